// One reference clock for every process that dates or compares reservation and credit-slice
// deadlines and shard leases: the Redis server's. A relay's deadline (its clock + TTL) is compared by
// the billing worker's reaper (its own clock), so with per-host clocks a relay running 120 s ahead
// left a crashed relay's holds 120 s past their TTL, and one running behind had live slices reaped.
// Each process reads Redis's TIME now and then (readClock-1.lua, on one fixed key, so that on a Redis
// Cluster all of them read the same node's clock) and keeps the offset of its own clock from it;
// now() is then the local clock plus that offset: no round trip, no allocation on the hot path.
import type { Redis } from 'ioredis';
import type { Logger } from '../../infra/logger.js';
import type { RedisKeys } from '../../infra/redis/keys.js';
import { defineScripts } from './scripts.js';

/** What dates deadlines: Unix ms. */
export interface ReferenceClock {
  now(): number;
  /**
   * Whether now() is the reference clock's yet: a RedisClock not read since its start is this host's
   * clock. The reaper does not compare deadlines on such a clock (a host far off Redis would reap
   * live reservations).
   */
  readonly settled: boolean;
}

/** This host's clock: for processes and tests that share no Redis clock (console-api, unit tests). */
export const WALL_CLOCK: ReferenceClock = { now: () => Date.now(), settled: true };

export interface RedisClockOptions {
  /** How often the offset is read again (default 10 s). */
  intervalMs?: number;
  /** The local clock (tests skew it); default Date.now. */
  wallClock?: () => number;
  /** TIME reads per sample, the one with the shortest round trip kept (default 3). */
  reads?: number;
  log?: Logger;
}

export const REDIS_CLOCK_INTERVAL_MS = 10_000;
/** How long start() waits for its first sample: a process started while Redis is down still starts. */
const FIRST_SAMPLE_WAIT_MS = 2_000;

/** A TIME read unanswered this long fails its sample: a stalled Redis never holds the clock's samples up. */
const READ_TIMEOUT_MS = 5_000;

export class RedisClock implements ReferenceClock {
  readonly #redis: Redis;
  readonly #read: (key: string) => Promise<[number | string, number | string]>;
  readonly #key: string;
  readonly #wallClock: () => number;
  readonly #intervalMs: number;
  readonly #reads: number;
  readonly #log: Logger | undefined;
  #offsetMs = 0;
  #sampled = false;
  #failing = false;
  #timer: NodeJS.Timeout | null = null;
  /** The sample on its way: a slow Redis never has two overlap. */
  #inFlight: Promise<boolean> | null = null;

  constructor(redis: Redis, keys: RedisKeys, opts: RedisClockOptions = {}) {
    this.#redis = redis;
    const command = defineScripts(redis).get('readClock')!.command;
    this.#read = (redis as unknown as Record<string, (key: string) => Promise<[number | string, number | string]>>)[command]!.bind(redis);
    this.#key = keys.clock();
    this.#wallClock = opts.wallClock ?? (() => Date.now());
    this.#intervalMs = opts.intervalMs ?? REDIS_CLOCK_INTERVAL_MS;
    this.#reads = Math.max(1, opts.reads ?? 3);
    this.#log = opts.log;
  }

  /** Redis's clock now, in Unix ms, as this process estimates it. */
  now(): number {
    return this.#wallClock() + this.#offsetMs;
  }

  /** Redis's clock minus this process's (ms): 0 until the first sample succeeded. */
  get offsetMs(): number {
    return this.#offsetMs;
  }

  /** Whether a sample ever succeeded. */
  get sampled(): boolean {
    return this.#sampled;
  }

  /**
   * Reads Redis's clock and sets the offset from the read with the shortest round trip (its error is
   * at most half of it). A failed sample keeps the offset of the last good one (0 before any), logged
   * once per run of failures. Answers whether it succeeded.
   */
  sample(): Promise<boolean> {
    this.#inFlight ??= this.#sample().finally(() => { this.#inFlight = null; });
    return this.#inFlight;
  }

  async #sample(): Promise<boolean> {
    let best = Infinity;
    let offset = 0;
    try {
      for (let i = 0; i < this.#reads; i++) {
        const t0 = this.#wallClock();
        const [sec, usec] = await this.#readOnce();
        const t1 = this.#wallClock();
        const rtt = t1 - t0;
        if (rtt < best) {
          best = rtt;
          offset = Number(sec) * 1000 + Number(usec) / 1000 - (t0 + t1) / 2;
        }
      }
    } catch (err) {
      if (!this.#failing) {
        this.#failing = true;
        this.#log?.warn({ err: (err as Error).message, offsetMs: Math.round(this.#offsetMs), sampled: this.#sampled },
          'Redis clock not read; deadlines keep the last offset (0 before any: this host\'s clock)');
      }
      return false;
    }
    if (!Number.isFinite(offset)) return false;
    this.#offsetMs = Math.round(offset);
    if (this.#failing || (!this.#sampled && Math.abs(this.#offsetMs) >= 1000)) {
      this.#log?.info({ offsetMs: this.#offsetMs }, 'Redis clock read; deadlines are dated with it');
    }
    this.#failing = false;
    this.#sampled = true;
    return true;
  }

  /** One TIME through readClock-1.lua, failed after READ_TIMEOUT_MS. */
  async #readOnce(): Promise<[number | string, number | string]> {
    let timer: NodeJS.Timeout | undefined;
    const read = this.#read(this.#key);
    try {
      return await Promise.race([
        read,
        new Promise<never>((_, fail) => { timer = setTimeout(() => fail(new Error('Redis TIME unanswered')), READ_TIMEOUT_MS); timer.unref(); }),
      ]) as [number | string, number | string];
    } finally {
      clearTimeout(timer);
      // A read given up on may still fail later: nobody waits for it.
      read.catch(() => undefined);
    }
  }

  /**
   * Takes the first sample (waiting FIRST_SAMPLE_WAIT_MS at most: a process started while Redis is
   * down starts on its own clock, and the interval corrects it once Redis answers), then samples every
   * intervalMs on an unref'd timer.
   */
  async start(firstWaitMs = FIRST_SAMPLE_WAIT_MS): Promise<void> {
    if (this.#timer !== null) return;
    this.#timer = setInterval(() => { void this.sample(); }, this.#intervalMs);
    this.#timer.unref();
    // A connection made (again): read at once rather than at the next interval, so that a process
    // started while Redis was down leaves its own clock as soon as Redis answers.
    this.#redis.on('ready', this.#onReady);
    let timeout: NodeJS.Timeout | undefined;
    await Promise.race([
      this.sample(),
      new Promise<void>((done) => { timeout = setTimeout(done, firstWaitMs); timeout.unref(); }),
    ]);
    clearTimeout(timeout);
  }

  stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    this.#redis.off('ready', this.#onReady);
  }

  readonly #onReady = (): void => { void this.sample(); };

  get settled(): boolean {
    return this.#sampled;
  }
}
