// A stream passed in its own format (an Anthropic-format channel to /v1/messages, an OpenAI-format
// channel to /v1/chat/completions) ends at its last event: message_stop, or `data: [DONE]`. What a
// provider writes after it is no part of the answer: it is neither passed to the client nor billed,
// and a provider that keeps its connection open after it (pinging) does not hold the client's end.
//
// Before: the relay read and passed on until the provider closed its connection. An OpenAI-format
// stream told 1000 / 50 and followed by content and a second usage after [DONE] was billed 1318 / 100
// (the bound); an Anthropic stream's usage after message_stop (999) was passed to the client and the
// row billed 100; a provider pinging after message_stop held the SDK's end (and the pooled
// connection) until it closed the connection itself. A converted stream already ended at its end
// (converted-usage.integration.test.ts): both paths bill the same provider bytes alike now.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type LedgerRow, type TestAccount } from '../../tests/harness/gateway-stack.js';
import {
  balanceOf, billOf, BLOCK_START, BLOCK_STOP, CHAT_DONE, CHAT_FINISH, CHAT_TOK, chatChunk, LONG_PROMPT, MESSAGE_STOP, messageDelta, messageStart,
  NORMAL_INPUT, NORMAL_OUTPUT, PING, startScriptedProvider, TOK, type ScriptedProvider,
} from '../../tests/harness/scripted-provider.js';

const MAX_TOKENS = 100;
const OAI_ROLE = chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
const oaiUsage = (usage: Record<string, unknown>): string => chatChunk({ choices: [], usage });
const FULL_USAGE = { prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, total_tokens: NORMAL_INPUT + NORMAL_OUTPUT };
const TAIL_USAGE = { prompt_tokens: 1318, completion_tokens: 999, total_tokens: 2317 };
const ANT_ANSWER = (m: string): string => messageStart(m) + BLOCK_START + TOK.repeat(NORMAL_OUTPUT) + BLOCK_STOP + messageDelta();
const OAI_ANSWER = OAI_ROLE + CHAT_TOK.repeat(NORMAL_OUTPUT) + CHAT_FINISH + oaiUsage(FULL_USAGE);
/** What a hostile or broken provider writes after the end: more content and a larger usage. */
const ANT_TAIL = BLOCK_START + TOK.repeat(20) + BLOCK_STOP + messageDelta({ output_tokens: 999 }) + MESSAGE_STOP;
const OAI_TAIL = CHAT_TOK.repeat(20) + oaiUsage(TAIL_USAGE) + CHAT_DONE;

/**
 * Each model's writes, 100 ms apart; the connection then stays open, pinging every 200 ms, until the
 * test lets it go (or 8 s).
 */
const SCRIPTS: Record<string, (m: string) => string[]> = {
  // The tail in the same write as the end.
  'sae-ant-tail': (m) => [ANT_ANSWER(m) + MESSAGE_STOP + ANT_TAIL],
  // The tail in a later write.
  'sae-ant-tail-later': (m) => [ANT_ANSWER(m) + MESSAGE_STOP, ANT_TAIL],
  // message_stop split across two writes, the tail in the second.
  'sae-ant-split': (m) => [ANT_ANSWER(m) + 'event: message_stop\n', 'data: {"type":"message_stop"}\n\n' + ANT_TAIL],
  'sae-ant-ping': (m) => [ANT_ANSWER(m) + MESSAGE_STOP],
  'sae-oai-tail': () => [OAI_ANSWER + CHAT_DONE + OAI_TAIL],
  'sae-oai-tail-later': () => [OAI_ANSWER + CHAT_DONE, OAI_TAIL],
  // [DONE]'s line in one write, the blank line that ends its event and the tail in the next.
  'sae-oai-split': () => [OAI_ANSWER + 'data: [DONE]\n', '\n' + OAI_TAIL],
  'sae-oai-ping': () => [OAI_ANSWER + CHAT_DONE],
  // Complete at its usage chunk, no [DONE] ever: only pings after it. Before, the client's end waited
  // for the provider to close (here 8 s; the stall check's 300 s at worst); now the tail's wait (5 s).
  'sae-oai-no-done': () => [OAI_ANSWER],
};
const releases: Array<() => void> = [];
/** The answers whose provider ended the connection itself (its 8 s), not the relay. */
const providerEnded = new Set<string>();

let stack: GatewayStack;
let provider: ScriptedProvider;
let account: TestAccount;
let anthropic: Anthropic;
let openai: OpenAI;

beforeAll(async () => {
  provider = await startScriptedProvider(({ model }, res) => {
    if (model === 'sae-ant-unended') {
      // message_stop's event without the blank line that ends it, then the connection's end.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      return void res.end(ANT_ANSWER(model) + 'event: message_stop\ndata: {"type":"message_stop"}');
    }
    const writes = SCRIPTS[model]?.(model);
    if (!writes) throw new Error(`unscripted model ${model}`);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    writes.forEach((w, i) => setTimeout(() => { if (!res.destroyed) res.write(w); }, i * 100));
    const ping = setInterval(() => { if (!res.destroyed) res.write(model.startsWith('sae-oai') ? ': keep-alive\n\n' : PING); }, 200);
    const close = (): void => {
      clearInterval(ping);
      if (res.destroyed) return;
      providerEnded.add(model);
      res.end();
    };
    releases.push(close);
    setTimeout(close, 8_000);
  });
  stack = await startGatewayStack();
  const models = Object.keys(SCRIPTS);
  await mockChannel(stack, [...models.filter((m) => m.startsWith('sae-ant')), 'sae-ant-unended'], 'default', { base_url: provider.url });
  await mockChannel(stack, models.filter((m) => m.startsWith('sae-oai')), 'default', { base_url: provider.url, type: 1, key: 'sk-x' });
  account = await fundedAccount(stack, 100_000_000);
  const key = (await createApiKey(stack, account)).key;
  anthropic = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
  openai = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  for (const close of releases) close();
  await stack?.close();
  await provider?.close();
});

const messages = [{ role: 'user' as const, content: LONG_PROMPT }];
const TEXT = /^(tok ?){50}$/;

describe('an Anthropic-format stream ends at message_stop', () => {
  it.each(['sae-ant-tail', 'sae-ant-tail-later', 'sae-ant-split', 'sae-ant-ping'])('%s: the SDK gets the answer and its usage, the row bills them, the provider is let go', async (model) => {
    const before = await balanceOf(stack, account.id);
    const events: string[] = [];
    const raw = await anthropic.messages.create({ model, max_tokens: MAX_TOKENS, stream: true, messages }).withResponse();
    let text = '';
    let output = -1;
    for await (const e of raw.data) {
      events.push(e.type);
      if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') text += e.delta.text;
      if (e.type === 'message_delta') output = e.usage.output_tokens;
    }
    // The SDK's loop ended with the stream: nothing after message_stop, and before the provider closed.
    expect(providerEnded.has(model)).toBe(false);
    expect(events.at(-1)).toBe('message_stop');
    expect(events.filter((t) => t === 'message_stop')).toHaveLength(1);
    expect(text).toMatch(TEXT);
    expect(output).toBe(NORMAL_OUTPUT);
    const row: LedgerRow = await billOf(stack, account.id, raw.response.headers.get('x-gateway-request-id')!, before);
    expect({ prompt: row.prompt_tokens, completion: row.completion_tokens }).toEqual({ prompt: NORMAL_INPUT, completion: NORMAL_OUTPUT });
    await vi.waitFor(() => expect(provider.seen.get(model)!.closedAt).toBeGreaterThan(0), { timeout: 5000 });
    expect(providerEnded.has(model)).toBe(false);
  });
});

// Before (review streamend): a provider that closed right after message_stop's data line, without
// the blank line that ends its event, had those bytes passed as they were: the SDK never dispatched
// the event (the SSE spec drops an event left unended at the stream's end) and saw no message_stop.
it('an Anthropic-format stream whose provider closes inside message_stop\'s event: the client still gets message_stop', async () => {
  const before = await balanceOf(stack, account.id);
  const raw = await anthropic.messages.create({ model: 'sae-ant-unended', max_tokens: MAX_TOKENS, stream: true, messages }).withResponse();
  const events: string[] = [];
  for await (const e of raw.data) events.push(e.type);
  expect(events.at(-1)).toBe('message_stop');
  const row = await billOf(stack, account.id, raw.response.headers.get('x-gateway-request-id')!, before);
  expect({ prompt: row.prompt_tokens, completion: row.completion_tokens }).toEqual({ prompt: NORMAL_INPUT, completion: NORMAL_OUTPUT });
});

describe('an OpenAI-format stream ends at [DONE]', () => {
  it.each(['sae-oai-tail', 'sae-oai-tail-later', 'sae-oai-split', 'sae-oai-ping', 'sae-oai-no-done'])('%s: the SDK gets the answer and its usage, the row bills them, the provider is let go', async (model) => {
    const before = await balanceOf(stack, account.id);
    const { data: s, response } = await openai.chat.completions.create({ model, max_tokens: MAX_TOKENS, stream: true, stream_options: { include_usage: true }, messages }).withResponse();
    let text = '';
    const told: OpenAI.CompletionUsage[] = [];
    for await (const c of s) {
      text += c.choices[0]?.delta.content ?? '';
      if (c.usage) told.push(c.usage);
    }
    expect(providerEnded.has(model)).toBe(false);
    expect(text).toMatch(TEXT);
    expect(told).toEqual([FULL_USAGE]);
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect({ prompt: row.prompt_tokens, completion: row.completion_tokens }).toEqual({ prompt: NORMAL_INPUT, completion: NORMAL_OUTPUT });
    await vi.waitFor(() => expect(provider.seen.get(model)!.closedAt).toBeGreaterThan(0), { timeout: 5000 });
    expect(providerEnded.has(model)).toBe(false);
  });
});
