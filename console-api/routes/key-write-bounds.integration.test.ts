// What one account can make the console keep in Redis and Postgres is bounded.
// Before: nothing limited API-key writes, so one account alternating a key's remain_quota 1/2 at 100
// PUT/s added 8.6 M key_quota_edits rows and 30-day Redis markers a day (and made every relay walk its
// key cache 100 times a second), until Redis ran out of memory; and the Redis mirrors of a deleted
// key or account never expired, so create / use / delete loops grew Redis for good.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';
import { KEY_WRITES_PER_MINUTE } from './token.js';

// A pinned clock at the start of a minute: the limit's window is the console clock's minute.
let clock = 1_900_000_020;
let h: ConsoleHarness;
beforeAll(async () => {
  h = await startConsoleHarness({}, { now: () => clock });
});
afterAll(async () => {
  await h?.close();
});

const inject = (who: TestAccount, method: 'POST' | 'PUT' | 'DELETE', url: string, payload?: object) =>
  h.app.inject({ method, url, headers: who.auth, ...(payload ? { payload } : {}) });
const limitedKey = { name: 'limited', expired_time: -1, remain_quota: 1_000, unlimited_quota: false };
async function newKey(who: TestAccount): Promise<number> {
  const res = await inject(who, 'POST', '/api/token/', limitedKey);
  expect(res.statusCode, res.body).toBe(200);
  const [row] = await h.sql<{ id: string }[]>`SELECT max(id) AS id FROM tokens WHERE user_id = ${who.user.id}`;
  return Number(row!.id);
}
const editsOf = async (tokenId: number) =>
  Number((await h.sql<{ n: string }[]>`SELECT count(*) AS n FROM key_quota_edits WHERE token_id = ${tokenId}`)[0]!.n);

describe('API-key writes per account and minute', () => {
  it(`answers quota-changing write number ${KEY_WRITES_PER_MINUTE + 1} of a minute 429 in the envelope, writing nothing`, async () => {
    expect(KEY_WRITES_PER_MINUTE).toBe(60);
    const a = await h.account();
    const id = await newKey(a); // a write too
    for (let i = 1; i < KEY_WRITES_PER_MINUTE; i++) {
      const res = await inject(a, 'PUT', '/api/token/', { id, remain_quota: i % 2 === 1 ? 2 : 1 });
      expect(res.statusCode, `write ${i + 1}: ${res.body}`).toBe(200);
    }
    expect(await editsOf(id)).toBe(KEY_WRITES_PER_MINUTE - 1);
    const [before] = await h.sql<{ remain_quota: number; quota_seq: string }[]>`SELECT remain_quota, quota_seq FROM tokens WHERE id = ${id}`;

    clock += 30;
    const refused = await inject(a, 'PUT', '/api/token/', { id, remain_quota: 5 });
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toEqual({ success: false, message: 'too many API key changes from this account; retry in 30 s' });
    expect(refused.headers['retry-after']).toBe('30');
    expect(await editsOf(id)).toBe(KEY_WRITES_PER_MINUTE - 1);
    expect((await h.sql`SELECT remain_quota, quota_seq FROM tokens WHERE id = ${id}`)[0]).toEqual(before);
    // Creation and deletion count in the same budget (create / use / delete loops).
    expect((await inject(a, 'POST', '/api/token/', limitedKey)).statusCode).toBe(429);
    expect((await inject(a, 'DELETE', `/api/token/${id}`)).statusCode).toBe(429);
    const [live] = await h.sql<{ n: string }[]>`SELECT count(*) AS n FROM tokens WHERE user_id = ${a.user.id} AND deleted_at IS NULL`;
    expect(Number(live!.n)).toBe(1);

    // Another account has a budget of its own; the next minute starts a new one.
    const b = await h.account();
    expect((await inject(b, 'POST', '/api/token/', limitedKey)).statusCode).toBe(200);
    clock += 30;
    const next = await inject(a, 'PUT', '/api/token/', { id, remain_quota: 5 });
    expect(next.statusCode, next.body).toBe(200);
    expect(await editsOf(id)).toBe(KEY_WRITES_PER_MINUTE);
  });
});

describe('mirrors of deleted keys and accounts expire', () => {
  const DAY = 24 * 3600;

  it('deleting a used limited key gives its mirror keys a TTL (a late settlement keeps it); the account mirror keeps none', async () => {
    const a = await h.account({ quota: 10_000 });
    const userId = Number(a.user.id);
    const tokenId = await newKey(a);
    const base = { userId, tokenId, tokenLimited: true, amount: 100, deadlineMs: Date.now() + 60_000 };
    expect(await h.quotaStore.reserve({ ...base, requestId: `kw-${tokenId}-1` })).toBe('reserved');
    await h.quotaStore.settle({ userId, tokenId, requestId: `kw-${tokenId}-1`, cost: 40, eventJson: '{}', limited: true });
    // Still running when the key is deleted.
    expect(await h.quotaStore.reserve({ ...base, requestId: `kw-${tokenId}-2` })).toBe('reserved');
    const k = h.keys;
    const mirror = [k.tokenRemain(userId, tokenId), k.tokenQuotaSeq(userId, tokenId)];
    for (const key of mirror) expect(await h.redis.ttl(key), key).toBe(-1);

    expect((await inject(a, 'DELETE', `/api/token/${tokenId}`)).statusCode).toBe(200);
    for (const key of mirror) {
      const ttl = await h.redis.ttl(key);
      expect(ttl, key).toBeGreaterThan(0);
      expect(ttl, key).toBeLessThanOrEqual(DAY);
    }
    await h.quotaStore.settle({ userId, tokenId, requestId: `kw-${tokenId}-2`, cost: 60, eventJson: '{}', limited: true });
    expect(await h.quotaStore.tokenRemain(userId, tokenId)).toBe(1_000 - 40 - 60);
    expect(await h.redis.ttl(k.tokenRemain(userId, tokenId))).toBeGreaterThan(0);
    // The account lives on: its mirror must not expire.
    expect(await h.redis.ttl(k.accountBalance(userId))).toBe(-1);
  });

  it('deleting an account gives its mirror and its keys\' mirrors a TTL', async () => {
    const admin = await h.account({ role: 10 });
    const a = await h.account({ quota: 10_000 });
    const userId = Number(a.user.id);
    const tokenId = await newKey(a);
    const requestId = `kw-${tokenId}-a`;
    expect(await h.quotaStore.reserve({ userId, tokenId, tokenLimited: true, requestId, amount: 100, deadlineMs: Date.now() + 60_000 })).toBe('reserved');
    await h.quotaStore.settle({ userId, tokenId, requestId, cost: 30, eventJson: '{}', limited: true });
    const k = h.keys;
    const mirror = [k.accountBalance(userId), k.accountCreditSeq(userId), k.tokenRemain(userId, tokenId), k.tokenQuotaSeq(userId, tokenId)];
    for (const key of mirror) expect(await h.redis.exists(key), key).toBe(1);

    const res = await h.app.inject({ method: 'POST', url: '/api/user/manage', headers: admin.auth, payload: { id: userId, action: 'delete' } });
    expect(res.statusCode, res.body).toBe(200);
    for (const key of mirror) {
      const ttl = await h.redis.ttl(key);
      expect(ttl, key).toBeGreaterThan(0);
      expect(ttl, key).toBeLessThanOrEqual(DAY);
    }
  });
});
