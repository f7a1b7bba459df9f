import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config.js';
import { redisClusterNodes, redisShardCount, resendingMoved, type Redis } from './client.js';

describe('Redis topology from the configuration', () => {
  it('one Redis by default: no cluster, the unsharded layout', () => {
    const c = loadConfig({});
    expect(redisClusterNodes(c)).toBeNull();
    expect(redisShardCount(c)).toBe(0);
    expect(redisShardCount(loadConfig({ REDIS_SHARDS: '8' }))).toBe(8);
  });

  it('a cluster from REDIS_CLUSTER_NODES or a redis+cluster:// URL, 64 shards unless told', () => {
    const nodes = [{ host: '10.0.0.1', port: 7000 }, { host: 'redis-b', port: 7001 }];
    expect(redisClusterNodes(loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis-b:7001' }))).toEqual(nodes);
    const url = loadConfig({ REDIS_URL: 'redis+cluster://10.0.0.1:7000,redis-b:7001/0' });
    expect(redisClusterNodes(url)).toEqual(nodes);
    expect(redisShardCount(url)).toBe(64);
    expect(redisShardCount(loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000', REDIS_SHARDS: '256' }))).toBe(256);
  });

  it('refuses the unsharded layout on a cluster and a node without a port', () => {
    expect(() => redisShardCount(loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000', REDIS_SHARDS: '0' }))).toThrow(/cannot run on a Redis Cluster/);
    expect(() => redisClusterNodes(loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1' }))).toThrow(/not host:port/);
  });
});

describe('resendingMoved', () => {
  /** A stand-in with what resendingMoved uses of a client: isCluster and the slot table's reload. */
  function client(isCluster: boolean): Redis & { reloads: number } {
    const c = { isCluster, reloads: 0, refreshSlotsCache(cb: (err?: Error) => void) { c.reloads++; cb(); } };
    return c as unknown as Redis & { reloads: number };
  }
  const moved = () => Object.assign(new Error('MOVED 2843 127.0.0.1:7134'), { name: 'ReplyError' });

  it('on a cluster, sends a call answered MOVED once more after reloading the slot table', async () => {
    const redis = client(true);
    const calls: unknown[][] = [];
    const f = resendingMoved(redis, async (a: string, b: number) => {
      calls.push([a, b]);
      if (calls.length === 1) throw moved();
      return `${a}:${b}`;
    });
    await expect(f('k', 7)).resolves.toBe('k:7');
    expect(calls).toEqual([['k', 7], ['k', 7]]);
    expect(redis.reloads).toBe(1);
  });

  it('passes any other error on at once, and a second MOVED too', async () => {
    const redis = client(true);
    let calls = 0;
    await expect(resendingMoved(redis, async () => { calls++; throw new Error('OOM command not allowed'); })()).rejects.toThrow('OOM');
    expect(calls).toBe(1);
    calls = 0;
    await expect(resendingMoved(redis, async () => { calls++; throw moved(); })()).rejects.toThrow('MOVED');
    expect(calls).toBe(2);
    expect(redis.reloads).toBe(1);
  });

  it('on a single Redis is the call itself', () => {
    const f = async () => 1;
    expect(resendingMoved(client(false), f)).toBe(f);
  });
});
