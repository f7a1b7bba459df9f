// pruneIdleConsumers-1.lua: dead workers' consumers leave the billing group. One that holds nothing
// and has been idle the given time is removed; one holding a pending entry, one that read recently
// and the caller itself stay. Against the test Redis.
import { afterAll, describe, expect, it } from 'vitest';
import { createRedis } from '../infra/redis/client.js';
import { testConfig } from '../infra/testing/test-config.js';
import { usageScripts } from './usage-scripts.js';

const config = testConfig();
const redis = createRedis(config, 'consumer-pruning-test');
const scripts = usageScripts(redis);
const stream = `${config.REDIS_PREFIX}-prune:usage`;
const group = 'billing';

afterAll(async () => {
  await redis.del(stream);
  await redis.quit();
});

async function consumers(): Promise<Record<string, number>> {
  const list = (await redis.xinfo('CONSUMERS', stream, group)) as unknown[][];
  return Object.fromEntries(list.map((f) => [String(f[f.indexOf('name') + 1]), Number(f[f.indexOf('pending') + 1])]));
}

describe('pruneIdleConsumers-1.lua', () => {
  it('removes only idle consumers that hold nothing, never the caller', async () => {
    await redis.xgroup('CREATE', stream, group, '$', 'MKSTREAM');
    await redis.xadd(stream, '*', 'e', '1');
    // host-1 read the entry and died with it pending; host-2 read nothing and died.
    await redis.xreadgroup('GROUP', group, 'host-1', 'COUNT', 1, 'STREAMS', stream, '>');
    for (const name of ['host-2', 'self']) await redis.xgroup('CREATECONSUMER', stream, group, name);
    await new Promise((r) => setTimeout(r, 120));
    // host-3 is alive: it has just read an entry.
    await redis.xadd(stream, '*', 'e', '2');
    await redis.xreadgroup('GROUP', group, 'host-3', 'COUNT', 1, 'STREAMS', stream, '>');
    await redis.xack(stream, group, ...(await redis.xpending(stream, group, '-', '+', 10, 'host-3') as [string][]).map(([id]) => id));
    expect(await scripts.pruneIdleConsumers(stream, group, 'self', 100)).toEqual(['host-2']);
    expect(await consumers()).toEqual({ 'host-1': 1, 'host-3': 0, self: 0 });
    // Nothing idle long enough: nothing removed. A missing stream or group: nothing either.
    expect(await scripts.pruneIdleConsumers(stream, group, 'self', 60_000)).toEqual([]);
    expect(await scripts.pruneIdleConsumers(`${stream}-none`, group, 'self', 0)).toEqual([]);
  });
});
