import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config.js';
import { redisClusterNodes, redisShardCount } from './client.js';

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
