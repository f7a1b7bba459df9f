// The reservation and settlement scripts against a real Redis.
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { createRedis } from '../../infra/redis/client.js';
import { redisKeys } from '../../infra/redis/keys.js';
import { encodedUsageEventsOf } from '../usage/usage-event.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { withWrongTypeKey } from '../../infra/testing/wrong-type-key.js';
import { consoleDebitHoldId, currentMinute, deadlineMember, DELETED_MIRROR_TTL_SEC, QuotaStore } from './quota-store.js';
import { batchScript, loadScriptDefs } from './scripts.js';

const config = testConfig();
const redis = createRedis(config, 'quota-test');
const keys = redisKeys(config.REDIS_PREFIX);
const pg = { account: new Map<number, number>(), token: new Map<number, number>() };
const store = new QuotaStore(redis, keys, {
  accountQuota: async (id) => pg.account.get(id) ?? 0,
  tokenRemainQuota: async (id) => pg.token.get(id) ?? 0,
});

let seq = 0;
const ids = () => ({ userId: 1000 + ++seq, tokenId: 5000 + seq, requestId: `req-${seq}` });

afterAll(async () => {
  const found = await redis.keys(`${config.REDIS_PREFIX}:*`);
  if (found.length) await redis.del(...found);
  await redis.quit();
});

beforeEach(() => {
  pg.account.clear();
  pg.token.clear();
});

async function streamEvents(): Promise<string[]> {
  const entries = (await redis.xrange(keys.usageStream(), '-', '+')) as [string, string[]][];
  return entries.flatMap(([, f]) => encodedUsageEventsOf(f) ?? []);
}

describe('reserveQuota-8.lua', () => {
  it('seeds the balance mirror from the book of record, then reserves atomically', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 1000);
    const outcome = await store.reserve({ userId, tokenId, tokenLimited: false, requestId, amount: 300, deadlineMs: Date.now() + 60_000 });
    expect(outcome).toBe('reserved');
    expect(await store.accountBalance(userId)).toBe(700);
    expect(await redis.hgetall(keys.reservation(userId, requestId))).toMatchObject({ amount: '300', limited: '0' });
  });

  it('refuses when the balance is too low and moves nothing', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 299);
    const outcome = await store.reserve({ userId, tokenId, tokenLimited: true, requestId, amount: 300, deadlineMs: Date.now() + 60_000 });
    expect(outcome).toBe('insufficient_balance');
    expect(await store.accountBalance(userId)).toBe(299);
    expect(await redis.exists(keys.reservation(userId, requestId))).toBe(0);
  });

  it('refuses when a limited key has too little quota left, leaving the account untouched', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    pg.token.set(tokenId, 100);
    const outcome = await store.reserve({ userId, tokenId, tokenLimited: true, requestId, amount: 101, deadlineMs: Date.now() + 60_000 });
    expect(outcome).toBe('insufficient_token_quota');
    expect(await store.accountBalance(userId)).toBe(10_000);
    expect(await store.tokenRemain(userId, tokenId)).toBe(100);
  });

  it('debits a limited key and the account together', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    pg.token.set(tokenId, 500);
    expect(await store.reserve({ userId, tokenId, tokenLimited: true, requestId, amount: 500, deadlineMs: 1 })).toBe('reserved');
    expect(await store.accountBalance(userId)).toBe(9_500);
    expect(await store.tokenRemain(userId, tokenId)).toBe(0);
  });

  it('refuses another reservation under the same request id', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    const r = { userId, tokenId, tokenLimited: false, requestId, amount: 10, deadlineMs: 1 };
    expect(await store.reserve(r)).toBe('reserved');
    expect(await store.reserve({ ...r, amount: 11 })).toBe('duplicate');
    expect(await store.reserve({ ...r, deadlineMs: 2 })).toBe('duplicate');
    expect(await store.accountBalance(userId)).toBe(9_990);
  });

  // ioredis resends a command whose connection dropped before its answer; the script had run. The
  // repeat was refused as a duplicate (a 500 while the hold stayed for the reaper's 15 minutes), or,
  // for a key whose last request of the minute or last quota it had taken, as rate limited or short.
  it('answers a repeat of the very same call as reserved, holding it once', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 1_000);
    pg.token.set(tokenId, 300);
    const r = { userId, tokenId, tokenLimited: true, requestId, amount: 300, deadlineMs: Date.now() + 60_000, rpmLimit: 1 };
    expect(await store.reserve(r)).toBe('reserved');
    expect(await store.reserve(r)).toBe('reserved');
    expect(await store.accountBalance(userId)).toBe(700);
    expect(await store.tokenRemain(userId, tokenId)).toBe(0);
    // Another request of that key this minute is still limited.
    expect(await store.reserve({ ...r, requestId: `${requestId}-next`, amount: 1 })).toBe('rpm_limited');
  });

  it('never lets concurrent reservations overdraw the balance', async () => {
    const { userId, tokenId } = ids();
    pg.account.set(userId, 1_000);
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, (_, i) => store.reserve({ userId, tokenId, tokenLimited: false, requestId: `c${seq}-${i}`, amount: 70, deadlineMs: 1 })),
    );
    expect(outcomes.filter((o) => o === 'reserved')).toHaveLength(14);
    expect(await store.accountBalance(userId)).toBe(1_000 - 14 * 70);
  });
  it('holds nothing when the deadline set refuses the reservation (a key of the wrong type)', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 1_000);
    pg.token.set(tokenId, 1_000);
    await withWrongTypeKey(redis, keys.reservationDeadlines(), async () => {
      await expect(store.reserve({ userId, tokenId, tokenLimited: true, requestId, amount: 300, deadlineMs: Date.now() + 60_000 })).rejects.toThrow(/WRONGTYPE/);
    });
    // Nothing is held that no settlement and no reaper would ever give back.
    expect(await store.accountBalance(userId)).toBe(1_000);
    expect(await store.tokenRemain(userId, tokenId)).toBe(1_000);
    expect(await redis.exists(keys.reservation(userId, requestId))).toBe(0);
    expect(await store.reserve({ userId, tokenId, tokenLimited: true, requestId, amount: 300, deadlineMs: Date.now() + 60_000 })).toBe('reserved');
    expect(await store.accountBalance(userId)).toBe(700);
  });
});

describe('settleReservations-9n.lua', () => {
  it('returns the unused part, debits the actual cost and appends the event, once', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 1_000);
    pg.token.set(tokenId, 800);
    await store.reserve({ userId, tokenId, tokenLimited: true, requestId, amount: 400, deadlineMs: 1 });
    const before = (await streamEvents()).length;
    expect(await store.settle({ userId, tokenId, requestId, cost: 123, eventJson: `{"r":"${requestId}"}` })).toBe(true);
    expect(await store.accountBalance(userId)).toBe(1_000 - 123);
    expect(await store.tokenRemain(userId, tokenId)).toBe(800 - 123);
    expect(await redis.exists(keys.reservation(userId, requestId))).toBe(0);
    expect(await store.settle({ userId, tokenId, requestId, cost: 123, eventJson: `{"r":"${requestId}"}` })).toBe(false);
    expect(await store.accountBalance(userId)).toBe(1_000 - 123);
    const events = await streamEvents();
    expect(events.length - before).toBe(1);
    expect(events.at(-1)).toBe(`{"r":"${requestId}"}`);
  });

  it('appends the events of a call as one stream entry, one event per line, and answers its id for each', async () => {
    const rs = [ids(), ids(), ids()];
    for (const r of rs) {
      pg.account.set(r.userId, 1_000);
      await store.reserve({ ...r, tokenLimited: false, amount: 100, deadlineMs: 1 });
    }
    const settle = batchScript(redis, loadScriptDefs().get('settleReservations')!);
    const k: string[] = [];
    const a: (string | number)[] = [];
    // The second twice: its repeat answers "already settled" and adds no line.
    for (const r of [rs[0]!, rs[1]!, rs[1]!, rs[2]!]) {
      k.push(keys.accountBalance(r.userId), keys.tokenRemain(r.userId, r.tokenId), keys.reservation(r.userId, r.requestId), keys.usageStream(),
        keys.keyTokensInWindow(r.userId, r.tokenId), keys.reservationDeadlines(), keys.reapedReservation(r.userId, r.requestId), keys.settledReservations(r.userId),
        keys.accountTokensInGroupWindow(r.userId, 'default'));
      a.push(10, `{"r":"${r.requestId}"}`, 0, deadlineMember(r.userId, r.requestId), '0', '', '', '', '');
    }
    const answers = (await settle(k, a)) as unknown[];
    const entry = (await redis.xrevrange(keys.usageStream(), '+', '-', 'COUNT', 1)) as [string, string[]][];
    expect(answers).toEqual([entry[0]![0], entry[0]![0], -6, entry[0]![0]]);
    expect(encodedUsageEventsOf(entry[0]![1])).toEqual(rs.map((r) => `{"r":"${r.requestId}"}`));
    for (const r of rs) expect(await store.accountBalance(r.userId)).toBe(990);
  });

  it('refunds the whole reservation when the cost is zero', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 1_000);
    await store.reserve({ userId, tokenId, tokenLimited: false, requestId, amount: 999, deadlineMs: 1 });
    await store.settle({ userId, tokenId, requestId, cost: 0, eventJson: '{}' });
    expect(await store.accountBalance(userId)).toBe(1_000);
  });
});

describe('settlements in one call (settleMany, settleSoon)', () => {
  const source = { accountQuota: async (id: number) => pg.account.get(id) ?? 0, tokenRemainQuota: async (id: number) => pg.token.get(id) ?? 0 };

  it('settles each of a batch on its own terms: one already settled does not stop the others', async () => {
    const a = ids(); const b = ids(); const c = ids();
    pg.account.set(a.userId, 1_000); pg.account.set(b.userId, 2_000); pg.account.set(c.userId, 3_000);
    pg.token.set(c.tokenId, 500);
    await store.reserve({ ...a, tokenLimited: false, amount: 400, deadlineMs: 1 });
    await store.reserve({ ...b, tokenLimited: false, amount: 700, deadlineMs: 1 });
    await store.reserve({ ...c, tokenLimited: true, amount: 300, deadlineMs: 1 });
    expect(await store.settle({ ...b, cost: 10, eventJson: '{"b":1}' })).toBe(true);
    const before = (await streamEvents()).length;
    const settled = await store.settleMany([
      { ...a, cost: 123, eventJson: '{"a":2}' },
      { ...b, cost: 10, eventJson: '{"b":2}' },
      { ...c, cost: 250, eventJson: '{"c":2}' },
    ]);
    expect(settled).toEqual([true, false, true]);
    expect(await store.accountBalance(a.userId)).toBe(1_000 - 123);
    expect(await store.accountBalance(b.userId)).toBe(2_000 - 10);
    expect(await store.accountBalance(c.userId)).toBe(3_000 - 250);
    expect(await store.tokenRemain(c.userId, c.tokenId)).toBe(500 - 250);
    expect((await streamEvents()).slice(before)).toEqual(['{"a":2}', '{"c":2}']);
  });

  it('sends queued settlements ahead of the next reservation, whose check sees their refunds', async () => {
    const slow = new QuotaStore(redis, keys, source, { settleDelayMs: 60_000 });
    const { userId, tokenId } = ids();
    pg.account.set(userId, 1_000);
    const first = { userId, tokenId, requestId: `${userId}-1` };
    const second = { userId, tokenId, requestId: `${userId}-2` };
    expect(await slow.reserve({ ...first, tokenLimited: false, amount: 600, deadlineMs: 1 })).toBe('reserved');
    expect(await slow.reserve({ ...second, tokenLimited: false, amount: 400, deadlineMs: 1 })).toBe('reserved');
    const settledFirst = slow.settleSoon({ ...first, cost: 100, eventJson: '{}' });
    const settledSecond = slow.settleSoon({ ...second, cost: 50, eventJson: '{}' });
    await new Promise((r) => setTimeout(r, 50));
    // Still queued: nothing refunded yet.
    expect(await slow.accountBalance(userId)).toBe(0);
    // 850 fits only once both refunds (500 + 350) are in.
    expect(await slow.reserve({ userId, tokenId, requestId: `${userId}-3`, tokenLimited: false, amount: 850, deadlineMs: 1 })).toBe('reserved');
    expect(await settledFirst).toBe(true);
    expect(await settledSecond).toBe(true);
    expect(await slow.accountBalance(userId)).toBe(1_000 - 100 - 50 - 850);
  });

  it('sends queued settlements after the delay when no reservation comes', async () => {
    const quiet = new QuotaStore(redis, keys, source, { settleDelayMs: 5 });
    const r = ids();
    pg.account.set(r.userId, 1_000);
    await quiet.reserve({ ...r, tokenLimited: false, amount: 600, deadlineMs: 1 });
    expect(await quiet.settleSoon({ ...r, cost: 1, eventJson: '{}' })).toBe(true);
    expect(await quiet.accountBalance(r.userId)).toBe(999);
  });

  it('sends a full batch at once, without waiting for the delay', async () => {
    const slow = new QuotaStore(redis, keys, source, { settleDelayMs: 60_000 });
    const { userId, tokenId } = ids();
    pg.account.set(userId, 1_000_000);
    const reqs = Array.from({ length: 130 }, (_, i) => ({ userId, tokenId, requestId: `${userId}-b${i}` }));
    for (const q of reqs) await slow.reserve({ ...q, tokenLimited: false, amount: 10, deadlineMs: 1 });
    const answers = reqs.map((q) => slow.settleSoon({ ...q, cost: 3, eventJson: '{}' }));
    expect(await Promise.all(answers.slice(0, 128))).toEqual(Array(128).fill(true));
    expect(await slow.accountBalance(userId)).toBe(1_000_000 - 128 * 3 - 2 * 10);
    // The last two wait for the next reservation.
    await slow.reserve({ userId, tokenId, requestId: `${userId}-next`, tokenLimited: false, amount: 1, deadlineMs: 1 });
    expect(await Promise.all(answers.slice(128))).toEqual([true, true]);
    expect(await slow.accountBalance(userId)).toBe(1_000_000 - 130 * 3 - 1);
  });

  it('sends one call per shard in the sharded layout, each event to its shard\'s stream', async () => {
    const sharded = redisKeys(config.REDIS_PREFIX, 4);
    const store4 = new QuotaStore(redis, sharded, source, { settleDelayMs: 1 });
    const users = [ids(), ids(), ids(), ids()];
    for (const u of users) {
      pg.account.set(u.userId, 1_000);
      await store4.reserve({ ...u, tokenLimited: false, amount: 100, deadlineMs: 1 });
    }
    // Events, not entries: a call's events are one entry (settleReservations-9n.lua).
    const lengths = async () => Promise.all([0, 1, 2, 3].map(async (s) => ((await redis.xrange(sharded.usageStream(s), '-', '+')) as [string, string[]][]).flatMap(([, f]) => encodedUsageEventsOf(f) ?? []).length));
    const before = await lengths();
    expect(await Promise.all(users.map((u) => store4.settleSoon({ ...u, cost: 7, eventJson: '{}' })))).toEqual([true, true, true, true]);
    const after = await lengths();
    for (const s of [0, 1, 2, 3]) expect(after[s]! - before[s]!).toBe(users.filter((u) => sharded.shardOf(u.userId) === s).length);
    for (const u of users) expect(await store4.accountBalance(u.userId)).toBe(993);
  });

  it('loads the batch script again on a Redis that lost it (restart, failover to a replica)', async () => {
    const r = ids();
    pg.account.set(r.userId, 1_000);
    await store.reserve({ ...r, tokenLimited: false, amount: 300, deadlineMs: 1 });
    // Every script of this server goes; ioredis's own commands reload theirs the same way.
    await redis.script('FLUSH');
    expect(await store.settleMany([{ ...r, cost: 25, eventJson: '{}' }])).toEqual([true]);
    expect(await store.accountBalance(r.userId)).toBe(975);
  });

  it('releases the expired reservations of every shard when one shard\'s deadline set fails, then says so', async () => {
    const sharded = redisKeys(config.REDIS_PREFIX, 4);
    const store4 = new QuotaStore(redis, sharded, source);
    const users = [ids(), ids(), ids(), ids()];
    for (const u of users) {
      pg.account.set(u.userId, 1_000);
      expect(await store4.reserve({ ...u, tokenLimited: false, amount: 100, deadlineMs: 1 })).toBe('reserved');
    }
    // Shard 0's deadline set is unreadable (a node failing, here a key of the wrong type).
    const broken = sharded.reservationDeadlines(0);
    const kept = await redis.zrange(broken, '0', '-1', 'WITHSCORES');
    await redis.del(broken);
    await redis.set(broken, 'not a set');
    try {
      await expect(store4.releaseExpired(Date.now(), 1000, () => '{}')).rejects.toThrow(/WRONGTYPE/);
      // Every other shard's reservation came back.
      for (const u of users) expect(await store4.accountBalance(u.userId)).toBe(sharded.shardOf(u.userId) === 0 ? 900 : 1_000);
    } finally {
      await redis.del(broken);
      for (let i = 0; i < kept.length; i += 2) await redis.zadd(broken, kept[i + 1]!, kept[i]!);
    }
  });

  it('answers settleMany in the order asked when its settlements span shards', async () => {
    const sharded = redisKeys(config.REDIS_PREFIX, 4);
    const store4 = new QuotaStore(redis, sharded, source);
    const users = [ids(), ids(), ids(), ids(), ids()];
    for (const u of users) {
      pg.account.set(u.userId, 1_000);
      await store4.reserve({ ...u, tokenLimited: false, amount: 100, deadlineMs: 1 });
    }
    expect(new Set(users.map((u) => sharded.shardOf(u.userId))).size).toBeGreaterThan(1);
    expect(await store4.settle({ ...users[2]!, cost: 5, eventJson: '{}' })).toBe(true);
    expect(await store4.settleMany(users.map((u) => ({ ...u, cost: 5, eventJson: '{}' })))).toEqual([true, true, false, true, true]);
    for (const u of users) expect(await store4.accountBalance(u.userId)).toBe(995);
  });

  it('fails every settlement of a call that Redis refuses, and each retried alone is billed once', async () => {
    const quiet = new QuotaStore(redis, keys, source, { settleDelayMs: 1 });
    const good = ids(); const bad = ids();
    pg.account.set(good.userId, 1_000); pg.account.set(bad.userId, 1_000);
    await quiet.reserve({ ...good, tokenLimited: false, amount: 500, deadlineMs: 1 });
    await quiet.reserve({ ...bad, tokenLimited: false, amount: 500, deadlineMs: 1 });
    // A balance of the wrong type makes the script fail on the second settlement, after the first ran.
    await redis.del(keys.accountBalance(bad.userId));
    await redis.hset(keys.accountBalance(bad.userId), 'x', '1');
    const before = (await streamEvents()).length;
    const answers = await Promise.allSettled([
      quiet.settleSoon({ ...good, cost: 40, eventJson: '{"good":1}' }),
      quiet.settleSoon({ ...bad, cost: 40, eventJson: '{"bad":1}' }),
    ]);
    expect(answers.map((a) => a.status)).toEqual(['rejected', 'rejected']);
    // The retry of the one that did run answers "already settled" and moves nothing.
    expect(await quiet.settle({ ...good, cost: 40, eventJson: '{"good":1}' })).toBe(false);
    expect(await quiet.accountBalance(good.userId)).toBe(1_000 - 40);
    expect((await streamEvents()).slice(before)).toEqual(['{"good":1}']);
    // The one that failed changed nothing: once its balance can take the debit, its retry settles it.
    await redis.del(keys.accountBalance(bad.userId));
    await redis.set(keys.accountBalance(bad.userId), 500);
    expect(await quiet.settle({ ...bad, cost: 40, eventJson: '{"bad":1}' })).toBe(true);
    expect(await quiet.accountBalance(bad.userId)).toBe(1_000 - 40);
    expect(await quiet.settle({ ...bad, cost: 40, eventJson: '{"bad":2}' })).toBe(false);
    expect((await streamEvents()).slice(before)).toEqual(['{"good":1}', '{"bad":1}']);
    await redis.del(keys.accountBalance(bad.userId));
  });

  it('bills a late settlement that Redis refused once, when retried after the balance is repaired', async () => {
    const r = ids();
    pg.account.set(r.userId, 1_000);
    const now = Date.now();
    await store.reserve({ ...r, tokenLimited: false, amount: 300, deadlineMs: now - 1 });
    expect(await store.releaseExpired(now, 1000, () => '{}')).toBeGreaterThanOrEqual(1);
    expect(await store.accountBalance(r.userId)).toBe(1_000);
    await redis.del(keys.accountBalance(r.userId));
    await redis.hset(keys.accountBalance(r.userId), 'x', '1');
    await expect(store.settle({ ...r, cost: 70, eventJson: '{"late":1}' })).rejects.toThrow(/WRONGTYPE/);
    await redis.del(keys.accountBalance(r.userId));
    await redis.set(keys.accountBalance(r.userId), 1_000);
    expect(await store.settle({ ...r, cost: 70, eventJson: '{"late":1}' })).toBe(true);
    expect(await store.accountBalance(r.userId)).toBe(930);
    expect(await store.settle({ ...r, cost: 70, eventJson: '{"late":2}' })).toBe(false);
    expect(await store.accountBalance(r.userId)).toBe(930);
  });

  it('debits the account and emits the event when a limited key\'s quota or token counter is of the wrong type', async () => {
    const r = ids();
    pg.account.set(r.userId, 1_000);
    pg.token.set(r.tokenId, 1_000);
    const minute = currentMinute();
    await store.reserve({ ...r, tokenLimited: true, amount: 300, deadlineMs: Date.now() + 60_000, tpmLimit: 1_000, tokens: 20 });
    await redis.del(keys.tokenRemain(r.userId, r.tokenId));
    await redis.hset(keys.tokenRemain(r.userId, r.tokenId), 'x', '1');
    await redis.set(keys.keyTokensInWindow(r.userId, r.tokenId), 'not a window');
    const before = (await streamEvents()).length;
    expect(await store.settle({ ...r, cost: 25, eventJson: '{"limited":1}', tokens: 10, minute })).toBe(true);
    expect(await store.accountBalance(r.userId)).toBe(975);
    expect((await streamEvents()).slice(before)).toEqual(['{"limited":1}']);
    expect(await store.settle({ ...r, cost: 25, eventJson: '{"limited":2}', tokens: 10, minute })).toBe(false);
    expect(await store.accountBalance(r.userId)).toBe(975);
    await redis.del(keys.tokenRemain(r.userId, r.tokenId), keys.keyTokensInWindow(r.userId, r.tokenId));
  });
});

describe('rate limits in reserveQuota-8.lua and settleReservations-9n.lua', () => {
  it('refuses the request over the per-minute request limit without moving quota', async () => {
    const { userId, tokenId } = ids();
    pg.account.set(userId, 10_000);
    const minute = 29_000_000;
    const base = { userId, tokenId, tokenLimited: false, amount: 10, deadlineMs: 1, rpmLimit: 3, minute, nowMs: minute * 60_000 };
    for (let i = 0; i < 3; i++) expect(await store.reserve({ ...base, requestId: `rpm-${seq}-${i}` })).toBe('reserved');
    expect(await store.reserve({ ...base, requestId: `rpm-${seq}-x` })).toBe('rpm_limited');
    expect(await store.accountBalance(userId)).toBe(10_000 - 30);
    // The window slides: 70 s later (the whole 10-second bucket of the three older than 60 s) it has room again.
    expect(await store.reserve({ ...base, nowMs: base.nowMs + 70_000, requestId: `rpm-${seq}-y` })).toBe('reserved');
  });

  // Before: a per-wall-clock-minute counter let 3 requests at a minute's last second and 3 more at
  // the next one's first through a limit of 3 a minute: twice the limit within two seconds.
  it('counts requests over the last 60 s, not per wall-clock minute: a burst at a minute\'s end leaves no room at the next one\'s start', async () => {
    const { userId, tokenId } = ids();
    pg.account.set(userId, 10_000);
    const start = 29_000_200 * 60_000;
    const at = (ms: number) => ({ minute: Math.floor(ms / 60_000), nowMs: ms });
    const base = { userId, tokenId, tokenLimited: false, amount: 10, deadlineMs: 1, rpmLimit: 3 };
    for (let i = 0; i < 3; i++) expect(await store.reserve({ ...base, ...at(start + 59_000), requestId: `slide-${seq}-${i}` })).toBe('reserved');
    const wait = { ms: 0 };
    expect(await store.reserve({ ...base, ...at(start + 61_000), requestId: `slide-${seq}-a` }, wait)).toBe('rpm_limited');
    // The three count until their bucket, [start + 50 s, start + 60 s), is wholly older than 60 s.
    expect(wait.ms).toBe(59_000);
    expect(await store.reserve({ ...base, ...at(start + 119_999), requestId: `slide-${seq}-b` })).toBe('rpm_limited');
    expect(await store.reserve({ ...base, ...at(start + 120_000), requestId: `slide-${seq}-c` })).toBe('reserved');
    expect(await store.accountBalance(userId)).toBe(10_000 - 40);
  });

  it('lets a request in as soon as the oldest of a spread-out minute leaves the window, and says when that is', async () => {
    const { userId, tokenId } = ids();
    pg.account.set(userId, 10_000);
    const start = 29_000_300 * 60_000;
    const at = (ms: number) => ({ minute: Math.floor(ms / 60_000), nowMs: ms });
    const base = { userId, tokenId, tokenLimited: false, amount: 10, deadlineMs: 1, rpmLimit: 3 };
    for (const [i, t] of [2_000, 25_000, 45_000].entries()) expect(await store.reserve({ ...base, ...at(start + t), requestId: `spread-${seq}-${i}` })).toBe('reserved');
    const wait = { ms: 0 };
    expect(await store.reserve({ ...base, ...at(start + 61_000), requestId: `spread-${seq}-a` }, wait)).toBe('rpm_limited');
    expect(wait.ms).toBe(9_000);
    expect(await store.reserve({ ...base, ...at(start + 70_000), requestId: `spread-${seq}-b` })).toBe('reserved');
    // Full again: the next to leave is the one of start + 25 s, whose bucket is out at start + 90 s.
    expect(await store.reserve({ ...base, ...at(start + 71_000), requestId: `spread-${seq}-c` }, wait)).toBe('rpm_limited');
    expect(wait.ms).toBe(19_000);
    // The window's record keeps no bucket older than the window.
    const buckets = Object.keys(await redis.hgetall(keys.keyRequestsInWindow(userId, tokenId))).map(Number).sort((x, y) => x - y);
    expect(buckets).toEqual([2, 4, 7].map((tens) => start / 10_000 + tens));
  });

  it('counts settled tokens against the per-minute token limit', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    const minute = 29_000_100;
    const base = { userId, tokenId, tokenLimited: false, amount: 10, deadlineMs: 1, tpmLimit: 100, minute, nowMs: minute * 60_000, tokens: 10 };
    expect(await store.reserve({ ...base, requestId })).toBe('reserved');
    await store.settle({ userId, tokenId, requestId, cost: 5, eventJson: '{}', tokens: 100, minute });
    expect(await store.reserve({ ...base, requestId: requestId + 'b' })).toBe('tpm_limited');
    expect(await store.accountBalance(userId)).toBe(10_000 - 5);
  });

  // Before: a per-wall-clock-minute counter let a key of 100 tokens a minute use 100 at a minute's
  // last second and 100 more at the next one's first.
  it('counts tokens over the last 60 s, not per wall-clock minute, and says when the window has room', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    const start = 29_000_400 * 60_000;
    const at = (ms: number) => ({ minute: Math.floor(ms / 60_000), nowMs: ms });
    const base = { userId, tokenId, tokenLimited: false, amount: 10, deadlineMs: 1, tpmLimit: 100, tokens: 100 };
    expect(await store.reserve({ ...base, ...at(start + 59_000), requestId })).toBe('reserved');
    await store.settle({ userId, tokenId, requestId, cost: 5, eventJson: '{}', tokens: 100, minute: Math.floor((start + 59_500) / 60_000) });
    const wait = { ms: 0 };
    expect(await store.reserve({ ...base, ...at(start + 61_000), requestId: `${requestId}-b` }, wait)).toBe('tpm_limited');
    expect(wait.ms).toBe(59_000);
    expect(await store.reserve({ ...base, ...at(start + 120_000), requestId: `${requestId}-c` })).toBe('reserved');
    expect(await store.accountBalance(userId)).toBe(10_000 - 5 - 10);
  });
});

describe('the rate-limit windows\' edges (reserveQuota-8.lua, settleReservations-9n.lua)', () => {
  const bucketOf = (ms: number) => String(Math.floor(ms / 10_000));

  // Before: each relay placed requests by its own clock, so a relay 70 s ahead dropped what a correct
  // one had counted (6 of a limit of 3 passed within a second), and a correct one told clients to wait
  // 670 s for a window a relay 10 minutes ahead had filled.
  it('places a request by the Redis server\'s clock, one for every relay', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    const [sec] = await redis.time();
    expect(await store.reserve({ userId, tokenId, tokenLimited: false, amount: 1, deadlineMs: 1, rpmLimit: 5, requestId })).toBe('reserved');
    const [field] = Object.keys(await redis.hgetall(keys.keyRequestsInWindow(userId, tokenId)));
    expect(Math.abs(Number(field) - Math.floor(Number(sec) / 10))).toBeLessThanOrEqual(1);
  });

  it('counts a bucket ahead of now as now\'s: the wait it gives is never over 70 s', async () => {
    const { userId, tokenId } = ids();
    pg.account.set(userId, 10_000);
    const t = 29_000_500 * 60_000;
    const base = { userId, tokenId, tokenLimited: false, amount: 1, deadlineMs: 1, rpmLimit: 2 };
    for (let i = 0; i < 2; i++) expect(await store.reserve({ ...base, nowMs: t + 600_000, requestId: `ahead-${seq}-${i}` })).toBe('reserved');
    const wait = { ms: 0 };
    expect(await store.reserve({ ...base, nowMs: t + 100, requestId: `ahead-${seq}-x` }, wait)).toBe('rpm_limited');
    expect(wait.ms).toBe(69_900);
  });

  it('never takes a tokens bucket below zero when a hold\'s bucket was dropped and written anew', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 100_000);
    const t = 29_000_600 * 60_000 + 1_000;
    const base = { userId, tokenId, tokenLimited: false, amount: 1, deadlineMs: 1, tpmLimit: 1_000 };
    expect(await store.reserve({ ...base, nowMs: t, tokens: 900, requestId })).toBe('reserved');
    // A call 70 s on drops the bucket; one back at t writes it anew with 100.
    expect(await store.reserve({ ...base, nowMs: t + 70_000, tokens: 10, requestId: `${requestId}-b` })).toBe('reserved');
    expect(await store.reserve({ ...base, nowMs: t + 500, tokens: 100, requestId: `${requestId}-c` })).toBe('reserved');
    await store.settle({ userId, tokenId, requestId, cost: 1, eventJson: '{}', tokens: 5 });
    expect(await redis.hget(keys.keyTokensInWindow(userId, tokenId), bucketOf(t))).toBe('0');
  });

  it('a settlement whose bucket left the window, or whose window expired, writes nothing; a window always has a TTL', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    const t = 29_000_700 * 60_000 + 1_000;
    const base = { userId, tokenId, tokenLimited: false, amount: 1, deadlineMs: 1, tpmLimit: 500, rpmLimit: 100 };
    expect(await store.reserve({ ...base, nowMs: t, tokens: 400, requestId })).toBe('reserved');
    expect(await store.reserve({ ...base, nowMs: t + 80_000, tokens: 50, requestId: `${requestId}-2` })).toBe('reserved');
    await store.settle({ userId, tokenId, requestId, cost: 1, eventJson: '{}', tokens: 30 });
    const window = keys.keyTokensInWindow(userId, tokenId);
    expect(await redis.hgetall(window)).toEqual({ [bucketOf(t + 80_000)]: '50' });
    expect(await redis.pttl(window)).toBeGreaterThan(0);
    expect(await redis.pttl(keys.keyRequestsInWindow(userId, tokenId))).toBeGreaterThan(0);
    await redis.del(window);
    await store.settle({ userId, tokenId, requestId: `${requestId}-2`, cost: 1, eventJson: '{}', tokens: 30 });
    expect(await redis.exists(window)).toBe(0);
    expect(await store.accountBalance(userId)).toBe(10_000 - 2);
  });

  it('the reaper gives a hold back in its bucket, once; the late settlement bills and counts nothing more', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    const now = Date.now();
    expect(await store.reserve({ userId, tokenId, tokenLimited: false, amount: 5, deadlineMs: now - 1, tpmLimit: 500, tokens: 300, nowMs: now, requestId })).toBe('reserved');
    const window = keys.keyTokensInWindow(userId, tokenId);
    expect(await store.releaseExpired(Date.now(), 1000, () => '{}')).toBeGreaterThanOrEqual(1);
    expect(await redis.hget(window, bucketOf(now))).toBe('0');
    expect(await store.settle({ userId, tokenId, requestId, cost: 3, eventJson: '{}', tokens: 40 })).toBe(true);
    expect(await redis.hget(window, bucketOf(now))).toBe('0');
    expect(await store.accountBalance(userId)).toBe(10_000 - 3);
  });

  it('lets exactly the limit in of many requests at once', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 100_000);
    const base = { userId, tokenId, tokenLimited: false, amount: 1, deadlineMs: 1, rpmLimit: 7 };
    const outcomes = await Promise.all(Array.from({ length: 60 }, (_, i) => store.reserve({ ...base, requestId: `${requestId}-${i}` })));
    expect(outcomes.filter((o) => o === 'reserved')).toHaveLength(7);
    expect(outcomes.filter((o) => o === 'rpm_limited')).toHaveLength(53);
  });

  // Before: a window that was not a hash refused every request of its key with 529, for good (one
  // name per key, no TTL), where a per-minute counter had healed at the next minute.
  it('drops a window that is not a hash, or a bucket that is not a whole number, and serves the key', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    const t = 29_000_800 * 60_000;
    await redis.set(keys.keyRequestsInWindow(userId, tokenId), 'not a window');
    await redis.hset(keys.keyTokensInWindow(userId, tokenId), bucketOf(t), '1.5', 'x', '3');
    const r = { userId, tokenId, tokenLimited: false, amount: 1, deadlineMs: 1, rpmLimit: 5, tpmLimit: 100, tokens: 10, nowMs: t };
    expect(await store.reserve({ ...r, requestId })).toBe('reserved');
    expect(await redis.hgetall(keys.keyRequestsInWindow(userId, tokenId))).toEqual({ [bucketOf(t)]: '1' });
    expect(await redis.hgetall(keys.keyTokensInWindow(userId, tokenId))).toEqual({ [bucketOf(t)]: '10' });
    expect(await store.accountBalance(userId)).toBe(10_000 - 1);
  });
});

describe('takeRateSlot-1.lua (the key\'s token counts per minute)', () => {
  it('takes slots up to the budget, a refused call counting too, in a counter that lives with its minute', async () => {
    const { userId, tokenId } = ids();
    const minute = 29_000_200;
    const key = keys.keyCountsInMinute(userId, tokenId, minute);
    expect(await store.takeCountSlot(userId, tokenId, 2, minute)).toBe(true);
    expect(await store.takeCountSlot(userId, tokenId, 2, minute)).toBe(true);
    expect(await store.takeCountSlot(userId, tokenId, 2, minute)).toBe(false);
    expect(await redis.get(key)).toBe('3');
    expect(await redis.ttl(key)).toBeGreaterThan(100);
    // Another minute is another budget.
    expect(await store.takeCountSlot(userId, tokenId, 2, minute + 1)).toBe(true);
  });
});

describe('tokens held against the per-minute token limit while requests run', () => {
  // Before: the counter moved at settlement only, so 100 requests sent at once all passed a limit of 500.
  it('a reservation holds its tokens: requests sent together stop at the limit; settlement turns the hold into the tokens used', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    const minute = 29_000_200;
    const nowMs = minute * 60_000;
    const counted = async () => Number(await redis.hget(keys.keyTokensInWindow(userId, tokenId), String(nowMs / 10_000)));
    const base = { userId, tokenId, tokenLimited: false, amount: 10, deadlineMs: 1, tpmLimit: 500, minute, nowMs, tokens: 200 };
    const outcomes = await Promise.all(Array.from({ length: 10 }, (_, i) => store.reserve({ ...base, requestId: `${requestId}-${i}` })));
    // 0, 200, 400 are below 500: three pass, the rest find 600.
    expect(outcomes.filter((o) => o === 'reserved')).toHaveLength(3);
    expect(outcomes.filter((o) => o === 'tpm_limited')).toHaveLength(7);
    expect(await counted()).toBe(600);
    const served = outcomes.flatMap((o, i) => (o === 'reserved' ? [`${requestId}-${i}`] : []));
    // Settled in the same minute: each hold of 200 becomes the 30 tokens used.
    for (const id of served) await store.settle({ userId, tokenId, requestId: id, cost: 5, eventJson: '{}', tokens: 30, minute });
    expect(await counted()).toBe(90);
    expect(await store.reserve({ ...base, requestId: `${requestId}-later` })).toBe('reserved');
    expect(await store.accountBalance(userId)).toBe(10_000 - 15 - 10);
  });

  // Before: a request settled in the minute after its start left its whole hold (input bound and
  // max_tokens) counted in the first minute, and its tokens used counted again in the second.
  it('a settlement in a later minute turns the hold into the tokens used where the request was counted, at its start', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    const minute = 29_000_300;
    const nowMs = minute * 60_000 + 58_000;
    const base = { userId, tokenId, tokenLimited: false, amount: 10, tpmLimit: 500, minute, nowMs, tokens: 200 };
    expect(await store.reserve({ ...base, deadlineMs: Date.now() + 60_000, requestId })).toBe('reserved');
    await store.settle({ userId, tokenId, requestId, cost: 5, eventJson: '{}', tokens: 30, minute: minute + 1 });
    expect(await redis.hgetall(keys.keyTokensInWindow(userId, tokenId))).toEqual({ [String(Math.floor(nowMs / 10_000))]: '30' });
  });
});

describe('a group\'s limits, counted per account (reserveQuota-8.lua KEYS 7-8, settleReservations-9n.lua KEYS 9)', () => {
  const bucketOf = (ms: number) => String(Math.floor(ms / 10_000));
  // Before: the relay applied the group's limit to each key's own window, so an account's keys each
  // had the whole of it.
  it('counts the requests of all an account\'s keys of the group together, apart from another account\'s and another group\'s', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    const t = 29_001_000 * 60_000;
    const base = { userId, tokenLimited: false, amount: 10, deadlineMs: 1, group: 'vip', groupRpmLimit: 3, nowMs: t };
    const wait = { ms: 0, group: false };
    for (let i = 0; i < 3; i++) expect(await store.reserve({ ...base, tokenId: tokenId + i, requestId: `${requestId}-${i}` })).toBe('reserved');
    expect(await store.reserve({ ...base, tokenId: tokenId + 3, requestId: `${requestId}-x` }, wait)).toBe('rpm_limited');
    expect(wait).toEqual({ ms: 70_000, group: true });
    expect(await store.accountBalance(userId)).toBe(10_000 - 30);
    expect(await redis.hgetall(keys.accountRequestsInGroupWindow(userId, 'vip'))).toEqual({ [bucketOf(t)]: '3' });
    // The account's requests in another group, and another account's in this one, count apart.
    expect(await store.reserve({ ...base, tokenId, group: 'default', requestId: `${requestId}-d` })).toBe('reserved');
    const other = ids();
    pg.account.set(other.userId, 10_000);
    expect(await store.reserve({ ...base, userId: other.userId, tokenId: other.tokenId, requestId: other.requestId })).toBe('reserved');
  });

  it('a key\'s own limit and the group\'s both apply, and a request either refuses takes nothing from the other', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    const t = 29_001_010 * 60_000;
    const base = { userId, tokenLimited: false, amount: 1, deadlineMs: 1, group: 'vip', groupRpmLimit: 2, nowMs: t };
    const wait = { ms: 0, group: true };
    expect(await store.reserve({ ...base, tokenId, rpmLimit: 1, requestId: `${requestId}-a` })).toBe('reserved');
    // The key's own limit refuses first: the group's window is not written.
    expect(await store.reserve({ ...base, tokenId, rpmLimit: 1, requestId: `${requestId}-b` }, wait)).toBe('rpm_limited');
    expect(wait.group).toBe(false);
    expect(await redis.hgetall(keys.accountRequestsInGroupWindow(userId, 'vip'))).toEqual({ [bucketOf(t)]: '1' });
    // A key of its own limit 100 meets the group's 2 at the second request of the account.
    expect(await store.reserve({ ...base, tokenId: tokenId + 1, rpmLimit: 100, requestId: `${requestId}-c` })).toBe('reserved');
    expect(await store.reserve({ ...base, tokenId: tokenId + 1, rpmLimit: 100, requestId: `${requestId}-d` }, wait)).toBe('rpm_limited');
    expect(wait.group).toBe(true);
    // Refused by the group's window: nothing counted in the key's own.
    expect(await redis.hgetall(keys.keyRequestsInWindow(userId, tokenId + 1))).toEqual({ [bucketOf(t)]: '1' });
    expect(await store.accountBalance(userId)).toBe(10_000 - 2);
  });

  it('holds tokens in the group\'s window too; the settlement and the reaper turn each window\'s hold into the tokens used', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 10_000);
    const now = Date.now();
    const base = { userId, tokenLimited: false, amount: 10, group: 'vip', groupTpmLimit: 500, nowMs: now, tokens: 200 };
    const groupWindow = keys.accountTokensInGroupWindow(userId, 'vip');
    const outcomes = await Promise.all(Array.from({ length: 6 }, (_, i) =>
      store.reserve({ ...base, tokenId: tokenId + i, tpmLimit: 10_000, deadlineMs: now + 60_000, requestId: `${requestId}-${i}` })));
    // 0, 200, 400 are below 500 whichever keys they come through.
    const served = outcomes.flatMap((o, i) => (o === 'reserved' ? [i] : []));
    expect(served).toHaveLength(3);
    expect(outcomes.filter((o) => o === 'tpm_limited')).toHaveLength(3);
    expect(await redis.hget(groupWindow, bucketOf(now))).toBe('600');
    const [first, second, third] = served as [number, number, number];
    expect(await redis.hget(keys.keyTokensInWindow(userId, tokenId + first), bucketOf(now))).toBe('200');
    // Settled: the hold of 200 becomes the 30 used, in the key's window and in the group's.
    expect(await store.settle({ userId, tokenId: tokenId + first, requestId: `${requestId}-${first}`, cost: 5, eventJson: '{}', tokens: 30, tpmGroup: 'vip' })).toBe(true);
    expect(await redis.hget(groupWindow, bucketOf(now))).toBe('430');
    expect(await redis.hget(keys.keyTokensInWindow(userId, tokenId + first), bucketOf(now))).toBe('30');
    // A settlement that names no group (a spool line of an older relay) corrects the key's window only.
    expect(await store.settle({ userId, tokenId: tokenId + second, requestId: `${requestId}-${second}`, cost: 5, eventJson: '{}', tokens: 30 })).toBe(true);
    expect(await redis.hget(groupWindow, bucketOf(now))).toBe('430');
    // The reaper releases the third (its deadline moved into the past): its hold goes from both windows.
    await redis.zadd(keys.reservationDeadlines(), now - 1, deadlineMember(userId, `${requestId}-${third}`));
    expect(await store.releaseExpired(now, 1000, () => '{}')).toBeGreaterThanOrEqual(1);
    expect(await redis.hget(groupWindow, bucketOf(now))).toBe('230');
    expect(await redis.hget(keys.keyTokensInWindow(userId, tokenId + third), bucketOf(now))).toBe('0');
    expect(await store.accountBalance(userId)).toBe(10_000 - 10);
  });
});

describe('releasing expired reservations', () => {
  it('gives an expired reservation back, logs it, and still bills a late settlement exactly once', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 1_000);
    pg.token.set(tokenId, 1_000);
    const now = Date.now();
    await store.reserve({ userId, tokenId, tokenLimited: true, requestId, amount: 400, deadlineMs: now - 1 });
    const fresh = `${requestId}-fresh`;
    await store.reserve({ userId, tokenId, tokenLimited: true, requestId: fresh, amount: 100, deadlineMs: now + 60_000 });
    expect(await store.accountBalance(userId)).toBe(500);

    const logged: string[] = [];
    const released = await store.releaseExpired(now, 1000, (r) => {
      logged.push(`${r.userId}/${r.tokenId}/${r.requestId}/${r.amount}`);
      return JSON.stringify({ expired: r.requestId });
    });
    expect(released).toBeGreaterThanOrEqual(1);
    expect(logged).toContain(`${userId}/${tokenId}/${requestId}/400`);
    expect(logged.some((l) => l.includes(fresh))).toBe(false);
    expect(await store.accountBalance(userId)).toBe(900);
    expect(await store.tokenRemain(userId, tokenId)).toBe(900);
    expect((await streamEvents()).at(-1)).toBe(JSON.stringify({ expired: requestId }));

    // The relay was alive after all: its settlement debits the actual cost from the restored balance.
    expect(await store.settle({ userId, tokenId, requestId, cost: 70, eventJson: '{"late":1}' })).toBe(true);
    expect(await store.accountBalance(userId)).toBe(830);
    expect(await store.tokenRemain(userId, tokenId)).toBe(830);
    expect(await store.settle({ userId, tokenId, requestId, cost: 70, eventJson: '{"late":2}' })).toBe(false);
    expect(await store.accountBalance(userId)).toBe(830);
    // Nothing left to release.
    expect(await store.releaseExpired(now, 1000, () => '{}')).toBe(0);
  });
});

describe('renewed deadlines (the relay heartbeat)', () => {
  it('keeps a renewed reservation from the reaper and does not bring back a settled one', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 1_000);
    const now = Date.now();
    await store.reserve({ userId, tokenId, tokenLimited: false, requestId, amount: 400, deadlineMs: now - 1 });
    const settled = `${requestId}-settled`;
    await store.reserve({ userId, tokenId, tokenLimited: false, requestId: settled, amount: 100, deadlineMs: now - 1 });
    await store.settle({ userId, tokenId, requestId: settled, cost: 10, eventJson: '{}' });
    await store.renewDeadlines([{ userId, requestId }, { userId, requestId: settled }], now + 60_000);
    expect(await redis.zscore(keys.reservationDeadlines(), `${userId}:${settled}`)).toBeNull();
    const logged: string[] = [];
    await store.releaseExpired(now, 1000, (r) => { logged.push(r.requestId); return '{}'; });
    expect(logged).not.toContain(requestId);
    expect(await redis.exists(keys.reservation(userId, requestId))).toBe(1);
    expect(await store.accountBalance(userId)).toBe(1_000 - 400 - 10);
  });

  it('leaves a reservation whose deadline is renewed between the reaper reading it and releasing it', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 1_000);
    const now = Date.now();
    await store.reserve({ userId, tokenId, tokenLimited: false, requestId, amount: 400, deadlineMs: now - 1 });
    const read = redis.zrangebyscore.bind(redis);
    // The heartbeat lands right after the reaper's read: the script sees the new deadline.
    (redis as unknown as { zrangebyscore: unknown }).zrangebyscore = async (...args: Parameters<typeof read>) => {
      const members = await read(...args);
      await store.renewDeadlines([{ userId, requestId }], now + 60_000);
      return members;
    };
    const logged: string[] = [];
    try {
      await store.releaseExpired(now, 1000, (r) => { logged.push(r.requestId); return '{}'; });
    } finally {
      delete (redis as unknown as { zrangebyscore?: unknown }).zrangebyscore;
    }
    expect(logged).toContain(requestId);
    expect(await redis.exists(keys.reservation(userId, requestId))).toBe(1);
    expect(await redis.zscore(keys.reservationDeadlines(), `${userId}:${requestId}`)).toBe(String(now + 60_000));
    expect(await store.accountBalance(userId)).toBe(600);
    // Its relay settles it as usual, once.
    expect(await store.settle({ userId, tokenId, requestId, cost: 50, eventJson: '{}' })).toBe(true);
    expect(await store.accountBalance(userId)).toBe(950);
  });
});

describe('adjustBalance-1.lua', () => {
  it('moves a loaded mirror by the delta and leaves an unloaded one alone', async () => {
    const { userId, tokenId, requestId } = ids();
    await store.adjustAccount(userId, 500);
    expect(await store.accountBalance(userId)).toBeNull();
    pg.account.set(userId, 100);
    await store.reserve({ userId, tokenId, tokenLimited: false, requestId, amount: 50, deadlineMs: 1 });
    await store.adjustAccount(userId, 500);
    expect(await store.accountBalance(userId)).toBe(550);
    await store.adjustAccount(userId, -600);
    expect(await store.accountBalance(userId)).toBe(-50);
  });
});

describe('adjustBalanceOnce-3.lua', () => {
  it('applies a console change to the mirror once, however often it is retried', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 100);
    await store.reserve({ userId, tokenId, tokenLimited: false, requestId, amount: 10, deadlineMs: 1 });
    await store.adjustAccountOnce(userId, 500, 77);
    await store.adjustAccountOnce(userId, 500, 77);
    expect(await store.accountBalance(userId)).toBe(590);
    await store.adjustAccountOnce(userId, -40, 78);
    expect(await store.accountBalance(userId)).toBe(550);
  });

  it('marks a change applied even when the mirror is not loaded, so a later retry does not add it again', async () => {
    const { userId, tokenId, requestId } = ids();
    await store.adjustAccountOnce(userId, 500, 91);
    expect(await store.accountBalance(userId)).toBeNull();
    pg.account.set(userId, 600);
    await store.reserve({ userId, tokenId, tokenLimited: false, requestId, amount: 0, deadlineMs: 1 });
    await store.adjustAccountOnce(userId, 500, 91);
    expect(await store.accountBalance(userId)).toBe(600);
  });

  it('skips a change the seeded mirror already holds, and applies a newer one', async () => {
    const { userId } = ids();
    const seeded = new QuotaStore(redis, keys, {
      accountQuota: async () => { throw new Error('accountSeed is preferred'); },
      tokenRemainQuota: async () => 0,
      // Postgres after credits 1..3 committed: their follow-ups must not add them again.
      accountSeed: async () => ({ quota: 1_000, creditSeq: 3 }),
    });
    expect(await seeded.seedAccount(userId)).toBe(true);
    expect(await seeded.seedAccount(userId)).toBe(false);
    await seeded.adjustAccountOnce(userId, 250, 201, 3);
    await seeded.adjustAccountOnce(userId, 250, 200, 2);
    expect(await seeded.accountBalance(userId)).toBe(1_000);
    await seeded.adjustAccountOnce(userId, -100, 202, 4);
    await seeded.adjustAccountOnce(userId, -100, 202, 4);
    expect(await seeded.accountBalance(userId)).toBe(900);
    // A row from before sequences moves a loaded mirror as it always did.
    await seeded.adjustAccountOnce(userId, 5, 203, null);
    expect(await seeded.accountBalance(userId)).toBe(905);
  });

  // Before: seeded for ever. A request whose key or account was deleted while its body came in seeds
  // after the deletion expired the mirrors (which did not exist then), and nothing removed them.
  it('a deleted row\'s mirror is seeded to expire as a deletion\'s mirrors do; a live row\'s for ever', async () => {
    const { userId, tokenId } = ids();
    const deleted = new QuotaStore(redis, keys, {
      accountQuota: async () => 0, tokenRemainQuota: async () => 0,
      accountSeed: async () => ({ quota: 700, creditSeq: 2, deleted: true }),
      tokenSeed: async () => ({ remain: 300, quotaSeq: 1, deleted: true }),
    });
    expect(await deleted.seedAccount(userId)).toBe(true);
    expect(await deleted.seedToken(userId, tokenId)).toBe(true);
    expect(await deleted.accountBalance(userId)).toBe(700);
    for (const key of [keys.accountBalance(userId), keys.accountCreditSeq(userId), keys.tokenRemain(userId, tokenId), keys.tokenQuotaSeq(userId, tokenId)]) {
      const ttl = await redis.ttl(key);
      expect(ttl, key).toBeGreaterThan(DELETED_MIRROR_TTL_SEC - 60);
      expect(ttl, key).toBeLessThanOrEqual(DELETED_MIRROR_TTL_SEC);
    }
    const live = ids();
    const kept = new QuotaStore(redis, keys, { accountQuota: async () => 0, tokenRemainQuota: async () => 0, accountSeed: async () => ({ quota: 700, creditSeq: 2, deleted: false }) });
    expect(await kept.seedAccount(live.userId)).toBe(true);
    expect(await redis.ttl(keys.accountBalance(live.userId))).toBe(-1);
    expect(await redis.ttl(keys.accountCreditSeq(live.userId))).toBe(-1);
  });
});

describe('console debit holds (holdConsoleDebit-4.lua, adjustAccountOnce-5.lua, releaseDebitHold-4.lua)', () => {
  const FAR = () => Date.now() + 3_600_000;
  const holdOf = (userId: number, ledgerId: number) => keys.reservation(userId, consoleDebitHoldId(ledgerId));
  const inDeadlines = async (userId: number, ledgerId: number) => (await redis.zscore(keys.reservationDeadlines(), deadlineMember(userId, consoleDebitHoldId(ledgerId)))) !== null;

  it('takes the debit from the mirror atomically against reservations, or refuses and holds nothing', async () => {
    const { userId, tokenId, requestId } = ids();
    pg.account.set(userId, 1_000);
    // Unloaded: seeded from the book of record first, as a reservation is.
    expect(await store.holdConsoleDebit(userId, 500, 1_001, FAR())).toBe('insufficient_balance');
    expect(await store.accountBalance(userId)).toBe(1_000);
    expect(await redis.exists(holdOf(userId, 500))).toBe(0);
    expect(await store.reserve({ userId, tokenId, tokenLimited: false, requestId, amount: 300, deadlineMs: FAR() })).toBe('reserved');
    expect(await store.holdConsoleDebit(userId, 501, 701, FAR())).toBe('insufficient_balance');
    expect(await store.holdConsoleDebit(userId, 502, 700, FAR())).toBe('held');
    expect(await store.accountBalance(userId)).toBe(0);
    expect(await redis.hgetall(holdOf(userId, 502))).toMatchObject({ amount: '700', hold: '1', user: String(userId) });
    expect(await inDeadlines(userId, 502)).toBe(true);
    // What the hold took no request reserves.
    expect(await store.reserve({ userId, tokenId, tokenLimited: false, requestId: `${requestId}-b`, amount: 1, deadlineMs: FAR() })).toBe('insufficient_balance');
  });

  it('the mirror step consumes the hold: the debit is in the mirror once, nothing given back, however often it runs', async () => {
    const { userId } = ids();
    pg.account.set(userId, 1_000);
    expect(await store.holdConsoleDebit(userId, 510, 400, FAR())).toBe('held');
    await store.adjustAccountOnce(userId, -400, 510, 7);
    expect(await store.accountBalance(userId)).toBe(600);
    expect([await redis.exists(holdOf(userId, 510)), await inDeadlines(userId, 510)]).toEqual([0, false]);
    await store.adjustAccountOnce(userId, -400, 510, 7);
    expect(await store.accountBalance(userId)).toBe(600);
    // The reaper afterwards finds nothing.
    expect(await store.releaseConsoleDebit(userId, 510)).toBe(0);
    expect(await store.accountBalance(userId)).toBe(600);
  });

  it('a rolled-back debit releases its hold once, with no log event', async () => {
    const { userId } = ids();
    pg.account.set(userId, 1_000);
    const before = (await streamEvents()).length;
    expect(await store.holdConsoleDebit(userId, 520, 400, FAR())).toBe('held');
    expect(await store.releaseConsoleDebit(userId, 520)).toBe(400);
    expect(await store.releaseConsoleDebit(userId, 520)).toBe(0);
    expect(await store.accountBalance(userId)).toBe(1_000);
    expect([await redis.exists(holdOf(userId, 520)), await inDeadlines(userId, 520)]).toEqual([0, false]);
    expect((await streamEvents()).length).toBe(before);
  });

  it('reaper first, then the follow-up: the hold goes back with no log row, the debit is applied once', async () => {
    const { userId } = ids();
    pg.account.set(userId, 1_000);
    const now = Date.now();
    expect(await store.holdConsoleDebit(userId, 530, 400, now - 1)).toBe('held');
    const before = (await streamEvents()).length;
    const logged: string[] = [];
    await store.releaseExpired(now, 1000, (r) => { logged.push(r.requestId); return '{}'; });
    expect(logged.filter((id) => id.startsWith('console-debit:'))).toEqual([]);
    expect((await streamEvents()).length).toBe(before + logged.length);
    expect(await store.accountBalance(userId)).toBe(1_000);
    expect([await redis.exists(holdOf(userId, 530)), await inDeadlines(userId, 530)]).toEqual([0, false]);
    // The debit committed: the billing follow-up finds no hold and applies it, once.
    await store.adjustAccountOnce(userId, -400, 530, 7);
    await store.adjustAccountOnce(userId, -400, 530, 7);
    expect(await store.accountBalance(userId)).toBe(600);
  });

  it('follow-up first (the console died after its commit), then the reaper: consumed once, nothing given back', async () => {
    const { userId } = ids();
    pg.account.set(userId, 1_000);
    const now = Date.now();
    expect(await store.holdConsoleDebit(userId, 540, 400, now - 1)).toBe('held');
    // The billing worker's own store: the follow-up of the pending ledger row.
    const worker = new QuotaStore(redis, keys, { accountQuota: async () => 0, tokenRemainQuota: async () => 0 });
    await worker.adjustAccountOnce(userId, -400, 540, 7);
    await worker.releaseExpired(now, 1000, () => '{}');
    expect(await store.accountBalance(userId)).toBe(600);
    expect(await redis.exists(holdOf(userId, 540))).toBe(0);
  });

  it('the reaper leaves a hold whose deadline is ahead', async () => {
    const { userId } = ids();
    pg.account.set(userId, 1_000);
    expect(await store.holdConsoleDebit(userId, 545, 400, FAR())).toBe('held');
    await store.releaseExpired(Date.now(), 1000, () => '{}');
    expect(await store.accountBalance(userId)).toBe(600);
    expect(await redis.exists(holdOf(userId, 545))).toBe(1);
    await store.adjustAccountOnce(userId, -400, 545, 7);
    expect(await store.accountBalance(userId)).toBe(600);
  });

  it('a mirror reseeded after the commit holds the debit: the hold is only removed', async () => {
    const { userId } = ids();
    let read = { quota: 1_000, creditSeq: 3 };
    const s = new QuotaStore(redis, keys, { accountQuota: async () => 0, tokenRemainQuota: async () => 0, accountSeed: async () => read });
    expect(await s.holdConsoleDebit(userId, 550, 400, FAR())).toBe('held');
    // The mirror is lost; the debit commits (seq 4); a relay seeds from Postgres, which has it.
    await redis.del(keys.accountBalance(userId));
    read = { quota: 600, creditSeq: 4 };
    await s.seedAccount(userId);
    await s.adjustAccountOnce(userId, -400, 550, 4);
    expect(await s.accountBalance(userId)).toBe(600);
    expect(await redis.exists(holdOf(userId, 550))).toBe(0);
    // A release of that hold, had it come first, would have given nothing back to the new mirror.
    expect(await s.holdConsoleDebit(userId, 551, 100, FAR())).toBe('held');
    await redis.del(keys.accountBalance(userId));
    read = { quota: 600, creditSeq: 5 };
    await s.seedAccount(userId);
    expect(await s.releaseConsoleDebit(userId, 551)).toBe(0);
    expect(await s.accountBalance(userId)).toBe(600);
  });

  it('a mirror reseeded before the commit lacks both hold and debit: the debit is applied whole', async () => {
    const { userId } = ids();
    let read = { quota: 1_000, creditSeq: 3 };
    const s = new QuotaStore(redis, keys, { accountQuota: async () => 0, tokenRemainQuota: async () => 0, accountSeed: async () => read });
    expect(await s.holdConsoleDebit(userId, 560, 400, FAR())).toBe('held');
    // Lost; a credit of 100 commits (seq 4) and the mirror is reseeded with it, then the debit commits (seq 5).
    await redis.del(keys.accountBalance(userId));
    read = { quota: 1_100, creditSeq: 4 };
    await s.seedAccount(userId);
    await s.adjustAccountOnce(userId, -400, 560, 5);
    expect(await s.accountBalance(userId)).toBe(700);
  });

  it('rolling upgrade: an older worker applied the debit by adjustBalanceOnce-3.lua; the new step leaves the hold to the reaper, once in all', async () => {
    const { userId } = ids();
    pg.account.set(userId, 1_000);
    const now = Date.now();
    expect(await store.holdConsoleDebit(userId, 570, 400, now - 1)).toBe('held');
    const old = loadScriptDefs().get('adjustBalanceOnce')!;
    await redis.eval(old.lua, 3, keys.accountBalance(userId), keys.adjustmentApplied(userId, 570), keys.accountCreditSeq(userId), -400, 60, 7);
    expect(await store.accountBalance(userId)).toBe(200);
    await store.adjustAccountOnce(userId, -400, 570, 7);
    expect(await store.accountBalance(userId)).toBe(200);
    await store.releaseExpired(now, 1000, () => '{}');
    expect(await store.accountBalance(userId)).toBe(600);
  });

  it('accountSpendable counts a committed debit whose hold is still there as in the mirror', async () => {
    const { userId } = ids();
    pg.account.set(userId, 1_000);
    expect(await store.holdConsoleDebit(userId, 580, 400, FAR())).toBe('held');
    expect(await store.accountSpendable(userId, [{ ledgerId: 580, creditSeq: 7, delta: -400 }])).toBe(600);
    // Another committed debit, neither held nor applied (its console died before holds existed).
    expect(await store.accountSpendable(userId, [{ ledgerId: 580, creditSeq: 7, delta: -400 }, { ledgerId: 581, creditSeq: 8, delta: -50 }])).toBe(550);
    await store.adjustAccountOnce(userId, -400, 580, 7);
    expect(await store.accountSpendable(userId, [{ ledgerId: 580, creditSeq: 7, delta: -400 }])).toBe(600);
  });
});

describe('seedBalance-2.lua', () => {
  it('refuses a seed read before a change that reached Redis while the mirror was unloaded, and reads again', async () => {
    const { userId } = ids();
    let pgRow = { quota: 1_000, creditSeq: 3 };
    let reads = 0;
    const s: QuotaStore = new QuotaStore(redis, keys, {
      accountQuota: async () => 0, tokenRemainQuota: async () => 0,
      accountSeed: async () => {
        const read = pgRow;
        if (reads++ === 0) {
          // Between this read and the seed, a credit commits (seq 4) and its mirror step finds no mirror.
          pgRow = { quota: 1_250, creditSeq: 4 };
          await s.adjustAccountOnce(userId, 250, 301, 4);
        }
        return read;
      },
    });
    await s.seedAccount(userId);
    expect(await s.accountBalance(userId)).toBe(1_250);
    expect(reads).toBe(2);
  });

  it('seeds the balance and its credit sequence together, and leaves a loaded mirror as it is', async () => {
    const { userId } = ids();
    let read = { quota: 700, creditSeq: 9 };
    const s = new QuotaStore(redis, keys, { accountQuota: async () => 0, tokenRemainQuota: async () => 0, accountSeed: async () => read });
    await redis.set(keys.accountCreditSeq(userId), 2); // left by an earlier seed of a mirror since lost
    expect(await s.seedAccount(userId)).toBe(true);
    expect([await redis.get(keys.accountBalance(userId)), await redis.get(keys.accountCreditSeq(userId))]).toEqual(['700', '9']);
    read = { quota: 1, creditSeq: 10 };
    expect(await s.seedAccount(userId)).toBe(false);
    expect([await redis.get(keys.accountBalance(userId)), await redis.get(keys.accountCreditSeq(userId))]).toEqual(['700', '9']);
  });
});

describe('script registration', () => {
  it('names each command name:version with the key count from the file name', () => {
    const defs = loadScriptDefs();
    expect(defs.get('reserveQuota')).toMatchObject({ numberOfKeys: 8 });
    expect(defs.get('settleReservations')).toMatchObject({ numberOfKeys: 9, batch: true });
    expect(defs.get('adjustBalance')).toMatchObject({ numberOfKeys: 1 });
    expect(defs.get('adjustBalanceOnce')).toMatchObject({ numberOfKeys: 3 });
    expect(defs.get('adjustAccountOnce')).toMatchObject({ numberOfKeys: 5 });
    expect(defs.get('holdConsoleDebit')).toMatchObject({ numberOfKeys: 4 });
    expect(defs.get('releaseDebitHold')).toMatchObject({ numberOfKeys: 4 });
    expect(defs.get('seedBalance')).toMatchObject({ numberOfKeys: 2 });
    for (const def of defs.values()) expect(def.command).toMatch(new RegExp(`^${def.name}:[0-9a-f]{10}$`));
  });
});
