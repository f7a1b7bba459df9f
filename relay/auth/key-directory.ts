// Finds the API key record (and its account) behind an `sk-` key. Postgres is asked at most once per
// key per KEY_CACHE_TTL_MS; the console's invalidation messages drop an entry at once, so a disabled
// key, a ban or a quota change reaches the relay well within a second.
//
// The cache holds unknown keys too (so a client repeating a wrong key costs one query per TTL), which
// is why it is an LRU capped at KEY_CACHE_MAX_ENTRIES: a stream of made-up keys of the right shape
// (the shape is checked before anything reaches this class) evicts old entries instead of growing
// the heap, and purgeStale() (called periodically by the server) drops expired ones.
import { LRUCache } from 'lru-cache';
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

/** The cached answer for a key no record matches (lru-cache holds no null). */
const UNKNOWN_KEY = Object.freeze({ unknown: true as const });
type Cached = ApiKeyRecord | typeof UNKNOWN_KEY;

export class KeyDirectory {
  readonly #sql: Sql;
  readonly #crypto: ApiKeyCrypto;
  readonly #cache: LRUCache<string, Cached>;
  readonly #inflight = new Map<string, Promise<ApiKeyRecord | null>>();
  /** Bumped by every invalidation: a lookup that started before one does not cache what it read. */
  #generation = 0;

  constructor(sql: Sql, crypto: ApiKeyCrypto, ttlMs: number, maxEntries: number) {
    this.#sql = sql;
    this.#crypto = crypto;
    this.#cache = new LRUCache<string, Cached>({ max: maxEntries, ttl: ttlMs, updateAgeOnGet: false });
  }

  /** The cached record (null: known to be unknown), synchronously, or undefined when Postgres must be asked. */
  peek(key: string): ApiKeyRecord | null | undefined {
    const e = this.#cache.get(key);
    if (e === undefined) return undefined;
    return e === UNKNOWN_KEY ? null : (e as ApiKeyRecord);
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

  /** Entries held, expired ones not yet purged included. */
  get size(): number {
    return this.#cache.size;
  }

  /** Drops expired entries (an LRU only drops them when read or evicted). */
  purgeStale(): void {
    this.#cache.purgeStale();
  }

  async #load(key: string): Promise<ApiKeyRecord | null> {
    const generation = this.#generation;
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
    if (generation === this.#generation) this.#cache.set(key, record ?? UNKNOWN_KEY);
    return record;
  }

  /** Drops every cached entry of one key or of one account. */
  invalidate(filter: { tokenId?: number; userId?: number }): void {
    this.#generation++;
    const drop: string[] = [];
    for (const [key, e] of this.#cache.entries()) {
      if (e === UNKNOWN_KEY) continue;
      const rec = e as ApiKeyRecord;
      if (rec.tokenId === filter.tokenId || rec.userId === filter.userId) drop.push(key);
    }
    for (const key of drop) this.#cache.delete(key);
  }

  clear(): void {
    this.#generation++;
    this.#cache.clear();
  }
}
