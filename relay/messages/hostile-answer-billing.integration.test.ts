// A provider's answer that the relay cannot pass on as it came, or whose usage says less than it
// delivered, is still billed what the provider generated (docs/billing.md). Found by a review of the
// money paths: a tool input nested deeper than JSON.stringify can go (JSON.parse takes any depth)
// threw in the conversion or the text count after the provider's 200, and the exchange's crash
// settled the generated answer at 0; a stream folded into the JSON answer of a request that asked for
// none was billed the usage the fold held (message_start's placeholder 1, or an early usage that
// content followed) for an answer of 50 tokens. Every bill is checked in the ledger, the balance and
// ClickHouse alike (billOf).
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { billingSettled, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../../tests/harness/gateway-stack.js';
import {
  balanceOf, billOf, BLOCK_START, BLOCK_STOP, CHAT_DONE, CHAT_FINISH, CHAT_TOK, chatChunk, LONG_PROMPT, messageDelta, messageStart,
  MESSAGE_STOP, NORMAL_INPUT, NORMAL_OUTPUT, NORMAL_TEXT, sse, startScriptedProvider, TOK, unnamedCost, type ScriptedProvider,
} from '../../tests/harness/scripted-provider.js';

const FUNDS = 100_000_000;
const MAX_TOKENS = 100;
const NORMAL = unnamedCost(NORMAL_INPUT, NORMAL_OUTPUT);
/** Deep enough that JSON.parse takes it and JSON.stringify overflows the stack (node 20: ~5,000 levels); 12 KB. */
const DEPTH = 6000;
const deepJson = '['.repeat(DEPTH) + ']'.repeat(DEPTH);

/** An Anthropic Message holding a text and a tool_use whose input is nested DEPTH deep. */
function deepToolMessage(model: string, usage: Record<string, unknown>): string {
  return `{"id":"msg_1","type":"message","role":"assistant","model":"${model}","content":[{"type":"text","text":"${NORMAL_TEXT}"},`
    + `{"type":"tool_use","id":"toolu_1","name":"t","input":{"x":${deepJson}}}],"stop_reason":"tool_use","stop_sequence":null,`
    + `"usage":${JSON.stringify(usage)}}`;
}

/** An OpenAI Chat Completion whose tool call's arguments hold a value nested DEPTH deep. */
function deepToolCompletion(): string {
  return JSON.stringify({
    id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'm',
    choices: [{ index: 0, message: { role: 'assistant', content: NORMAL_TEXT, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 't', arguments: `{"x":${deepJson}}` } }] }, finish_reason: 'tool_calls' }],
    usage: { prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, total_tokens: NORMAL_INPUT + NORMAL_OUTPUT },
  });
}

/** An Anthropic stream whose tool_use block streams an input nested DEPTH deep, then its final usage. */
function deepToolStream(model: string): string {
  return messageStart(model)
    + sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 'toolu_1', name: 't', input: {} } })
    + sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: `{"x":${deepJson}}` } })
    + sse('content_block_stop', { type: 'content_block_stop', index: 0 })
    + messageDelta() + MESSAGE_STOP;
}

const json = (res: import('node:http').ServerResponse, body: string) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(body);
};
const events = (res: import('node:http').ServerResponse, body: string) => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.end(body);
};

let stack: GatewayStack;
let provider: ScriptedProvider;
let account: TestAccount;
let anthropic: Anthropic;
let openai: OpenAI;

beforeAll(async () => {
  provider = await startScriptedProvider(({ model }, res) => {
    switch (model) {
      case 'deep-tool': return json(res, deepToolMessage(model, { input_tokens: NORMAL_INPUT, output_tokens: NORMAL_OUTPUT }));
      case 'deep-tool-out0': return json(res, deepToolMessage(model, { input_tokens: NORMAL_INPUT, output_tokens: 0 }));
      case 'oai-deep-tool': return json(res, deepToolCompletion());
      case 'deep-tool-stream': return events(res, deepToolStream(model));
      // Streams to a request that asked for JSON: one ending cleanly before message_delta; one stating
      // its usage ({1000, 1}) in its first chunk, then 50 deltas; and one whole, its usage final.
      case 'fold-cut': return events(res, messageStart(model) + BLOCK_START + TOK.repeat(NORMAL_OUTPUT) + BLOCK_STOP);
      case 'oai-fold-early-usage': {
        const first = chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }], usage: { prompt_tokens: NORMAL_INPUT, completion_tokens: 1, total_tokens: NORMAL_INPUT + 1 } });
        return events(res, first + CHAT_TOK.repeat(NORMAL_OUTPUT) + CHAT_FINISH + CHAT_DONE);
      }
      case 'fold-whole': return events(res, messageStart(model) + BLOCK_START + TOK.repeat(NORMAL_OUTPUT) + BLOCK_STOP + messageDelta({ output_tokens: 60 }) + MESSAGE_STOP);
      // Streams to a request that asked for JSON holding only the provider's error, nothing generated.
      case 'oai-error-only': return events(res, 'data: {"error":{"message":"Rate limit reached","type":"rate_limit_exceeded","code":"rate_limit_exceeded"}}\n\n');
      case 'claude-error-only': return events(res, sse('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
      // A stream to a request that asked for JSON, broken off by an overload after 10 tokens.
      case 'fold-overloaded': return events(res, messageStart(model) + BLOCK_START + TOK.repeat(10) + sse('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
      default:
        res.writeHead(500);
        res.end();
    }
  });
  stack = await startGatewayStack();
  await mockChannel(stack, ['deep-tool', 'deep-tool-out0', 'deep-tool-stream', 'fold-cut', 'fold-whole', 'fold-overloaded', 'provider-500'], 'default', { base_url: provider.url });
  await mockChannel(stack, ['oai-deep-tool', 'oai-fold-early-usage', 'oai-error-only'], 'default', { base_url: provider.url, type: 1, key: 'sk-x' });
  await mockChannel(stack, ['claude-error-only'], 'default', { base_url: provider.url });
  account = await fundedAccount(stack, FUNDS);
  const key = (await createApiKey(stack, account)).key;
  anthropic = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
  openai = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
}, 120_000);
afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

const messages = [{ role: 'user' as const, content: LONG_PROMPT }];

/** The status and gateway request id of a call, answered or refused (an SDK APIError carries the headers too), with the refusal's message. */
async function outcomeOf(call: () => Promise<{ response: Response }>): Promise<{ id: string; status: number; message: string }> {
  try {
    const { response } = await call();
    return { id: response.headers.get('x-gateway-request-id')!, status: response.status, message: '' };
  } catch (err) {
    const e = err as { status?: number; headers?: Headers; message?: string };
    if (!e.headers) throw err;
    return { id: e.headers.get('x-gateway-request-id')!, status: e.status ?? 0, message: e.message ?? '' };
  }
}

describe('a provider answer holding a value nested deeper than the relay can write again (a tool input)', () => {
  it('OpenAI client, Anthropic channel: answered 500 (the answer cannot be converted), billed what the provider stated', async () => {
    const before = await balanceOf(stack, account.id);
    const { id, status, message } = await outcomeOf(() => openai.chat.completions.create({ model: 'deep-tool', max_tokens: MAX_TOKENS, messages }).withResponse());
    const row = await billOf(stack, account.id, id, before);
    expect({ status, quota: row.quota, prompt: row.prompt_tokens, completion: row.completion_tokens })
      .toEqual({ status: 500, quota: NORMAL, prompt: NORMAL_INPUT, completion: NORMAL_OUTPUT });
    expect(message).toMatch(/could not be read/);
  });

  it('Anthropic client, OpenAI channel: answered 500, billed what the provider stated', async () => {
    const before = await balanceOf(stack, account.id);
    const { id, status } = await outcomeOf(() => anthropic.messages.create({ model: 'oai-deep-tool', max_tokens: MAX_TOKENS, messages }).withResponse());
    const row = await billOf(stack, account.id, id, before);
    expect({ status, quota: row.quota, prompt: row.prompt_tokens, completion: row.completion_tokens })
      .toEqual({ status: 500, quota: NORMAL, prompt: NORMAL_INPUT, completion: NORMAL_OUTPUT });
  });

  it('Anthropic client and channel, output stated 0: passed on as it came (200), its input billed', async () => {
    const before = await balanceOf(stack, account.id);
    const { id, status } = await outcomeOf(() => anthropic.messages.create({ model: 'deep-tool-out0', max_tokens: MAX_TOKENS, messages }).withResponse());
    const row = await billOf(stack, account.id, id, before);
    expect({ status, prompt: row.prompt_tokens }).toEqual({ status: 200, prompt: NORMAL_INPUT });
    expect(row.quota).toBeGreaterThanOrEqual(unnamedCost(NORMAL_INPUT, 0));
  });

  it('a stream request answered with such JSON: 500 (it cannot be written as events), billed what the provider stated', async () => {
    const before = await balanceOf(stack, account.id);
    const { id, status } = await outcomeOf(async () => {
      const { data, response } = await anthropic.messages.create({ model: 'deep-tool', max_tokens: MAX_TOKENS, messages, stream: true }).withResponse();
      for await (const _ of data);
      return { response };
    });
    const row = await billOf(stack, account.id, id, before);
    expect({ status, quota: row.quota }).toEqual({ status: 500, quota: NORMAL });
  });

  it('a stream folded for a JSON request whose tool input is that deep: 500, billed its final usage', async () => {
    const before = await balanceOf(stack, account.id);
    const { id, status } = await outcomeOf(() => anthropic.messages.create({ model: 'deep-tool-stream', max_tokens: MAX_TOKENS, messages }).withResponse());
    const row = await billOf(stack, account.id, id, before);
    expect({ status, quota: row.quota, completion: row.completion_tokens }).toEqual({ status: 500, quota: NORMAL, completion: NORMAL_OUTPUT });
  });
});

describe('a stream folded into the JSON answer of a request that asked for none', () => {
  it('an Anthropic stream ended before message_delta: the client gets the 50 tokens (200) and is billed its text as counted, as the same stream cut is', async () => {
    const before = await balanceOf(stack, account.id);
    const { data, response } = await anthropic.messages.create({ model: 'fold-cut', max_tokens: MAX_TOKENS, messages }).withResponse();
    const text = data.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect({ status: response.status, text }).toEqual({ status: 200, text: 'tok '.repeat(NORMAL_OUTPUT) });
    // The relay's count of the text (the trailing space may be a token of its own), not message_start's 1.
    expect(row.completion_tokens).toBeGreaterThanOrEqual(NORMAL_OUTPUT);
    expect(row.quota).toBe(unnamedCost(NORMAL_INPUT, row.completion_tokens));
  });

  it('an OpenAI stream stating {1000, 1} before 50 deltas: billed the text delivered as counted, as the same stream streamed is', async () => {
    const before = await balanceOf(stack, account.id);
    const { data, response } = await openai.chat.completions.create({ model: 'oai-fold-early-usage', max_tokens: MAX_TOKENS, messages }).withResponse();
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(data.choices[0]?.message.content).toBe('tok '.repeat(NORMAL_OUTPUT));
    expect(row.completion_tokens).toBeGreaterThanOrEqual(NORMAL_OUTPUT);
    expect(row.quota).toBe(unnamedCost(NORMAL_INPUT, row.completion_tokens));
  });

  it('a whole stream whose final usage states more than its deltas (60 for 50): billed as stated, nothing counted', async () => {
    const before = await balanceOf(stack, account.id);
    const { data, response } = await anthropic.messages.create({ model: 'fold-whole', max_tokens: MAX_TOKENS, messages }).withResponse();
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect({ stop: data.stop_reason, completion: row.completion_tokens, quota: row.quota })
      .toEqual({ stop: 'end_turn', completion: 60, quota: unnamedCost(NORMAL_INPUT, 60) });
  });
});

// Both SDKs retry a 429, a 5xx and a 529 twice by default, taking them to mean nothing was done: true of
// a provider's own error, not of one the relay answers after billing what the provider generated. A
// request broken off by an overload was sent to the provider three times and billed three times for
// one error. An error answer that was billed says `x-should-retry: false`, which both SDKs obey.
describe('an error answer billed for what the provider generated', () => {
  async function billedRows(model: string): Promise<number[]> {
    const rows = await stack.sql`SELECT quota FROM ledger WHERE user_id = ${account.id} AND model_name = ${model} AND type = 2 ORDER BY id`;
    return rows.map((r) => Number(r.quota));
  }

  it('a folded stream broken off by an overload: the Anthropic SDK with its default retries sends it once, billed once (529, x-should-retry: false)', async () => {
    const key = (await createApiKey(stack, account)).key;
    const retrying = new Anthropic({ apiKey: key, baseURL: stack.relayUrl });
    const before = await balanceOf(stack, account.id);
    const { id, status } = await outcomeOf(() => retrying.messages.create({ model: 'fold-overloaded', max_tokens: MAX_TOKENS, messages }).withResponse());
    expect(status).toBe(529);
    const row = await billOf(stack, account.id, id, before);
    expect(await billedRows('fold-overloaded')).toEqual([row.quota]);
    expect(row.quota).toBeGreaterThan(0);
  });

  it('an answer the relay cannot convert: the OpenAI SDK with its default retries sends it once, billed once (500, x-should-retry: false)', async () => {
    const key = (await createApiKey(stack, account)).key;
    const retrying = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1` });
    const before = await balanceOf(stack, account.id);
    const rowsBefore = (await billedRows('deep-tool')).length;
    const res = await fetch(`${stack.relayUrl}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'deep-tool', max_tokens: MAX_TOKENS, messages }),
    });
    expect([res.status, res.headers.get('x-should-retry')]).toEqual([500, 'false']);
    await res.arrayBuffer();
    await billOf(stack, account.id, res.headers.get('x-gateway-request-id')!, before);
    const { status } = await outcomeOf(() => retrying.chat.completions.create({ model: 'deep-tool', max_tokens: MAX_TOKENS, messages }).withResponse());
    expect(status).toBe(500);
    await billingSettled(stack);
    expect((await billedRows('deep-tool')).length).toBe(rowsBefore + 2);
  });

  // Before: the prompt was counted and billed for a request the provider refused before generating
  // anything, and the answer told the SDKs not to retry a rate limit (the same answer to a client that
  // asked to stream was billed 0).
  it('a folded stream holding only the provider\'s rate limit or overload: billed nothing, and the SDKs may retry it', async () => {
    const key = (await createApiKey(stack, account)).key;
    for (const [path, model, status] of [['/v1/chat/completions', 'oai-error-only', 429], ['/v1/messages', 'claude-error-only', 529]] as const) {
      const res = await fetch(`${stack.relayUrl}${path}`, {
        method: 'POST', headers: { authorization: `Bearer ${key}`, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
        body: JSON.stringify({ model, max_tokens: MAX_TOKENS, messages }),
      });
      expect([res.status, res.headers.get('x-should-retry')], model).toEqual([status, null]);
      await res.arrayBuffer();
      await billingSettled(stack);
      const rows = await stack.sql`SELECT quota FROM ledger WHERE request_id = ${res.headers.get('x-gateway-request-id')!}`;
      expect(rows.map((r) => Number(r.quota)), model).toEqual([0]);
    }
  });

  it('an error the relay answers before anything was billed keeps the SDKs\' retries (no x-should-retry)', async () => {
    const key = (await createApiKey(stack, account)).key;
    const res = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'provider-500', max_tokens: MAX_TOKENS, messages }),
    });
    expect(res.status).toBeGreaterThanOrEqual(500);
    expect(res.headers.get('x-should-retry')).toBeNull();
    await res.arrayBuffer();
  });
});
