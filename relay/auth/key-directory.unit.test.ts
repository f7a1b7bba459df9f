// The key cache stays bounded whatever keys arrive: a shape check before any lookup, an LRU capped at
// KEY_CACHE_MAX_ENTRIES, expired entries purged; invalidation by key or account still drops the
// entries it should. While Postgres fails: the stale window (KEY_CACHE_STALE_MS), 529 beyond it.
import { describe, expect, it, vi } from 'vitest';
import type { Sql } from '../../infra/postgres/client.js';
import { createApiKeyCrypto, generateApiKey, hasApiKeyShape } from '../../infra/secrets/api-key-crypto.js';
import { beginKeyLookup, KEY_STORE_UNAVAILABLE, MISSING_KEY_ERROR, UNKNOWN_KEY_ERROR } from './key-check.js';
import { KEY_LOOKUP_TIMEOUT_MS, KeyDirectory } from './key-directory.js';

const crypto = createApiKeyCrypto('unit-test-secret-0123456789');

/** A Postgres stand-in: every query counted; `known` maps a key's hash to its row. */
function fakeSql(known = new Map<string, Record<string, unknown>>()) {
  const calls = { n: 0 };
  const sql = ((_strings: TemplateStringsArray, hash: Buffer) => {
    calls.n++;
    const row = known.get(hash.toString('hex'));
    return Promise.resolve(row ? [row] : []);
  }) as unknown as Sql;
  return { sql, calls };
}

function row(tokenId: number, userId: number): Record<string, unknown> {
  return {
    id: tokenId, user_id: userId, name: 'k', status: 1, expired_time: -1, unlimited_quota: true, model_limits_enabled: false,
    model_limits: '', allow_ips: null, group: '', cross_group_retry: false, rate_limit_rpm: 0, rate_limit_tpm: 0,
    username: 'u', user_status: 1, user_group: 'default',
  };
}

describe('hasApiKeyShape', () => {
  it('accepts what generateApiKey makes and nothing else', () => {
    for (let i = 0; i < 200; i++) expect(hasApiKeyShape(generateApiKey())).toBe(true);
    const good = generateApiKey();
    for (const bad of ['', 'sk-', good.slice(0, -1), good + 'A', 'sk_' + good.slice(3), 'SK-' + good.slice(3),
      good.slice(0, 10) + '-' + good.slice(11), good.slice(0, 10) + 'é' + good.slice(11), good.slice(0, 10) + '\0' + good.slice(11),
      'sk-unknownunknownunknown', 'sk-ant-mock-channel-credential']) {
      expect(hasApiKeyShape(bad)).toBe(false);
    }
  });
});

describe('KeyDirectory', () => {
  it('refuses a key not of our shape without a query or a cache entry', async () => {
    const { sql, calls } = fakeSql();
    const dir = new KeyDirectory(sql, crypto, 60_000, 100);
    expect(beginKeyLookup({ keys: dir }, '')).toBe(MISSING_KEY_ERROR);
    for (let i = 0; i < 1000; i++) expect(beginKeyLookup({ keys: dir }, `sk-${Math.random().toString(36)}`)).toBe(UNKNOWN_KEY_ERROR);
    expect(calls.n).toBe(0);
    expect(dir.size).toBe(0);
  });

  it('holds at most maxEntries however many unknown keys of our shape arrive, asking once per key', async () => {
    const { sql, calls } = fakeSql();
    const dir = new KeyDirectory(sql, crypto, 60_000, 1000);
    const keys = Array.from({ length: 20_000 }, () => generateApiKey());
    for (const k of keys) expect(await beginKeyLookup({ keys: dir }, k)).toBe(UNKNOWN_KEY_ERROR);
    expect(calls.n).toBe(20_000);
    expect(dir.size).toBe(1000);
    // The most recent are cached as unknown: no second query.
    expect(beginKeyLookup({ keys: dir }, keys.at(-1)!)).toBe(UNKNOWN_KEY_ERROR);
    expect(calls.n).toBe(20_000);
  });

  it('expires hits and misses after the TTL, and purgeStale removes them', async () => {
    const known = generateApiKey();
    const { sql, calls } = fakeSql(new Map([[crypto.hash(known).toString('hex'), row(7, 70)]]));
    const dir = new KeyDirectory(sql, crypto, 30, 100);
    expect((await dir.lookup(known))?.tokenId).toBe(7);
    expect(await dir.lookup(generateApiKey())).toBeNull();
    expect(dir.peek(known)?.tokenId).toBe(7);
    expect(dir.size).toBe(2);
    await new Promise((r) => setTimeout(r, 60));
    expect(dir.peek(known)).toBeUndefined();
    dir.purgeStale();
    expect(dir.size).toBe(0);
    expect(calls.n).toBe(2);
  });

  it('drops the entries of a key or of an account on invalidation, and keeps the others', async () => {
    const a = generateApiKey(), b = generateApiKey(), c = generateApiKey();
    const { sql } = fakeSql(new Map([
      [crypto.hash(a).toString('hex'), row(1, 10)], [crypto.hash(b).toString('hex'), row(2, 10)], [crypto.hash(c).toString('hex'), row(3, 30)],
    ]));
    const dir = new KeyDirectory(sql, crypto, 60_000, 100);
    for (const k of [a, b, c]) await dir.lookup(k);
    dir.invalidate({ tokenId: 1 });
    expect(dir.peek(a)).toBeUndefined();
    expect(dir.peek(b)?.tokenId).toBe(2);
    dir.invalidate({ userId: 10 });
    expect(dir.peek(b)).toBeUndefined();
    expect(dir.peek(c)?.tokenId).toBe(3);
  });

  it('does not cache a record read while an invalidation arrived', async () => {
    const a = generateApiKey();
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const sql = (async () => {
      await gate;
      return [row(1, 10)];
    }) as unknown as Sql;
    const dir = new KeyDirectory(sql, crypto, 60_000, 100);
    const pending = dir.lookup(a);
    dir.invalidate({ tokenId: 1 });
    release();
    expect((await pending)?.tokenId).toBe(1);
    expect(dir.peek(a)).toBeUndefined();
  });

  it('does not hand a lookup made after an invalidation the read begun before it', async () => {
    const a = generateApiKey();
    let status = 1;
    const gates: (() => void)[] = [];
    const sql = (async () => {
      const read = { ...row(1, 10), status };
      await new Promise<void>((r) => gates.push(r));
      return [read];
    }) as unknown as Sql;
    const dir = new KeyDirectory(sql, crypto, 60_000, 100);
    const before = dir.lookup(a);
    // The key is disabled: Postgres has it, then the invalidation arrives while the first read waits.
    status = 2;
    dir.invalidate({ tokenId: 1 });
    const after = dir.lookup(a);
    for (const open of gates) open();
    await new Promise((r) => setImmediate(r));
    for (const open of gates) open();
    expect((await before)?.status).toBe(1);
    expect((await after)?.status).toBe(2);
  });

  it('takes model limits switched on with an empty list as no limit, as the contract says', async () => {
    const a = generateApiKey();
    const known = new Map([[crypto.hash(a).toString('hex'), { ...row(1, 10), model_limits_enabled: true, model_limits: ' , ' }]]);
    const dir = new KeyDirectory(fakeSql(known).sql, crypto, 60_000, 100);
    expect((await dir.lookup(a))?.modelLimits).toBeNull();
    const b = generateApiKey();
    known.set(crypto.hash(b).toString('hex'), { ...row(2, 10), model_limits_enabled: true, model_limits: 'm1, m2' });
    expect([...(await dir.lookup(b))!.modelLimits!]).toEqual(['m1', 'm2']);
  });
});

describe('KeyDirectory while Postgres fails', () => {
  /** A Postgres stand-in that answers, fails or never answers, as `mode` says at the time of the query. */
  function flakySql(known: Map<string, Record<string, unknown>>) {
    const state = { mode: 'up' as 'up' | 'down' | 'hung', calls: 0 };
    const sql = ((_strings: TemplateStringsArray, hash: Buffer) => {
      state.calls++;
      if (state.mode === 'down') return Promise.reject(new Error('connect ECONNREFUSED'));
      if (state.mode === 'hung') return new Promise(() => {});
      const r = known.get(hash.toString('hex'));
      return Promise.resolve(r ? [r] : []);
    }) as unknown as Sql;
    return { sql, state };
  }

  it('serves an entry past its TTL within the stale window, asks again a TTL later, and refuses past the window', async () => {
    // Real time (lru-cache keeps its own clock): a 50 ms TTL, a 400 ms window.
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const key = generateApiKey();
    const { sql, state } = flakySql(new Map([[crypto.hash(key).toString('hex'), row(5, 9)]]));
    const dir = new KeyDirectory(sql, crypto, 50, 100, 400);
    expect(await beginKeyLookup({ keys: dir }, key)).toMatchObject({ tokenId: 5 });
    state.mode = 'down';
    await sleep(80);
    expect(dir.peek(key)).toBeUndefined();
    expect(await beginKeyLookup({ keys: dir }, key)).toMatchObject({ tokenId: 5 });
    // The failed re-read counts as one for the TTL: no query per request during the outage.
    const calls = state.calls;
    expect(beginKeyLookup({ keys: dir }, key)).toMatchObject({ tokenId: 5 });
    expect(state.calls).toBe(calls);
    // Past the stale window (from the last successful read) the lookup fails: 529.
    await sleep(450);
    expect(await beginKeyLookup({ keys: dir }, key)).toBe(KEY_STORE_UNAVAILABLE);
    // Postgres back: read again.
    state.mode = 'up';
    expect(await beginKeyLookup({ keys: dir }, key)).toMatchObject({ tokenId: 5 });
  });

  it('never serves stale what an invalidation dropped, nor a key it never read', async () => {
    const key = generateApiKey();
    const { sql, state } = flakySql(new Map([[crypto.hash(key).toString('hex'), row(5, 9)]]));
    const dir = new KeyDirectory(sql, crypto, 1, 100, 60_000);
    expect(await beginKeyLookup({ keys: dir }, key)).toMatchObject({ tokenId: 5 });
    state.mode = 'down';
    dir.invalidate({ userId: 9 });
    await new Promise((r) => setTimeout(r, 5));
    expect(await beginKeyLookup({ keys: dir }, key)).toBe(KEY_STORE_UNAVAILABLE);
    expect(await beginKeyLookup({ keys: dir }, generateApiKey())).toBe(KEY_STORE_UNAVAILABLE);
  });

  it('says in the log, at most once a second and with how many, that lookups failed with nothing to answer from', async () => {
    const { sql, state } = flakySql(new Map());
    state.mode = 'down';
    const warn = vi.fn();
    const dir = new KeyDirectory(sql, crypto, 1000, 100, 10_000, { warn });
    for (let i = 0; i < 5; i++) expect(await beginKeyLookup({ keys: dir }, generateApiKey())).toBe(KEY_STORE_UNAVAILABLE);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0]![0]).toMatchObject({ failed: 1, timeoutMs: KEY_LOOKUP_TIMEOUT_MS });
    expect(warn.mock.calls[0]![1]).toMatch(/answered 529 key_store_unavailable/);
  });

  it('counts a read Postgres holds unanswered as failed after KEY_LOOKUP_TIMEOUT_MS', async () => {
    vi.useFakeTimers();
    try {
      const { sql, state } = flakySql(new Map());
      state.mode = 'hung';
      const dir = new KeyDirectory(sql, crypto, 1000, 100, 10_000);
      const found = beginKeyLookup({ keys: dir }, generateApiKey());
      vi.advanceTimersByTime(KEY_LOOKUP_TIMEOUT_MS);
      expect(await found).toBe(KEY_STORE_UNAVAILABLE);
    } finally {
      vi.useRealTimers();
    }
  });
});
