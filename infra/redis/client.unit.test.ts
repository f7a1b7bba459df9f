import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config.js';
import { redisClusterNodes, redisShardCount, resendAfterMoved, resendingMoved, retryOnMoved, TRYAGAIN_DELAY_MS, type Redis } from './client.js';

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
  /** A stand-in with what resendingMoved uses of a client: isCluster, the slot table and its reload. */
  function client(isCluster: boolean): Redis & { reloads: number; slots: string[][]; _groupsBySlot: (number | undefined)[] } {
    const c = {
      isCluster, reloads: 0, slots: [] as string[][], _groupsBySlot: [] as (number | undefined)[],
      refreshSlotsCache(cb: (err?: Error) => void) { c.reloads++; cb(); },
    };
    c.slots[2843] = ['127.0.0.1:7131'];
    c._groupsBySlot[2843] = 1;
    return c as unknown as ReturnType<typeof client>;
  }
  const moved = (text = 'MOVED 2843 127.0.0.1:7134') => Object.assign(new Error(text), { name: 'ReplyError' });

  it('on a cluster, sends a call answered MOVED again once the slot table follows the MOVED', async () => {
    const redis = client(true);
    const calls: unknown[][] = [];
    const f = resendingMoved(redis, async (a: string, b: number) => {
      calls.push([a, b]);
      if (calls.length === 1) throw moved();
      return `${a}:${b}`;
    });
    await expect(f('k', 7)).resolves.toBe('k:7');
    expect(calls).toEqual([['k', 7], ['k', 7]]);
    // Reloaded, then the slot pointed at the node the MOVED names (the reload may have read an old table).
    expect(redis.reloads).toBe(1);
    expect(redis.slots[2843]).toEqual(['127.0.0.1:7134']);
    // Its group left as it was: a batch already queued with this slot and others of its group stays valid.
    expect(redis._groupsBySlot[2843]).toBe(1);
  });

  it('sends again after each further MOVED, at most three times, and passes any other error on at once', async () => {
    const redis = client(true);
    let calls = 0;
    await expect(resendingMoved(redis, async () => { calls++; throw new Error('OOM command not allowed'); })()).rejects.toThrow('OOM');
    expect(calls).toBe(1);
    calls = 0;
    await expect(resendingMoved(redis, async () => { calls++; throw moved(); })()).rejects.toThrow('MOVED');
    expect(calls).toBe(4);
    expect(redis.reloads).toBe(3);
    calls = 0;
    await expect(retryOnMoved(redis, async () => { calls++; if (calls < 3) throw moved(); return 'ok'; })).resolves.toBe('ok');
    expect(calls).toBe(3);
    calls = 0;
    await expect(retryOnMoved(redis, async () => { calls++; throw calls === 1 ? moved() : new Error('NOSCRIPT'); })).rejects.toThrow('NOSCRIPT');
    expect(calls).toBe(2);
  });

  it('sends a call answered TRYAGAIN or ASK (a slot being moved) again a little later, for about a second at most', async () => {
    const redis = client(true);
    let calls = 0;
    const started = Date.now();
    const answers = [new Error('TRYAGAIN Multiple keys request during rehashing of slot'), new Error('ASK 4362 127.0.0.1:7001')];
    await expect(retryOnMoved(redis, async () => { calls++; if (calls <= answers.length) throw answers[calls - 1]; return 'ok'; })).resolves.toBe('ok');
    expect(calls).toBe(3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2 * TRYAGAIN_DELAY_MS - 10);
    // No slot table reload for these: the slot's owner has not changed yet.
    expect(redis.reloads).toBe(0);
    calls = 0;
    await expect(retryOnMoved(redis, async () => { calls++; throw new Error('TRYAGAIN Multiple keys request during rehashing of slot'); })).rejects.toThrow('TRYAGAIN');
    expect(calls).toBe(11);
    // On a single Redis there is no slot to move: passed on at once.
    calls = 0;
    await expect(retryOnMoved(client(false), async () => { calls++; throw new Error('TRYAGAIN x'); })).rejects.toThrow('TRYAGAIN');
    expect(calls).toBe(1);
  });

  // Before: passed on, and the relay answered 529 to a reservation that nothing had run (review reshard).
  it('sends a batch ioredis refused for its slots\' groups again once the slot table is reloaded', async () => {
    const redis = client(true);
    let calls = 0;
    const split = () => new Error('All keys in the pipeline should belong to the same slots allocation group');
    await expect(retryOnMoved(redis, async () => { calls++; if (calls === 1) throw split(); return 'ok'; })).resolves.toBe('ok');
    expect(calls).toBe(2);
    expect(redis.reloads).toBe(1);
    calls = 0;
    await expect(retryOnMoved(redis, async () => { calls++; throw split(); })).rejects.toThrow('slots allocation group');
    expect(calls).toBe(4);
  });

  it('applies only a well-formed MOVED to the slot table', async () => {
    for (const text of ['MOVED __proto__ 127.0.0.1:7134', 'MOVED 16384 127.0.0.1:7134', 'MOVED -1 127.0.0.1:7134', 'MOVED 2843', 'MOVED 2843 :7134', 'MOVED 2843 127.0.0.1']) {
      const redis = client(true);
      let calls = 0;
      await expect(retryOnMoved(redis, async () => { if (calls++ === 0) throw moved(text); return 'ok'; })).resolves.toBe('ok');
      expect(redis.reloads, text).toBe(1);
      expect(redis.slots[2843], text).toEqual(['127.0.0.1:7131']);
      expect(Object.prototype, text).not.toHaveProperty('0');
    }
  });

  it('on a single Redis is the call itself, and a MOVED is passed on', async () => {
    const f = async () => 1;
    const redis = client(false);
    expect(resendingMoved(redis, f)).toBe(f);
    await expect(resendAfterMoved(redis, moved(), f)).rejects.toThrow('MOVED');
    expect(redis.reloads).toBe(0);
  });
});
