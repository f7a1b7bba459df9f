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

export function toApiKeyListItem(row: Omit<ApiKeyRow, 'key_hash' | 'key_ciphertext' | 'deleted_at'>): ApiKeyListItem {
  return {
    id: Number(row.id),
    user_id: Number(row.user_id),
    name: row.name,
    key: row.key_mask,
    status: Number(row.status),
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
