// What an OpenAI-format channel (type 1) may bill stays within what was reserved (docs/billing.md, the
// money bound), against the OpenAI-format mock (bench/mock-upstream-openai/), with the official SDKs:
//   - the output bound that was reserved always reaches the provider: injected when the client set
//     none (`max_completion_tokens` for OpenAI's reasoning models, which refuse `max_tokens`;
//     `max_tokens` for every other model, as most compatible providers know only that), a client's
//     `max_tokens` above its own `max_completion_tokens` lowered to it, a `max_completion_tokens`
//     alone sent as `max_tokens` to every model but the reasoning ones;
//   - a text prompt is reserved by its bytes, not a 200,000-token window its model may exceed;
//   - `n` choices are reserved n times (and refused where the channel cannot generate them);
//   - fields that make the provider bill what the relay cannot price (audio output, web search,
//     predicted outputs, priority processing) are refused with OpenAI's 400 before anything is sent.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countPromptTokens, startMockOpenAI, type MockOpenAI } from '../../bench/mock-upstream-openai/mock-openai.js';
import { relayMetrics } from '../metrics/relay-metrics.js';
import {
  billingSettled, consoleCall, createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

const MODEL = 'gpt-4o';
const REASONING_MODELS = ['o3-mini', 'gpt-5-mini'];
/** Not in the built-in price or window tables: the harness prices it at ratio 1. */
const COMPATIBLE_MODEL = 'deepseek-chat';
const OPENAI_KEY = 'sk-proj-mock-openai-bounds';
// gpt-4o at OpenAI's prices ($2.50 input, $10 output per million): model ratio 1.25, completion
// ratio 4 (core/pricing/ratios.ts's built-in table), group default 1. Written out, not taken from core/pricing.
const cost = (input: number, output: number) => Math.round((input + output * 4) * 1.25);
/** What the mock generates when nothing caps it: more than the default bound (4096). */
const LONG_ANSWER = 5000;

let stack: GatewayStack;
let openaiMock: MockOpenAI;
let account: TestAccount;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  stack = await startGatewayStack();
  openaiMock = await startMockOpenAI({ apiKey: OPENAI_KEY, outputTokens: LONG_ANSWER });
  await mockChannel(stack, [MODEL, ...REASONING_MODELS, COMPATIBLE_MODEL, 'gpt-4.1'], 'default', { base_url: openaiMock.url, key: OPENAI_KEY, type: 1 });
  await mockChannel(stack, ['claude-haiku-4-5']);
  account = await fundedAccount(stack, 100_000_000);
  const apiKey = (await createApiKey(stack, account)).key;
  openai = new OpenAI({ apiKey, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey, baseURL: stack.relayUrl, maxRetries: 0 });
});
afterAll(async () => {
  await openaiMock?.close();
  await stack?.close();
});

/** users.quota once every earlier request of the file is billed. */
async function balanceOf(id: number): Promise<number> {
  await billingSettled(stack);
  const [u] = await stack.sql`SELECT quota FROM users WHERE id = ${id}`;
  return Number(u!.quota);
}

function providerBody(): Record<string, unknown> {
  return openaiMock.requests[openaiMock.requests.length - 1]!.body as Record<string, unknown>;
}

describe('the reserved output bound reaches an OpenAI-format provider', () => {
  it('a request without max_tokens is sent with the bound it was reserved at, and billed within it', async () => {
    const over = relayMetrics.overReservations.value;
    const before = await balanceOf(account.id);
    const request = { model: MODEL, messages: [{ role: 'user' as const, content: 'Write me a very long essay' }] };
    const { data, response } = await openai.chat.completions.create(request).withResponse();
    const sent = providerBody();
    // The client's body, with the bound added (gpt-4o is no reasoning model: max_tokens).
    expect(sent).toEqual({ ...request, max_tokens: 4096 });
    expect(data.usage!.completion_tokens).toBe(4096);
    expect(data.choices[0]!.finish_reason).toBe('length');
    const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
    const prompt = countPromptTokens(sent);
    expect(row).toMatchObject({ prompt_tokens: prompt, completion_tokens: 4096, quota: cost(prompt, 4096) });
    expect(await balanceOf(account.id)).toBe(before - row.quota);
    expect(await stack.quota.accountBalance(account.id)).toBe(before - row.quota);
    expect(relayMetrics.overReservations.value).toBe(over);
  });

  it('streamed without a bound: the same, the usage chunk still asked for', async () => {
    const over = relayMetrics.overReservations.value;
    const { data: stream, response } = await openai.chat.completions.create({
      model: MODEL, stream: true, messages: [{ role: 'user', content: 'Write me a very long essay' }],
    }).withResponse();
    let deltas = 0;
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content) deltas++;
    expect(deltas).toBe(4096);
    expect(providerBody()).toMatchObject({ max_tokens: 4096, stream_options: { include_usage: true } });
    const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
    expect(row.completion_tokens).toBe(4096);
    expect(relayMetrics.overReservations.value).toBe(over);
  });

  it.each(REASONING_MODELS)('%s (a reasoning model, which refuses max_tokens) gets max_completion_tokens', async (model) => {
    await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'Think hard' }] });
    const sent = providerBody();
    expect(sent.max_completion_tokens).toBe(4096);
    expect(sent).not.toHaveProperty('max_tokens');
  });

  it('the client\'s own max_tokens passes as it is; a max_tokens above its max_completion_tokens is lowered to it', async () => {
    await openai.chat.completions.create({ model: MODEL, max_tokens: 30, messages: [{ role: 'user', content: 'Short please' }] });
    expect(providerBody()).toEqual({ model: MODEL, max_tokens: 30, messages: [{ role: 'user', content: 'Short please' }] });
    // Reserved at max_completion_tokens (30): a provider that knows only max_tokens must not get 100000.
    await openai.chat.completions.create({ model: MODEL, max_completion_tokens: 30, max_tokens: 100_000, messages: [{ role: 'user', content: 'Short please' }] });
    expect(providerBody()).toMatchObject({ max_completion_tokens: 30, max_tokens: 30 });
  });

  // It passed unchanged before: reserved at 30, it reached DeepSeek, older vLLM or Ollama, which read
  // only max_tokens, with no bound at all, and they generated up to their own default. It is moved,
  // not copied, into max_tokens: OpenAI refuses a request that sets both.
  it.each([COMPATIBLE_MODEL, MODEL])('a max_completion_tokens alone reaches %s (a max_tokens model) as max_tokens', async (model) => {
    const over = relayMetrics.overReservations.value;
    const { data, response } = await openai.chat.completions.create({ model, max_completion_tokens: 30, messages: [{ role: 'user', content: 'Short please' }] }).withResponse();
    expect(providerBody()).toEqual({ model, max_tokens: 30, messages: [{ role: 'user', content: 'Short please' }] });
    expect(data.usage!.completion_tokens).toBe(30);
    expect((await ledgerRow(stack, response.headers.get('x-gateway-request-id')!)).completion_tokens).toBe(30);
    expect(relayMetrics.overReservations.value).toBe(over);
  });

  it.each(REASONING_MODELS)('a max_completion_tokens alone reaches %s (a reasoning model) as it is', async (model) => {
    await openai.chat.completions.create({ model, max_completion_tokens: 30, messages: [{ role: 'user', content: 'Think' }] });
    expect(providerBody()).toEqual({ model, max_completion_tokens: 30, messages: [{ role: 'user', content: 'Think' }] });
  });

  // It passed unchanged before, and OpenAI answers 400 "Unsupported parameter: 'max_tokens'" to its
  // reasoning models: moved into the field they take, as on /v1/messages below.
  it.each(REASONING_MODELS)('a max_tokens alone reaches %s (a reasoning model) as max_completion_tokens, and is billed within it', async (model) => {
    const { data, response } = await openai.chat.completions.create({ model, max_tokens: 30, messages: [{ role: 'user', content: 'Think' }] }).withResponse();
    expect(providerBody()).toEqual({ model, max_completion_tokens: 30, messages: [{ role: 'user', content: 'Think' }] });
    expect(data.usage!.completion_tokens).toBe(30);
    expect((await ledgerRow(stack, response.headers.get('x-gateway-request-id')!)).completion_tokens).toBe(30);
    // Streamed too, the usage chunk still asked for.
    const stream = await openai.chat.completions.create({ model, max_tokens: 20, stream: true, messages: [{ role: 'user', content: 'Think' }] });
    for await (const chunk of stream) void chunk;
    expect(providerBody()).toEqual({ model, max_completion_tokens: 20, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Think' }] });
  });

  it('/v1/messages to a reasoning model: max_tokens becomes max_completion_tokens', async () => {
    const message = await anthropic.messages.create({ model: 'o3-mini', max_tokens: 25, messages: [{ role: 'user', content: 'Think' }] });
    const sent = providerBody();
    expect(sent.max_completion_tokens).toBe(25);
    expect(sent).not.toHaveProperty('max_tokens');
    expect(message.usage.output_tokens).toBe(25);
    // Any other model keeps max_tokens.
    await anthropic.messages.create({ model: MODEL, max_tokens: 25, messages: [{ role: 'user', content: 'Think' }] });
    expect(providerBody()).toMatchObject({ max_tokens: 25 });
    expect(providerBody()).not.toHaveProperty('max_completion_tokens');
  });
});

describe('the input bound of a text prompt', () => {
  // 1,000,000 bytes, which the mock counts as 250,000 prompt tokens: more than the 200,000 every
  // model's text was once capped at, though the bytes bound it and the model takes it.
  const LONG_PROMPT = 'x'.repeat(1_000_000);

  it.each([
    [COMPATIBLE_MODEL, 'whose window is not known: by its bytes alone'],
    ['gpt-4.1', 'whose window is 1,047,576 tokens: by its bytes, under that window'],
  ])('to %s, %s, and billed within the reservation', async (model) => {
    const over = relayMetrics.overReservations.value;
    const { response } = await openai.chat.completions.create({ model, max_tokens: 5, messages: [{ role: 'user', content: LONG_PROMPT }] }).withResponse();
    const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
    expect(row).toMatchObject({ prompt_tokens: 250_000, completion_tokens: 5 });
    expect(relayMetrics.overReservations.value).toBe(over);
  });
});

describe('the option ModelMaxOutputTokens', () => {
  it('sets, per model, the bound of a request that sets none: reserved, sent and billed within it, on both kinds of channel', async () => {
    const set = async (value: Record<string, number>) =>
      expect((await consoleCall(stack, 'PUT', '/api/option/', stack.adminToken, { key: 'ModelMaxOutputTokens', value: JSON.stringify(value) })).status).toBe(200);
    await set({ [MODEL]: 4500, 'claude-haiku-4-5': 1234 });
    try {
      const over = relayMetrics.overReservations.value;
      const request = { model: MODEL, messages: [{ role: 'user' as const, content: 'Write me a very long essay' }] };
      // The relay applies option changes on the invalidation message, a moment after the write.
      const deadline = Date.now() + 5_000;
      let answer = await openai.chat.completions.create(request).withResponse();
      while (providerBody().max_tokens !== 4500 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
        answer = await openai.chat.completions.create(request).withResponse();
      }
      expect(providerBody()).toEqual({ ...request, max_tokens: 4500 });
      expect(answer.data.usage!.completion_tokens).toBe(4500);
      const row = await ledgerRow(stack, answer.response.headers.get('x-gateway-request-id')!);
      expect(row).toMatchObject({ completion_tokens: 4500, quota: cost(countPromptTokens(providerBody()), 4500) });
      expect(relayMetrics.overReservations.value).toBe(over);
      // Converted for an Anthropic channel: its max_tokens.
      await openai.chat.completions.create({ model: 'claude-haiku-4-5', messages: [{ role: 'user', content: 'hi' }] });
      expect((stack.mock.requests[stack.mock.requests.length - 1]!.body as { max_tokens: number }).max_tokens).toBe(1234);
      // A model the option does not name: the default.
      await openai.chat.completions.create({ model: 'o3-mini', messages: [{ role: 'user', content: 'hi' }] });
      expect(providerBody().max_completion_tokens).toBe(4096);
    } finally {
      await set({});
    }
  });
});

describe('n choices', () => {
  it('are generated by an OpenAI-format provider and billed within a reservation of n times the output', async () => {
    const over = relayMetrics.overReservations.value;
    const before = await balanceOf(account.id);
    const { data, response } = await openai.chat.completions.create({
      model: MODEL, n: 3, max_tokens: 200, messages: [{ role: 'user', content: 'Three takes please' }],
    }).withResponse();
    expect(data.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(data.usage!.completion_tokens).toBe(600);
    const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
    const prompt = countPromptTokens(providerBody());
    expect(row).toMatchObject({ prompt_tokens: prompt, completion_tokens: 600, quota: cost(prompt, 600) });
    expect(await balanceOf(account.id)).toBe(before - row.quota);
    expect(relayMetrics.overReservations.value).toBe(over);
  });

  it('streamed: every choice\'s deltas delivered, the sum billed', async () => {
    const over = relayMetrics.overReservations.value;
    const { data: stream, response } = await openai.chat.completions.create({
      model: MODEL, n: 2, max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'Two takes please' }],
    }).withResponse();
    const deltas = [0, 0];
    for await (const chunk of stream) for (const c of chunk.choices) if (c.delta.content) deltas[c.index]!++;
    expect(deltas).toEqual([50, 50]);
    const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
    expect(row.completion_tokens).toBe(100);
    expect(relayMetrics.overReservations.value).toBe(over);
  });

  it('the reservation covers all n: a balance for one choice but not three is refused (429 insufficient_quota), nothing billed', async () => {
    // The reservation is (input bound + max_tokens × n × 4) × 1.25; the input bound of this body is
    // under 200: at most 15,250 for three choices, 5,250 for one.
    const poor = await fundedAccount(stack, 8_000);
    const client = new OpenAI({ apiKey: (await createApiKey(stack, poor)).key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
    const request = { model: MODEL, max_tokens: 1000, messages: [{ role: 'user' as const, content: 'Hi' }] };
    const refused = await client.chat.completions.create({ ...request, n: 3 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.APIError);
    expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(429);
    expect((refused as InstanceType<typeof OpenAI.APIError>).code).toBe('insufficient_quota');
    expect(await balanceOf(poor.id)).toBe(8_000);
    const { response } = await client.chat.completions.create(request).withResponse();
    const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
    expect(await balanceOf(poor.id)).toBe(8_000 - row.quota);
  });

  it('are refused with OpenAI\'s 400 on an Anthropic channel, which generates one, and nothing is billed', async () => {
    const before = await balanceOf(account.id);
    const err = await openai.chat.completions.create({ model: 'claude-haiku-4-5', n: 2, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).message).toMatch(/^400 n:/);
    // Refused once routed (after its reservation, which is given back whole).
    expect(await balanceOf(account.id)).toBe(before);
    expect(await stack.quota.accountBalance(account.id)).toBe(before);
  });
});

describe('fields whose cost the relay cannot price are refused, on every channel', () => {
  it.each([
    ['audio output', { modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' } }, /audio/],
    ['modalities with audio', { modalities: ['audio'] }, /modalities/],
    // Before: a string passed to the provider (only an array was checked).
    ['modalities as a string', { modalities: 'audio' }, /modalities/],
    ['modalities as an object', { modalities: { audio: true } }, /modalities/],
    ['web search', { web_search_options: {} }, /web_search_options/],
    ['predicted outputs', { prediction: { type: 'content', content: 'a long prediction' } }, /prediction/],
    ['priority processing', { service_tier: 'priority' }, /service_tier/],
    // Providers' own paid extras of OpenAI-format APIs, passed through to them before: xAI's Live
    // Search (a fee per source), OpenRouter's plugins (web results, PDF parsing: a fee each) and model
    // fallbacks (another model answers, at its price), DashScope's (Qwen's) web search.
    ['xAI Live Search', { search_parameters: { mode: 'on' } }, /search_parameters/],
    ['OpenRouter web plugin', { plugins: [{ id: 'web' }] }, /plugins/],
    ['OpenRouter model fallbacks', { models: ['cheap/model', 'dear/model'] }, /models/],
    ['DashScope web search', { enable_search: true }, /enable_search/],
  ])('%s: 400 in OpenAI\'s error JSON, the provider never called', async (_name, extra, message) => {
    const calls = openaiMock.requests.length;
    const err = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], ...extra } as OpenAI.ChatCompletionCreateParamsNonStreaming).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).code).toBe('invalid_request');
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).message).toMatch(message);
    expect(openaiMock.requests.length).toBe(calls);
  });

  it('what the provider prices as the relay does passes: text modalities, flex and default tiers, a JSON schema', async () => {
    const extra = { modalities: ['text'], service_tier: 'flex', response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' } } }, enable_search: false, plugins: [] };
    await openai.chat.completions.create({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }], ...extra } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(providerBody()).toMatchObject(extra);
  });
});
