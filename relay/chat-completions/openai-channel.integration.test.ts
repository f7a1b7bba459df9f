// OpenAI-format channels (channel type 1) behind the relay, against the OpenAI-format mock
// (bench/mock-upstream-openai/), with the official SDKs unchanged (base URL only):
//   - /v1/chat/completions passed through without conversion (what the mock received is what the
//     client sent, but for stream_options.include_usage, forced on; the extra usage chunk is left out
//     for a client that did not ask), metered from the provider's `usage` (cached tokens as cache
//     reads), a cut stream billed for its delivered tokens;
//   - /v1/messages converted to Chat Completions and back.
// Every bill exact in every book: ledger, users.quota, the Redis mirror, the ClickHouse log row.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { ChatCompletionStream } from 'openai/lib/ChatCompletionStream';
import { Tiktoken } from 'js-tiktoken/lite';
import cl100k from 'js-tiktoken/ranks/cl100k_base';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countPromptTokens, startMockOpenAI, type MockOpenAI } from '../../bench/mock-upstream-openai/mock-openai.js';
import {
  settledAccountQuota,
  billingSettled, createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

const MODEL = 'gpt-4o';
const OPENAI_KEY = 'sk-proj-mock-openai-channel-credential';
// gpt-4o at OpenAI's prices ($2.50 input, $1.25 cached, $10 output per million): model ratio 1.25,
// completion ratio 4, cache reads 0.5 (core/pricing/ratios.ts's built-in table), group default 1.
// Written out, not taken from core/pricing.
const cost = (input: number, output: number, cacheRead = 0) => Math.round((input + cacheRead * 0.5 + output * 4) * 1.25);
const FUNDS = 10_000_000;
const OUTPUT = 9;
const CACHED = 4;
const IMAGE_TOKENS = 700;

let stack: GatewayStack;
let openaiMock: MockOpenAI;
let account: TestAccount;
let apiKey: string;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  stack = await startGatewayStack();
  openaiMock = await startMockOpenAI({ apiKey: OPENAI_KEY, outputTokens: OUTPUT, cachedTokens: CACHED, imageInputTokens: IMAGE_TOKENS });
  await mockChannel(stack, [MODEL, 'gpt-4-turbo', 'gpt-x-error429', 'gpt-x-error400'], 'default', { base_url: openaiMock.url, key: OPENAI_KEY, type: 1 });
  account = await fundedAccount(stack, FUNDS);
  apiKey = (await createApiKey(stack, account)).key;
  openai = new OpenAI({ apiKey, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey, baseURL: stack.relayUrl, maxRetries: 0 });
});
afterAll(async () => {
  await openaiMock?.close();
  await stack?.close();
});

const balance = (): Promise<number> => settledAccountQuota(stack, account.id);

function providerRequest(): { body: Record<string, unknown>; headers: Record<string, string>; requestId: string } {
  const r = openaiMock.requests[openaiMock.requests.length - 1]!;
  return { body: r.body as Record<string, unknown>, headers: r.headers, requestId: r.requestId };
}

/** Every book agrees: ledger (tokens, quota, protocol), log row, account balance, Redis mirror. */
async function expectBilled(
  requestId: string, before: number, u: { input: number; cached: number; output: number }, protocol: 'openai' | 'anthropic',
  quota = cost(u.input, u.output, u.cached),
): Promise<void> {
  const row = await ledgerRow(stack, requestId);
  expect(row).toMatchObject({ prompt_tokens: u.input + u.cached, completion_tokens: u.output, quota });
  const [ledger] = await stack.sql`SELECT protocol, cache_read_tokens FROM ledger WHERE request_id = ${requestId}`;
  expect(ledger).toMatchObject({ protocol, cache_read_tokens: u.cached });
  const rs = await stack.ch.query({
    query: 'SELECT quota, protocol, cache_read_tokens FROM logs FINAL WHERE request_id = {r:String}', query_params: { r: requestId }, format: 'JSONEachRow',
  });
  const logs = await rs.json<{ quota: string | number; protocol: string; cache_read_tokens: number }>();
  expect(logs.map((l) => ({ ...l, quota: Number(l.quota) }))).toEqual([{ quota, protocol, cache_read_tokens: u.cached }]);
  expect(await balance()).toBe(before - quota);
  expect(await stack.quota.accountBalance(account.id)).toBe(before - quota);
}

describe('/v1/chat/completions to an OpenAI-format channel', () => {
  it('non-streaming: passed through unconverted, with the channel credential; billed from its usage', async () => {
    const before = await balance();
    const request = {
      model: MODEL, max_tokens: 50, temperature: 1.7, seed: 7, logit_bias: { '50256': -100 },
      messages: [{ role: 'system' as const, content: 'You are a terse assistant.' }, { role: 'user' as const, content: 'Say hello to everyone here' }],
    };
    const { data, response } = await openai.chat.completions.create(request).withResponse();
    const sent = providerRequest();
    // Byte for byte what the client sent: OpenAI-only fields (seed, logit_bias, temperature above 1) kept.
    expect(sent.body).toEqual(request);
    expect(sent.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(response.headers.get('x-request-id')).toBe(sent.requestId);
    expect(data).toMatchObject({ object: 'chat.completion', model: MODEL, system_fingerprint: 'fp_mock' });
    expect(data.choices[0]!.message.content).toBe('tok '.repeat(OUTPUT));
    const prompt = countPromptTokens(request);
    expect(data.usage).toMatchObject({ prompt_tokens: prompt, completion_tokens: OUTPUT, prompt_tokens_details: { cached_tokens: CACHED } });
    await expectBilled(response.headers.get('x-gateway-request-id')!, before, { input: prompt - CACHED, cached: CACHED, output: OUTPUT }, 'openai');
    // The log row's upstream_request_id is the provider's x-request-id.
    const rs = await stack.ch.query({
      query: 'SELECT upstream_request_id FROM logs FINAL WHERE request_id = {r:String}', query_params: { r: response.headers.get('x-gateway-request-id')! }, format: 'JSONEachRow',
    });
    expect(await rs.json()).toEqual([{ upstream_request_id: sent.requestId }]);
  });

  it('streamed with include_usage: the provider\'s chunks as they are, usage chunk included', async () => {
    const before = await balance();
    const { data: stream, response } = await openai.chat.completions.create({
      model: MODEL, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Tell me a long story please' }],
    }).withResponse();
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      for (const c of chunk.choices) text += c.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe('tok '.repeat(OUTPUT));
    const prompt = countPromptTokens(providerRequest().body);
    expect(usage).toMatchObject({ prompt_tokens: prompt, completion_tokens: OUTPUT });
    await expectBilled(response.headers.get('x-gateway-request-id')!, before, { input: prompt - CACHED, cached: CACHED, output: OUTPUT }, 'openai');
  });

  it('streamed without include_usage: the relay asks the provider for it, the client never sees the usage chunk', async () => {
    const before = await balance();
    const res = await fetch(`${stack.relayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'Tell me a long story please' }] }),
    });
    const body = await res.text();
    expect(providerRequest().body.stream_options).toEqual({ include_usage: true });
    const events = body.split('\n\n').filter((e) => e !== '');
    expect(events[events.length - 1]).toBe('data: [DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)) as { choices: unknown[] });
    expect(chunks.length).toBe(OUTPUT + 2);
    expect(chunks.every((c) => c.choices.length === 1)).toBe(true);
    const prompt = countPromptTokens(providerRequest().body);
    await expectBilled(res.headers.get('x-gateway-request-id')!, before, { input: prompt - CACHED, cached: CACHED, output: OUTPUT }, 'openai');
  });

  it('a tool call round trip', async () => {
    const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }];
    const before = await balance();
    const first = await openai.chat.completions.create({ model: MODEL, tools, tool_choice: 'required', messages: [{ role: 'user', content: 'Look up the weather in Paris' }] }).withResponse();
    const call = first.data.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(first.data.choices[0]!.finish_reason).toBe('tool_calls');
    expect(JSON.parse(call.function.arguments)).toEqual({ q: 'tok' });
    const prompt1 = countPromptTokens(providerRequest().body);
    await expectBilled(first.response.headers.get('x-gateway-request-id')!, before, { input: prompt1 - CACHED, cached: CACHED, output: OUTPUT }, 'openai');

    const middle = await balance();
    const { data: stream, response } = await openai.chat.completions.create({
      model: MODEL, tools, stream: true, stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'Look up the weather in Paris' }, first.data.choices[0]!.message, { role: 'tool', tool_call_id: call.id, content: 'Sunny and warm today' }],
    }).withResponse();
    const final = await ChatCompletionStream.fromReadableStream(stream.toReadableStream()).finalChatCompletion();
    expect(final.choices[0]!.message.content).toBe('tok '.repeat(OUTPUT));
    const prompt2 = countPromptTokens(providerRequest().body);
    await expectBilled(response.headers.get('x-gateway-request-id')!, middle, { input: prompt2 - CACHED, cached: CACHED, output: OUTPUT }, 'openai');
  });

  it('what only an Anthropic channel refuses passes: allowed_tools as tool_choice, a user message with empty content; billed exactly', async () => {
    const tools: OpenAI.ChatCompletionTool[] = [
      { type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } } },
      { type: 'function', function: { name: 'count', parameters: { type: 'object', properties: { n: { type: 'number' } } } } },
    ];
    const before = await balance();
    const request = {
      model: MODEL, tools, messages: [{ role: 'user' as const, content: 'Count them' }],
      tool_choice: { type: 'allowed_tools' as const, allowed_tools: { mode: 'required' as const, tools: [{ type: 'function' as const, function: { name: 'count' } }] } },
    };
    const first = await openai.chat.completions.create(request).withResponse();
    // Unconverted: the provider sees the choice as the client wrote it, with every tool (and the
    // output bound the request was reserved at, which it did not set).
    expect(providerRequest().body).toEqual({ ...request, max_tokens: 4096 });
    const call = first.data.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function).toEqual({ name: 'count', arguments: '{"n":1}' });
    // A short prompt: the mock's cached tokens are at most the prompt.
    const prompt1 = countPromptTokens(providerRequest().body);
    const cached1 = Math.min(CACHED, prompt1);
    await expectBilled(first.response.headers.get('x-gateway-request-id')!, before, { input: prompt1 - cached1, cached: cached1, output: OUTPUT }, 'openai');

    // OpenAI answers a conversation whose only message is empty; an Anthropic channel cannot.
    const middle = await balance();
    const empty = await openai.chat.completions.create({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: '' }] }).withResponse();
    expect(providerRequest().body).toEqual({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: '' }] });
    const prompt2 = countPromptTokens(providerRequest().body);
    const output2 = empty.data.usage!.completion_tokens;
    expect(output2).toBe(5);
    await expectBilled(empty.response.headers.get('x-gateway-request-id')!, middle, { input: prompt2 - Math.min(CACHED, prompt2), cached: Math.min(CACHED, prompt2), output: output2 }, 'openai');
  });

  it('image input passes as image_url; its tokens are billed', async () => {
    const before = await balance();
    const { data, response } = await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What do you see in this?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] }],
    }).withResponse();
    const prompt = countPromptTokens(providerRequest().body, IMAGE_TOKENS);
    expect(data.usage!.prompt_tokens).toBe(prompt);
    expect(prompt).toBeGreaterThan(IMAGE_TOKENS);
    await expectBilled(response.headers.get('x-gateway-request-id')!, before, { input: prompt - CACHED, cached: CACHED, output: OUTPUT }, 'openai');
  });

  it('a client leaving mid-stream pays the tokens delivered and its prompt, counted here', async () => {
    openaiMock.setOptions({ tokenDelayMs: 30, outputTokens: 300 });
    try {
      const before = await balance();
      const K = 7;
      const controller = new AbortController();
      const { data: stream, response } = await openai.chat.completions.create({
        model: MODEL, stream: true, messages: [{ role: 'user', content: 'Tell me a very long story about the sea' }],
      }, { signal: controller.signal }).withResponse();
      let deltas = 0;
      try {
        for await (const chunk of stream) {
          if (chunk.choices[0]?.delta.content) deltas++;
          if (deltas === K) controller.abort();
        }
      } catch {
        // aborted
      }
      expect(deltas).toBe(K);
      const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
      // The provider never sent its usage: the tokens delivered, and the prompt counted (o200k, gpt-4o's).
      // Delivered is what the relay wrote before the abort reached it: the K read, and on a loaded
      // machine the next one or two (a token every 30 ms; a CI run billed 8 for 7 read).
      expect(row.completion_tokens).toBeGreaterThanOrEqual(K);
      expect(row.completion_tokens).toBeLessThanOrEqual(K + 2);
      expect(row.prompt_tokens).toBeGreaterThan(0);
      expect(row.quota).toBe(cost(row.prompt_tokens, row.completion_tokens));
      expect(await balance()).toBe(before - row.quota);
    } finally {
      openaiMock.setOptions({ tokenDelayMs: 0, outputTokens: OUTPUT });
    }
  });

  it('a cut stream\'s prompt is counted in its model\'s encoding: o200k_base for gpt-4o, cl100k_base for gpt-4-turbo', async () => {
    openaiMock.setOptions({ tokenDelayMs: 30, outputTokens: 300 });
    // Text the two encodings count apart (o200k packs Japanese and Russian tighter).
    const text = '海の長い物語を話してください。波と風と船乗りたちの話です。Расскажи длинную историю о море. '.repeat(8);
    const cutPrompt = async (model: string) => {
      const controller = new AbortController();
      const { data: stream, response } = await openai.chat.completions.create({
        model, stream: true, messages: [{ role: 'user', content: text }],
      }, { signal: controller.signal }).withResponse();
      let deltas = 0;
      try {
        for await (const chunk of stream) {
          if (chunk.choices[0]?.delta.content) deltas++;
          if (deltas === 3) controller.abort();
        }
      } catch {
        // aborted
      }
      const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
      // The 3 read, and what was written before the abort reached the relay (the test above).
      expect(row.completion_tokens).toBeGreaterThanOrEqual(3);
      expect(row.completion_tokens).toBeLessThanOrEqual(5);
      return row.prompt_tokens;
    };
    try {
      const [newer, older] = [await cutPrompt(MODEL), await cutPrompt('gpt-4-turbo')];
      // The framing counted around the text is the same for both: the difference is the text's.
      const count = (ranks: typeof cl100k, s: string) => new Tiktoken(ranks).encode(s, [], []).length;
      const textDifference = count(o200k, text) - count(cl100k, text);
      expect(textDifference).toBeLessThan(-50);
      expect(newer - older).toBe(textDifference);
    } finally {
      openaiMock.setOptions({ tokenDelayMs: 0, outputTokens: OUTPUT });
    }
  });

  it('a provider that dies mid-stream: the client gets an error, the tokens delivered are billed', async () => {
    openaiMock.setOptions({ failMidStreamAfterTokens: 5, tokenDelayMs: 5 });
    try {
      const { data: stream, response } = await openai.chat.completions.create({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'Tell me a story' }] }).withResponse();
      let text = '';
      const err = await (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      })().then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect(text).toBe('tok '.repeat(5));
      const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
      expect(row.completion_tokens).toBe(5);
      expect(row.quota).toBe(cost(row.prompt_tokens, 5));
    } finally {
      openaiMock.setOptions({ failMidStreamAfterTokens: undefined, tokenDelayMs: 0 });
    }
  });

  it('a channel\'s model mapping renames the model; everything else of the body stays the client\'s', async () => {
    await mockChannel(stack, ['gpt-alias'], 'default', { base_url: openaiMock.url, key: OPENAI_KEY, type: 1, model_mapping: { 'gpt-alias': MODEL } });
    const before = await balance();
    const res = await fetch(`${stack.relayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-alias', stream: true, stream_options: { include_usage: false }, seed: 3, messages: [{ role: 'user', content: 'Tell me something' }] }),
    });
    await res.text();
    // max_tokens: the bound it was reserved at, as the client set none (openai-channel-bounds.integration.test.ts).
    expect(providerRequest().body).toEqual({ model: MODEL, stream: true, stream_options: { include_usage: true }, seed: 3, max_tokens: 4096, messages: [{ role: 'user', content: 'Tell me something' }] });
    const prompt = countPromptTokens(providerRequest().body);
    // Priced under the name the client asked for, as on the Anthropic path: gpt-alias at the ratio
    // mockChannel gave it (1; completion 5 and cache reads 0.1 by default), not gpt-4o's.
    const requestId = res.headers.get('x-gateway-request-id')!;
    const aliasCost = Math.round(prompt - CACHED + CACHED * 0.1 + OUTPUT * 5);
    expect(aliasCost).not.toBe(cost(prompt - CACHED, OUTPUT, CACHED));
    await expectBilled(requestId, before, { input: prompt - CACHED, cached: CACHED, output: OUTPUT }, 'openai', aliasCost);
    const [row] = await stack.sql`SELECT model_name FROM ledger WHERE request_id = ${requestId}`;
    expect(row!.model_name).toBe('gpt-alias');
  });

  it('provider errors pass in OpenAI\'s JSON, status and request id; a rate limit\'s or a failure\'s message, about the operator\'s account, does not', async () => {
    const limited = await openai.chat.completions.create({ model: 'gpt-x-error429', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
    expect((limited as InstanceType<typeof OpenAI.RateLimitError>).code).toBe('rate_limit_exceeded');
    // The provider names the operator's organization: the client is told it is rate limited, not whose account.
    expect((limited as InstanceType<typeof OpenAI.RateLimitError>).message).not.toMatch(/org-/);
    expect((limited as InstanceType<typeof OpenAI.RateLimitError>).message).toMatch(/rate limit/i);
    expect((limited as InstanceType<typeof OpenAI.RateLimitError>).requestID).toMatch(/^req_[0-9a-f]{32}$/);
    const bad = await openai.chat.completions.create({ model: 'gpt-x-error400', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
  });
});

describe('/v1/messages to an OpenAI-format channel', () => {
  it('non-streaming: converted to Chat Completions and back; billed exactly', async () => {
    const before = await balance();
    const { data, response } = await anthropic.messages.create({
      model: MODEL, max_tokens: 40, system: 'You are terse.', stop_sequences: ['END'],
      messages: [{ role: 'user', content: 'Say hello to the world' }, { role: 'assistant', content: 'Hello.' }, { role: 'user', content: [{ type: 'text', text: 'Again' }] }],
    }).withResponse();
    expect(providerRequest().body).toEqual({
      model: MODEL, max_tokens: 40, stop: ['END'],
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Say hello to the world' },
        { role: 'assistant', content: 'Hello.' },
        { role: 'user', content: 'Again' },
      ],
    });
    expect(data.type).toBe('message');
    expect(data.content).toEqual([{ type: 'text', text: 'tok '.repeat(OUTPUT) }]);
    expect(data.stop_reason).toBe('end_turn');
    const prompt = countPromptTokens(providerRequest().body);
    expect(data.usage).toMatchObject({ input_tokens: prompt - CACHED, cache_read_input_tokens: CACHED, output_tokens: OUTPUT });
    await expectBilled(response.headers.get('x-gateway-request-id')!, before, { input: prompt - CACHED, cached: CACHED, output: OUTPUT }, 'anthropic');
  });

  it('streamed: Anthropic\'s events from the chunks; the SDK assembles the message and its usage', async () => {
    const before = await balance();
    const stream = anthropic.messages.stream({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'Count for me please' }] });
    const message = await stream.finalMessage();
    const sent = providerRequest().body;
    expect(sent).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(message.content).toEqual([{ type: 'text', text: 'tok '.repeat(5) }]);
    expect(message.stop_reason).toBe('max_tokens');
    const prompt = countPromptTokens(sent);
    expect(message.usage).toMatchObject({ input_tokens: prompt - CACHED, output_tokens: 5 });
    const { response } = await stream.withResponse();
    await expectBilled(response.headers.get('x-gateway-request-id')!, before, { input: prompt - CACHED, cached: CACHED, output: 5 }, 'anthropic');
  });

  it('a tool use round trip', async () => {
    const tools: Anthropic.Tool[] = [{ name: 'lookup', description: 'Look it up', input_schema: { type: 'object', properties: { q: { type: 'string' }, n: { type: 'number' } } } }];
    const first = await anthropic.messages.create({ model: MODEL, max_tokens: 50, tools, tool_choice: { type: 'any' }, messages: [{ role: 'user', content: 'Look up Paris' }] });
    expect(providerRequest().body).toMatchObject({ tool_choice: 'required', tools: [{ type: 'function', function: { name: 'lookup', description: 'Look it up', parameters: tools[0]!.input_schema } }] });
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b) => b.type === 'tool_use') as Anthropic.ToolUseBlock;
    expect(use).toMatchObject({ name: 'lookup', input: { q: 'tok', n: 1 } });

    const stream = anthropic.messages.stream({
      model: MODEL, max_tokens: 50, tools,
      messages: [{ role: 'user', content: 'Look up Paris' }, { role: 'assistant', content: first.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Sunny' }] }],
    });
    const final = await stream.finalMessage();
    expect(providerRequest().body.messages).toEqual([
      { role: 'user', content: 'Look up Paris' },
      { role: 'assistant', content: null, tool_calls: [{ id: use.id, type: 'function', function: { name: 'lookup', arguments: JSON.stringify({ q: 'tok', n: 1 }) } }] },
      { role: 'tool', tool_call_id: use.id, content: 'Sunny' },
    ]);
    expect(final.content).toEqual([{ type: 'text', text: 'tok '.repeat(OUTPUT) }]);
  });

  it('a provider error reaches the Anthropic client in Anthropic\'s shape', async () => {
    const err = await anthropic.messages.create({ model: 'gpt-x-error429', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.RateLimitError);
    expect((err as InstanceType<typeof Anthropic.RateLimitError>).error).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
  });

  it('what Chat Completions cannot carry is refused with Anthropic\'s 400', async () => {
    const err = await anthropic.messages.create({
      model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'x' } }] }],
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as InstanceType<typeof Anthropic.BadRequestError>).message).toMatch(/document/);
  });

  it('a null where a tool or a tool result\'s block goes is Anthropic\'s 400 naming it, not a 500; nothing sent, nothing billed', async () => {
    await billingSettled(stack);
    const before = { balance: await balance(), sent: openaiMock.stats.requests };
    const bodies: Array<[Record<string, unknown>, string]> = [
      [{ tools: [null] }, 'tools.0: must be an object'],
      [{ messages: [
        { role: 'user', content: 'a' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [null] }] },
      ] }, 'messages.2.content.0.content.0: must be an object'],
    ];
    for (const stream of [false, true]) {
      for (const [extra, message] of bodies) {
        const params = { model: MODEL, max_tokens: 10, stream, messages: [{ role: 'user', content: 'hi' }], ...extra };
        const err = await anthropic.messages.create(params as unknown as Anthropic.MessageCreateParamsNonStreaming).catch((e: unknown) => e);
        expect(err, message).toBeInstanceOf(Anthropic.BadRequestError);
        expect((err as InstanceType<typeof Anthropic.BadRequestError>).error).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message } });
      }
    }
    expect(openaiMock.stats.requests).toBe(before.sent);
    await billingSettled(stack);
    expect(await balance()).toBe(before.balance);
  });
});
