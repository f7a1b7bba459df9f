// The `flex` service tier on OpenAI-format channels (migration 021, channels.flex_ratio): OpenAI bills
// an answer it served at flex at half its standard price, so a channel says what its provider charges
// for flex and the relay bills a flex answer at that fraction, only when the client asked for flex
// and the answer says flex served it. Driven with the official SDK; every book checked: the ledger,
// the account's balance in Postgres and in Redis, the ClickHouse log row (quota and its content).
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countPromptTokens, startMockOpenAI, type MockOpenAI } from '../../bench/mock-upstream-openai/mock-openai.js';
import {
  settledAccountQuota,
  consoleCall, createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

const OPENAI_KEY = 'sk-proj-mock-flex-credential';
const OUTPUT = 40;
const CACHED = 8;
// OpenAI's prices as core/pricing's built-in table has them, written out here (model ratio, completion
// ratio, cache-read ratio): o3 $2 / $8 / $0.50, o4-mini $1.10 / $4.40 / $0.275, gpt-5-mini $0.25 / $2 /
// $0.025, gpt-5-nano $0.05 / $0.40 / $0.005 per million tokens; group ratio 1.
const PRICES = {
  'o3': [1, 4, 0.25],
  'o4-mini': [0.55, 4, 0.25],
  'gpt-5-mini': [0.125, 8, 0.1],
  'gpt-5-nano': [0.025, 8, 0.1],
} as const;
type Model = keyof typeof PRICES;
const cost = (model: Model, input: number, cached: number, output: number, tier = 1) => {
  const [m, c, r] = PRICES[model];
  return Math.round((input + cached * r + output * c) * m * tier);
};

let stack: GatewayStack;
let flexMock: MockOpenAI;
let standardOnlyMock: MockOpenAI;
let account: TestAccount;
let openai: OpenAI;
let flexChannel: number;
let defaultChannel: number;

beforeAll(async () => {
  stack = await startGatewayStack();
  flexMock = await startMockOpenAI({ apiKey: OPENAI_KEY, outputTokens: OUTPUT, cachedTokens: CACHED });
  // A provider that takes the field and serves standard all the same (says "default").
  standardOnlyMock = await startMockOpenAI({ apiKey: OPENAI_KEY, outputTokens: OUTPUT, cachedTokens: CACHED, serviceTier: 'default' });
  flexChannel = await mockChannel(stack, ['o3', 'o4-mini'], 'default', { base_url: flexMock.url, key: OPENAI_KEY, type: 1, flex_ratio: 0.5 });
  defaultChannel = await mockChannel(stack, ['gpt-5-mini'], 'default', { base_url: flexMock.url, key: OPENAI_KEY, type: 1 });
  await mockChannel(stack, ['gpt-5-nano'], 'default', { base_url: standardOnlyMock.url, key: OPENAI_KEY, type: 1, flex_ratio: 0.5 });
  account = await fundedAccount(stack, 50_000_000);
  openai = new OpenAI({ apiKey: (await createApiKey(stack, account)).key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  await flexMock?.close();
  await standardOnlyMock?.close();
  await stack?.close();
});

const balance = (): Promise<number> => settledAccountQuota(stack, account.id);

/** Ledger, log row and both balances agree on `quota`; the log row's content is returned. */
async function expectBilled(requestId: string, before: number, quota: number, prompt: number): Promise<string> {
  const row = await ledgerRow(stack, requestId);
  expect(row).toMatchObject({ prompt_tokens: prompt, completion_tokens: OUTPUT, quota });
  const rs = await stack.ch.query({
    query: 'SELECT quota, content FROM logs FINAL WHERE request_id = {r:String}', query_params: { r: requestId }, format: 'JSONEachRow',
  });
  const logs = await rs.json<{ quota: string | number; content: string }>();
  expect(logs.map((l) => Number(l.quota))).toEqual([quota]);
  expect(await balance()).toBe(before - quota);
  expect(await stack.quota.accountBalance(account.id)).toBe(before - quota);
  return logs[0]!.content;
}

const messages = [{ role: 'user' as const, content: 'Summarise the quarterly report in three lines' }];

describe('the flex service tier, billed at the channel\'s flex ratio', () => {
  it('the console stores a channel\'s flex_ratio (1 unless set) and refuses one outside (0, 1]', async () => {
    const flex = await consoleCall<{ flex_ratio: number }>(stack, 'GET', `/api/channel/${flexChannel}`, stack.adminToken);
    expect(flex.json.data!.flex_ratio).toBe(0.5);
    const plain = await consoleCall<{ flex_ratio: number }>(stack, 'GET', `/api/channel/${defaultChannel}`, stack.adminToken);
    expect(plain.json.data!.flex_ratio).toBe(1);
    for (const bad of [0, -0.5, 1.5, '0.5', null, Number.NaN]) {
      const res = await consoleCall(stack, 'PUT', '/api/channel/', stack.adminToken, { id: defaultChannel, flex_ratio: bad });
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.json).toMatchObject({ success: false, message: expect.stringContaining('flex_ratio') });
    }
    const [row] = await stack.sql`SELECT flex_ratio FROM channels WHERE id = ${defaultChannel}`;
    expect(Number(row!.flex_ratio)).toBe(1);
  });

  it('non-streaming: a flex answer on a flex-priced channel costs half, its log row says so', async () => {
    const before = await balance();
    const request = { model: 'o3', service_tier: 'flex' as const, max_completion_tokens: 200, messages };
    const { data, response } = await openai.chat.completions.create(request).withResponse();
    expect(data.service_tier).toBe('flex');
    expect(flexMock.requests.at(-1)!.body).toMatchObject({ service_tier: 'flex' });
    const prompt = countPromptTokens(request);
    const content = await expectBilled(response.headers.get('x-gateway-request-id')!, before, cost('o3', prompt - CACHED, CACHED, OUTPUT, 0.5), prompt);
    expect(content).toContain('flex service tier ×0.5');
  });

  it('streamed, with and without include_usage: the usage chunk\'s service_tier prices it', async () => {
    for (const includeUsage of [true, false]) {
      const before = await balance();
      const { data: stream, response } = await openai.chat.completions.create({
        model: 'o4-mini', service_tier: 'flex', stream: true, stream_options: { include_usage: includeUsage }, messages,
      }).withResponse();
      let text = '';
      for await (const chunk of stream) for (const c of chunk.choices) text += c.delta.content ?? '';
      expect(text).toBe('tok '.repeat(OUTPUT));
      const prompt = countPromptTokens(flexMock.requests.at(-1)!.body);
      await expectBilled(response.headers.get('x-gateway-request-id')!, before, cost('o4-mini', prompt - CACHED, CACHED, OUTPUT, 0.5), prompt);
    }
  });

  it('the same channel without flex asked: the standard price', async () => {
    const before = await balance();
    const { data, response } = await openai.chat.completions.create({ model: 'o3', max_completion_tokens: 200, messages }).withResponse();
    expect(data.service_tier).toBe('default');
    const prompt = countPromptTokens({ messages });
    const content = await expectBilled(response.headers.get('x-gateway-request-id')!, before, cost('o3', prompt - CACHED, CACHED, OUTPUT), prompt);
    expect(content).not.toContain('flex');
  });

  it('flex on a channel that sets no flex ratio: the standard price (the upper bound, as before)', async () => {
    const before = await balance();
    const { data, response } = await openai.chat.completions.create({ model: 'gpt-5-mini', service_tier: 'flex', messages }).withResponse();
    expect(data.service_tier).toBe('flex');
    const prompt = countPromptTokens({ messages });
    await expectBilled(response.headers.get('x-gateway-request-id')!, before, cost('gpt-5-mini', prompt - CACHED, CACHED, OUTPUT), prompt);
  });

  it('flex asked of a provider that answers it served standard: the standard price, streamed or not', async () => {
    for (const stream of [false, true]) {
      const before = await balance();
      const res = await fetch(`${stack.relayUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${openai.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-5-nano', service_tier: 'flex', stream, messages }),
      });
      expect(res.status).toBe(200);
      const body = await res.text();
      expect(body).toContain('"service_tier":"default"');
      const prompt = countPromptTokens({ messages });
      await expectBilled(res.headers.get('x-gateway-request-id')!, before, cost('gpt-5-nano', prompt - CACHED, CACHED, OUTPUT), prompt);
    }
  });
});
