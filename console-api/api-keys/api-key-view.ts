// What listings show of an API key: the stored record with `key` masked; never the hash or ciphertext.
export interface ApiKeyRow {
  id: number;
  user_id: number;
  name: string;
  key_hash: Buffer;
  key_ciphertext: Buffer;
  key_mask: string;
  status: number;
  created_time: number;
  accessed_time: number;
  expired_time: number;
  remain_quota: number;
  unlimited_quota: boolean;
  used_quota: number;
  model_limits_enabled: boolean;
  model_limits: string;
  allow_ips: string | null;
  group: string;
  cross_group_retry: boolean;
  rate_limit_rpm: number;
  rate_limit_tpm: number;
  deleted_at: number | null;
}

export type ApiKeyListItem = Omit<ApiKeyRow, 'key_hash' | 'key_ciphertext' | 'key_mask' | 'deleted_at'> & {
  /** Masked: `sk-XXXX********YYYY`. The full key only comes from POST /api/token/:id/key. */
  key: string;
};

/** new-api's key statuses: 1 enabled, 2 disabled (stored), 3 expired, 4 exhausted (shown for an enabled key that is). */
export const KEY_STATUS_SHOWN = { enabled: 1, disabled: 2, expired: 3, exhausted: 4 } as const;

/**
 * The status a listing shows: the stored one (1 or 2), except an enabled key the relay refuses for
 * its expiry (3) or, limited, for having no quota left (4), as new-api shows them. Derived when read,
 * so that nothing has to write it when a key runs out.
 */
function shownStatus(row: Pick<ApiKeyRow, 'status' | 'expired_time' | 'unlimited_quota' | 'remain_quota'>, nowSec: number): number {
  const stored = Number(row.status);
  if (stored !== KEY_STATUS_SHOWN.enabled) return stored;
  const expires = Number(row.expired_time);
  if (expires !== -1 && expires <= nowSec) return KEY_STATUS_SHOWN.expired;
  if (!row.unlimited_quota && Number(row.remain_quota) <= 0) return KEY_STATUS_SHOWN.exhausted;
  return stored;
}

export function toApiKeyListItem(row: Omit<ApiKeyRow, 'key_hash' | 'key_ciphertext' | 'deleted_at'>, nowSec: number): ApiKeyListItem {
  return {
    id: Number(row.id),
    user_id: Number(row.user_id),
    name: row.name,
    key: row.key_mask,
    status: shownStatus(row, nowSec),
    created_time: Number(row.created_time),
    accessed_time: Number(row.accessed_time),
    expired_time: Number(row.expired_time),
    remain_quota: Number(row.remain_quota),
    unlimited_quota: row.unlimited_quota,
    used_quota: Number(row.used_quota),
    model_limits_enabled: row.model_limits_enabled,
    model_limits: row.model_limits,
    allow_ips: row.allow_ips,
    group: row.group,
    cross_group_retry: row.cross_group_retry,
    rate_limit_rpm: Number(row.rate_limit_rpm),
    rate_limit_tpm: Number(row.rate_limit_tpm),
  };
}
