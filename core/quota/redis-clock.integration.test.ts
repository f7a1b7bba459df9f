// One reference clock for deadlines (redis-clock.ts): Redis's. A relay's reservation and credit-slice
// deadlines are compared by the billing worker's reaper, on another host; dated with each host's own
// clock, a relay 120 s ahead left a crashed relay's holds 120 s past their TTL (accounts near zero
// refused meanwhile), and one 60 s behind had its live slices reaped. Here the relay's host clock is
// skewed (Date.now, which every relay-side path read before) and the reaper's is not.
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Logger } from '../../infra/logger.js';
import { createRedis } from '../../infra/redis/client.js';
import { redisKeys } from '../../infra/redis/keys.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { ReservationHeartbeat } from '../../relay/messages/reservation-heartbeat.js';
import { startReservationReaper } from '../../billing/reservation-reaper.js';
import { DEFAULT_CREDIT_SLICE_OPTIONS } from './credit-slices.js';
import { QuotaStore } from './quota-store.js';
import { RedisClock } from './redis-clock.js';

const config = testConfig();
const redis = createRedis(config, 'redis-clock-test');
redis.setMaxListeners(64);
const keys = redisKeys(config.REDIS_PREFIX);
const pg = new Map<number, number>();
const source = { accountQuota: async (id: number) => pg.get(id) ?? 0, tokenRemainQuota: async () => 10_000_000 };
/** This host's clock, whatever a test makes Date.now answer. */
const realNow = Date.now.bind(Date);
const quiet = { warn: vi.fn(), info: vi.fn(), error: vi.fn() } as unknown as Logger;
const stops: { stop(): void }[] = [];

let seq = 0;
const newUser = (balance: number) => {
  const userId = 9100 + ++seq;
  pg.set(userId, balance);
  return userId;
};

/** Redis's clock now (ms), read as a reference: the midpoint of one TIME's round trip, on this host's clock. */
async function redisMinusLocal(): Promise<number> {
  const t0 = realNow();
  const [sec, usec] = await redis.time();
  const t1 = realNow();
  return Number(sec) * 1000 + Number(usec) / 1000 - (t0 + t1) / 2;
}

afterAll(async () => {
  for (const s of stops) s.stop();
  const found = await redis.keys(`${config.REDIS_PREFIX}:*`);
  if (found.length) await redis.del(...found);
  await redis.quit();
});

describe('RedisClock', () => {
  it('answers Redis\'s clock from a local clock skewed either way, within a few ms', async () => {
    const truth = await redisMinusLocal();
    for (const skew of [120_000, -60_000, 0]) {
      const clock = new RedisClock(redis, keys, { wallClock: () => realNow() + skew });
      expect(await clock.sample()).toBe(true);
      expect(clock.sampled).toBe(true);
      // now() = the skewed local clock + offset = this host's clock + Redis's offset from it.
      expect(Math.abs(clock.now() - realNow() - truth)).toBeLessThan(25);
      expect(Math.abs(clock.offsetMs - (truth - skew))).toBeLessThan(25);
    }
  });

  it('keeps the last offset while Redis does not answer, 0 before any, and warns once per run of failures', async () => {
    const conn = createRedis(config, 'redis-clock-failing');
    const warn = vi.fn();
    const log = { warn, info: vi.fn(), error: vi.fn() } as unknown as Logger;
    const clock = new RedisClock(conn, keys, { wallClock: () => realNow() + 120_000, log });
    expect(await clock.sample()).toBe(true);
    const offset = clock.offsetMs;
    expect(offset).toBeLessThan(-119_000);
    conn.disconnect();
    expect(await clock.sample()).toBe(false);
    expect(await clock.sample()).toBe(false);
    expect(clock.offsetMs).toBe(offset);
    expect(warn).toHaveBeenCalledTimes(1);

    // Never answered (nothing listens there): this host's clock, offset 0.
    const dead = new Redis({ host: '127.0.0.1', port: 7647, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    const never = new RedisClock(dead, keys, { wallClock: () => 5_000, log });
    await never.start(200);
    stops.push(never);
    expect(never.sampled).toBe(false);
    expect(never.offsetMs).toBe(0);
    expect(never.now()).toBe(5_000);
    expect(warn).toHaveBeenCalledTimes(2);
    never.stop();
    dead.disconnect();
  });

  // Found by review: a process started while Redis was down dated deadlines on its own clock until
  // the next interval (10 s), and the reaper compared them on it. A connection made again is read at
  // once: here the local clock steps while the connection is away, and the clock follows on 'ready',
  // not at its next interval (a minute away).
  it('reads Redis as soon as a connection is ready again, not at the next interval', async () => {
    const conn = createRedis(config, 'redis-clock-ready');
    let skew = 0;
    const clock = new RedisClock(conn, keys, { wallClock: () => realNow() + skew, intervalMs: 60_000, log: quiet });
    stops.push(clock);
    await clock.start();
    expect(clock.settled).toBe(true);
    expect(Math.abs(clock.offsetMs)).toBeLessThan(1_000);
    skew = 90_000;
    conn.disconnect(true);
    await vi.waitFor(() => expect(clock.offsetMs).toBeLessThan(-89_000), { timeout: 3_000 });
    clock.stop();
    conn.disconnect();
  });

  it('start() waits for its first sample, then samples on its interval', async () => {
    let skew = 30_000;
    const clock = new RedisClock(redis, keys, { wallClock: () => realNow() + skew, intervalMs: 50 });
    stops.push(clock);
    await clock.start();
    expect(clock.sampled).toBe(true);
    const truth = await redisMinusLocal();
    expect(Math.abs(clock.now() - realNow() - truth)).toBeLessThan(25);
    // The host's clock stepped (NTP): the next sample follows.
    skew = -45_000;
    await new Promise((done) => setTimeout(done, 200));
    expect(Math.abs(clock.now() - realNow() - truth)).toBeLessThan(25);
    clock.stop();
  });
});

describe('deadlines a relay sets with its host clock skewed, reaped by a worker whose clock is right', () => {
  // The worker's host clock is right; the relay's is skewed by `skew` (Date.now, which every relay-side
  // path read before the fix, and which the relay's RedisClock reads as its local clock).
  let skew = 0;
  let relayClock: RedisClock;
  const workerClock = new RedisClock(redis, keys, { wallClock: realNow });
  const reaper = new QuotaStore(redis, keys, source, { clock: workerClock });

  async function relayStore(opts: { ttlMs: number }): Promise<QuotaStore> {
    relayClock = new RedisClock(redis, keys);
    expect(await relayClock.sample()).toBe(true);
    const store = new QuotaStore(redis, keys, source, {
      clock: relayClock,
      creditSlices: { ...DEFAULT_CREDIT_SLICE_OPTIONS, busyStreak: 1, idleMs: 60_000, maxAgeMs: 60_000, ttlMs: opts.ttlMs },
    });
    stops.push(store);
    return store;
  }

  /** Runs the reaper (as billing/reservation-reaper.ts does: the quota store's clock) until `done` or `withinMs`. */
  async function reapUntil(done: () => Promise<boolean>, withinMs: number): Promise<number> {
    const started = realNow();
    for (;;) {
      await reaper.releaseExpired(reaper.clock.now(), 1000, () => '{}');
      if (await done()) return realNow() - started;
      if (realNow() - started > withinMs) return Infinity;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  beforeEach(async () => {
    expect(await workerClock.sample()).toBe(true);
    vi.spyOn(Date, 'now').mockImplementation(() => realNow() + skew);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('a relay 120 s ahead that dies: its reservation (renewed by its heartbeat) is released within TTL + a reap interval', async () => {
    skew = 120_000;
    const TTL = 500;
    const relay = await relayStore({ ttlMs: TTL });
    const userId = newUser(1_000_000);
    const requestId = `skewed-ahead-${realNow()}`;
    // A limited key's request: reserved alone, with the deadline messages-handler.ts sets.
    expect(await relay.reserve({
      userId, tokenId: userId * 10, tokenLimited: true, requestId, amount: 5_000, deadlineMs: relay.clock.now() + TTL,
    })).toBe('reserved');
    const heartbeat = new ReservationHeartbeat(relay, TTL, quiet);
    stops.push(heartbeat);
    heartbeat.hold({ requestId, record: { userId } });
    await heartbeat.beat();
    const held = await redis.zscore(keys.reservationDeadlines(), `${userId}:${requestId}`);
    // Dated with Redis's clock, not the relay's host clock 120 s ahead.
    expect(Math.abs(Number(held) - (reaper.clock.now() + TTL))).toBeLessThan(100);
    // The relay dies: nothing renews any more.
    heartbeat.stop();
    relay.stop();
    const took = await reapUntil(async () => (await redis.exists(keys.reservation(userId, requestId))) === 0, 5_000);
    expect(took).toBeLessThan(TTL + 1_000);
  });

  it('a relay 120 s ahead that dies: its credit slice is taken by the reaper within the slice TTL + a reap interval', async () => {
    skew = 120_000;
    const TTL = 500;
    const relay = await relayStore({ ttlMs: TTL });
    const userId = newUser(1_000_000);
    const requestId = `slice-ahead-${realNow()}`;
    await relay.reserve({ userId, tokenId: userId * 10, tokenLimited: false, requestId, amount: 200, deadlineMs: relay.clock.now() + TTL });
    const slice = relay.sliceOf(requestId)!;
    expect(slice).toBeDefined();
    const taken = await relay.accountBalance(userId);
    expect(taken).toBeLessThan(1_000_000);
    // A renewal (the sweep's, every third of the TTL) dated too.
    await new Promise((r) => setTimeout(r, TTL / 2));
    relay.stop();
    // Taken: its tombstone holds the amount for the reservations' TTL (credit-slices.integration.test.ts).
    const took = await reapUntil(async () => (await redis.hget(keys.reapedReservation(userId, slice.id), 'holding')) === '1', 5_000);
    expect(took).toBeLessThan(TTL + 1_000);
  });

  it('the reaper compares no deadline on a clock not read yet (a worker started while Redis was down)', async () => {
    const userId = newUser(1_000_000);
    const requestId = `unsettled-${realNow()}`;
    expect(await reaper.reserve({ userId, tokenId: userId * 10, tokenLimited: true, requestId, amount: 5_000, deadlineMs: reaper.clock.now() + 60_000 })).toBe('reserved');
    // A worker whose host runs 10 minutes ahead and has not read Redis's clock yet.
    const unsettled = new QuotaStore(redis, keys, source, { clock: { now: () => realNow() + 600_000, settled: false } });
    const reap = startReservationReaper(unsettled, quiet, 20);
    await new Promise((done) => setTimeout(done, 200));
    reap.stop();
    expect(await redis.exists(keys.reservation(userId, requestId))).toBe(1);
    // Once read, the same clock's deadlines are compared: released.
    const settled = new QuotaStore(redis, keys, source, { clock: { now: () => realNow() + 600_000, settled: true } });
    const reap2 = startReservationReaper(settled, quiet, 20);
    await vi.waitFor(async () => expect(await redis.exists(keys.reservation(userId, requestId))).toBe(0), { timeout: 2_000 });
    reap2.stop();
  });

  it('a relay 60 s behind: its live slice and reservation are not reaped', async () => {
    skew = -60_000;
    const TTL = 2_000;
    const relay = await relayStore({ ttlMs: TTL });
    const userId = newUser(1_000_000);
    const first = { userId, tokenId: userId * 10, tokenLimited: false, requestId: `slice-behind-${realNow()}-a`, amount: 200, deadlineMs: relay.clock.now() + TTL };
    await relay.reserve(first);
    const slice = relay.sliceOf(first.requestId);
    expect(slice).toBeDefined();
    const limited = { ...first, tokenLimited: true, requestId: `rsv-behind-${realNow()}` };
    expect(await relay.reserve(limited)).toBe('reserved');
    const balance = await relay.accountBalance(userId);
    await reaper.releaseExpired(reaper.clock.now(), 1000, () => '{}');
    expect(await redis.exists(keys.reapedReservation(userId, slice!.id))).toBe(0);
    expect(await redis.exists(keys.reservation(userId, limited.requestId))).toBe(1);
    expect(await reaper.accountBalance(userId)).toBe(balance);
    // Still reserved from, and settled against, the same slice.
    const second = { ...first, requestId: `slice-behind-${realNow()}-b` };
    await relay.reserve(second);
    expect(relay.sliceOf(second.requestId)?.id).toBe(slice!.id);
    relay.stop();
  });
});
