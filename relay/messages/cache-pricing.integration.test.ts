// Cache usage is priced as the provider prices it: reads at 0.1× input, 5-minute writes at 1.25×,
// 1-hour writes at 2× (CacheRatio, CreateCacheRatio, CreateCacheRatio1h), through the official SDK,
// streamed and not, and the same quota lands in every book: the ledger row, users.quota, the Redis
// mirror and the ClickHouse log row, whose content and columns carry the cache tokens.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  settledAccountQuota,
  billingSettled, consoleCall, createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';
import { anthropicMessage } from '../../tests/harness/sdk-streams.js';

const MODEL = 'claude-haiku-4-5';
// claude-haiku-4-5: model ratio 0.5, completion ratio 5, group default 1; cache read 0.1, 5-minute
// write 1.25, 1-hour write 2 (core/pricing/ratios.ts). Written out here, not taken from core/pricing,
// so that the test checks the formula rather than repeating it.
const expected = (input: number, read: number, w5m: number, w1h: number, output: number) =>
  Math.round((input + read * 0.1 + w5m * 1.25 + w1h * 2 + output * 5) * 0.5);
const FUNDS = 10_000_000;
// A cached prefix as long as the cache tokens the mock reports (it reports them whatever the prompt),
// so that, as with a real provider, the body's bytes bound every input token and the reservation
// (priced at the dearest cache ratio, the request having a breakpoint) bounds the cost.
const SYSTEM = 'cached context '.repeat(4_000);
const OUTPUT = 10;

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

interface Case { name: string; read: number; w5m: number; w1h: number }
const CASES: Case[] = [
  { name: '10,000 cache reads at 0.1×', read: 10_000, w5m: 0, w1h: 0 },
  { name: '10,000 5-minute cache writes at 1.25×', read: 0, w5m: 10_000, w1h: 0 },
  { name: '10,000 1-hour cache writes at 2×', read: 0, w5m: 0, w1h: 10_000 },
  { name: 'reads and both writes together', read: 30_000, w5m: 4_000, w1h: 2_001 },
];

/** One request with a breakpoint on its system prompt: 5 minutes (Anthropic's default), or an hour. */
async function ask(stream: boolean, ttl: '5m' | '1h' = '5m'): Promise<{ requestId: string; input: number; usage: Anthropic.Usage }> {
  const params = {
    model: MODEL, max_tokens: 100, system: [{ type: 'text' as const, text: SYSTEM, cache_control: ttl === '1h' ? { type: 'ephemeral' as const, ttl } : { type: 'ephemeral' as const } }],
    messages: [{ role: 'user' as const, content: 'What is cached here?' }],
  };
  const { message, requestId } = await anthropicMessage(client, params, stream);
  return { requestId, input: message.usage.input_tokens, usage: message.usage };
}

describe.each([false, true])('stream %s', (stream) => {
  it.each(CASES)('$name', async ({ read, w5m, w1h }) => {
    stack.mock.setOptions({ cacheReadTokens: read, cacheCreationTokens: w5m, cacheCreation1hTokens: w1h });
    const before = await balance();
    // An hour's writes are asked for with an hour's breakpoint (the tests below: without one they are 5 minutes').
    const { requestId, input, usage } = await ask(stream, w1h > 0 ? '1h' : '5m');
    // The client sees the provider's usage unchanged.
    expect(usage).toMatchObject({ cache_read_input_tokens: read, cache_creation_input_tokens: w5m + w1h });
    const quota = expected(input, read, w5m, w1h, OUTPUT);

    const row = await ledgerRow(stack, requestId);
    expect(row).toMatchObject({ quota, prompt_tokens: input + read + w5m + w1h, completion_tokens: OUTPUT });
    const [cols] = await stack.sql`SELECT cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens FROM ledger WHERE request_id = ${requestId}`;
    expect(cols).toEqual({ cache_read_tokens: read, cache_write_5m_tokens: w5m, cache_write_1h_tokens: w1h });
    expect(before - await balance()).toBe(quota);
    expect(await stack.quota.accountBalance(account.id)).toBe(await balance());

    await billingSettled(stack);
    const logs = await stack.ch.query({
      query: `SELECT quota, content, prompt_tokens, cache_tokens, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens
              FROM logs FINAL WHERE request_id = {r:String}`,
      query_params: { r: requestId }, format: 'JSONEachRow',
    }).then((r) => r.json<Record<string, string | number>>());
    expect(logs).toHaveLength(1);
    const log = logs[0]!;
    expect(Number(log.quota)).toBe(quota);
    expect([log.cache_tokens, log.cache_read_tokens, log.cache_write_5m_tokens, log.cache_write_1h_tokens].map(Number))
      .toEqual([read + w5m + w1h, read, w5m, w1h]);
    expect(log.content).toContain('cache read ratio 0.1, cache write ratio 1.25 (5m) / 2 (1h)');
    expect(log.content).toContain(`cache read ${read}, cache write 5m ${w5m}, cache write 1h ${w1h}`);
  });
});

// Before: a breakpoint in a document's content source (or a search result's text inside a tool
// result) was not seen, and the writes it caused were billed as plain input: 1-hour writes at 1×, not 2×.
describe('a breakpoint nested in a document\'s content source', () => {
  it.each([false, true])('stream %s: its 1-hour writes are billed at 2×', async (stream) => {
    stack.mock.setOptions({ cacheReadTokens: 0, cacheCreationTokens: 0, cacheCreation1hTokens: 10_000 });
    const before = await balance();
    const params = {
      model: MODEL, max_tokens: 100,
      messages: [{ role: 'user' as const, content: [
        { type: 'document' as const, source: { type: 'content' as const, content: [{ type: 'text' as const, text: SYSTEM, cache_control: { type: 'ephemeral' as const, ttl: '1h' as const } }] } },
        { type: 'text' as const, text: 'What does it say?' },
      ] }],
    };
    const { message, requestId } = await anthropicMessage(client, params, stream);
    const input = message.usage.input_tokens;
    const quota = expected(input, 0, 0, 10_000, OUTPUT);
    expect(await ledgerRow(stack, requestId)).toMatchObject({ quota, prompt_tokens: input + 10_000, completion_tokens: OUTPUT });
    const [cols] = await stack.sql`SELECT cache_write_1h_tokens FROM ledger WHERE request_id = ${requestId}`;
    expect(cols).toEqual({ cache_write_1h_tokens: 10_000 });
    expect(before - await balance()).toBe(quota);
  });
});

describe('per-model cache ratios from the options', () => {
  it('CacheRatio, CreateCacheRatio and CreateCacheRatio1h override the defaults', async () => {
    const set = async (key: string, value: Record<string, number>) =>
      expect((await consoleCall(stack, 'PUT', '/api/option/', stack.adminToken, { key, value: JSON.stringify(value) })).status).toBe(200);
    await set('CacheRatio', { [MODEL]: 0.2 });
    await set('CreateCacheRatio', { [MODEL]: 1.5 });
    await set('CreateCacheRatio1h', { [MODEL]: 3 });
    try {
      stack.mock.setOptions({ cacheReadTokens: 1_000, cacheCreationTokens: 100, cacheCreation1hTokens: 10 });
      // The relay applies option changes on the invalidation message, a moment after the write.
      const deadline = Date.now() + 5_000;
      for (;;) {
        const { requestId, input } = await ask(false, '1h');
        const row = await ledgerRow(stack, requestId);
        const want = Math.round((input + 1_000 * 0.2 + 100 * 1.5 + 10 * 3 + OUTPUT * 5) * 0.5);
        if (row.quota === want) break;
        if (Date.now() > deadline) expect(row.quota).toBe(want);
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      await set('CacheRatio', {});
      await set('CreateCacheRatio', {});
      await set('CreateCacheRatio1h', {});
    }
  });
});

describe('cache writes reported for a request without a cache_control breakpoint', () => {
  it('are billed as input, as the reservation priced them (at 1×): nothing past it', async () => {
    // Anthropic writes the cache only at a breakpoint; a provider reporting writes anyway (the mock, a
    // proxy) was billed them at 1.25× and 2×, past the reservation, and 19 such requests took a
    // balance of 20 reservations to -38,755 (a probe, 2026-11-29).
    const poor = await fundedAccount(stack, 1_000_000);
    const poorClient = new Anthropic({ apiKey: (await createApiKey(stack, poor)).key, baseURL: stack.relayUrl, maxRetries: 0 });
    const params = { model: MODEL, max_tokens: 100, system: SYSTEM, messages: [{ role: 'user' as const, content: 'Nothing is marked for caching.' }] };
    stack.mock.setOptions({ cacheReadTokens: 0, cacheCreationTokens: 5_000, cacheCreation1hTokens: 7_000 });
    try {
      const { data, response } = await poorClient.messages.create(params).withResponse();
      expect(data.usage).toMatchObject({ cache_creation_input_tokens: 12_000 });
      const requestId = response.headers.get('x-gateway-request-id')!;
      const row = await ledgerRow(stack, requestId);
      // The writes as plain input: (input + 12,000 + output × 5) × 0.5, not at 1.25× and 2×.
      expect(row.quota).toBe(expected(data.usage.input_tokens + 12_000, 0, 0, 0, OUTPUT));
      expect(row.quota).toBeLessThan(expected(data.usage.input_tokens, 0, 5_000, 7_000, OUTPUT));
      await billingSettled(stack);
      const [cols] = await stack.sql`SELECT cache_write_5m_tokens, cache_write_1h_tokens, prompt_tokens FROM ledger WHERE request_id = ${requestId}`;
      expect(cols).toEqual({ cache_write_5m_tokens: 0, cache_write_1h_tokens: 0, prompt_tokens: data.usage.input_tokens + 12_000 });
      const [u] = await stack.sql`SELECT quota FROM users WHERE id = ${poor.id}`;
      expect(Number(u!.quota)).toBe(1_000_000 - row.quota);
    } finally {
      stack.mock.setOptions({ cacheReadTokens: 0, cacheCreationTokens: 0, cacheCreation1hTokens: 0 });
    }
  });
});

describe('1-hour cache writes reported for a request whose breakpoints are all 5 minutes\'', () => {
  it.each([false, true])('are billed as 5-minute writes (stream %s): an hour\'s write is asked for with ttl "1h"', async (stream) => {
    // Anthropic writes for an hour only at a breakpoint with ttl "1h"; a provider reporting such
    // writes anyway (a proxy, the mock) was billed them at 2× where the request asked for 1.25×.
    stack.mock.setOptions({ cacheReadTokens: 0, cacheCreationTokens: 3_000, cacheCreation1hTokens: 2_000 });
    try {
      const before = await balance();
      const { requestId, input, usage } = await ask(stream, '5m');
      expect(usage).toMatchObject({ cache_creation_input_tokens: 5_000 });
      const row = await ledgerRow(stack, requestId);
      expect(row.quota).toBe(expected(input, 0, 5_000, 0, OUTPUT));
      expect(row.quota).toBeLessThan(expected(input, 0, 3_000, 2_000, OUTPUT));
      const [cols] = await stack.sql`SELECT cache_write_5m_tokens, cache_write_1h_tokens FROM ledger WHERE request_id = ${requestId}`;
      expect(cols).toEqual({ cache_write_5m_tokens: 5_000, cache_write_1h_tokens: 0 });
      expect(before - await balance()).toBe(row.quota);
      await billingSettled(stack);
      const [log] = await stack.ch.query({
        query: 'SELECT quota, cache_write_5m_tokens, cache_write_1h_tokens FROM logs FINAL WHERE request_id = {r:String}', query_params: { r: requestId }, format: 'JSONEachRow',
      }).then((r) => r.json<Record<string, string | number>>());
      expect([log!.quota, log!.cache_write_5m_tokens, log!.cache_write_1h_tokens].map(Number)).toEqual([row.quota, 5_000, 0]);
    } finally {
      stack.mock.setOptions({ cacheReadTokens: 0, cacheCreationTokens: 0, cacheCreation1hTokens: 0 });
    }
  });
});
