// A converted stream (an OpenAI client of an Anthropic channel, an Anthropic client of an
// OpenAI-format channel) whose event opens a JSON object in its first data line and never closes it,
// then sends data lines without end.
//
// Before: the conversion (relay/stream/line-stream.ts) joined every further data line of the event to
// a string without limit, while the client got nothing: 60 MB of such lines grew the relay's heap
// 134-230 MB in 2.5 s, and one stream fed on reached 2.8 GB (a V8 out-of-memory abort, every user's
// stream cut). Now the joined data is held up to 1 MiB, as the meters and the aligner hold a line or
// an event; past it the stream ends as a provider stream that cannot be read: the provider is
// cancelled, the client told in its protocol, and the request billed as a failed stream
// (docs/billing.md: the input stated, or the prompt counted for an OpenAI-format channel, and the
// text delivered).
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../../tests/harness/gateway-stack.js';
import {
  balanceOf, billOf, BLOCK_START, CHAT_TOK, chatChunk, LONG_PROMPT, messageStart, NORMAL_INPUT, startScriptedProvider, TOK, unnamedCost, type ScriptedProvider,
} from '../../tests/harness/scripted-provider.js';

const FLOOD_BYTES = 60 * 1024 * 1024;
/** Content delivered before the endless event: three "tok " deltas. */
const DELIVERED = 3;

let stack: GatewayStack;
let provider: ScriptedProvider;
let account: TestAccount;
let key: string;
let anthropic: Anthropic;
let openai: OpenAI;
let counted: number;
const messages = [{ role: 'user' as const, content: LONG_PROMPT }];

beforeAll(async () => {
  provider = await startScriptedProvider(({ model }, res) => {
    const chat = model.startsWith('oai-');
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(chat
      ? chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }) + CHAT_TOK.repeat(DELIVERED) + 'data: {"choices":[\n'
      : messageStart(model) + BLOCK_START + TOK.repeat(DELIVERED) + 'event: content_block_delta\ndata: {"type":"content_block_delta",\n');
    const line = model.endsWith('short-data-flood') ? 'data: x\n' : 'data: ' + 'x'.repeat(10) + '\n';
    const block = line.repeat(100_000); // 0.8-1.7 MB per write
    let sent = 0;
    const pump = (): void => {
      while (sent < FLOOD_BYTES && !res.destroyed) {
        sent += block.length;
        if (!res.write(block)) return void res.once('drain', pump);
      }
      // Held open: the relay's memory is read meanwhile.
    };
    pump();
  });
  stack = await startGatewayStack();
  await mockChannel(stack, ['joined-data-flood', 'short-data-flood'], 'default', { base_url: provider.url });
  await mockChannel(stack, ['oai-joined-data-flood'], 'default', { base_url: provider.url, type: 1, key: 'sk-x' });
  account = await fundedAccount(stack, 100_000_000);
  key = (await createApiKey(stack, account)).key;
  anthropic = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
  openai = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
  counted = (await anthropic.messages.countTokens({ model: 'joined-data-flood', messages })).input_tokens;
}, 120_000);
afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

describe('an event whose data lines never end, through a conversion', () => {
  it('OpenAI client, Anthropic channel: the SDK reads the three deltas, then raises the failed stream; billed the input stated and the 3 delivered', async () => {
    const before = await balanceOf(stack, account.id);
    const { data: stream, response } = await openai.chat.completions.create({ model: 'joined-data-flood', max_tokens: 100, stream: true, messages }).withResponse();
    let text = '';
    const err = await (async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    })().then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as Error).message).toContain('The model provider stream failed.');
    expect(text).toBe('tok '.repeat(DELIVERED));
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: DELIVERED, quota: unnamedCost(NORMAL_INPUT, DELIVERED) });
    // The provider was let go.
    await expect.poll(() => provider.seen.get('joined-data-flood')!.closedAt, { timeout: 5_000 }).toBeGreaterThan(0);
  }, 30_000);

  it('Anthropic client, OpenAI-format channel: the SDK reads the three deltas, then raises the failed stream; billed the prompt counted and the 3 delivered', async () => {
    const before = await balanceOf(stack, account.id);
    const stream = anthropic.messages.stream({ model: 'oai-joined-data-flood', max_tokens: 100, messages });
    let text = '';
    stream.on('text', (t) => { text += t; });
    const err = await stream.finalMessage().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as Error).message).toContain('The model provider stream failed.');
    expect(text).toBe('tok '.repeat(DELIVERED));
    const row = await billOf(stack, account.id, stream.response!.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: counted, completion_tokens: DELIVERED, quota: unnamedCost(counted, DELIVERED) });
    await expect.poll(() => provider.seen.get('oai-joined-data-flood')!.closedAt, { timeout: 5_000 }).toBeGreaterThan(0);
  }, 30_000);

  for (const [label, path, model, openaiStyle] of [
    ['OpenAI client, Anthropic channel', '/v1/chat/completions', 'joined-data-flood', true],
    ['Anthropic client, OpenAI channel', '/v1/messages', 'oai-joined-data-flood', false],
    ['OpenAI client, Anthropic channel, 8-byte lines', '/v1/chat/completions', 'short-data-flood', true],
  ] as const) {
    it(`${label}: relay memory stays bounded while the provider sends up to ${FLOOD_BYTES >> 20} MB of data lines`, async () => {
      global.gc?.();
      const before = process.memoryUsage().heapUsed;
      const ac = new AbortController();
      const res = await fetch(`${stack.relayUrl}${path}`, {
        method: 'POST',
        signal: ac.signal,
        headers: openaiStyle ? { authorization: `Bearer ${key}`, 'content-type': 'application/json' } : { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
        body: JSON.stringify({ model, max_tokens: 100, stream: true, messages }),
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      let got = '';
      const read = (async () => { try { for (;;) { const { done, value } = await reader.read(); if (done) break; got += Buffer.from(value).toString(); } } catch { /* aborted */ } })();
      let peak = 0;
      const deadline = Date.now() + 2500;
      while (Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        peak = Math.max(peak, process.memoryUsage().heapUsed - before);
      }
      ac.abort();
      await read;
      // Unbounded, the heap grew 134-230 MB in these 2.5 s.
      expect(peak).toBeLessThan(40 * 2 ** 20);
      expect(got).toContain('The model provider stream failed.');
    }, 30_000);
  }
});
