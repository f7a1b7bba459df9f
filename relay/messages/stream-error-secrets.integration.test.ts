// A provider's error event inside a stream that quotes the key it was sent ("Incorrect API key
// provided: <key>"), in the four pairings of client and channel protocol, read with the official SDKs.
// The channel's key has no known key shape (a self-hosted provider's token): only the scrub by value
// catches it; a key-shaped `sk-…` in the same message is caught by its shape.
//
// Before: the event reached the client word for word: passed through as the provider wrote it (same
// protocol), or its message copied into the converted event (to-chat.ts, to-messages.ts). Only a
// 4xx answered whole was scrubbed (passThroughError). Now every error event the relay writes is
// scrubbed (relay/stream/error-event-scrub.ts), and the model's content, key-shaped examples
// included, passes byte for byte.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';
import { anthropicStreamRead, openaiStreamRead, type StreamRead } from '../../tests/harness/sdk-streams.js';
import { BLOCK_START, chatChunk, LONG_PROMPT, messageStart, sse, startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

const CHANNEL_KEY = 'chan-cred-7Hq2Lr9Xw4Tb8Kz1';
/** Key-shaped text the provider also quotes in its error. */
const QUOTED_SHAPE = 'sk-proj-Zq8Wm3Nv5Bx7Lk2Jh4Gf6Dd9Ss1Aa0';
/** The model's answer: a key-shaped example, the channel key's look-alike and `"error"`, which the client must get as written. */
const CONTENT = ['Set ', 'OPENAI_API_KEY=sk-proj-Example0Example1Example2Example3', ' then check {"error": null} and "Bearer abcdefghijklmnop".'];
const MESSAGE = `Incorrect API key provided: ${CHANNEL_KEY} (also ${QUOTED_SHAPE}). Internal shard db-7`;

const anthropicDelta = (text: string) => sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } });
const chatDelta = (content: string) => chatChunk({ choices: [{ index: 0, delta: { content }, finish_reason: null }] });
const ANTHROPIC_ERROR = sse('error', { type: 'error', error: { type: 'authentication_error', message: MESSAGE } });
const ANTHROPIC_DATA_ONLY_ERROR = `data: ${JSON.stringify({ type: 'error', error: { type: 'authentication_error', message: MESSAGE } })}\n\n`;
const CHAT_ERROR = `data: ${JSON.stringify({ error: { message: MESSAGE, type: 'invalid_request_error', code: 'invalid_api_key' } })}\n\n`;

let stack: GatewayStack;
let provider: ScriptedProvider;
let key: string;
let anthropic: Anthropic;
let openai: OpenAI;
const messages = [{ role: 'user' as const, content: LONG_PROMPT }];

beforeAll(async () => {
  provider = await startScriptedProvider(({ model }, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const chat = model.startsWith('oai-');
    const head = chat
      ? chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }) + CONTENT.map(chatDelta).join('')
      : messageStart(model) + BLOCK_START + CONTENT.map(anthropicDelta).join('');
    const error = chat ? CHAT_ERROR : model.endsWith('data-only') ? ANTHROPIC_DATA_ONLY_ERROR : ANTHROPIC_ERROR;
    if (!model.endsWith('-split')) return void res.end(head + error);
    // The error event in three reads: cut inside its first line, inside the key, and before its empty line.
    const cuts = [5, error.indexOf(CHANNEL_KEY) + 9, error.length - 1];
    res.write(head + error.slice(0, cuts[0]));
    let at = 0;
    const next = (): void => {
      if (at === cuts.length) return void res.end();
      res.write(error.slice(cuts[at], cuts[at + 1]));
      at++;
      setTimeout(next, 30);
    };
    setTimeout(next, 30);
  });
  stack = await startGatewayStack();
  const names = ['key-error', 'key-error-split', 'key-error-data-only'];
  await mockChannel(stack, names, 'default', { base_url: provider.url, key: CHANNEL_KEY });
  await mockChannel(stack, names.map((n) => `oai-${n}`), 'default', { base_url: provider.url, type: 1, key: CHANNEL_KEY });
  const account = await fundedAccount(stack, 100_000_000);
  key = (await createApiKey(stack, account)).key;
  anthropic = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
  openai = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
}, 120_000);
afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

/** Neither the channel's key nor anything key-shaped of the provider's message. */
function expectScrubbed(text: string): void {
  expect(text).not.toContain(CHANNEL_KEY);
  expect(text).not.toContain(QUOTED_SHAPE);
  expect(text).not.toMatch(/chan-cred|Zq8Wm3/);
  expect(text).toContain('Incorrect API key provided: [redacted]');
}

const anthropicStream = (model: string): Promise<StreamRead> => anthropicStreamRead(anthropic, { model, max_tokens: 100, messages });

const openaiStream = (model: string, includeUsage: boolean): Promise<StreamRead> =>
  openaiStreamRead(openai, { model, max_tokens: 100, messages, ...(includeUsage ? { stream_options: { include_usage: true } } : {}) });

async function raw(path: '/v1/messages' | '/v1/chat/completions', model: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await fetch(`${stack.relayUrl}${path}`, {
    method: 'POST',
    headers: path === '/v1/messages'
      ? { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' }
      : { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, max_tokens: 100, stream: true, messages, ...extra }),
  });
  expect(res.status).toBe(200);
  return res.text();
}

describe('a streamed error event quoting the channel key', () => {
  for (const model of ['key-error', 'key-error-split']) {
    it(`Anthropic client, Anthropic channel (${model}): the SDK's error holds no key; the content, key-shaped, is delivered as written`, async () => {
      const { text, error } = await anthropicStream(model);
      expect(error).toBeInstanceOf(Anthropic.APIError);
      expectScrubbed(`${(error as Error).message} ${JSON.stringify((error as InstanceType<typeof Anthropic.APIError>).error)}`);
      expect(text).toBe(CONTENT.join(''));
      // Byte for byte: the provider's content events are in the client's stream as the provider wrote them.
      const body = await raw('/v1/messages', model);
      expect(body).toContain(CONTENT.map(anthropicDelta).join(''));
      expectScrubbed(body);
    });

    it(`Anthropic client, OpenAI channel, converted (oai-${model}): the SDK's error holds no key; the content is delivered as written`, async () => {
      const { text, error } = await anthropicStream(`oai-${model}`);
      expect(error).toBeInstanceOf(Anthropic.APIError);
      expectScrubbed(`${(error as Error).message} ${JSON.stringify((error as InstanceType<typeof Anthropic.APIError>).error)}`);
      expect(text).toBe(CONTENT.join(''));
      expectScrubbed(await raw('/v1/messages', `oai-${model}`));
    });

    for (const includeUsage of [true, false]) {
      it(`OpenAI client, OpenAI channel (oai-${model}, include_usage ${includeUsage}): the SDK's error holds no key; the content is delivered as written`, async () => {
        const { text, error } = await openaiStream(`oai-${model}`, includeUsage);
        expect(error).toBeInstanceOf(OpenAI.APIError);
        expectScrubbed(`${(error as Error).message} ${JSON.stringify((error as InstanceType<typeof OpenAI.APIError>).error)}`);
        expect(text).toBe(CONTENT.join(''));
        const body = await raw('/v1/chat/completions', `oai-${model}`, includeUsage ? { stream_options: { include_usage: true } } : {});
        expect(body).toContain(CONTENT.map(chatDelta).join(''));
        expectScrubbed(body);
      });
    }

    it(`OpenAI client, Anthropic channel, converted (${model}): the SDK's error holds no key; the content is delivered as written`, async () => {
      const { text, error } = await openaiStream(model, false);
      expect(error).toBeInstanceOf(OpenAI.APIError);
      expectScrubbed(`${(error as Error).message} ${JSON.stringify((error as InstanceType<typeof OpenAI.APIError>).error)}`);
      expect(text).toBe(CONTENT.join(''));
      expectScrubbed(await raw('/v1/chat/completions', model));
    });
  }

  it('a data-only {"type":"error"} event: scrubbed passed through, and converted', async () => {
    expectScrubbed(await raw('/v1/messages', 'key-error-data-only'));
    const { text, error } = await openaiStream('key-error-data-only', false);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expectScrubbed(`${(error as Error).message} ${JSON.stringify((error as InstanceType<typeof OpenAI.APIError>).error)}`);
    expect(text).toBe(CONTENT.join(''));
  });
});
