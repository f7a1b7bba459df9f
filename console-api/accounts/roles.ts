// Account roles and statuses as the contract numbers them, and the permissions object derived from a
// role (documented in console-api/README.md, "The permissions object").
export const ROLE = { user: 1, admin: 10, root: 100 } as const;
export type Role = (typeof ROLE)[keyof typeof ROLE];

export const ACCOUNT_STATUS = { enabled: 1, banned: 2 } as const;

export interface Permissions {
  /** May change the personal sidebar module setting (sidebar_modules). */
  sidebar_settings: boolean;
  /** May create, list, reveal and edit own API keys. */
  manage_own_tokens: boolean;
  /** May top up and redeem codes. */
  topup: boolean;
  /** May read own logs and statistics. */
  view_own_logs: boolean;
  /** Administrator: may list and edit accounts (quota, group, status) of a lower role. */
  manage_users: boolean;
  /** Administrator: may create and edit channels. */
  manage_channels: boolean;
  /** Administrator: may create redemption codes. */
  manage_redemptions: boolean;
  /** Administrator: may read every account's logs. */
  view_all_logs: boolean;
  /** Administrator: may read options (secrets blank); changing any option is the super administrator's (manage_payment_settings). */
  manage_options: boolean;
  /** Super administrator: may change every option (pricing, groups, top-up, payment credentials, addresses, compliance); promote and demote. */
  manage_payment_settings: boolean;
}

export function permissionsForRole(role: number): Permissions {
  const admin = role >= ROLE.admin;
  const root = role >= ROLE.root;
  return {
    sidebar_settings: true,
    manage_own_tokens: true,
    topup: true,
    view_own_logs: true,
    manage_users: admin,
    manage_channels: admin,
    manage_redemptions: admin,
    view_all_logs: admin,
    manage_options: admin,
    manage_payment_settings: root,
  };
}
