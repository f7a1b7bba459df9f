// settleReservations-7n.lua with the settled marker (Redis with replicas, issue 11): a settlement whose
// reservation a failover lost still bills the cost once and emits its event once; a replayed
// settlement that did run changes nothing; without the marker the script behaves as before.
import { afterAll, describe, expect, it } from 'vitest';
import { createRedis } from '../../infra/redis/client.js';
import { redisKeys } from '../../infra/redis/keys.js';
import { encodedUsageEventsOf } from '../usage/usage-event.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { currentMinute, QuotaStore } from './quota-store.js';

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

describe('settleReservations-7n.lua with the settled marker', () => {
  it('settles once: a replay of a settlement that ran answers "already settled" and moves nothing', async () => {
    const r = ids();
    expect(await replicated.reserve({ ...r, tokenLimited: true, amount: 300, deadlineMs: Date.now() + 60_000 })).toBe('reserved');
    expect(await replicated.settle(settlement(r))).toBe(true);
    expect(await redis.get(keys.reapedReservation(r.userId, r.requestId))).toBe('S');
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
    expect(await redis.exists(keys.reapedReservation(s.userId, s.requestId))).toBe(0);
  });
});
