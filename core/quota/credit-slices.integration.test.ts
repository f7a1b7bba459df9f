// Credit held by the relay (credit-slices.ts and its scripts takeCreditSlice-3, settleSliceDraws-4n,
// releaseCreditSlice-4) against a real Redis: every unit that leaves a balance is a settled cost or
// comes back, whatever order settlements, returns, trims and the reaper come in.
import { createServer, connect, type AddressInfo } from 'node:net';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { createRedis } from '../../infra/redis/client.js';
import { redisKeys } from '../../infra/redis/keys.js';
import { encodedUsageEventsOf } from '../usage/usage-event.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { withWrongTypeKey } from '../../infra/testing/wrong-type-key.js';
import { creditSliceOptions, DEFAULT_CREDIT_SLICE_OPTIONS, sliceHoldMember, type CreditSliceOptions } from './credit-slices.js';
import { DEFAULT_REAPED_SLICE_HOLD_MS, QuotaStore, type ReserveRequest } from './quota-store.js';
import { batchScript, loadScriptDefs } from './scripts.js';

const config = testConfig();
const redis = createRedis(config, 'slices-test');
// Each test builds its own stores on this one connection (a relay has one store per connection), each
// listening for 'ready' until afterAll stops it.
redis.setMaxListeners(64);
const keys = redisKeys(config.REDIS_PREFIX);
const pg = new Map<number, number>();
const source = { accountQuota: async (id: number) => pg.get(id) ?? 0, tokenRemainQuota: async () => 0 };
const stores: QuotaStore[] = [];
// Every request of these tests may take a slice at once; the busy gate has its own test.
const SLICES: CreditSliceOptions = { ...DEFAULT_CREDIT_SLICE_OPTIONS, busyStreak: 1 };

function slicedStore(opts: Partial<CreditSliceOptions> = {}, settledMarkerSec = 0): QuotaStore {
  const store = new QuotaStore(redis, keys, source, { creditSlices: { ...SLICES, ...opts }, settledMarkerSec });
  stores.push(store);
  return store;
}

let seq = 0;
const newUser = (balance: number) => {
  const userId = 7000 + ++seq;
  pg.set(userId, balance);
  return userId;
};
const request = (userId: number, n: number | string, amount: number, deadlineMs = Date.now() + 60_000): ReserveRequest =>
  ({ userId, tokenId: userId * 10, tokenLimited: false, requestId: `r${userId}-${n}`, amount, deadlineMs });
const settlement = (r: ReserveRequest, cost: number) =>
  ({ userId: r.userId, tokenId: r.tokenId, requestId: r.requestId, cost, eventJson: JSON.stringify({ id: r.requestId, cost }) });

afterAll(async () => {
  for (const s of stores) s.stop();
  const found = await redis.keys(`${config.REDIS_PREFIX}:*`);
  if (found.length) await redis.del(...found);
  await redis.quit();
});

beforeEach(() => pg.clear());

async function events(): Promise<{ id: string; cost: number }[]> {
  const entries = (await redis.xrange(keys.usageStream(), '-', '+')) as [string, string[]][];
  return entries.flatMap(([, f]) => encodedUsageEventsOf(f) ?? []).map((e) => JSON.parse(e) as { id: string; cost: number });
}

async function eventsOf(userId: number): Promise<{ id: string; cost: number }[]> {
  return (await events()).filter((e) => e.id?.startsWith(`r${userId}-`));
}

async function slicesOf(userId: number): Promise<Record<string, string>[]> {
  const found = await redis.keys(`${keys.reservation(userId, 'slice-')}*`);
  return Promise.all(found.map((k) => redis.hgetall(k)));
}

describe('requests reserved from a slice of the balance', () => {
  it('takes one slice for many requests, settles each against it and gives the rest back: the balance moves by the costs alone', async () => {
    const store = slicedStore();
    const userId = newUser(1_000_000);
    const reqs = Array.from({ length: 20 }, (_, i) => request(userId, i, 100));
    for (const r of reqs.slice(0, 16)) expect(await store.reserve(r)).toBe('reserved');
    // One slice of 16 requests' worth; no reservation of their own.
    expect(await store.accountBalance(userId)).toBe(1_000_000 - 1_600);
    expect(await redis.exists(keys.reservation(userId, reqs[0]!.requestId))).toBe(0);
    expect(store.sliceOf(reqs[0]!.requestId)?.id).toMatch(/^slice-/);
    // The 17th does not fit: a second slice.
    for (const r of reqs.slice(16)) expect(await store.reserve(r)).toBe('reserved');
    expect(await store.accountBalance(userId)).toBeLessThanOrEqual(1_000_000 - 3_200 + 1_600);

    const costs = reqs.map((_, i) => (i % 5 === 0 ? 0 : 37 + i));
    // One over its reservation: the provider billed it, so it is debited all the same.
    costs[7] = 250;
    expect(await store.settleMany(reqs.map((r, i) => settlement(r, costs[i]!)))).toEqual(reqs.map(() => true));
    await store.returnSlices();
    const total = costs.reduce((a, b) => a + b, 0);
    expect(await store.accountBalance(userId)).toBe(1_000_000 - total);
    expect((await eventsOf(userId)).map((e) => e.cost).reduce((a, b) => a + b, 0)).toBe(total);
    expect(await eventsOf(userId)).toHaveLength(20);
    expect(await slicesOf(userId)).toEqual([]);
    expect(store.slicesHeld).toBe(0);
    const members = await redis.zrange(keys.reservationDeadlines(), '0', '-1');
    expect(members.filter((m) => m.startsWith(`${userId}:`))).toEqual([]);
  });

  it('settles a request once however often its settlement comes (a retry, a replay from the spool by another process)', async () => {
    const store = slicedStore();
    const userId = newUser(1_000_000);
    const r = request(userId, 'once', 500);
    await store.reserve(r);
    const slice = store.sliceOf(r.requestId)!;
    expect(await store.settle(settlement(r, 120))).toBe(true);
    // A replay carries the slice's id from the spool; the store that replays it never reserved it.
    const other = slicedStore();
    expect(await other.settle({ ...settlement(r, 120), slice })).toBe(false);
    expect(await store.settle({ ...settlement(r, 120), slice })).toBe(false);
    await store.returnSlices();
    expect(await store.accountBalance(userId)).toBe(1_000_000 - 120);
    expect(await eventsOf(userId)).toHaveLength(1);
  });

  it('takes one slice for a burst of concurrent requests of one account, not one each', async () => {
    const store = slicedStore();
    const userId = newUser(10_000_000);
    const reqs = Array.from({ length: 48 }, (_, i) => request(userId, `c${i}`, 1_000));
    expect(await Promise.all(reqs.map((r) => store.reserve(r)))).toEqual(reqs.map(() => 'reserved'));
    // 48 requests of 16-request slices: 3 slices (4 if one raced a retirement), never 48.
    expect(store.slicesHeld).toBeLessThanOrEqual(4);
    await store.settleMany(reqs.map((r) => settlement(r, 10)));
    await store.returnSlices();
    expect(await store.accountBalance(userId)).toBe(10_000_000 - 480);
  });

  it('gives a busy account larger slices, and one of the first size when the balance cannot spare a larger', async () => {
    const store = slicedStore();
    const userId = newUser(1_000_000);
    const reqs = Array.from({ length: 17 }, (_, i) => request(userId, `busy${i}`, 100));
    for (const r of reqs) await store.reserve(r);
    // The first slice (16 × 100) spent at once: the next holds 32 × 100.
    expect(await store.accountBalance(userId)).toBe(1_000_000 - 1_600 - 3_200);
    await store.settleMany(reqs.map((r) => settlement(r, 5)));
    await store.returnSlices();
    expect(await store.accountBalance(userId)).toBe(1_000_000 - 85);

    // 20,000: a slice of 1,600 needs 12,800, one of 3,200 would need 25,600.
    const tight = newUser(20_000);
    const first = Array.from({ length: 17 }, (_, i) => request(tight, `tight${i}`, 100));
    for (const r of first) expect(await store.reserve(r)).toBe('reserved');
    expect(store.sliceOf(first[16]!.requestId)?.id).toMatch(/^slice-/);
    expect(await store.accountBalance(tight)).toBe(20_000 - 1_600 - 1_600);
    await store.settleMany(first.map((r) => settlement(r, 1)));
    await store.returnSlices();
    expect(await store.accountBalance(tight)).toBe(20_000 - 17);
  });

  it('reserves a quiet account\'s requests one by one, and takes a slice once its requests come close together', async () => {
    const store = slicedStore({ busyStreak: 4, busyGapMs: 500 });
    const userId = newUser(1_000_000);
    const quiet = [request(userId, 'q0', 100), request(userId, 'q1', 100)];
    await store.reserve(quiet[0]!);
    await new Promise((done) => setTimeout(done, 600));
    await store.reserve(quiet[1]!);
    await new Promise((done) => setTimeout(done, 600));
    for (const r of quiet) {
      expect(store.sliceOf(r.requestId)).toBeUndefined();
      expect(await redis.hget(keys.reservation(userId, r.requestId), 'amount')).toBe('100');
    }
    // Four within 500 ms of each other: the fourth takes a slice.
    const burst = Array.from({ length: 4 }, (_, i) => request(userId, `b${i}`, 100));
    for (const r of burst) await store.reserve(r);
    expect(burst.map((r) => store.sliceOf(r.requestId) !== undefined)).toEqual([false, false, false, true]);
    await store.settleMany([...quiet, ...burst].map((r) => settlement(r, 7)));
    await store.returnSlices();
    expect(await store.accountBalance(userId)).toBe(1_000_000 - 42);
  });

  it('reserves alone when the balance is too low for a slice, and refuses exactly at the balance', async () => {
    const store = slicedStore();
    // A slice of 16 × 100 needs a balance of 8 slices: 12,800.
    const userId = newUser(12_799);
    const r = request(userId, 'alone', 100);
    expect(await store.reserve(r)).toBe('reserved');
    expect(store.sliceOf(r.requestId)).toBeUndefined();
    expect(await redis.hget(keys.reservation(userId, r.requestId), 'amount')).toBe('100');
    expect(await store.accountBalance(userId)).toBe(12_699);
    expect(await store.reserve(request(userId, 'too-big', 12_700))).toBe('insufficient_balance');
    expect(await store.settle(settlement(r, 40))).toBe(true);
    expect(await store.accountBalance(userId)).toBe(12_759);
  });

  it('reserves limited keys and keys with rate limits alone: their checks are per key in Redis', async () => {
    const store = slicedStore();
    const userId = newUser(10_000_000);
    const limited = { ...request(userId, 'limited', 100), tokenLimited: true };
    const withRpm = { ...request(userId, 'rpm', 100), rpmLimit: 5 };
    expect(await store.reserve(withRpm)).toBe('reserved');
    expect(store.sliceOf(withRpm.requestId)).toBeUndefined();
    expect(await redis.exists(keys.reservation(userId, withRpm.requestId))).toBe(1);
    // The limited key's quota mirror is not loaded (source gives 0): refused by its own check, not served from a slice.
    expect(await store.reserve(limited)).toBe('insufficient_token_quota');
    expect(store.slicesHeld).toBe(0);
  });

  it('takes no slices on a Redis with replicas (a failover could lose what a slice settled)', async () => {
    const store = slicedStore({}, 600);
    const userId = newUser(10_000_000);
    const r = request(userId, 'replicas', 100);
    expect(await store.reserve(r)).toBe('reserved');
    expect(store.sliceOf(r.requestId)).toBeUndefined();
    expect(store.slicesHeld).toBe(0);
  });

  it('returns an idle slice by itself', async () => {
    const store = slicedStore({ idleMs: 40 });
    const userId = newUser(1_000_000);
    const r = request(userId, 'idle', 100);
    await store.reserve(r);
    await store.settle(settlement(r, 30));
    expect(store.slicesHeld).toBe(1);
    for (let i = 0; i < 100 && store.slicesHeld > 0; i++) await new Promise((done) => setTimeout(done, 10));
    expect(store.slicesHeld).toBe(0);
    expect(await store.accountBalance(userId)).toBe(1_000_000 - 30);
  });

  it('keeps only what running requests reserved when an account changes, and returns the rest once they settle', async () => {
    const store = slicedStore();
    const userId = newUser(1_000_000);
    const running = request(userId, 'running', 300);
    await store.reserve(running);
    store.retireSlicesOf(userId);
    for (let i = 0; i < 100 && (await store.accountBalance(userId)) !== 1_000_000 - 300; i++) await new Promise((done) => setTimeout(done, 5));
    // Trimmed to the running request's 300.
    expect(await store.accountBalance(userId)).toBe(1_000_000 - 300);
    // The next request takes a new slice rather than the retired one.
    const next = request(userId, 'next', 300);
    await store.reserve(next);
    expect(store.sliceOf(next.requestId)?.id).not.toBe(store.sliceOf(running.requestId)?.id);
    // The running one costs more than it reserved: the excess is debited when its slice goes back.
    await store.settleMany([settlement(running, 450), settlement(next, 100)]);
    await store.returnSlices();
    for (let i = 0; i < 100 && store.slicesHeld > 0; i++) await new Promise((done) => setTimeout(done, 5));
    expect(store.slicesHeld).toBe(0);
    expect(await store.accountBalance(userId)).toBe(1_000_000 - 550);
    expect(await slicesOf(userId)).toEqual([]);
  });
});

describe('settlements of requests reserved from a slice', () => {
  it('wait longer to go to Redis (drawSettleDelayMs), and go at once with a settlement that may not wait', async () => {
    const store = new QuotaStore(redis, keys, source, { creditSlices: SLICES, settleDelayMs: 1, drawSettleDelayMs: 5_000 });
    stores.push(store);
    const userId = newUser(1_000_000);
    const drawn = request(userId, 'drawn', 100);
    await store.reserve(drawn);
    expect(store.sliceOf(drawn.requestId)).toBeDefined();
    const drawnSettled = store.settleSoon(settlement(drawn, 10));
    await new Promise((done) => setTimeout(done, 30));
    expect(await eventsOf(userId)).toEqual([]);
    // A limited key's request has a reservation of its own, whose refund the next reservation may need.
    const own = { ...request(userId, 'own', 100), tokenLimited: true };
    await store.seedToken(userId, own.tokenId);
    await redis.set(keys.tokenRemain(userId, own.tokenId), 1_000);
    expect(await store.reserve(own)).toBe('reserved');
    expect(await store.settleSoon(settlement(own, 20))).toBe(true);
    expect(await drawnSettled).toBe(true);
    expect((await eventsOf(userId)).map((e) => e.cost).sort()).toEqual([10, 20]);
    await store.returnSlices();
    expect(await store.accountBalance(userId)).toBe(1_000_000 - 30);
  });
});

describe('a Redis that lost its data', () => {
  it('reserves from no slice made before the connection was made again: a restarted Redis may not have it', async () => {
    const conn = createRedis(config, 'slices-reconnect');
    const store = new QuotaStore(conn, keys, source, { creditSlices: SLICES });
    stores.push(store);
    try {
      const userId = newUser(1_000_000);
      const before = request(userId, 'before', 100);
      await store.reserve(before);
      const lost = store.sliceOf(before.requestId)!;
      // A restart without persistence: the slice and the mirror are gone.
      await redis.del(keys.reservation(userId, lost.id), keys.accountBalance(userId));
      const ready = new Promise((done) => conn.once('ready', done));
      conn.disconnect(true);
      await ready;
      const after = request(userId, 'after', 100);
      expect(await store.reserve(after)).toBe('reserved');
      expect(store.sliceOf(after.requestId)?.id).not.toBe(lost.id);
      // Billed: settled against a slice that exists.
      expect(await store.settle(settlement(after, 25))).toBe(true);
      await store.returnSlices();
      expect(await store.accountBalance(userId)).toBe(1_000_000 - 25);
    } finally {
      await conn.quit();
    }
  });
});

describe('a slice whose relay died (the reaper)', () => {
  const reaper = new QuotaStore(redis, keys, source);
  const passed = () => new Promise((done) => setTimeout(done, 5));

  it('takes a dead relay\'s slice with no log row, holds it for the reservations\' TTL, bills a late settlement of its request once from the hold, none twice, and gives the rest back when the hold ends', async () => {
    // A deadline 1 ms ahead: dead at once.
    const dead = slicedStore({ ttlMs: 1 });
    const userId = newUser(1_000_000);
    const r = request(userId, 'late', 200);
    await dead.reserve(r);
    dead.stop();
    const slice = dead.sliceOf(r.requestId)!;
    expect(await dead.accountBalance(userId)).toBe(1_000_000 - 3_200);

    await passed();
    const logged: string[] = [];
    expect(await reaper.releaseExpired(Date.now(), 1000, (x) => { logged.push(x.requestId); return '{}'; })).toBeGreaterThanOrEqual(1);
    expect(logged).not.toContain(slice.id);
    // Held: its relay may only be paused, with its request still running.
    expect(await reaper.accountBalance(userId)).toBe(1_000_000 - 3_200);
    expect(await redis.hmget(keys.reapedReservation(userId, slice.id), 'slice', 'holding', 'amount')).toEqual(['1', '1', '3200']);

    // The spool's replay (another process): debited from the hold, once.
    const replaying = slicedStore();
    expect(await replaying.settle({ ...settlement(r, 90), slice })).toBe(true);
    expect(await replaying.settle({ ...settlement(r, 90), slice })).toBe(false);
    expect(await replaying.accountBalance(userId)).toBe(1_000_000 - 3_200);
    expect(await eventsOf(userId)).toEqual([{ id: r.requestId, cost: 90 }]);
    // Not before the hold's end (the reservations' TTL, 900 s by default); then what is left goes back.
    expect(await reaper.releaseExpired(Date.now() + 1000, 1000, () => '{}')).toBe(0);
    expect(await reaper.releaseExpired(Date.now() + DEFAULT_REAPED_SLICE_HOLD_MS + 1000, 1000, () => '{}')).toBeGreaterThanOrEqual(1);
    expect(await reaper.accountBalance(userId)).toBe(1_000_000 - 90);
    expect(await redis.zscore(keys.reservationDeadlines(), sliceHoldMember(userId, slice.id))).toBeNull();
    // A replay after that: its record is kept, nothing changes.
    expect(await replaying.settle({ ...settlement(r, 90), slice })).toBe(false);
    // The dead relay's own store, had it lived: its return finds nothing to give back.
    await dead.returnSlices();
    expect(await dead.accountBalance(userId)).toBe(1_000_000 - 90);
  });

  it('holds what a paused relay\'s slice may still owe: a settlement after the reap never takes the balance below zero, and the rest comes back once its requests are settled', async () => {
    // Review scaleout: a relay paused (SIGSTOP, a VM freeze) past its slice's TTL while another relay
    // spent the account. The reaper gave the whole slice back, its running request's draw included,
    // the other relay spent it, and the resumed relay's settlement took the balance to -421.
    const paused = slicedStore({ ttlMs: 1 });
    // Another relay, reserving per request.
    const other = new QuotaStore(redis, keys, source);
    const userId = newUser(30_000);
    const r = request(userId, 'paused', 200);
    expect(await paused.reserve(r)).toBe('reserved');
    // Paused: its sweep renews nothing any more.
    paused.stop();
    await passed();
    expect(await reaper.releaseExpired(Date.now() + 1000, 1000, () => '{}')).toBeGreaterThanOrEqual(1);
    let spent = 0;
    for (let i = 0; i < 40; i++) {
      const o = request(userId, `other-${i}`, 1_000);
      if (await other.reserve(o) !== 'reserved') break;
      expect(await other.settle(settlement(o, 1_000))).toBe(true);
      spent += 1_000;
    }
    expect(spent).toBeGreaterThan(0);
    // Resumed: its request is settled, and what its slice held goes back.
    expect(await paused.settle(settlement(r, 150))).toBe(true);
    expect(await reaper.accountBalance(userId)).toBeGreaterThanOrEqual(0);
    await paused.returnSlices();
    expect(await reaper.accountBalance(userId)).toBe(30_000 - spent - 150);
    expect((await eventsOf(userId)).reduce((sum, e) => sum + e.cost, 0)).toBe(spent + 150);
    expect(paused.slicesHeld).toBe(0);
  });

  it('gives a reaped slice\'s hold back when its last requests settle together (the trim of the first answers "no such slice")', async () => {
    const store = slicedStore({ ttlMs: 1 });
    const userId = newUser(1_000_000);
    const a = request(userId, 'held-a', 200);
    const b = request(userId, 'held-b', 200);
    await store.reserve(a);
    await store.reserve(b);
    store.stop();
    await passed();
    expect(await reaper.releaseExpired(Date.now() + 1000, 1000, () => '{}')).toBeGreaterThanOrEqual(1);
    // One call settles both against the hold: the first's settled() sends a trim (one request still
    // open), the second's finds it on its way; the trim answers "no such slice" with none open.
    expect(await Promise.all([store.settle(settlement(a, 70)), store.settle(settlement(b, 30))])).toEqual([true, true]);
    await store.returnSlices();
    // The hold went back then, not at the reaper's expire (RESERVATION_TTL_SEC later).
    expect(await reaper.accountBalance(userId)).toBe(1_000_000 - 100);
    expect(store.slicesHeld).toBe(0);
  });

  it('stops reserving from a slice its settlement found reaped', async () => {
    const store = slicedStore({ ttlMs: 1 });
    const userId = newUser(1_000_000);
    const first = request(userId, 'a', 200);
    await store.reserve(first);
    const slice = store.sliceOf(first.requestId)!;
    await passed();
    // Reaped as seen a second on: the store's sweep (every 10 ms) renews the 1-ms deadline, and a
    // renewal landing between passed() and this call (a loaded machine) would keep the slice alive.
    expect(await reaper.releaseExpired(Date.now() + 1000, 1000, () => '{}')).toBeGreaterThanOrEqual(1);
    expect(await redis.hget(keys.reapedReservation(userId, slice.id), 'slice')).toBe('1');
    expect(await store.settle(settlement(first, 50))).toBe(true);
    const second = request(userId, 'b', 200);
    await store.reserve(second);
    expect(store.sliceOf(second.requestId)?.id).not.toBe(slice.id);
    await store.settle(settlement(second, 60));
    await store.returnSlices();
    expect(await store.accountBalance(userId)).toBe(1_000_000 - 110);
  });

  it('keeps the slices of a live relay from the reaper (they renew their deadlines), and not those of a stopped one', async () => {
    const store = slicedStore({ ttlMs: 150, idleMs: 60_000 });
    const userId = newUser(1_000_000);
    const r = request(userId, 'renewed', 200);
    await store.reserve(r);
    await new Promise((done) => setTimeout(done, 400));
    await reaper.releaseExpired(Date.now(), 1000, () => '{}');
    expect(await store.accountBalance(userId)).toBe(1_000_000 - 3_200);
    expect(await store.settle(settlement(r, 70))).toBe(true);
    // Killed: nothing renews its slice any more. The reaper takes it, and gives it back when its hold ends.
    store.stop();
    await new Promise((done) => setTimeout(done, 300));
    await reaper.releaseExpired(Date.now(), 1000, () => '{}');
    expect(await store.accountBalance(userId)).toBe(1_000_000 - 3_200);
    await reaper.releaseExpired(Date.now() + DEFAULT_REAPED_SLICE_HOLD_MS + 1000, 1000, () => '{}');
    expect(await store.accountBalance(userId)).toBe(1_000_000 - 70);
    expect(await eventsOf(userId)).toEqual([{ id: r.requestId, cost: 70 }]);
  });

  it('reserves from a slice for two thirds of its deadline at most, however short the relay\'s configured deadline', async () => {
    // RELAY_CREDIT_SLICE_TTL_MS below the default slice age (10 s): the reaper must never find a slice
    // its live relay is still reserving from, so the relay retires each within two thirds of the TTL.
    const ttlMs = 300;
    const store = slicedStore({ ...creditSliceOptions(16, ttlMs), busyStreak: 1, idleMs: 60_000 });
    const userId = newUser(10_000_000);
    const firstDrawAt = new Map<string, number>();
    const reqs: ReserveRequest[] = [];
    for (let i = 0; i < 12; i++) {
      // Bounds on either side of the draw: `at` before it, and a slice's first draw ended after its take
      // (the age counts from the take): at - firstDrawAt <= draw - take < 2/3 of the TTL, however slow Redis is.
      const at = Date.now();
      const r = request(userId, `age-${i}`, 10);
      reqs.push(r);
      expect(await store.reserve(r)).toBe('reserved');
      const id = store.sliceOf(r.requestId)!.id;
      if (!firstDrawAt.has(id)) firstDrawAt.set(id, Date.now());
      expect(at - firstDrawAt.get(id)!).toBeLessThan((ttlMs * 2) / 3);
      await new Promise((done) => setTimeout(done, 50));
    }
    expect(firstDrawAt.size).toBeGreaterThanOrEqual(3);
    expect(await store.settleMany(reqs.map((r) => settlement(r, 7)))).toEqual(reqs.map(() => true));
    await store.returnSlices();
    expect(await store.accountBalance(userId)).toBe(10_000_000 - 7 * reqs.length);
  });
});

describe('a slice taken while Redis does not answer', () => {
  it('gives back a slice whose take timed out once Redis runs it', async () => {
    // A proxy that holds what the store sends for 2 s, then passes it on: the take times out at the
    // store (500 ms), and Redis runs it afterwards, as a stalled server runs what it had queued. The
    // timeout is ten times a loaded machine's slowest answer (the seeding before the hold timed out at
    // 50 ms in a run beside other tests), the hold four times the timeout.
    let holdUntil = 0;
    const proxy = createServer((client) => {
      const upstream = connect(Number(new URL(config.REDIS_URL).port || 6379), new URL(config.REDIS_URL).hostname);
      client.on('data', (d) => {
        const wait = holdUntil - Date.now();
        if (wait > 0) setTimeout(() => upstream.write(d), wait);
        else upstream.write(d);
      });
      upstream.on('data', (d) => client.write(d));
      const end = () => { client.destroy(); upstream.destroy(); };
      client.on('close', end).on('error', end);
      upstream.on('close', end).on('error', end);
    });
    await new Promise<void>((done) => proxy.listen(0, '127.0.0.1', done));
    const port = (proxy.address() as AddressInfo).port;
    const slow = createRedis({ ...config, REDIS_URL: `redis://127.0.0.1:${port}/${new URL(config.REDIS_URL).pathname.slice(1) || '0'}` }, 'slices-timeout', { commandTimeoutMs: 500 });
    const store = new QuotaStore(slow, keys, source, { creditSlices: { ...SLICES, idleMs: 40 } });
    stores.push(store);
    try {
      const userId = newUser(1_000_000);
      await store.seedAccount(userId);
      holdUntil = Date.now() + 2_000;
      await expect(store.reserve(request(userId, 'timed-out', 100))).rejects.toThrow();
      const deadline = Date.now() + 10_000;
      while (store.slicesHeld > 0 && Date.now() < deadline) await new Promise((done) => setTimeout(done, 20));
      expect(store.slicesHeld).toBe(0);
      expect(await store.accountBalance(userId)).toBe(1_000_000);
      expect(await slicesOf(userId)).toEqual([]);
    } finally {
      slow.disconnect();
      await new Promise((done) => proxy.close(done));
    }
  });
});

describe('settleSliceDraws-4n.lua', () => {
  const settleDraws = batchScript(redis, loadScriptDefs().get('settleSliceDraws')!);
  const stream = keys.usageStream();
  const entriesSince = async (id: string) => ((await redis.xrange(stream, `(${id}`, '+')) as [string, string[]][]);
  const lastId = async () => ((await redis.xrevrange(stream, '+', '-', 'COUNT', 1)) as [string, string[]][])[0]?.[0] ?? '0-0';
  /** One call settling draws `ns` of slice `sliceId` at cost n each. */
  const call = (userId: number, sliceId: string, ns: number[]) => {
    const k: string[] = [];
    const a: (string | number)[] = [];
    for (const n of ns) {
      k.push(keys.accountBalance(userId), keys.reservation(userId, sliceId), keys.reapedReservation(userId, sliceId), stream);
      a.push(n, JSON.stringify({ id: `draw-${n}`, cost: n }), n);
    }
    return settleDraws(k, a) as Promise<number[]>;
  };
  const sum = (ns: number[]) => ns.reduce((x, n) => x + n, 0);
  const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

  it('records each draw once as a bit, debits the slice by the costs, and appends a call\'s events as one entry', async () => {
    const userId = newUser(0);
    const slice = keys.reservation(userId, 'slice-bits');
    await redis.hset(slice, 'amount', 1_000_000, 'limited', '0', 'token', 0, 'user', userId, 'deadline', Date.now() + 60_000, 'slice', '1');
    const from = await lastId();
    const first = range(1, 70);
    expect(await call(userId, 'slice-bits', first)).toEqual(first.map(() => 1));
    expect(Number(await redis.hget(slice, 'amount'))).toBe(1_000_000 - sum(first));
    const entries = await entriesSince(from);
    expect(entries).toHaveLength(1);
    expect(encodedUsageEventsOf(entries[0]![1])!.map((e) => (JSON.parse(e) as { id: string }).id)).toEqual(first.map((n) => `draw-${n}`));
    // 70 records in three fields of 30 bits, beside the slice's six.
    expect(await redis.hlen(slice)).toBe(6 + 3);

    // Replays of draws at every field's edges, with one new draw: only the new one moves anything.
    const from2 = await lastId();
    expect(await call(userId, 'slice-bits', [1, 30, 31, 60, 61, 70, 71, 71])).toEqual([-6, -6, -6, -6, -6, -6, 1, -6]);
    expect(Number(await redis.hget(slice, 'amount'))).toBe(1_000_000 - sum(first) - 71);
    const entries2 = await entriesSince(from2);
    expect(entries2.map(([, f]) => encodedUsageEventsOf(f))).toEqual([[JSON.stringify({ id: 'draw-71', cost: 71 })]]);
    // A call that settles nothing appends nothing.
    const from3 = await lastId();
    expect(await call(userId, 'slice-bits', [2, 3])).toEqual([-6, -6]);
    expect(await entriesSince(from3)).toEqual([]);
  });

  it('honours the one-field-per-draw record of a relay from before the bits', async () => {
    const userId = newUser(0);
    const slice = keys.reservation(userId, 'slice-old');
    await redis.hset(slice, 'amount', 10_000, 'limited', '0', 'token', 0, 'user', userId, 'deadline', Date.now() + 60_000, 'slice', '1', '5', '1');
    expect(await call(userId, 'slice-old', [5, 6])).toEqual([-6, 1]);
    expect(Number(await redis.hget(slice, 'amount'))).toBe(10_000 - 6);
  });

  it('settles a reaped slice\'s draw against the balance once, and leaves the draws of a call before a failing one billed with their events', async () => {
    const userId = newUser(0);
    const balance = keys.accountBalance(userId);
    await redis.set(balance, 5_000);
    const slice = keys.reservation(userId, 'slice-reaped');
    await redis.hset(slice, 'amount', 0, 'limited', '0', 'token', 0, 'user', userId, 'deadline', 1, 'slice', '1');
    expect(await call(userId, 'slice-reaped', [3])).toEqual([1]);
    // What releaseCreditSlice-4.lua's 'reap' leaves: the slice renamed to its tombstone, records kept.
    await redis.rename(slice, keys.reapedReservation(userId, 'slice-reaped'));
    expect(await call(userId, 'slice-reaped', [3, 40, 40])).toEqual([-6, 2, -6]);
    expect(await redis.get(balance)).toBe(String(5_000 - 40));

    // A live slice's draw, then a reaped one's whose balance is of the wrong type: the script fails on
    // the second after the first was recorded and debited; the first's event still goes out, once.
    const other = newUser(0);
    const live = keys.reservation(other, 'slice-live');
    await redis.hset(live, 'amount', 10_000, 'limited', '0', 'token', 0, 'user', other, 'deadline', Date.now() + 60_000, 'slice', '1');
    await redis.hset(keys.reapedReservation(other, 'slice-dead'), 'amount', 0, 'slice', '1');
    await redis.hset(keys.accountBalance(other), 'x', '1');
    const from = await lastId();
    const k = [keys.accountBalance(other), live, keys.reapedReservation(other, 'slice-live'), stream,
      keys.accountBalance(other), keys.reservation(other, 'slice-dead'), keys.reapedReservation(other, 'slice-dead'), stream];
    await expect(settleDraws(k, [7, '{"id":"live-7"}', 7, 9, '{"id":"dead-9"}', 9])).rejects.toThrow(/WRONGTYPE/);
    expect(Number(await redis.hget(live, 'amount'))).toBe(10_000 - 7);
    expect((await entriesSince(from)).map(([, f]) => encodedUsageEventsOf(f))).toEqual([['{"id":"live-7"}']]);
    expect(await call(other, 'slice-live', [7])).toEqual([-6]);
    // The failing draw left no record behind: once its balance can be debited, it settles, once.
    await redis.del(keys.accountBalance(other));
    await redis.set(keys.accountBalance(other), 1_000);
    expect(await call(other, 'slice-dead', [9, 9])).toEqual([2, -6]);
    expect(await redis.get(keys.accountBalance(other))).toBe(String(1_000 - 9));
    await redis.del(keys.accountBalance(other));
  });

  it('settles many draws of several slices and their tombstones in one call as one at a time would', async () => {
    const userId = newUser(0);
    const balance = keys.accountBalance(userId);
    await redis.set(balance, 100_000);
    const live = ['multi-a', 'multi-b'];
    for (const id of live) {
      await redis.hset(keys.reservation(userId, id), 'amount', 50_000, 'limited', '0', 'token', 0, 'user', userId, 'deadline', Date.now() + 60_000, 'slice', '1');
    }
    // A reaped slice with draws 1 and 31 recorded, and one older relay's own-field record (draw 2).
    await redis.hset(keys.reapedReservation(userId, 'multi-dead'), 'amount', 0, 'slice', '1', 'd0', 1, 'd1', 1, '2', '1');
    const k: string[] = [];
    const a: (string | number)[] = [];
    const add = (id: string, n: number) => {
      k.push(balance, keys.reservation(userId, id), keys.reapedReservation(userId, id), stream);
      a.push(n, JSON.stringify({ id: `${id}-${n}` }), n);
    };
    // Interleaved slices, draws on both sides of a field's edge, repeats inside the call, the reaped
    // slice's recorded and new draws, and a slice that never existed.
    for (const [id, n] of [['multi-a', 1], ['multi-b', 30], ['multi-a', 31], ['multi-dead', 1], ['multi-dead', 3], ['multi-b', 30],
      ['multi-a', 1], ['multi-dead', 2], ['multi-none', 4], ['multi-b', 31], ['multi-dead', 31], ['multi-dead', 32], ['multi-dead', 3]] as const) add(id, n);
    const from = await lastId();
    expect(await settleDraws(k, a)).toEqual([1, 1, 1, -6, 2, -6, -6, -6, -6, 1, -6, 2, -6]);
    expect(Number(await redis.hget(keys.reservation(userId, 'multi-a'), 'amount'))).toBe(50_000 - 1 - 31);
    expect(Number(await redis.hget(keys.reservation(userId, 'multi-b'), 'amount'))).toBe(50_000 - 30 - 31);
    expect(await redis.get(balance)).toBe(String(100_000 - 3 - 32));
    expect(await redis.exists(keys.reservation(userId, 'multi-none'), keys.reapedReservation(userId, 'multi-none'))).toBe(0);
    expect((await entriesSince(from)).map(([, f]) => encodedUsageEventsOf(f))).toEqual([
      ['multi-a-1', 'multi-b-30', 'multi-a-31', 'multi-dead-3', 'multi-b-31', 'multi-dead-32'].map((id) => JSON.stringify({ id })),
    ]);
    // The records are those one call per draw leaves: every draw above answers "already settled" now.
    const again = (await settleDraws(k, a)) as number[];
    expect(again).toEqual(again.map(() => -6));
    expect(await redis.hgetall(keys.reapedReservation(userId, 'multi-dead'))).toEqual({ amount: '0', slice: '1', d0: String(1 + 4), d1: String(1 + 2), 2: '1' });
    expect(await redis.hget(keys.reservation(userId, 'multi-a'), 'd0')).toBe('1');
    expect(await redis.hget(keys.reservation(userId, 'multi-a'), 'd1')).toBe('1');
    expect(await redis.hget(keys.reservation(userId, 'multi-b'), 'd0')).toBe(String(2 ** 29));
    expect(await redis.hget(keys.reservation(userId, 'multi-b'), 'd1')).toBe('1');
    await redis.del(balance);
  });
});

describe('releaseCreditSlice-4.lua', () => {
  const def = loadScriptDefs().get('releaseCreditSlice')!;
  const release = (userId: number, sliceId: string, mode: string, keep = 0) =>
    redis.eval(def.lua, 4, keys.reservation(userId, sliceId), keys.accountBalance(userId), keys.reservationDeadlines(),
      keys.reapedReservation(userId, sliceId), mode, keep, `${userId}:${sliceId}`, Date.now()) as Promise<[number, number]>;

  it('gives nothing away when the balance refuses it (a key of the wrong type): the retry gives it back once', async () => {
    const userId = newUser(0);
    const balance = keys.accountBalance(userId);
    const slice = keys.reservation(userId, 'slice-wrongtype');
    await redis.hset(slice, 'amount', 1_000, 'limited', '0', 'token', 0, 'user', userId, 'deadline', Date.now() + 60_000, 'slice', '1');
    await redis.hset(balance, 'x', '1');
    await expect(release(userId, 'slice-wrongtype', 'trim', 300)).rejects.toThrow(/WRONGTYPE/);
    expect(await redis.hget(slice, 'amount')).toBe('1000');
    await expect(release(userId, 'slice-wrongtype', 'return')).rejects.toThrow(/WRONGTYPE/);
    expect(await redis.hget(slice, 'amount')).toBe('1000');

    await redis.del(balance);
    await redis.set(balance, 5_000);
    expect(await release(userId, 'slice-wrongtype', 'trim', 300)).toEqual([1, 700]);
    expect(await release(userId, 'slice-wrongtype', 'trim', 300)).toEqual([1, 0]);
    expect(await release(userId, 'slice-wrongtype', 'return')).toEqual([1, 300]);
    expect(await release(userId, 'slice-wrongtype', 'return')).toEqual([-6, 0]);
    expect(await redis.get(balance)).toBe(String(5_000 + 1_000));
    await redis.del(balance);
  });

  it('returns a slice whose deadline set is of the wrong type, once', async () => {
    const userId = newUser(0);
    const balance = keys.accountBalance(userId);
    await redis.set(balance, 5_000);
    await redis.hset(keys.reservation(userId, 'slice-zset'), 'amount', 400, 'slice', '1');
    await withWrongTypeKey(redis, keys.reservationDeadlines(), async () => {
      expect(await release(userId, 'slice-zset', 'return')).toEqual([1, 400]);
      expect(await release(userId, 'slice-zset', 'return')).toEqual([-6, 0]);
    });
    expect(await redis.get(balance)).toBe(String(5_400));
    await redis.del(balance);
  });
});
