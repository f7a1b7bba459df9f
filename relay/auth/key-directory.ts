// Finds the API key record (and its account) behind an `sk-` key. Postgres is asked at most once per
// key per KEY_CACHE_TTL_MS; the console's invalidation messages drop an entry at once, so a disabled
// key, a ban or a quota change reaches the relay well within a second.
//
// The cache holds unknown keys too (so a client repeating a wrong key costs one query per TTL), which
// is why it is an LRU capped at KEY_CACHE_MAX_ENTRIES: a stream of made-up keys of the right shape
// (the shape is checked before anything reaches this class) evicts old entries instead of growing
// the heap, and purgeStale() (called periodically by the server) drops expired ones.
//
// Postgres unreachable: an entry past its TTL but read within KEY_CACHE_STALE_MS is served as it was
// (and not asked for again for another TTL), so the keys in use keep working through a short outage
// on the Redis mirrors; a key without such an entry fails its lookup (the routes answer 529
// key_store_unavailable). A key revoked meanwhile stops at the first re-read once Postgres answers, a
// TTL later at most; an invalidation message (Redis) drops the entry at once, outage or not.
import { LRUCache } from 'lru-cache';
import type { Sql } from '../../infra/postgres/client.js';
import type { ApiKeyCrypto } from '../../infra/secrets/api-key-crypto.js';
import type { Logger } from '../../infra/logger.js';

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

/**
 * A key read not answered by then counts as failed. Postgres answers one in milliseconds; a Postgres
 * that cannot be reached does not refuse the query, postgres.js holds it while it reconnects (for
 * seconds, measured: 3 s and more behind a cut TCP proxy), and every request with that key would wait
 * with it.
 */
export const KEY_LOOKUP_TIMEOUT_MS = 2_000;

interface Entry {
  readonly value: Cached;
  /** Until then the entry is served without asking Postgres (a TTL after the last read, or failed re-read). */
  freshUntil: number;
}

export class KeyDirectory {
  readonly #sql: Sql;
  readonly #crypto: ApiKeyCrypto;
  readonly #cache: LRUCache<string, Entry>;
  readonly #ttlMs: number;
  readonly #inflight = new Map<string, Promise<ApiKeyRecord | null>>();
  /** Bumped by every invalidation: a lookup that started before one does not cache what it read. */
  #generation = 0;
  readonly #log: Pick<Logger, 'warn'> | undefined;
  /** Lookups that failed with nothing cached since the last warning, which goes at most once a second. */
  #failedSinceWarning = 0;
  #warnedAt = 0;

  /**
   * `staleMs`: how long past its TTL an entry may still answer while Postgres cannot (0: never).
   * `log`: where a lookup that failed with nothing to answer from is told (a 529 said nothing in the
   * relay's log: an event loop stalled past KEY_LOOKUP_TIMEOUT_MS looked like a Postgres outage).
   */
  constructor(sql: Sql, crypto: ApiKeyCrypto, ttlMs: number, maxEntries: number, staleMs = 0, log?: Pick<Logger, 'warn'>) {
    this.#sql = sql;
    this.#crypto = crypto;
    this.#ttlMs = ttlMs;
    this.#log = log;
    // The LRU's own TTL counts from the last successful read (set), so it ends the stale window.
    this.#cache = new LRUCache<string, Entry>({ max: maxEntries, ttl: ttlMs + staleMs, updateAgeOnGet: false });
  }

  /**
   * Moves on at every invalidation (a key or account changed in the console): a request that read its
   * key's record at its headers reads it again, once its body is in, when this moved meanwhile.
   */
  get generation(): number {
    return this.#generation;
  }

  /** The cached record (null: known to be unknown), synchronously, or undefined when Postgres must be asked. */
  peek(key: string): ApiKeyRecord | null | undefined {
    const e = this.#cache.get(key);
    if (e === undefined || Date.now() >= e.freshUntil) return undefined;
    return valueOf(e);
  }

  lookup(key: string): Promise<ApiKeyRecord | null> {
    let p = this.#inflight.get(key);
    if (!p) {
      // Concurrent first requests with one key share a single query.
      const read = this.#load(key).finally(() => {
        if (this.#inflight.get(key) === read) this.#inflight.delete(key);
      });
      p = read;
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
    let rows;
    try {
      rows = await withTimeout(this.#read(key), KEY_LOOKUP_TIMEOUT_MS);
    } catch (err) {
      // An entry an invalidation dropped meanwhile is gone from the cache: never served stale.
      const stale = this.#cache.get(key);
      if (stale === undefined) {
        this.#warnLookupFailed(err);
        throw err;
      }
      stale.freshUntil = Date.now() + this.#ttlMs;
      return valueOf(stale);
    }
    const r = rows[0] as Record<string, unknown> | undefined;
    const record: ApiKeyRecord | null = r
      ? {
          tokenId: r.id as number,
          userId: r.user_id as number,
          name: r.name as string,
          status: r.status as number,
          expiredTime: r.expired_time as number,
          unlimitedQuota: r.unlimited_quota as boolean,
          modelLimits: modelLimitsOf(r.model_limits_enabled as boolean, r.model_limits as string),
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
    if (generation === this.#generation) this.#cache.set(key, { value: record ?? UNKNOWN_KEY, freshUntil: Date.now() + this.#ttlMs });
    return record;
  }

  #warnLookupFailed(err: unknown): void {
    this.#failedSinceWarning++;
    const now = Date.now();
    if (this.#log === undefined || now - this.#warnedAt < 1000) return;
    this.#log.warn({ err: (err as Error)?.message ?? String(err), failed: this.#failedSinceWarning, timeoutMs: KEY_LOOKUP_TIMEOUT_MS },
      'API key lookups failed or took longer than the timeout, with nothing cached: answered 529 key_store_unavailable');
    this.#warnedAt = now;
    this.#failedSinceWarning = 0;
  }

  #read(key: string) {
    return this.#sql`
      SELECT t.id, t.user_id, t.name, t.status, t.expired_time, t.unlimited_quota, t.model_limits_enabled,
             t.model_limits, t.allow_ips, t."group", t.cross_group_retry, t.rate_limit_rpm, t.rate_limit_tpm,
             u.username, u.status AS user_status, u."group" AS user_group
      FROM tokens t JOIN users u ON u.id = t.user_id
      WHERE t.key_hash = ${this.#crypto.hash(key)} AND t.deleted_at IS NULL AND u.deleted_at IS NULL`;
  }

  /** Drops every cached entry of one key or of one account. */
  invalidate(filter: { tokenId?: number; userId?: number }): void {
    this.#generation++;
    // A lookup from now on reads again: one joining a read begun before the change would get the
    // record as it was (a key just disabled, served for the rest of that read).
    this.#inflight.clear();
    const drop: string[] = [];
    for (const [key, e] of this.#cache.entries()) {
      if (e.value === UNKNOWN_KEY) continue;
      const rec = e.value as ApiKeyRecord;
      if (rec.tokenId === filter.tokenId || rec.userId === filter.userId) drop.push(key);
    }
    for (const key of drop) this.#cache.delete(key);
  }

  clear(): void {
    this.#generation++;
    this.#cache.clear();
  }
}

function valueOf(e: Entry): ApiKeyRecord | null {
  return e.value === UNKNOWN_KEY ? null : (e.value as ApiKeyRecord);
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`key lookup: Postgres did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** A key's model limits: the listed names when switched on; none (null) when off or when the list is empty, as the contract says of an empty list. */
function modelLimitsOf(enabled: boolean, list: string | null): ReadonlySet<string> | null {
  if (!enabled) return null;
  const names = new Set((list ?? '').split(',').map((s) => s.trim()).filter(Boolean));
  return names.size > 0 ? names : null;
}
