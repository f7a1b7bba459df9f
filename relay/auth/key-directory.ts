// Finds the API key record (and its account) behind an `sk-` key. Postgres is asked at most once per
// key per KEY_CACHE_TTL_MS; the console's invalidation messages drop an entry at once, so a disabled
// key, a ban or a quota change reaches the relay well within a second.
import type { Sql } from '../../infra/postgres/client.js';
import type { ApiKeyCrypto } from '../../infra/secrets/api-key-crypto.js';

export interface ApiKeyRecord {
  tokenId: number;
  userId: number;
  name: string;
  status: number;
  expiredTime: number;
  unlimitedQuota: boolean;
  modelLimits: ReadonlySet<string> | null;
  allowIps: string | null;
  group: string;
  crossGroupRetry: boolean;
  /** Requests and tokens per minute; 0 leaves it to the group's limit. */
  rateLimitRpm: number;
  rateLimitTpm: number;
  username: string;
  userStatus: number;
  userGroup: string;
}

interface Entry {
  record: ApiKeyRecord | null;
  expiresAt: number;
}

export class KeyDirectory {
  readonly #sql: Sql;
  readonly #crypto: ApiKeyCrypto;
  readonly #ttlMs: number;
  readonly #entries = new Map<string, Entry>();
  readonly #inflight = new Map<string, Promise<ApiKeyRecord | null>>();

  constructor(sql: Sql, crypto: ApiKeyCrypto, ttlMs: number) {
    this.#sql = sql;
    this.#crypto = crypto;
    this.#ttlMs = ttlMs;
  }

  /** The cached record, synchronously, or undefined when Postgres must be asked. */
  peek(key: string, now: number): ApiKeyRecord | null | undefined {
    const e = this.#entries.get(key);
    if (e === undefined || e.expiresAt <= now) return undefined;
    return e.record;
  }

  lookup(key: string): Promise<ApiKeyRecord | null> {
    let p = this.#inflight.get(key);
    if (!p) {
      // Concurrent first requests with one key share a single query.
      p = this.#load(key).finally(() => this.#inflight.delete(key));
      this.#inflight.set(key, p);
    }
    return p;
  }

  async #load(key: string): Promise<ApiKeyRecord | null> {
    const rows = await this.#sql`
      SELECT t.id, t.user_id, t.name, t.status, t.expired_time, t.unlimited_quota, t.model_limits_enabled,
             t.model_limits, t.allow_ips, t."group", t.cross_group_retry, t.rate_limit_rpm, t.rate_limit_tpm,
             u.username, u.status AS user_status, u."group" AS user_group
      FROM tokens t JOIN users u ON u.id = t.user_id
      WHERE t.key_hash = ${this.#crypto.hash(key)} AND t.deleted_at IS NULL AND u.deleted_at IS NULL`;
    const r = rows[0] as Record<string, unknown> | undefined;
    const record: ApiKeyRecord | null = r
      ? {
          tokenId: r.id as number,
          userId: r.user_id as number,
          name: r.name as string,
          status: r.status as number,
          expiredTime: r.expired_time as number,
          unlimitedQuota: r.unlimited_quota as boolean,
          modelLimits: r.model_limits_enabled
            ? new Set((r.model_limits as string).split(',').map((s) => s.trim()).filter(Boolean))
            : null,
          allowIps: (r.allow_ips as string | null) || null,
          group: r.group as string,
          crossGroupRetry: r.cross_group_retry as boolean,
          rateLimitRpm: r.rate_limit_rpm as number,
          rateLimitTpm: r.rate_limit_tpm as number,
          username: r.username as string,
          userStatus: r.user_status as number,
          userGroup: r.user_group as string,
        }
      : null;
    this.#entries.set(key, { record, expiresAt: Date.now() + this.#ttlMs });
    return record;
  }

  /** Drops every cached entry of one key or of one account. */
  invalidate(filter: { tokenId?: number; userId?: number }): void {
    for (const [key, e] of this.#entries) {
      const rec = e.record;
      if (!rec) continue;
      if (rec.tokenId === filter.tokenId || rec.userId === filter.userId) this.#entries.delete(key);
    }
  }

  clear(): void {
    this.#entries.clear();
  }
}
