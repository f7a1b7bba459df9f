// Which shards' usage streams this billing worker consumes (sharded key layout, REDIS_SHARDS > 0).
// Each shard is held by at most one worker at a time through a lease in the shard's own slot
// (holdShardLease-1.lua), so no shard's stream is read by two workers at once; the workers alive
// register in one hash with an expiry, and each aims at its fair share, ceil(shards / workers alive):
// a worker holding more gives the extras up between two batches, one holding fewer takes free ones.
// A worker that dies stops renewing: its leases and its registration run out after the lease length,
// and the others take its shards (and claim the entries it had read and not acknowledged).
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../infra/redis/keys.js';
import { defineScripts } from '../core/quota/scripts.js';
import { retryOnMoved } from '../infra/redis/client.js';
import { WALL_CLOCK, type ReferenceClock } from '../core/quota/redis-clock.js';

type ScriptFn = (...args: (string | number)[]) => Promise<unknown>;

export interface LeaseChange {
  gained: number[];
  lost: number[];
  /** Redis calls of this refresh that failed: the rest went on without them (the worker logs them). */
  errors: string[];
}

export class ShardLeases {
  readonly #redis: Redis;
  readonly #keys: RedisKeys;
  readonly #me: string;
  readonly #leaseMs: number;
  readonly #hold: ScriptFn;
  /** Held shards, each with when its lease ends at the latest (as of before the call that set it). */
  readonly #held = new Map<number, number>();
  /** Shards in the order this worker tries them: rotated by its name, so workers starting together spread. */
  readonly #order: number[];
  /** Dates the workers' registrations (Redis's clock in the worker: every worker compares them with the same one). */
  readonly #clock: ReferenceClock;

  constructor(redis: Redis, keys: RedisKeys, consumer: string, leaseMs: number, clock: ReferenceClock = WALL_CLOCK) {
    this.#clock = clock;
    if (keys.shards === 0) throw new Error('shard leases need the sharded key layout (REDIS_SHARDS > 0)');
    this.#redis = redis;
    this.#keys = keys;
    this.#me = consumer;
    this.#leaseMs = leaseMs;
    const command = defineScripts(redis).get('holdShardLease')!.command;
    this.#hold = (redis as unknown as Record<string, ScriptFn>)[command]!.bind(redis);
    let h = 0;
    for (const c of consumer) h = (h * 31 + c.charCodeAt(0)) >>> 0;
    const n = keys.shards;
    this.#order = Array.from({ length: n }, (_, i) => (i + h) % n);
  }

  held(): number[] {
    return [...this.#held.keys()].sort((a, b) => a - b);
  }

  /**
   * Renews the held leases, gives up extras and takes free shards up to the fair share. Never throws
   * for a failed Redis call: one shard's failure (its node failing over, a batch MOVED) must not stop
   * the others' renewal, nor the worker's schedule, which a throw leaves retrying this refresh
   * instead of reading.
   */
  async refresh(nowMs = this.#clock.now()): Promise<LeaseChange> {
    const change: LeaseChange = { gained: [], lost: [], errors: [] };
    const failed = (err: unknown): void => { change.errors.push(err instanceof Error ? err.message : String(err)); };
    const until = nowMs + this.#leaseMs;
    // Without the workers alive there is no fair share: the held leases are renewed, nothing more.
    const target = await this.#fairShare(nowMs).catch((err: unknown) => { failed(err); return null; });
    const held = this.held();
    const renewed = await Promise.allSettled(held.map((s) => this.#call(s, 'hold')));
    held.forEach((s, i) => {
      const r = renewed[i]!;
      if (r.status === 'fulfilled' && r.value === 1) return void this.#held.set(s, until);
      if (r.status === 'rejected') {
        failed(r.reason);
        // Refreshed every third of the lease: one failed renewal leaves it two thirds, enough to read
        // on until the next try; a second would leave too little, and another worker may take it then.
        if (this.#held.get(s)! > nowMs + this.#leaseMs / 2) return;
      }
      this.#held.delete(s);
      change.lost.push(s);
    });
    if (target === null) return change;
    for (const s of this.held().slice(target)) {
      // Given up here even when Redis did not answer: the lease runs out, and another worker takes it then.
      await this.#call(s, 'release').catch(failed);
      this.#held.delete(s);
      change.lost.push(s);
    }
    for (const s of this.#order) {
      if (this.#held.size >= target) break;
      if (this.#held.has(s)) continue;
      const took = await this.#call(s, 'hold').catch((err: unknown) => { failed(err); return 0; });
      if (took === 1) {
        this.#held.set(s, until);
        change.gained.push(s);
      }
    }
    return change;
  }

  /** Gives every held shard up and unregisters (a worker stopping): the others take over at once. */
  async releaseAll(): Promise<void> {
    await Promise.all(this.held().map((s) => this.#call(s, 'release')));
    this.#held.clear();
    await this.#redis.hdel(this.#keys.billingWorkers(), this.#me);
  }

  /** Registers this worker as alive and returns its fair share: ceil(shards / workers alive). */
  async #fairShare(nowMs: number): Promise<number> {
    const workersKey = this.#keys.billingWorkers();
    await retryOnMoved(this.#redis, () => this.#redis.hset(workersKey, this.#me, nowMs + this.#leaseMs));
    const workers = await retryOnMoved(this.#redis, () => this.#redis.hgetall(workersKey));
    let live = 0;
    for (const [name, until] of Object.entries(workers)) {
      if (Number(until) > nowMs) live++;
      // A dead worker's entry left behind is removed by the next refresh, and counted by nobody meanwhile.
      else await this.#redis.hdel(workersKey, name).catch(() => undefined);
    }
    return Math.ceil(this.#keys.shards / Math.max(1, live));
  }

  /** A lease call is safe to send twice (hold renews, release gives up only the caller's own). */
  #call(shard: number, mode: 'hold' | 'release'): Promise<number> {
    return retryOnMoved(this.#redis, async () => Number(await this.#hold(this.#keys.billingShardLease(shard), this.#me, this.#leaseMs, mode)));
  }
}
