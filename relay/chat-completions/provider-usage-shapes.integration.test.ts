// The usage OpenAI-compatible providers state, where each puts it, billed as stated: a prompt of
// 1000 tokens with 600 cache hits and 50 output tokens is 400 + 600 × 0.1 (the cache-read ratio) +
// 50 × 5 = 710 quota however the provider says so, through the openai SDK (/v1/chat/completions,
// same format) and the Anthropic SDK (/v1/messages, converted), streamed and not.
//
// Before (review oaicompat): DeepSeek's prompt_cache_hit_tokens and Moonshot's top-level
// cached_tokens were billed as full-price input (1250 for 710), and Moonshot's streamed usage, nested
// in the finish chunk's choices[0].usage, was not read at all: the relay counted the prompt itself
// (245 tokens of 1000 stated; 495 quota).
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../../tests/harness/gateway-stack.js';
import { balanceOf, billOf, CHAT_DONE, chatChunk, LONG_PROMPT, startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

const PROMPT = 1000;
const CACHED = 600;
const OUTPUT = 50;
const EXPECTED = PROMPT - CACHED + CACHED * 0.1 + OUTPUT * 5;
const counts = { prompt_tokens: PROMPT, completion_tokens: OUTPUT, total_tokens: PROMPT + OUTPUT };

const ROLE = chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
const TEXT = chatChunk({ choices: [{ index: 0, delta: { content: 'tok ' }, finish_reason: null }] }).repeat(OUTPUT);
const finish = (extra: Record<string, unknown> = {}, top: Record<string, unknown> = {}): string =>
  chatChunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop', ...extra }], ...top });
const usageChunk = (usage: Record<string, unknown>): string => chatChunk({ choices: [], usage });
const answer = (usage: Record<string, unknown>): string => JSON.stringify({
  id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', content: 'tok '.repeat(OUTPUT).trim() }, finish_reason: 'stop' }], usage,
});

const DEEPSEEK = { ...counts, prompt_cache_hit_tokens: CACHED, prompt_cache_miss_tokens: PROMPT - CACHED };
const MOONSHOT = { ...counts, cached_tokens: CACHED };
const DASHSCOPE_WRITES = { ...counts, prompt_tokens_details: { cached_tokens: 0, cache_creation_input_tokens: 500, cache_creation: { ephemeral_5m_input_tokens: 500 }, cache_type: 'ephemeral' } };
/** DashScope's explicit cache: 500 of the 1000 written (its 1.25×), at a breakpoint the request marked. */
const DASHSCOPE = { stream: ROLE + TEXT + finish() + usageChunk(DASHSCOPE_WRITES) + CHAT_DONE, json: answer(DASHSCOPE_WRITES) };
/** OpenAI from GPT-5.6 on: 800 of the 1000 written without any breakpoint, billed by it at 1.25×. */
const OPENAI_WRITES = { ...counts, prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 800 } };
const OPENAI_WRITER = { stream: ROLE + TEXT + finish() + usageChunk(OPENAI_WRITES) + CHAT_DONE, json: answer(OPENAI_WRITES) };
/** Each provider's stream and JSON answer. */
const SHAPES: Record<string, { stream: string; json: string }> = {
  // The baseline every other is held to.
  'pus-openai': { stream: ROLE + TEXT + finish() + usageChunk({ ...counts, prompt_tokens_details: { cached_tokens: CACHED } }) + CHAT_DONE, json: answer({ ...counts, prompt_tokens_details: { cached_tokens: CACHED } }) },
  // DeepSeek: the usage rides on the finish chunk; its hits in fields of its own.
  'pus-deepseek': { stream: ROLE + TEXT + finish({}, { usage: DEEPSEEK }) + CHAT_DONE, json: answer(DEEPSEEK) },
  // Moonshot (Kimi): the stream's usage in the finish chunk's choice, restated at the top level after it.
  'pus-moonshot': { stream: ROLE + TEXT + finish({ usage: MOONSHOT }) + usageChunk(MOONSHOT) + CHAT_DONE, json: answer(MOONSHOT) },
  // Moonshot with the nested usage alone.
  'pus-moonshot-nested': { stream: ROLE + TEXT + finish({ usage: MOONSHOT }) + CHAT_DONE, json: answer(MOONSHOT) },
};

let stack: GatewayStack;
let provider: ScriptedProvider;
let account: TestAccount;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  provider = await startScriptedProvider(({ model, body }, res) => {
    const shape = model === 'pus-dashscope' ? DASHSCOPE : model === 'gpt-5.6' ? OPENAI_WRITER : SHAPES[model];
    if (!shape) throw new Error(`unscripted model ${model}`);
    const stream = body.stream === true;
    res.writeHead(200, { 'content-type': stream ? 'text/event-stream' : 'application/json' });
    res.end(stream ? shape.stream : shape.json);
  });
  stack = await startGatewayStack();
  await mockChannel(stack, [...Object.keys(SHAPES), 'pus-dashscope', 'gpt-5.6'], 'default', { base_url: provider.url, type: 1, key: 'sk-x' });
  account = await fundedAccount(stack, 100_000_000);
  const key = (await createApiKey(stack, account)).key;
  openai = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
});
afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

const messages = [{ role: 'user' as const, content: LONG_PROMPT }];

describe.each(Object.keys(SHAPES))('%s', (model) => {
  it.each([false, true])('openai SDK, stream %s: billed 710, the cache hits as cache reads', async (stream) => {
    const before = await balanceOf(stack, account.id);
    let requestId: string;
    if (stream) {
      const { data, response } = await openai.chat.completions.create({ model, max_tokens: 100, stream: true, stream_options: { include_usage: true }, messages }).withResponse();
      let text = '';
      for await (const c of data) text += c.choices[0]?.delta.content ?? '';
      expect(text.trim()).toBe('tok '.repeat(OUTPUT).trim());
      requestId = response.headers.get('x-gateway-request-id')!;
    } else {
      const { response } = await openai.chat.completions.create({ model, max_tokens: 100, messages }).withResponse();
      requestId = response.headers.get('x-gateway-request-id')!;
    }
    const row = await billOf(stack, account.id, requestId, before);
    expect({ quota: row.quota, prompt: row.prompt_tokens, completion: row.completion_tokens }).toEqual({ quota: EXPECTED, prompt: PROMPT, completion: OUTPUT });
  });

  it.each([false, true])('Anthropic SDK, stream %s: billed 710 and told the cache reads billed', async (stream) => {
    const before = await balanceOf(stack, account.id);
    let told: Anthropic.Usage;
    let requestId: string;
    if (stream) {
      const s = anthropic.messages.stream({ model, max_tokens: 100, messages });
      told = (await s.finalMessage()).usage;
      requestId = s.response!.headers.get('x-gateway-request-id')!;
    } else {
      const { data, response } = await anthropic.messages.create({ model, max_tokens: 100, messages }).withResponse();
      told = data.usage;
      requestId = response.headers.get('x-gateway-request-id')!;
    }
    const row = await billOf(stack, account.id, requestId, before);
    expect(row.quota).toBe(EXPECTED);
    expect({ input: told.input_tokens, cached: told.cache_read_input_tokens, output: told.output_tokens }).toEqual({ input: PROMPT - CACHED, cached: CACHED, output: OUTPUT });
  });
});

// Before: a Chat Completions request's breakpoints (content parts' cache_control, passed to the
// provider as they are) were not read, so DashScope's cache writes were billed as plain input: 1250
// for 1375. Without a breakpoint the writes stay input, as on Anthropic's side.
describe('DashScope\'s explicit cache: writes billed as writes where the request marks a breakpoint', () => {
  const WRITES_EXPECTED = 500 + 500 * 1.25 + OUTPUT * 5;
  const marked = [{ role: 'user' as const, content: [{ type: 'text' as const, text: LONG_PROMPT, cache_control: { type: 'ephemeral' } }] }];

  it.each([false, true])('openai SDK with a breakpoint, stream %s: 1375', async (stream) => {
    const before = await balanceOf(stack, account.id);
    const params = { model: 'pus-dashscope', max_tokens: 100, messages: marked } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming;
    let requestId: string;
    if (stream) {
      const { data, response } = await openai.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } } as OpenAI.ChatCompletionCreateParamsStreaming).withResponse();
      for await (const _ of data) { /* read to the end */ }
      requestId = response.headers.get('x-gateway-request-id')!;
    } else {
      requestId = (await openai.chat.completions.create(params).withResponse()).response.headers.get('x-gateway-request-id')!;
    }
    expect((provider.seen.get('pus-dashscope')!.body.messages as Array<{ content: Array<{ cache_control?: unknown }> }>)[0]!.content[0]!.cache_control).toEqual({ type: 'ephemeral' });
    const row = await billOf(stack, account.id, requestId, before);
    expect(row.quota).toBe(WRITES_EXPECTED);
  });

  it('openai SDK without a breakpoint: the writes billed as input (1250)', async () => {
    const before = await balanceOf(stack, account.id);
    const { response } = await openai.chat.completions.create({ model: 'pus-dashscope', max_tokens: 100, messages }).withResponse();
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row.quota).toBe(PROMPT + OUTPUT * 5);
  });

  it('Anthropic SDK with a breakpoint, streamed: 1375, and told the writes', async () => {
    const before = await balanceOf(stack, account.id);
    const s = anthropic.messages.stream({ model: 'pus-dashscope', max_tokens: 100, messages: [{ role: 'user', content: [{ type: 'text', text: LONG_PROMPT, cache_control: { type: 'ephemeral' } }] }] });
    const told = (await s.finalMessage()).usage;
    const row = await billOf(stack, account.id, s.response!.headers.get('x-gateway-request-id')!, before);
    expect(row.quota).toBe(WRITES_EXPECTED);
    expect({ input: told.input_tokens, writes: told.cache_creation_input_tokens }).toEqual({ input: 500, writes: 500 });
  });
});

// OpenAI from GPT-5.6 on writes its cache without a breakpoint and bills the writes at 1.25× input
// (cache_write_tokens). Before, with no breakpoint in the request, they were billed as plain input:
// 1250 for 1450.
describe('OpenAI\'s unmarked cache writes (GPT-5.6 and later): billed as writes', () => {
  const WRITES_EXPECTED = 200 + 800 * 1.25 + OUTPUT * 5;
  it.each([false, true])('openai SDK, stream %s: 1450', async (stream) => {
    const before = await balanceOf(stack, account.id);
    let requestId: string;
    if (stream) {
      const { data, response } = await openai.chat.completions.create({ model: 'gpt-5.6', max_completion_tokens: 100, stream: true, stream_options: { include_usage: true }, messages }).withResponse();
      for await (const _ of data) { /* read to the end */ }
      requestId = response.headers.get('x-gateway-request-id')!;
    } else {
      requestId = (await openai.chat.completions.create({ model: 'gpt-5.6', max_completion_tokens: 100, messages }).withResponse()).response.headers.get('x-gateway-request-id')!;
    }
    const row = await billOf(stack, account.id, requestId, before);
    expect(row.quota).toBe(WRITES_EXPECTED);
  });

  it('Anthropic SDK (converted): 1450, told the writes', async () => {
    const before = await balanceOf(stack, account.id);
    const { data, response } = await anthropic.messages.create({ model: 'gpt-5.6', max_tokens: 100, messages }).withResponse();
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row.quota).toBe(WRITES_EXPECTED);
    expect(data.usage.cache_creation_input_tokens).toBe(800);
  });
});
