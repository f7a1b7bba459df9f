// A Redis without persistence restarts empty while requests are in flight (review faults, F1): their
// reservations, and the credit slices some were drawn from, go with its data. The answers were still
// delivered in full, and their settlements then found no reservation: 7 of 25 requests in the review
// (11 of 98 on a busy account) had no ledger row, no log row and no log line naming them. On a Redis
// that keeps no settled markers a relay settles each request once, so a first settlement that finds
// nothing means the reservation was lost: it is sent again as lost and bills the cost alone, once.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/testing/free-port.js';
import { createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../harness/gateway-stack.js';
import {
  balanceOf, billOf, LONG_PROMPT, NORMAL_INPUT, NORMAL_OUTPUT, startHoldingProvider, unnamedCost, type HoldingProvider,
} from '../harness/scripted-provider.js';
import { relayMetrics } from '../../relay/metrics/relay-metrics.js';
import { startRedisServer, type OwnRedisServer } from './redis-server.js';
import { streamedText } from '../harness/sdk-streams.js';
import { until } from '../harness/until.js';

const MODEL = 'lost-reservation-model';
const COST = unnamedCost(NORMAL_INPUT, NORMAL_OUTPUT);
/** Requests of the unlimited key at once: from the fifth on they are drawn from a credit slice. */
const BUSY = 8;

let redisServer: OwnRedisServer;
/** Holds every answer until the test lets them go. */
let provider: HoldingProvider;
let stack: GatewayStack;

beforeAll(async () => {
  redisServer = await startRedisServer({ port: await freePort(), aof: false });
  provider = await startHoldingProvider(MODEL);
  stack = await startGatewayStack({ env: { REDIS_URL: redisServer.url } });
  await mockChannel(stack, [MODEL], 'default', { base_url: provider.url });
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await provider?.close();
  await redisServer?.close();
});

async function client(account: TestAccount, input: Record<string, unknown>): Promise<Anthropic> {
  const key = await createApiKey(stack, account, input);
  return new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 });
}

describe('a Redis restarted empty under requests in flight', () => {
  it('bills each request whose reservation or credit slice it lost, once, from what the answer used', async () => {
    const limited = await fundedAccount(stack, 10_000_000);
    const busy = await fundedAccount(stack, 10_000_000);
    const limitedBefore = await balanceOf(stack, limited.id);
    const busyBefore = await balanceOf(stack, busy.id);
    const limitedClient = await client(limited, { unlimited_quota: false, remain_quota: 5_000_000 });
    const busyClient = await client(busy, {});
    const billedBefore = relayMetrics.lostReservationsBilled.value;

    const params = { model: MODEL, max_tokens: 100, messages: [{ role: 'user' as const, content: LONG_PROMPT }] };
    const stream = limitedClient.messages.create({ ...params, stream: true }).withResponse();
    const answers = Array.from({ length: BUSY }, () => busyClient.messages.create(params).withResponse());
    // Each is reserved (or drawn from a slice) before it is sent: all of them are held at the provider.
    await until('every request at the provider', () => provider.held === BUSY + 1);

    await redisServer.kill();
    await redisServer.start();
    await until('the relay ready on the empty Redis', async () => (await fetch(`${stack.relayUrl}/ready`)).status === 200);
    provider.release();

    const streamed = await stream;
    expect(await streamedText(streamed.data)).toBe('tok '.repeat(NORMAL_OUTPUT));
    const done = await Promise.all(answers);
    for (const a of done) expect(a.data.usage).toMatchObject({ input_tokens: NORMAL_INPUT, output_tokens: NORMAL_OUTPUT });

    // Every answer delivered is billed once, at its price, in every book.
    const limitedRow = await billOf(stack, limited.id, streamed.response.headers.get('x-gateway-request-id')!, limitedBefore);
    expect(limitedRow.quota).toBe(COST);
    const busyIds = done.map((a) => a.response.headers.get('x-gateway-request-id')!);
    for (const id of busyIds) expect((await ledgerRow(stack, id)).quota).toBe(COST);
    const rs = await stack.ch.query({ query: 'SELECT request_id, quota FROM logs FINAL WHERE request_id IN {ids:Array(String)}', query_params: { ids: busyIds }, format: 'JSONEachRow' });
    const logs = await rs.json<{ request_id: string; quota: string | number }>();
    expect(logs.map((l) => [l.request_id, Number(l.quota)]).sort()).toEqual(busyIds.map((id) => [id, COST]).sort());
    expect(await balanceOf(stack, busy.id)).toBe(busyBefore - BUSY * COST);
    const [spent] = await stack.sql`SELECT coalesce(sum(quota), 0)::bigint AS q, count(*)::int AS n FROM ledger WHERE user_id IN (${limited.id}, ${busy.id}) AND type = 2`;
    expect({ q: Number(spent!.q), n: spent!.n }).toEqual({ q: (BUSY + 1) * COST, n: BUSY + 1 });
    // The mirrors the empty Redis loaded again hold the same debits as Postgres.
    expect(Number(await stack.redis.get(stack.keys.accountBalance(limited.id)))).toBe(limitedBefore - COST);
    expect(Number(await stack.redis.get(stack.keys.accountBalance(busy.id)))).toBe(busyBefore - BUSY * COST);
    // The limited key's quota too.
    const [key] = await stack.sql`SELECT remain_quota FROM tokens WHERE user_id = ${limited.id}`;
    expect(Number(key!.remain_quota)).toBe(5_000_000 - COST);
    expect(relayMetrics.lostReservationsBilled.value - billedBefore).toBe(BUSY + 1);
  }, 120_000);

  it('bills them when their answers end while Redis is down, for longer than a settlement\'s retries (review diffreview2: none of three was billed)', async () => {
    const account = await fundedAccount(stack, 10_000_000);
    const before = await balanceOf(stack, account.id);
    const key = await client(account, { unlimited_quota: false, remain_quota: 5_000_000 });
    const params = { model: MODEL, max_tokens: 100, messages: [{ role: 'user' as const, content: LONG_PROMPT }] };
    const answers = Array.from({ length: 3 }, () => key.messages.create(params).withResponse());
    await until('the three at the provider', () => provider.held === 3);
    await redisServer.kill();
    const downAt = Date.now();
    // Delivered while Redis is down: each settlement is held back, unsent, past its 6.3 s of retries.
    provider.release();
    const done = await Promise.all(answers);
    const ids = done.map((a) => a.response.headers.get('x-gateway-request-id')!);
    await new Promise((r) => setTimeout(r, Math.max(0, 8_000 - (Date.now() - downAt))));
    await redisServer.start();
    for (const id of ids) expect((await ledgerRow(stack, id, 30_000)).quota).toBe(COST);
    expect(await balanceOf(stack, account.id)).toBe(before - 3 * COST);
    await until('the mirror loaded again to meet Postgres', async () => Number(await stack.redis.get(stack.keys.accountBalance(account.id))) === before - 3 * COST);
    const rs = await stack.ch.query({ query: 'SELECT count() AS c FROM logs FINAL WHERE request_id IN {ids:Array(String)}', query_params: { ids }, format: 'JSONEachRow' });
    expect(Number((await rs.json<{ c: string }>())[0]!.c)).toBe(3);
  }, 120_000);
});
