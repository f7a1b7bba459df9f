// What a provider states of its usage is billed when it is a count, and only then: a count below 0,
// an output of 0 for an answer with content, an input of 0 (a prompt is at least one token), a later
// message_start or a smaller message_delta, an OpenAI-format usage stated before the content that
// follows it, and counts no request can reach (2^60). The normal answer states 1000 input and 50
// output tokens and delivers 50 deltas "tok ": 1250 quota at the test's ratios.
//
// Before: output_tokens -5 or 0 billed output 0; input_tokens -1000 billed input 0, and a JSON
// answer stating both negative was free; a repeated message_start after the message_delta billed
// 1005, a later message_delta of 3 billed 1015; an OpenAI stream stating {1000, 0} first and no
// usage after its content billed 1000; output_tokens 2^60 billed 100 million tokens (500,000,000
// quota on a 1,500-quota reservation). Now a count below 0 is not stated (the relay counts what it
// delivered or the prompt), a stated 0 with content delivered is billed the delivered count, input
// stated 0 with no cache tokens is the counted prompt, only the first message_start counts, output
// never decreases, a usage followed by content bills max(stated, delivered), and a count above what
// the request could cost is billed at the request's bound (max_tokens × n; a text prompt's bytes).
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../../tests/harness/gateway-stack.js';
import {
  balanceOf, billOf, BLOCK_START, BLOCK_STOP, CHAT_DONE, CHAT_FINISH, CHAT_TOK, chatChunk, chatCompletion, LONG_PROMPT, MESSAGE_STOP, messageDelta,
  messageStart, NORMAL_INPUT, NORMAL_OUTPUT, normalMessage, startScriptedProvider, TOK, unnamedCost, type ScriptedProvider,
} from '../../tests/harness/scripted-provider.js';

const FUNDS = 100_000_000;
const NORMAL = unnamedCost(NORMAL_INPUT, NORMAL_OUTPUT);
const HUGE = 2 ** 60;
const MAX_TOKENS = 100;

const usageO = (prompt: number, completion: number) => ({ prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion });

/** Anthropic streams by model: the normal answer with its usage changed as the model's name says. */
function anthropicStream(model: string): string {
  const body = BLOCK_START + TOK.repeat(NORMAL_OUTPUT) + BLOCK_STOP;
  switch (model) {
    case 'out-negative': return messageStart(model) + body + messageDelta({ output_tokens: -5 }) + MESSAGE_STOP;
    case 'out-zero': return messageStart(model) + body + messageDelta({ output_tokens: 0 }) + MESSAGE_STOP;
    case 'in-negative': return messageStart(model, { input_tokens: -1000, output_tokens: 1 }) + body + messageDelta() + MESSAGE_STOP;
    case 'in-zero': return messageStart(model, { input_tokens: 0, output_tokens: 1 }) + body + messageDelta() + MESSAGE_STOP;
    case 'restart-after-delta': return messageStart(model) + body + messageDelta() + messageStart(model, { input_tokens: NORMAL_INPUT, output_tokens: 1 }) + MESSAGE_STOP;
    case 'delta-shrinks': return messageStart(model) + body + messageDelta() + messageDelta({ output_tokens: 3 }) + MESSAGE_STOP;
    case 'out-huge': return messageStart(model) + body + messageDelta({ output_tokens: HUGE }) + MESSAGE_STOP;
    case 'in-huge': return messageStart(model, { input_tokens: HUGE, output_tokens: 1 }) + body + messageDelta() + MESSAGE_STOP;
    default: throw new Error(`unscripted model ${model}`);
  }
}

const ANTHROPIC_JSON: Record<string, string> = {
  'json-both-negative': normalMessage('json-both-negative', { input_tokens: -1000, output_tokens: -5 }),
  'json-huge': normalMessage('json-huge', { input_tokens: HUGE, output_tokens: HUGE }),
};

function chatStream(model: string): string {
  const first = chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
  const body = CHAT_TOK.repeat(NORMAL_OUTPUT) + CHAT_FINISH;
  const last = (u: object) => chatChunk({ choices: [], usage: u });
  switch (model) {
    case 'oai-stream-zero': return first + body + last(usageO(NORMAL_INPUT, 0)) + CHAT_DONE;
    case 'oai-stream-negative-prompt': return first + body + last(usageO(-1000, NORMAL_OUTPUT)) + CHAT_DONE;
    // The usage stated early (as some compatible servers do with every chunk) and never after the content.
    case 'oai-early-usage': return chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }], usage: usageO(NORMAL_INPUT, 0) }) + body + CHAT_DONE;
    default: throw new Error(`unscripted model ${model}`);
  }
}

const OPENAI_JSON: Record<string, string> = {
  'oai-json-negative': chatCompletion(usageO(-1000, -5)),
  'oai-json-huge': chatCompletion(usageO(NORMAL_INPUT, HUGE)),
};

let stack: GatewayStack;
let provider: ScriptedProvider;
let account: TestAccount;
let key: string;
let anthropic: Anthropic;
let openai: OpenAI;
/** The relay's count of LONG_PROMPT, as count_tokens gives it. */
let counted: number;

beforeAll(async () => {
  provider = await startScriptedProvider(({ model, body }, res) => {
    if (ANTHROPIC_JSON[model] ?? OPENAI_JSON[model]) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(ANTHROPIC_JSON[model] ?? OPENAI_JSON[model]);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(model.startsWith('oai-') ? chatStream(model) : anthropicStream(model));
    void body;
  });
  stack = await startGatewayStack();
  await mockChannel(stack, ['out-negative', 'out-zero', 'in-negative', 'in-zero', 'restart-after-delta', 'delta-shrinks', 'out-huge', 'in-huge', ...Object.keys(ANTHROPIC_JSON)], 'default', { base_url: provider.url });
  await mockChannel(stack, ['oai-stream-zero', 'oai-stream-negative-prompt', 'oai-early-usage', ...Object.keys(OPENAI_JSON)], 'default', { base_url: provider.url, type: 1, key: 'sk-x' });
  account = await fundedAccount(stack, FUNDS);
  key = (await createApiKey(stack, account)).key;
  anthropic = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
  openai = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
  counted = (await anthropic.messages.countTokens({ model: 'out-zero', messages })).input_tokens;
  expect(counted).toBeGreaterThan(0);
  expect(counted).not.toBe(NORMAL_INPUT);
});
afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

const messages = [{ role: 'user' as const, content: LONG_PROMPT }];

async function anthropicStreamed(model: string): Promise<string> {
  const { data: stream, response } = await anthropic.messages.create({ model, max_tokens: MAX_TOKENS, stream: true, messages }).withResponse();
  let text = '';
  for await (const event of stream) if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
  expect(text).toBe('tok '.repeat(NORMAL_OUTPUT));
  return response.headers.get('x-gateway-request-id')!;
}

async function openaiStreamed(model: string): Promise<string> {
  const { data: stream, response } = await openai.chat.completions.create({ model, max_tokens: MAX_TOKENS, stream: true, messages }).withResponse();
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  expect(text).toBe('tok '.repeat(NORMAL_OUTPUT));
  return response.headers.get('x-gateway-request-id')!;
}

describe('counts below 0, and 0 where there was content', () => {
  it.each([
    ['out-negative', 'an output of -5'],
    ['out-zero', 'an output of 0'],
  ])('%s (%s): billed the 50 tokens delivered', async (model) => {
    const before = await balanceOf(stack, account.id);
    const row = await billOf(stack, account.id, await anthropicStreamed(model), before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL });
  });

  it.each([
    ['in-negative', 'an input of -1000'],
    ['in-zero', 'an input of 0 without cache tokens'],
  ])('%s (%s): billed the prompt the relay counts', async (model) => {
    const before = await balanceOf(stack, account.id);
    const row = await billOf(stack, account.id, await anthropicStreamed(model), before);
    expect(row).toMatchObject({ prompt_tokens: counted, completion_tokens: NORMAL_OUTPUT, quota: unnamedCost(counted, NORMAL_OUTPUT) });
  });

  it('in-zero for a prompt of 200 images: billed the count of the relay\'s own only up to the window it reserved', async () => {
    // An unnamed model's window is taken as 200,000 tokens for media (reservation-bound.ts); the
    // relay counts an image to a model of no known image sizing at 1,600 tokens: 320,000 here. A probe's 1,000 images took a
    // key 4.4 M quota below zero, the count billed uncapped at 16× its reservation.
    const pixel = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
    const content = Array.from({ length: 200 }, () => ({ type: 'image' as const, source: { type: 'base64' as const, media_type: 'image/png' as const, data: pixel } }));
    const before = await balanceOf(stack, account.id);
    const { data: stream, response } = await anthropic.messages.create({ model: 'in-zero', max_tokens: MAX_TOKENS, stream: true, messages: [{ role: 'user', content }] }).withResponse();
    for await (const event of stream) void event;
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: 200_000, completion_tokens: NORMAL_OUTPUT, quota: unnamedCost(200_000, NORMAL_OUTPUT) });
  });

  it('an Anthropic JSON answer stating both below 0: billed the counted prompt and answer, not free', async () => {
    const before = await balanceOf(stack, account.id);
    const { data, response } = await anthropic.messages.create({ model: 'json-both-negative', max_tokens: MAX_TOKENS, messages }).withResponse();
    expect(data.content[0]).toMatchObject({ type: 'text' });
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: counted, completion_tokens: NORMAL_OUTPUT, quota: unnamedCost(counted, NORMAL_OUTPUT) });
  });

  it('an OpenAI JSON answer stating both below 0: billed the counted prompt and answer', async () => {
    const before = await balanceOf(stack, account.id);
    const { response } = await openai.chat.completions.create({ model: 'oai-json-negative', max_tokens: MAX_TOKENS, messages }).withResponse();
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: counted, completion_tokens: NORMAL_OUTPUT, quota: unnamedCost(counted, NORMAL_OUTPUT) });
  });

  it('an OpenAI stream stating 0 completion tokens: billed the 50 delivered', async () => {
    const before = await balanceOf(stack, account.id);
    const row = await billOf(stack, account.id, await openaiStreamed('oai-stream-zero'), before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL });
  });

  it('an OpenAI stream stating -1000 prompt tokens: billed the counted prompt', async () => {
    const before = await balanceOf(stack, account.id);
    const row = await billOf(stack, account.id, await openaiStreamed('oai-stream-negative-prompt'), before);
    expect(row).toMatchObject({ prompt_tokens: counted, completion_tokens: NORMAL_OUTPUT, quota: unnamedCost(counted, NORMAL_OUTPUT) });
  });
});

describe('counts that go back', () => {
  it('a message_start after the message_delta changes nothing', async () => {
    const before = await balanceOf(stack, account.id);
    const row = await billOf(stack, account.id, await anthropicStreamed('restart-after-delta'), before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL });
  });

  it('a later, smaller message_delta does not lower the output', async () => {
    const before = await balanceOf(stack, account.id);
    const row = await billOf(stack, account.id, await anthropicStreamed('delta-shrinks'), before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL });
  });
});

describe('an OpenAI-format usage followed by content', () => {
  it('stated {1000, 0} in the first chunk and never again: billed the 50 delivered', async () => {
    const before = await balanceOf(stack, account.id);
    const row = await billOf(stack, account.id, await openaiStreamed('oai-early-usage'), before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL });
  });
});

describe('counts no request could reach', () => {
  /** A raw request, so that the test knows its bytes: a text prompt's input is bounded by them. */
  async function post(model: string, extra: object = {}): Promise<{ requestId: string; bytes: number; status: number; text: string }> {
    const body = JSON.stringify({ model, max_tokens: MAX_TOKENS, messages, ...extra });
    const res = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body,
    });
    return { requestId: res.headers.get('x-gateway-request-id')!, bytes: Buffer.byteLength(body), status: res.status, text: await res.text() };
  }

  it('output_tokens 2^60 on a stream of max_tokens 100: billed 100 output tokens', async () => {
    const before = await balanceOf(stack, account.id);
    const r = await post('out-huge', { stream: true });
    expect(r.status).toBe(200);
    const row = await billOf(stack, account.id, r.requestId, before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: MAX_TOKENS, quota: unnamedCost(NORMAL_INPUT, MAX_TOKENS) });
  });

  it('input_tokens 2^60 on a text prompt: billed the prompt\'s byte length, the most it can be', async () => {
    const before = await balanceOf(stack, account.id);
    const r = await post('in-huge', { stream: true });
    const row = await billOf(stack, account.id, r.requestId, before);
    expect(row).toMatchObject({ prompt_tokens: r.bytes, completion_tokens: NORMAL_OUTPUT, quota: unnamedCost(r.bytes, NORMAL_OUTPUT) });
  });

  it('an Anthropic JSON answer stating 2^60 of both: billed the bytes and max_tokens', async () => {
    const before = await balanceOf(stack, account.id);
    const r = await post('json-huge');
    expect(r.status).toBe(200);
    const row = await billOf(stack, account.id, r.requestId, before);
    expect(row).toMatchObject({ prompt_tokens: r.bytes, completion_tokens: MAX_TOKENS, quota: unnamedCost(r.bytes, MAX_TOKENS) });
  });

  it('an OpenAI JSON answer of 2 choices stating 2^60 completion tokens: billed max_tokens × 2', async () => {
    const before = await balanceOf(stack, account.id);
    const { response } = await openai.chat.completions.create({ model: 'oai-json-huge', max_tokens: MAX_TOKENS, n: 2, messages }).withResponse();
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: 2 * MAX_TOKENS, quota: unnamedCost(NORMAL_INPUT, 2 * MAX_TOKENS) });
  });
});
