// A client that leaves once the generation is over but before the provider said what it bills. An
// OpenAI-format stream states its usage in a chunk of its own after the finish_reason (the relay asks
// for it with stream_options.include_usage), and OpenAI's SDK user typically breaks out of the loop at
// the finish_reason. Before, the relay cancelled the provider at once and billed its local count of
// the visible text: an o-series answer's reasoning tokens (thousands) and the cached-token price were
// lost (prompt 1000 with 900 cached, 5010 completion tokens of which 5000 reasoning: billed 25 quota
// instead of 11,325). Now it reads on, writing nothing, until the usage comes (bounded by
// USAGE_TAIL_WAIT_MS, after which it bills the local count), and bills the provider's usage. The same
// holds for an Anthropic stream whose message_delta gives the stop reason and a later one the usage.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createApiKey, settledAccountQuota, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';
import { USAGE_TAIL_WAIT_MS } from './stream-relay.js';

const FUNDS = 10_000_000;
// o3-mini at OpenAI's prices ($1.10 input, $0.55 cached, $4.40 output per million): model ratio 0.55,
// completion ratio 4, cache reads 0.5 (core/pricing/ratios.ts's built-in table), group 1. Written out.
const o3mini = (input: number, output: number, cached = 0) => Math.round((input + cached * 0.5 + output * 4) * 0.55);
// A model no ratio names: model ratio 1, completion ratio 5.
const unnamed = (input: number, output: number) => input + output * 5;
const USAGE = { prompt_tokens: 1000, completion_tokens: 5010, total_tokens: 6010, prompt_tokens_details: { cached_tokens: 900 }, completion_tokens_details: { reasoning_tokens: 5000 } };
/**
 * A prompt whose bytes bound the 1000 prompt tokens the scripted provider states: the relay bills no
 * more input than a text prompt's bytes can hold, nor more output than the max_tokens it sent (6000
 * here, above the 5010 stated; docs/billing.md, "Reserve").
 */
const PROMPT = 'Say hello, and think it over at length before you do. '.repeat(20);
const MAX_OUTPUT = 6000;
/** How long the scripted provider takes, after the finish_reason, to send the usage. */
const USAGE_DELAY_MS = 400;

let stack: GatewayStack;
let provider: Server;
let account: TestAccount;
let openai: OpenAI;
let anthropic: Anthropic;
/** Per model, when the provider's connection closed, in ms after it sent the end of the generation. */
const closedAfterFinish = new Map<string, number>();
/** Per model, whether the provider got to send its usage before its connection closed. */
const usageSent = new Map<string, boolean>();

function chatChunk(c: object): string {
  return `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'o3-mini', usage: null, ...c })}\n\n`;
}

function sse(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

function scripted(req: IncomingMessage, res: ServerResponse): void {
  let raw = '';
  req.on('data', (c: Buffer) => { raw += c.toString(); });
  req.on('end', () => {
    const { model } = JSON.parse(raw) as { model: string };
    let finishedAt = 0;
    usageSent.set(model, false);
    res.on('close', () => closedAfterFinish.set(model, performance.now() - finishedAt));
    res.writeHead(200, { 'content-type': 'text/event-stream', 'x-request-id': `req_${model}` });
    const later = (ms: number, then: () => void) => setTimeout(() => { if (!res.destroyed) then(); }, ms);
    if (model === 'o3-mini' || model === 'o4-mini') {
      res.write(chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }));
      res.write(chatChunk({ choices: [{ index: 0, delta: { content: 'Hello' }, finish_reason: null }] }));
      res.write(chatChunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }));
      finishedAt = performance.now();
      // o4-mini's provider never sends its usage: the relay gives up on it after USAGE_TAIL_WAIT_MS.
      if (model === 'o4-mini') return later(30_000, () => res.end());
      later(USAGE_DELAY_MS, () => {
        usageSent.set(model, true);
        res.end(`${chatChunk({ choices: [], usage: USAGE })}data: [DONE]\n\n`);
      });
      return;
    }
    // An Anthropic-format provider that gives the stop reason in one message_delta and the usage in a later one.
    res.write(sse('message_start', { type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model, content: [], usage: { input_tokens: 1000, output_tokens: 1 } } })
      + sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
      + sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello' } })
      + sse('content_block_stop', { type: 'content_block_stop', index: 0 })
      + sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null } }));
    finishedAt = performance.now();
    later(USAGE_DELAY_MS, () => {
      usageSent.set(model, true);
      res.end(sse('message_delta', { type: 'message_delta', delta: {}, usage: { output_tokens: 5010 } }) + sse('message_stop', { type: 'message_stop' }));
    });
  });
}

beforeAll(async () => {
  provider = createServer(scripted);
  await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;
  stack = await startGatewayStack();
  await mockChannel(stack, ['o3-mini', 'o4-mini'], 'default', { base_url: url, key: 'sk-proj-scripted', type: 1 });
  await mockChannel(stack, ['claude-split-usage'], 'default', { base_url: url });
  account = await fundedAccount(stack, FUNDS);
  const key = (await createApiKey(stack, account)).key;
  openai = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
});
afterAll(async () => {
  await stack?.close();
  provider?.closeAllConnections();
  await new Promise((r) => provider?.close(r));
});

const balance = (): Promise<number> => settledAccountQuota(stack, account.id);

/** The request's ledger row, its log row's quota in ClickHouse, and the account's debit agree. */
async function billed(requestId: string, before: number): Promise<{ quota: number; prompt_tokens: number; completion_tokens: number }> {
  const row = await ledgerRow(stack, requestId);
  const rs = await stack.ch.query({ query: 'SELECT quota FROM logs FINAL WHERE request_id = {r:String}', query_params: { r: requestId }, format: 'JSONEachRow' });
  const logs = await rs.json<{ quota: string | number }>();
  expect(logs.map((l) => Number(l.quota))).toEqual([row.quota]);
  expect(await balance()).toBe(before - row.quota);
  return row;
}

/** An OpenAI SDK user who stops reading at the finish_reason (breaking out of the loop aborts the request). */
async function breakAtFinish(model: string): Promise<{ requestId: string; text: string }> {
  const { data: stream, response } = await openai.chat.completions.create({ model, stream: true, max_completion_tokens: MAX_OUTPUT, messages: [{ role: 'user', content: PROMPT }] }).withResponse();
  let text = '';
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? '';
    if (chunk.choices[0]?.finish_reason) break;
  }
  return { requestId: response.headers.get('x-gateway-request-id')!, text };
}

describe('a client that leaves at the finish_reason of an OpenAI-format stream', () => {
  it('is billed the provider\'s usage (reasoning and cached tokens), which the relay reads on for', async () => {
    const before = await balance();
    const { requestId, text } = await breakAtFinish('o3-mini');
    expect(text).toBe('Hello');
    const row = await billed(requestId, before);
    expect(row).toMatchObject({ prompt_tokens: 1000, completion_tokens: 5010, quota: o3mini(100, 5010, 900) });
    expect(row.quota).toBe(11_325);
    // The relay read on to the usage: the provider was not cancelled before it sent it.
    expect(usageSent.get('o3-mini')).toBe(true);
    expect(closedAfterFinish.get('o3-mini')).toBeGreaterThanOrEqual(USAGE_DELAY_MS - 50);
  });

  it('whose provider never sends the usage: cut after USAGE_TAIL_WAIT_MS, billed the prompt and text the relay counts', async () => {
    const before = await balance();
    const { requestId } = await breakAtFinish('o4-mini');
    const row = await billed(requestId, before);
    // o4-mini: model ratio 0.55, completion ratio 4; the counted prompt and 'Hello' (one token).
    expect(row.completion_tokens).toBe(1);
    expect(row.prompt_tokens).toBeGreaterThan(0);
    expect(row.quota).toBe(Math.round((row.prompt_tokens + 4) * 0.55));
    const closed = closedAfterFinish.get('o4-mini')!;
    expect(closed).toBeGreaterThanOrEqual(USAGE_TAIL_WAIT_MS - 100);
    expect(closed).toBeLessThan(USAGE_TAIL_WAIT_MS + 3000);
  });
});

describe('an Anthropic-format stream whose usage comes in a message_delta after the one with the stop reason', () => {
  it('an Anthropic SDK user who stops at the first message_delta is billed the usage that follows', async () => {
    const before = await balance();
    const { data: stream, response } = await anthropic.messages.create({ model: 'claude-split-usage', max_tokens: MAX_OUTPUT, stream: true, messages: [{ role: 'user', content: PROMPT }] }).withResponse();
    for await (const event of stream) if (event.type === 'message_delta') break;
    const row = await billed(response.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: 1000, completion_tokens: 5010, quota: unnamed(1000, 5010) });
    expect(usageSent.get('claude-split-usage')).toBe(true);
  });

  it('an OpenAI SDK user on that channel who stops at the finish_reason likewise', async () => {
    const before = await balance();
    const { requestId, text } = await breakAtFinish('claude-split-usage');
    expect(text).toBe('Hello');
    const row = await billed(requestId, before);
    expect(row).toMatchObject({ prompt_tokens: 1000, completion_tokens: 5010, quota: unnamed(1000, 5010) });
  });
});
