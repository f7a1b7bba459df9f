// settleReservations-9n.lua with the settled markers (Redis with replicas, issue 11): a settlement whose
// reservation a failover lost still bills the cost once and emits its event once; a replayed
// settlement that did run changes nothing; without the marker the script behaves as before.
import { afterAll, describe, expect, it } from 'vitest';
import { createRedis } from '../../infra/redis/client.js';
import { redisKeys } from '../../infra/redis/keys.js';
import { encodedUsageEventsOf } from '../usage/usage-event.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { currentMinute, deadlineMember, QuotaStore } from './quota-store.js';

const config = testConfig();
const redis = createRedis(config, 'settle-lost-test');
const keys = redisKeys(`${config.REDIS_PREFIX}-lost`);
const source = { accountQuota: async () => 10_000, tokenRemainQuota: async () => 1_000 };
const replicated = new QuotaStore(redis, keys, source, { settledMarkerSec: 600 });
const single = new QuotaStore(redis, keys, source);

let seq = 0;
const ids = () => ({ userId: 7000 + ++seq, tokenId: 9000 + seq, requestId: `lost-${seq}` });

afterAll(async () => {
  const found = await redis.keys(`${config.REDIS_PREFIX}-lost:*`);
  if (found.length) await redis.del(...found);
  await redis.quit();
});

async function eventsOf(requestId: string): Promise<number> {
  const entries = (await redis.xrange(keys.usageStream(), '-', '+')) as [string, string[]][];
  return entries.flatMap(([, f]) => encodedUsageEventsOf(f) ?? []).filter((e) => e === `{"request_id":"${requestId}"}`).length;
}

function settlement(r: ReturnType<typeof ids>, extra: { minute?: number; limited?: boolean } = {}) {
  return { ...r, cost: 120, eventJson: JSON.stringify({ request_id: r.requestId }), minute: currentMinute(), limited: true, ...extra };
}

describe('settleReservations-9n.lua with the settled marker', () => {
  it('settles once: a replay of a settlement that ran answers "already settled" and moves nothing', async () => {
    const r = ids();
    expect(await replicated.reserve({ ...r, tokenLimited: true, amount: 300, deadlineMs: Date.now() + 60_000 })).toBe('reserved');
    expect(await replicated.settle(settlement(r))).toBe(true);
    expect(await redis.zscore(keys.settledReservations(r.userId), deadlineMember(r.userId, r.requestId))).not.toBeNull();
    expect(await redis.exists(keys.reapedReservation(r.userId, r.requestId))).toBe(0);
    expect(await replicated.settle(settlement(r))).toBe(false);
    expect(await replicated.accountBalance(r.userId)).toBe(10_000 - 120);
    expect(Number(await redis.get(keys.tokenRemain(r.userId, r.tokenId)))).toBe(1_000 - 120);
    expect(await eventsOf(r.requestId)).toBe(1);
  });

  it('bills a settlement whose reservation was lost (a failover) once: the cost alone, one event, the key too', async () => {
    const r = ids();
    // The mirrors are on the promoted replica; the reservation (and its hold) was lost with the master.
    await replicated.seedAccount(r.userId);
    await replicated.seedToken(r.userId, r.tokenId);
    expect(await replicated.settle(settlement(r))).toBe(true);
    expect(await replicated.settle(settlement(r))).toBe(false);
    expect(await replicated.accountBalance(r.userId)).toBe(10_000 - 120);
    expect(Number(await redis.get(keys.tokenRemain(r.userId, r.tokenId)))).toBe(1_000 - 120);
    expect(await eventsOf(r.requestId)).toBe(1);
  });

  it('loads a mirror the failover lost too from Postgres before it bills a lost reservation, so the mirror ends where Postgres will', async () => {
    // An account's first request: its mirrors were seeded on the master in the same unreplicated
    // window as the reservation, and went with it.
    const r = ids();
    expect(await redis.exists(keys.accountBalance(r.userId), keys.tokenRemain(r.userId, r.tokenId))).toBe(0);
    expect(await replicated.settle(settlement(r))).toBe(true);
    expect(await replicated.accountBalance(r.userId)).toBe(10_000 - 120);
    expect(Number(await redis.get(keys.tokenRemain(r.userId, r.tokenId)))).toBe(1_000 - 120);
    expect(await eventsOf(r.requestId)).toBe(1);
    expect(await replicated.reserve({ ...r, requestId: `${r.requestId}-next`, tokenLimited: true, amount: 100, deadlineMs: Date.now() + 60_000 })).toBe('reserved');
    // The account's mirror alone lost (an unlimited key): the key's is not needed.
    const u = ids();
    await replicated.seedToken(u.userId, u.tokenId);
    expect(await replicated.settleMany([settlement(u, { limited: false }), settlement(ids(), { limited: false })])).toEqual([true, true]);
    expect(await replicated.accountBalance(u.userId)).toBe(10_000 - 120);
    expect(Number(await redis.get(keys.tokenRemain(u.userId, u.tokenId)))).toBe(1_000);
  });

  it('leaves an unlimited key\'s quota alone for a lost reservation', async () => {
    const r = ids();
    await replicated.seedAccount(r.userId);
    await replicated.seedToken(r.userId, r.tokenId);
    expect(await replicated.settle(settlement(r, { limited: false }))).toBe(true);
    expect(await replicated.accountBalance(r.userId)).toBe(10_000 - 120);
    expect(Number(await redis.get(keys.tokenRemain(r.userId, r.tokenId)))).toBe(1_000);
  });

  it('does not take a settlement older than the marker\'s life for a lost one (it may have run, its marker gone)', async () => {
    const r = ids();
    await replicated.seedAccount(r.userId);
    expect(await replicated.settle(settlement(r, { minute: currentMinute() - 10 }))).toBe(false);
    // Nor one spooled without its minute and key kind (an older relay's).
    expect(await replicated.settle({ ...r, cost: 120, eventJson: '{}' })).toBe(false);
    expect(await replicated.accountBalance(r.userId)).toBe(10_000);
    expect(await eventsOf(r.requestId)).toBe(0);
  });

  it('still bills a late settlement after the reaper released the reservation, once', async () => {
    const r = ids();
    expect(await replicated.reserve({ ...r, tokenLimited: false, amount: 300, deadlineMs: Date.now() - 1 })).toBe('reserved');
    expect(await replicated.releaseExpired(Date.now(), 100, () => '{"reaped":true}')).toBeGreaterThanOrEqual(1);
    expect(await replicated.accountBalance(r.userId)).toBe(10_000);
    expect(await replicated.settle(settlement(r, { limited: false }))).toBe(true);
    expect(await replicated.settle(settlement(r, { limited: false }))).toBe(false);
    expect(await replicated.accountBalance(r.userId)).toBe(10_000 - 120);
  });

  it('without the marker (one Redis, no replicas) a missing reservation is "already settled", as before', async () => {
    const r = ids();
    await single.seedAccount(r.userId);
    expect(await single.settle(settlement(r))).toBe(false);
    expect(await single.accountBalance(r.userId)).toBe(10_000);
    const s = ids();
    expect(await single.reserve({ ...s, tokenLimited: false, amount: 300, deadlineMs: Date.now() + 60_000 })).toBe('reserved');
    expect(await single.settle(settlement(s))).toBe(true);
    expect(await redis.exists(keys.reapedReservation(s.userId, s.requestId), keys.settledReservations(s.userId))).toBe(0);
  });

  it('keeps an account\'s markers in one sorted set that drops the ones run out and expires with its newest', async () => {
    const r = ids();
    const set = keys.settledReservations(r.userId);
    for (let i = 0; i < 50; i++) {
      const s = { ...r, requestId: `${r.requestId}-${i}` };
      expect(await replicated.reserve({ ...s, tokenLimited: false, amount: 150, deadlineMs: Date.now() + 60_000 })).toBe('reserved');
    }
    // A marker that has run out (written 11 minutes ago) is dropped by the next write.
    await redis.zadd(set, Date.now() - 60_000, 'stale-marker');
    const settled = await replicated.settleMany(Array.from({ length: 50 }, (_, i) => settlement({ ...r, requestId: `${r.requestId}-${i}` }, { limited: false })));
    expect(settled.every((x) => x)).toBe(true);
    expect(await redis.zcard(set)).toBe(50);
    expect(await redis.zscore(set, 'stale-marker')).toBeNull();
    // 50 settlements leave the account's mirror and the set: no key per request.
    expect((await redis.keys(`${config.REDIS_PREFIX}-lost:{a${r.userId}}:*`)).sort())
      .toEqual([keys.accountBalance(r.userId), keys.accountCreditSeq(r.userId), set].sort());
    const ttl = await redis.pttl(set);
    expect(ttl).toBeGreaterThan(590_000);
    expect(ttl).toBeLessThanOrEqual(600_000);
    for (let i = 0; i < 50; i++) expect(await replicated.settle(settlement({ ...r, requestId: `${r.requestId}-${i}` }, { limited: false }))).toBe(false);
    expect(await replicated.accountBalance(r.userId)).toBe(10_000 - 50 * 120);
  });

  it('takes an older relay\'s marker key for "already settled" and copies it to the set, where the replication check reads', async () => {
    const r = ids();
    await replicated.seedAccount(r.userId);
    await redis.set(keys.reapedReservation(r.userId, r.requestId), 'S', 'EX', 300);
    expect(await replicated.settle(settlement(r))).toBe(false);
    expect(await replicated.accountBalance(r.userId)).toBe(10_000);
    expect(await eventsOf(r.requestId)).toBe(0);
    const until = Number(await redis.zscore(keys.settledReservations(r.userId), deadlineMember(r.userId, r.requestId)));
    expect(until).toBeGreaterThan(Date.now() + 290_000);
    expect(until).toBeLessThanOrEqual(Date.now() + 300_000);
  });
});
