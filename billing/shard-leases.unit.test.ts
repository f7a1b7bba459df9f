// ShardLeases.refresh when some of its Redis calls fail. On a cluster, a graceful slot move (CLUSTER
// FAILOVER on a replica, a reshard) gets an auto-pipelined batch of renewals to one node several
// different MOVEDs, which ioredis neither follows nor answers with a slot-table refresh: every renewal
// in it fails. A refresh that threw then left the worker retrying it forever without reading a shard.
// Here a renewal that fails is tried again after a slot-table refresh when it was MOVED, and otherwise
// leaves the other shards renewed and the refresh answering.
import type { Redis } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import { redisKeys } from '../infra/redis/keys.js';
import { ShardLeases } from './shard-leases.js';

const SHARDS = 4;
const LEASE_MS = 3000;
const keys = redisKeys('lease-test', SHARDS);

/** A Redis answering holdShardLease-1.lua and the workers hash from memory; `fail` decides a call's error. */
function fakeRedis(opts: { cluster?: boolean; fail?: (shard: number, mode: string) => Error | null } = {}) {
  const leases = new Map<string, string>();
  const workers = new Map<string, string>();
  const refreshes = vi.fn();
  const redis: Record<string, unknown> = {
    isCluster: opts.cluster ?? false,
    defineCommand(name: string) {
      redis[name] = async (key: string, me: string, _ms: number, mode: string) => {
        const err = opts.fail?.(Number(/\{s(\d+)\}/.exec(key)![1]), mode);
        if (err) throw err;
        const holder = leases.get(key);
        if (mode === 'release') {
          if (holder !== me) return 0;
          leases.delete(key);
          return 1;
        }
        if (holder !== undefined && holder !== me) return 0;
        leases.set(key, me);
        return 1;
      };
    },
    on() {},
    nodes: () => [],
    refreshSlotsCache(cb?: (err?: Error) => void) {
      refreshes();
      setImmediate(() => cb?.());
    },
    hset: async (_k: string, f: string, v: number) => { workers.set(f, String(v)); return 1; },
    hgetall: async () => Object.fromEntries(workers),
    hdel: async (_k: string, f: string) => Number(workers.delete(f)),
  };
  return { redis: redis as unknown as Redis, leases, refreshes };
}

describe('ShardLeases.refresh', () => {
  it('renews the other leases and keeps a young one whose renewal failed, then lets it go after a second failure', async () => {
    let failing = false;
    const { redis } = fakeRedis({ fail: (shard, mode) => (failing && shard === 2 && mode === 'hold' ? new Error('Connection is closed.') : null) });
    const leases = new ShardLeases(redis, keys, 'w1', LEASE_MS);
    const t0 = 1_000_000;
    expect((await leases.refresh(t0)).gained.sort()).toEqual([0, 1, 2, 3]);

    failing = true;
    const first = await leases.refresh(t0 + LEASE_MS / 3);
    expect(first.lost).toEqual([]);
    expect(first.errors).toEqual(['Connection is closed.']);
    expect(leases.held()).toEqual([0, 1, 2, 3]);

    // A third of the lease left: another worker may take it before the next refresh.
    const second = await leases.refresh(t0 + (2 * LEASE_MS) / 3);
    expect(second.lost).toEqual([2]);
    expect(leases.held()).toEqual([0, 1, 3]);

    failing = false;
    expect((await leases.refresh(t0 + LEASE_MS)).gained).toEqual([2]);
    expect(leases.held()).toEqual([0, 1, 2, 3]);
  });

  it('answers even when the workers hash cannot be read: the held leases are renewed, none taken or given up', async () => {
    const { redis } = fakeRedis();
    const leases = new ShardLeases(redis, keys, 'w1', LEASE_MS);
    await leases.refresh(1_000_000);
    (redis as unknown as { hgetall: () => Promise<never> }).hgetall = async () => { throw new Error('CLUSTERDOWN The cluster is down'); };
    const change = await leases.refresh(1_001_000);
    expect(change).toEqual({ gained: [], lost: [], errors: ['CLUSTERDOWN The cluster is down'] });
    expect(leases.held()).toEqual([0, 1, 2, 3]);
  });

  it('on a cluster, renews leases whose batch was MOVED after refreshing the slot table', async () => {
    let moved = false;
    const renewedAfterMove = new Set<number>();
    const { redis, refreshes } = fakeRedis({
      cluster: true,
      // Each shard's renewal MOVED once, as when a batch spanning several of a node's slots is.
      fail: (shard) => (moved && !renewedAfterMove.has(shard) && renewedAfterMove.add(shard) ? new Error(`MOVED ${1000 + shard} 127.0.0.1:7004`) : null),
    });
    const leases = new ShardLeases(redis, keys, 'w1', LEASE_MS);
    await leases.refresh(1_000_000);
    moved = true;
    const change = await leases.refresh(1_001_000);
    expect(change).toEqual({ gained: [], lost: [], errors: [] });
    expect(leases.held()).toEqual([0, 1, 2, 3]);
    expect(refreshes).toHaveBeenCalled();
  });

  it('dates the workers\' registrations with the clock it is given (billing/service.ts: Redis\'s), so a dead worker stops counting once its lease ran out on it', async () => {
    const { redis, leases: held } = fakeRedis();
    // One reference clock for both workers, whatever their hosts' clocks say.
    let t = 1_000_000;
    const clock = { now: () => t, settled: true };
    const w1 = new ShardLeases(redis, keys, 'w1', LEASE_MS, clock);
    const w2 = new ShardLeases(redis, keys, 'w2', LEASE_MS, clock);
    expect((await w1.refresh()).gained).toHaveLength(SHARDS);
    await w2.refresh();
    // w1 dies: its leases (SET PX, Redis's clock) and its registration run out after a lease.
    t += LEASE_MS + 1;
    held.clear();
    expect((await w2.refresh()).gained.sort()).toEqual([0, 1, 2, 3]);
  });
});
