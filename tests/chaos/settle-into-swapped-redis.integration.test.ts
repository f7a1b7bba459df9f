// A request in flight when the Redis behind REDIS_URL is swapped for another database's (the address
// now naming another server). Review diffreview: reservations were refused there, but the relay's
// in-memory settlement was sent, found no reservation, and the lost-reservation path debited the
// other database's mirror of the account with the same id (3,000,000 to 2,999,661) and appended this
// database's event to its stream. Now a settlement is sent only to a Redis known to be its database's,
// held in memory meanwhile.
import Anthropic from '@anthropic-ai/sdk';
import type { ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/testing/free-port.js';
import { createRedis, type Redis } from '../../infra/redis/client.js';
import { createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack } from '../harness/gateway-stack.js';
import { balanceOf, NORMAL_OUTPUT, normalMessage, startScriptedProvider, unnamedCost, type ScriptedProvider } from '../harness/scripted-provider.js';
import { relayMetrics } from '../../relay/metrics/relay-metrics.js';
import { settlementsInFlight } from '../../relay/messages/settlement.js';
import { startRedisServer, type OwnRedisServer } from './redis-server.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';
import { until } from '../harness/until.js';

const MODEL = 'swap-in-flight-model';

let ours: OwnRedisServer;
let foreign: OwnRedisServer;
let foreignRedis: Redis;
let proxy: TcpProxy;
let provider: ScriptedProvider;
let stack: GatewayStack;
const held: ServerResponse[] = [];

beforeAll(async () => {
  ours = await startRedisServer({ port: await freePort(), aof: true });
  foreign = await startRedisServer({ port: await freePort(), aof: true });
  proxy = await startTcpProxy({ host: '127.0.0.1', port: ours.port });
  provider = await startScriptedProvider((_req, res) => { held.push(res); });
  stack = await startGatewayStack({ env: { REDIS_URL: `redis://127.0.0.1:${proxy.port}` } });
  await mockChannel(stack, [MODEL], 'default', { base_url: provider.url });
  foreignRedis = createRedis({ ...stack.config, REDIS_URL: foreign.url }, 'test-foreign');
}, 60_000);
afterAll(async () => {
  foreignRedis?.disconnect();
  await stack?.close();
  await provider?.close();
  await proxy?.close();
  await foreign?.close();
  await ours?.close();
});

describe('a request in flight when the Redis is swapped', () => {
  it('settles nothing into the other database\'s Redis, and is billed here once this database\'s Redis is back', async () => {
    const acct = await fundedAccount(stack, 10_000_000);
    const key = await createApiKey(stack, acct, {});
    const client = new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 });
    // The other database: bound to another instance, its account of the same id holding 3,000,000.
    await foreignRedis.set(stack.keys.databaseInstance(), randomUUID());
    await foreignRedis.set(stack.keys.accountBalance(acct.id), 3_000_000);
    const funded = await balanceOf(stack, acct.id);
    const lostBefore = relayMetrics.lostReservationsBilled.value;
    const failuresBefore = relayMetrics.settleFailures.value;

    const pending = client.messages.create({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    await until('the request at the provider', () => held.length === 1);
    proxy.retarget({ host: '127.0.0.1', port: foreign.port });
    await until('the relay to find the other database\'s Redis', async () => (await (await fetch(`${stack.relayUrl}/ready`)).text()).includes('quota_store_foreign'));
    held[0]!.writeHead(200, { 'content-type': 'application/json' });
    held[0]!.end(normalMessage(MODEL));
    const answer = await pending;
    const requestId = answer.response.headers.get('x-gateway-request-id')!;
    // Held back at every try, past the 6.3 s a sent settlement is retried for (then it would be left to
    // the spool, whose replay cannot tell a lost reservation from a settled one): still in flight.
    await new Promise((r) => setTimeout(r, 7_000));
    expect(settlementsInFlight()).toBeGreaterThan(0);
    expect(relayMetrics.settleFailures.value).toBe(failuresBefore);
    expect(Number(await foreignRedis.get(stack.keys.accountBalance(acct.id)))).toBe(3_000_000);
    const entries = await foreignRedis.xrange(stack.keys.usageStream(), '-', '+');
    expect(entries.filter(([, f]) => f.join(' ').includes(requestId))).toEqual([]);
    expect(relayMetrics.lostReservationsBilled.value).toBe(lostBefore);

    // This database's Redis back: the spool replays the settlement against its reservation, billed once.
    proxy.retarget({ host: '127.0.0.1', port: ours.port });
    const row = await ledgerRow(stack, requestId, 30_000);
    // Its input bounded by the prompt's bytes ("hi"), its 50 output tokens at 5.
    expect(row.quota).toBeGreaterThanOrEqual(unnamedCost(0, NORMAL_OUTPUT));
    expect(await balanceOf(stack, acct.id)).toBe(funded - row.quota);
    expect(Number(await foreignRedis.get(stack.keys.accountBalance(acct.id)))).toBe(3_000_000);
  }, 90_000);
});
