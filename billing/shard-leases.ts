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

type ScriptFn = (...args: (string | number)[]) => Promise<unknown>;

export interface LeaseChange {
  gained: number[];
  lost: number[];
}

export class ShardLeases {
  readonly #redis: Redis;
  readonly #keys: RedisKeys;
  readonly #me: string;
  readonly #leaseMs: number;
  readonly #hold: ScriptFn;
  readonly #held = new Set<number>();
  /** Shards in the order this worker tries them: rotated by its name, so workers starting together spread. */
  readonly #order: number[];

  constructor(redis: Redis, keys: RedisKeys, consumer: string, leaseMs: number) {
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
    return [...this.#held].sort((a, b) => a - b);
  }

  /** Renews the held leases, gives up extras and takes free shards up to the fair share. */
  async refresh(nowMs = Date.now()): Promise<LeaseChange> {
    const workersKey = this.#keys.billingWorkers();
    await this.#redis.hset(workersKey, this.#me, nowMs + this.#leaseMs);
    const workers = await this.#redis.hgetall(workersKey);
    let live = 0;
    for (const [name, until] of Object.entries(workers)) {
      if (Number(until) > nowMs) live++;
      else await this.#redis.hdel(workersKey, name);
    }
    const target = Math.ceil(this.#keys.shards / Math.max(1, live));
    const change: LeaseChange = { gained: [], lost: [] };
    const held = this.held();
    const renewed = await Promise.all(held.map((s) => this.#call(s, 'hold')));
    held.forEach((s, i) => {
      if (renewed[i] !== 1) {
        this.#held.delete(s);
        change.lost.push(s);
      }
    });
    for (const s of this.held().slice(target)) {
      await this.#call(s, 'release');
      this.#held.delete(s);
      change.lost.push(s);
    }
    for (const s of this.#order) {
      if (this.#held.size >= target) break;
      if (this.#held.has(s)) continue;
      if ((await this.#call(s, 'hold')) === 1) {
        this.#held.add(s);
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

  async #call(shard: number, mode: 'hold' | 'release'): Promise<number> {
    return Number(await this.#hold(this.#keys.billingShardLease(shard), this.#me, this.#leaseMs, mode));
  }
}
