// A billing worker whose REDIS_URL now names another gateway's live Redis. Review diffreview: it
// settled nothing there, but it read first and only then looked whose Redis it was: that gateway's
// new usage entries were delivered to this worker's consumer (7 times in 8 s), pending under its name
// and out of reach of that gateway's own worker. Now it looks before every read.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BILLING_GROUP } from '../../billing/billing-worker.js';
import { billingMetrics } from '../../billing/metrics/billing-metrics.js';
import { encodeUsageEvent, usageEvent } from '../../core/usage/usage-event.js';
import { freePort } from '../../infra/testing/free-port.js';
import { createRedis, type Redis } from '../../infra/redis/client.js';
import { startGatewayStack, type GatewayStack } from '../harness/gateway-stack.js';
import { startRedisServer, type OwnRedisServer } from './redis-server.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';
import { until } from '../harness/until.js';

let ours: OwnRedisServer;
let foreign: OwnRedisServer;
let foreignRedis: Redis;
let proxy: TcpProxy;
let stack: GatewayStack;

beforeAll(async () => {
  ours = await startRedisServer({ port: await freePort(), aof: true });
  foreign = await startRedisServer({ port: await freePort(), aof: true });
  proxy = await startTcpProxy({ host: '127.0.0.1', port: ours.port });
  stack = await startGatewayStack({ env: { REDIS_URL: `redis://127.0.0.1:${proxy.port}` } });
  foreignRedis = createRedis({ ...stack.config, REDIS_URL: foreign.url }, 'test-foreign');
}, 60_000);
afterAll(async () => {
  foreignRedis?.disconnect();
  await stack?.close();
  await proxy?.close();
  await foreign?.close();
  await ours?.close();
});

describe('a billing worker pointed at another gateway\'s live Redis', () => {
  it('reads nothing there: that gateway\'s new entries stay for that gateway\'s worker', async () => {
    await foreignRedis.set(stack.keys.databaseInstance(), randomUUID());
    await foreignRedis.xgroup('CREATE', stack.keys.usageStream(), BILLING_GROUP, '0', 'MKSTREAM');
    proxy.retarget({ host: '127.0.0.1', port: foreign.port });
    const refusing = () => (billingMetrics.health().lastError ?? '').includes('not known to hold this database\'s accounts');
    await until('the worker to refuse the other gateway\'s Redis', refusing);
    // The other gateway's relay settles a request; this worker goes on refusing, round after round.
    const event = usageEvent({ type: 2, request_id: `other-${randomUUID()}`, user_id: 1, token_id: 1, token_limited: false, quota: 4242,
      created_at: Math.floor(Date.now() / 1000), content: 'other gateway', model_name: 'm' });
    await foreignRedis.xadd(stack.keys.usageStream(), '*', 'e', encodeUsageEvent(event));
    const added = Date.now();
    await until('a round of the worker after the entry came', () => (billingMetrics.health().lastErrorAt ?? 0) > added && refusing());
    expect(await foreignRedis.xpending(stack.keys.usageStream(), BILLING_GROUP)).toEqual([0, null, null, null]);
    // The other gateway's worker reads it as new.
    const theirs = await foreignRedis.xreadgroup('GROUP', BILLING_GROUP, 'other-gateway-worker', 'COUNT', 10, 'STREAMS', stack.keys.usageStream(), '>') as [string, [string, string[]][]][] | null;
    expect(theirs?.[0]?.[1].length).toBe(1);
    proxy.retarget({ host: '127.0.0.1', port: ours.port });
  }, 90_000);
});
