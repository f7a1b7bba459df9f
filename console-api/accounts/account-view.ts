// The Account resource of the contract, built from a `users` row. password_hash never leaves here.
import { publicSettingText } from '../../core/notices/notice-setting.js';
import { type Permissions, permissionsForRole } from './roles.js';

/** A `users` row as postgres.js returns it (BIGINT already parsed to number by infra/postgres/client). */
export interface UserRow {
  id: number;
  username: string;
  display_name: string;
  password_hash: string;
  role: number;
  status: number;
  email: string;
  code_host_id: string;
  chat_platform_id: string;
  oidc_id: string;
  social_app_id: string;
  messenger_id: string;
  forum_id: string;
  group: string;
  quota: number;
  used_quota: number;
  request_count: number;
  aff_code: string;
  aff_count: number;
  aff_quota: number;
  aff_history_quota: number;
  inviter_id: number;
  setting: string;
  card_provider_customer: string;
  sidebar_modules: string;
  created_at: number;
  deleted_at: number | null;
}

/** The contract's Account: the row's public columns plus the role's permissions. */
export type Account = Omit<UserRow, 'password_hash' | 'created_at' | 'deleted_at'> & { permissions: Permissions };

/** The account as `reader` sees it: its owner, or an administrator (the default). */
export function toAccount(row: UserRow, reader: 'owner' | 'admin' = 'admin'): Account {
  return {
    id: Number(row.id),
    username: row.username,
    display_name: row.display_name,
    role: Number(row.role),
    status: Number(row.status),
    email: row.email,
    code_host_id: row.code_host_id,
    chat_platform_id: row.chat_platform_id,
    oidc_id: row.oidc_id,
    social_app_id: row.social_app_id,
    messenger_id: row.messenger_id,
    forum_id: row.forum_id,
    group: row.group,
    quota: Number(row.quota),
    used_quota: Number(row.used_quota),
    request_count: Number(row.request_count),
    aff_code: row.aff_code,
    aff_count: Number(row.aff_count),
    aff_quota: Number(row.aff_quota),
    aff_history_quota: Number(row.aff_history_quota),
    inviter_id: Number(row.inviter_id),
    // The webhook secret is the account's signing key: kept, never shown back; the webhook URL's token
    // (its path and query) shown to its owner alone.
    setting: publicSettingText(row.setting, reader === 'owner'),
    card_provider_customer: row.card_provider_customer,
    sidebar_modules: row.sidebar_modules,
    permissions: permissionsForRole(Number(row.role)),
  };
}

/** What login returns: enough for the console to render the session, plus the session token. */
export interface AccountSummary {
  id: number;
  username: string;
  display_name: string;
  role: number;
  status: number;
  group: string;
}

export function toAccountSummary(row: UserRow): AccountSummary {
  return {
    id: Number(row.id),
    username: row.username,
    display_name: row.display_name,
    role: Number(row.role),
    status: Number(row.status),
    group: row.group,
  };
}
