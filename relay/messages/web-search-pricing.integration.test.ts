// Web searches are billed at settlement: each search the provider reports in
// usage.server_tool_use.web_search_requests costs WebSearchCallPrice quota (default 5,000: $10 per
// 1,000 searches) times the group ratio, on top of the tokens, through the official SDK, streamed and
// not. The same quota lands in every book (ledger, users.quota, the Redis mirror, the ClickHouse log
// row, whose content and column carry the count), and never more than was reserved.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  settledAccountQuota,
  billingSettled, consoleCall, createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';
import { relayMetrics } from '../metrics/relay-metrics.js';

const MODEL = 'claude-haiku-4-5';
// claude-haiku-4-5: model ratio 0.5, completion ratio 5; a web search 5,000 quota. Written out here,
// not taken from core/pricing, so that the test checks the formula rather than repeating it.
const SEARCH_PRICE = 5_000;
const expected = (input: number, output: number, searches: number, group: number) =>
  Math.round((input + output * 5) * 0.5 * group) + Math.round(searches * SEARCH_PRICE * group);
const FUNDS = 10_000_000;
const OUTPUT = 10;
const SEARCHES = 3;

let stack: GatewayStack;
let account: TestAccount;
let client: Anthropic;

beforeAll(async () => {
  stack = await startGatewayStack({ mock: { outputTokens: OUTPUT } });
  await mockChannel(stack, [MODEL]);
  account = await fundedAccount(stack, FUNDS);
  client = new Anthropic({ apiKey: (await createApiKey(stack, account)).key, baseURL: stack.relayUrl, maxRetries: 0 });
});
afterAll(async () => {
  await stack?.close();
});

const balance = (): Promise<number> => settledAccountQuota(stack, account.id);

async function ask(stream: boolean): Promise<{ requestId: string; input: number; usage: Anthropic.Usage }> {
  const params = {
    model: MODEL, max_tokens: 100,
    tools: [{ type: 'web_search_20250305' as const, name: 'web_search' as const, max_uses: 5 }],
    messages: [{ role: 'user' as const, content: 'What is the weather in Paris today?' }],
  };
  if (stream) {
    const s = client.messages.stream(params);
    const msg = await s.finalMessage();
    const { response } = await s.withResponse();
    return { requestId: response.headers.get('x-gateway-request-id')!, input: msg.usage.input_tokens, usage: msg.usage };
  }
  const { data, response } = await client.messages.create(params).withResponse();
  return { requestId: response.headers.get('x-gateway-request-id')!, input: data.usage.input_tokens, usage: data.usage };
}

/** One request, checked in every book; false (nothing checked) when `waiting` and the quota is not yet the one expected. */
async function check(stream: boolean, group: number, waiting = false): Promise<boolean> {
  stack.mock.setOptions({ webSearchRequests: SEARCHES });
  const overBefore = relayMetrics.overReservations.value;
  const before = await balance();
  const { requestId, input, usage } = await ask(stream);
  // The client sees the provider's usage unchanged.
  expect(usage.server_tool_use?.web_search_requests).toBe(SEARCHES);
  const quota = expected(input, OUTPUT, SEARCHES, group);

  const row = await ledgerRow(stack, requestId);
  if (waiting && row.quota !== quota) return false;
  expect(row).toMatchObject({ quota, completion_tokens: OUTPUT });
  const [cols] = await stack.sql`SELECT web_search_requests FROM ledger WHERE request_id = ${requestId}`;
  expect(cols).toEqual({ web_search_requests: SEARCHES });
  expect(before - await balance()).toBe(quota);
  expect(await stack.quota.accountBalance(account.id)).toBe(await balance());
  // The reservation (max_uses 5 searches) bounded the cost: nothing was flagged.
  expect(relayMetrics.overReservations.value).toBe(overBefore);

  await billingSettled(stack);
  const logs = await stack.ch.query({
    query: 'SELECT quota, content, web_search_requests FROM logs FINAL WHERE request_id = {r:String}',
    query_params: { r: requestId }, format: 'JSONEachRow',
  }).then((r) => r.json<Record<string, string | number>>());
  expect(logs).toHaveLength(1);
  expect(Number(logs[0]!.quota)).toBe(quota);
  expect(Number(logs[0]!.web_search_requests)).toBe(SEARCHES);
  expect(logs[0]!.content).toContain(`web search ${SEARCHES} × ${SEARCH_PRICE} quota`);
  return true;
}

describe.each([false, true])('stream %s', (stream) => {
  it(`${SEARCHES} web searches are billed at WebSearchCallPrice each, tokens besides`, async () => {
    expect(await check(stream, 1)).toBe(true);
  });
});

describe('a web_search tool without max_uses', () => {
  it('is sent with the 20 searches it was reserved for; one with max_uses goes as the client sent it', async () => {
    stack.mock.setOptions({ webSearchRequests: 1 });
    const tool = { type: 'web_search_20250305' as const, name: 'web_search' as const, allowed_domains: ['example.com'] };
    const params = { model: MODEL, max_tokens: 100, messages: [{ role: 'user' as const, content: 'Search the news.' }] };
    const first = await client.messages.create({ ...params, tools: [tool] }).withResponse();
    // Anthropic sets no cap: without one the provider could search (and bill) beyond what was reserved.
    expect(stack.mock.requests.at(-1)!.body).toMatchObject({ ...params, tools: [{ ...tool, max_uses: 20 }] });
    const second = await client.messages.create({ ...params, tools: [{ ...tool, max_uses: 2 }] }).withResponse();
    expect(stack.mock.requests.at(-1)!.body).toEqual({ ...params, tools: [{ ...tool, max_uses: 2 }] });
    // Billed as any other (the next test reads the balance before and after its own request).
    for (const { data, response } of [first, second]) {
      const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
      expect(row.quota).toBe(expected(data.usage.input_tokens, OUTPUT, 1, 1));
    }
  });
});

describe('a web_search tool whose max_uses is no whole number of searches, or costs past any balance', () => {
  it('is refused 400 naming it, nothing sent or billed (before: -5 was sent as 20, answered 200; 1e15 heard 404 model_not_priced)', async () => {
    const sent = stack.mock.stats.requests;
    const before = await balance();
    const ask = (max_uses: unknown) => fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': client.apiKey!, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: MODEL, max_tokens: 10, tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses }], messages: [{ role: 'user', content: 'q' }] }),
    });
    for (const max of [-5, 1.5, '3', true]) {
      const res = await ask(max);
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: 'tools.0.max_uses: must be a whole number of searches, 0 or more' } });
    }
    const dear = await ask(1e15);
    expect(dear.status).toBe(400);
    expect(await dear.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringMatching(/^tools: 1,000,000,000,000,000 web searches \(their max_uses\) cost more/) } });
    expect(stack.mock.stats.requests).toBe(sent);
    expect(await balance()).toBe(before);
  });
});

describe('group ratio', () => {
  it('the search fee is multiplied by the group ratio', async () => {
    const set = async (key: string, value: Record<string, number>) =>
      expect((await consoleCall(stack, 'PUT', '/api/option/', stack.adminToken, { key, value: JSON.stringify(value) })).status).toBe(200);
    await set('GroupRatio', { default: 2, vip: 1, svip: 1 });
    try {
      // The relay applies option changes on the invalidation message, a moment after the write.
      const deadline = Date.now() + 5_000;
      while (!await check(false, 2, Date.now() < deadline)) await new Promise((r) => setTimeout(r, 50));
    } finally {
      await set('GroupRatio', { default: 1, vip: 1, svip: 1 });
    }
  });
});
