// A provider's 200 whose framing is not the one the relay expects: a stream labelled with another media
// type (`Text/Event-Stream`, `application/octet-stream`, none), a body that is not the protocol's
// answer (a proxy's `<html>502 Bad Gateway</html>`), a body in a content-coding the relay never asked
// for (a proxy that gzips), and a JSON answer that stops after its headers. Through the official
// SDKs and raw fetch, on an Anthropic-format and an OpenAI-format channel.
//
// Before: a stream not labelled exactly `text/event-stream` was passed to the client as 200
// application/json and billed 0; the HTML page was passed as a 200 answer and billed 0; gzip bytes were
// passed under 200 (no client can read them) and billed 0; the stalled answer was a 500 saying the
// provider "could not be reached". Now a stream is metered as one whatever its label (and a body that
// begins like SSE is one), a 200 that is no answer of the protocol is the relay's 500 "could not be
// read" in the client's protocol, the relay asks for `accept-encoding: identity` and decodes gzip,
// deflate and br (an unknown coding is a 500), and a body that stops is "stopped answering".
import { gzipSync, brotliCompressSync, deflateSync } from 'node:zlib';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../../tests/harness/gateway-stack.js';
import {
  balanceOf, billOf, BLOCK_START, CHAT_DONE, CHAT_FINISH, CHAT_TOK, chatChunk, chatCompletion, LONG_PROMPT, NORMAL_INPUT, NORMAL_OUTPUT, NORMAL_TEXT, normalMessage, normalStream,
  messageStart, sse, startScriptedProvider, TOK, unnamedCost, type ScriptedProvider,
} from '../../tests/harness/scripted-provider.js';

const FUNDS = 10_000_000;
const NORMAL = unnamedCost(NORMAL_INPUT, NORMAL_OUTPUT);
const BODY_TIMEOUT_MS = 1000;

/** A Chat Completions stream of the normal answer, its usage in the last chunk. */
function chatStream(): string {
  return chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] })
    + CHAT_TOK.repeat(NORMAL_OUTPUT) + CHAT_FINISH
    + chatChunk({ choices: [], usage: { prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, total_tokens: NORMAL_INPUT + NORMAL_OUTPUT } })
    + CHAT_DONE;
}

const CODERS: Record<string, (b: Buffer) => Buffer> = { gzip: (b) => gzipSync(b), br: (b) => brotliCompressSync(b), deflate: (b) => deflateSync(b) };

let stack: GatewayStack;
let provider: ScriptedProvider;
let account: TestAccount;
let anthropic: Anthropic;
let openai: OpenAI;
let key: string;

beforeAll(async () => {
  provider = await startScriptedProvider(({ model, body }, res) => {
    const chat = model.startsWith('oai-');
    const streamBody = chat ? chatStream() : normalStream(model);
    const jsonBody = chat ? chatCompletion({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, total_tokens: NORMAL_INPUT + NORMAL_OUTPUT }) : normalMessage(model);
    const name = model.replace(/^oai-/, '');
    if (name.startsWith('ct-')) {
      const type = { 'ct-mixed-case': 'Text/Event-Stream; charset=UTF-8', 'ct-octet': 'application/octet-stream', 'ct-none': '' }[name]!;
      res.writeHead(200, type ? { 'content-type': type } : {});
      res.end(streamBody);
      return;
    }
    if (name === 'html-502') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>502 Bad Gateway</html>');
      return;
    }
    if (name === 'error-200') {
      // The provider's error in its own protocol's shape, under a 200 (some OpenAI-compatible servers).
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(chat
        ? JSON.stringify({ error: { message: 'Upstream failure (org-123)', type: 'server_error', code: null } })
        : JSON.stringify({ type: 'error', error: { type: 'api_error', message: 'Upstream failure (org-123)' } }));
      return;
    }
    if (name === 'json-for-stream') {
      // A provider that ignores `stream` (asked for by every request to this model).
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(jsonBody);
      return;
    }
    if (name === 'stream-error') {
      // A stream that the provider breaks off with its error event after some text.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(chat
        ? chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }) + CHAT_TOK.repeat(10)
          + `data: ${JSON.stringify({ error: { message: 'Internal failure at the provider, org-123', type: 'server_error', code: null } })}\n\n`
        : messageStart(model) + BLOCK_START + TOK.repeat(10)
          + sse('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded (org-123)' } }));
      return;
    }
    if (name === 'no-done') {
      // A whole Chat Completions stream, closed without `data: [DONE]` (some OpenAI-compatible servers).
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(chatStream().replace(CHAT_DONE, ''));
      return;
    }
    if (name === 'sse-unlabelled') {
      res.writeHead(200, {});
      res.end(streamBody);
      return;
    }
    const coded = /^(gzip|br|deflate|zstd)-(stream|json)$/.exec(name);
    if (coded) {
      const [, coding, kind] = coded;
      const plain = Buffer.from(kind === 'stream' ? streamBody : jsonBody);
      res.writeHead(200, { 'content-type': kind === 'stream' ? 'text/event-stream' : 'application/json', 'content-encoding': coding! });
      // zstd stands for any coding the relay cannot decode: its bytes are not even zstd.
      res.end(coding === 'zstd' ? gzipSync(plain) : CODERS[coding!]!(plain));
      return;
    }
    if (name === 'stall-json') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"id":"msg_1","type":"message","content":[{"type":"text","text":"tok');
      return; // never ends: the relay's body timeout does
    }
    throw new Error(`unscripted model ${model} (${JSON.stringify(body).slice(0, 80)})`);
  });
  stack = await startGatewayStack({ env: { UPSTREAM_BODY_TIMEOUT_MS: String(BODY_TIMEOUT_MS) } });
  const names = ['ct-mixed-case', 'ct-octet', 'ct-none', 'html-502', 'error-200', 'sse-unlabelled', 'stall-json', 'json-for-stream', 'stream-error', 'no-done',
    ...['gzip', 'br', 'deflate', 'zstd'].flatMap((c) => [`${c}-stream`, `${c}-json`])];
  await mockChannel(stack, names, 'default', { base_url: provider.url });
  await mockChannel(stack, names.map((n) => `oai-${n}`), 'default', { base_url: provider.url, type: 1, key: 'sk-x' });
  account = await fundedAccount(stack, FUNDS);
  key = (await createApiKey(stack, account)).key;
  anthropic = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
  openai = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

const messages = [{ role: 'user' as const, content: LONG_PROMPT }];

/** An Anthropic SDK stream read to its end: its text, content-type and gateway request id. */
async function anthropicStream(model: string): Promise<{ text: string; contentType: string; requestId: string }> {
  const { data: stream, response } = await anthropic.messages.create({ model, max_tokens: 100, stream: true, messages }).withResponse();
  let text = '';
  for await (const event of stream) if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
  return { text, contentType: response.headers.get('content-type') ?? '', requestId: response.headers.get('x-gateway-request-id')! };
}

async function openaiStream(model: string): Promise<{ text: string; contentType: string; requestId: string }> {
  const { data: stream, response } = await openai.chat.completions.create({ model, max_tokens: 100, stream: true, messages }).withResponse();
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
  return { text, contentType: response.headers.get('content-type') ?? '', requestId: response.headers.get('x-gateway-request-id')! };
}

/** The SDK's error of a request that fails, with the gateway request id of its answer. */
async function failed(run: () => Promise<unknown>): Promise<{ status: number; error: Record<string, unknown>; requestId: string }> {
  const err = await run().then(() => null, (e: unknown) => e);
  if (!(err instanceof Anthropic.APIError) && !(err instanceof OpenAI.APIError)) throw new Error(`expected an API error, got ${String(err)}`);
  const headers = err.headers as Headers | undefined;
  return { status: err.status!, error: err.error as Record<string, unknown>, requestId: headers?.get('x-gateway-request-id') ?? '' };
}

describe('a stream labelled with another media type', () => {
  for (const model of ['ct-mixed-case', 'ct-octet', 'ct-none']) {
    it(`${model}: streamed to an Anthropic client as text/event-stream and billed the provider's usage`, async () => {
      const before = await balanceOf(stack, account.id);
      const { text, contentType, requestId } = await anthropicStream(model);
      expect(text).toBe('tok '.repeat(NORMAL_OUTPUT));
      expect(contentType).toMatch(/^text\/event-stream/);
      const row = await billOf(stack, account.id, requestId, before);
      expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL, type: 2 });
    });

    it(`oai-${model}: streamed to an OpenAI client and billed the provider's usage`, async () => {
      const before = await balanceOf(stack, account.id);
      const { text, contentType, requestId } = await openaiStream(`oai-${model}`);
      expect(text).toBe('tok '.repeat(NORMAL_OUTPUT));
      expect(contentType).toMatch(/^text\/event-stream/);
      const row = await billOf(stack, account.id, requestId, before);
      expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL, type: 2 });
    });
  }

});

describe('a Chat Completions stream closed without [DONE]', () => {
  // Before: the relay took it for a cut stream and ended it with its failed-stream event, so the
  // SDK threw after the whole answer (billed in full); the log said the stream was cut.
  it('is a whole answer: the OpenAI SDK reads it to its end and the [DONE] it may wait for, billed its usage as complete', async () => {
    const before = await balanceOf(stack, account.id);
    const res = await fetch(`${stack.relayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'oai-no-done', max_tokens: 100, stream: true, messages }),
    });
    const raw = await res.text();
    expect(raw).not.toContain('stream_failed');
    expect(raw.trimEnd().endsWith('data: [DONE]')).toBe(true);
    const row = await billOf(stack, account.id, res.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL, type: 2 });
    const rs = await stack.ch.query({ query: 'SELECT content FROM logs FINAL WHERE request_id = {r:String}', query_params: { r: res.headers.get('x-gateway-request-id')! }, format: 'JSONEachRow' });
    expect((await rs.json<{ content: string }>())[0]!.content).not.toMatch(/stream ended/);

    const mid = await balanceOf(stack, account.id);
    const { text, requestId } = await openaiStream('oai-no-done');
    expect(text).toBe('tok '.repeat(NORMAL_OUTPUT));
    expect(await billOf(stack, account.id, requestId, mid)).toMatchObject({ quota: NORMAL });
  });

  it('converted for an Anthropic client: its message_stop, the SDK\'s finalMessage, billed as complete', async () => {
    const before = await balanceOf(stack, account.id);
    const stream = anthropic.messages.stream({ model: 'oai-no-done', max_tokens: 100, messages });
    const message = await stream.finalMessage();
    expect(message).toMatchObject({ content: [{ type: 'text', text: 'tok '.repeat(NORMAL_OUTPUT) }], stop_reason: 'end_turn', usage: { input_tokens: NORMAL_INPUT, output_tokens: NORMAL_OUTPUT } });
    const row = await billOf(stack, account.id, stream.response!.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL, type: 2 });
  });
});

describe('a request without stream answered with a stream (a provider that streams whatever it is asked)', () => {
  // Before: the events went to the client as they came (text/event-stream to a request for JSON),
  // which the SDKs, waiting for one JSON object, could not read, though it was billed.
  it('unlabelled, to raw fetch: the Message as JSON, billed the stream\'s usage', async () => {
    const before = await balanceOf(stack, account.id);
    const res = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sse-unlabelled', max_tokens: 100, messages }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toMatchObject({ type: 'message', role: 'assistant', content: [{ type: 'text', text: 'tok '.repeat(NORMAL_OUTPUT) }], stop_reason: 'end_turn', usage: { input_tokens: NORMAL_INPUT, output_tokens: NORMAL_OUTPUT } });
    const row = await billOf(stack, account.id, res.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL, type: 2 });
  });

  it('the Anthropic SDK\'s messages.create reads the Message, billed its usage', async () => {
    const before = await balanceOf(stack, account.id);
    const { data: message, response } = await anthropic.messages.create({ model: 'ct-mixed-case', max_tokens: 100, messages }).withResponse();
    expect(message).toMatchObject({ type: 'message', content: [{ type: 'text', text: 'tok '.repeat(NORMAL_OUTPUT) }], stop_reason: 'end_turn', usage: { input_tokens: NORMAL_INPUT, output_tokens: NORMAL_OUTPUT } });
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL, type: 2 });
  });

  it('the OpenAI SDK reads the Chat Completion folded from the chunks, billed its usage', async () => {
    const before = await balanceOf(stack, account.id);
    const { data: completion, response } = await openai.chat.completions.create({ model: 'oai-ct-mixed-case', max_tokens: 100, messages }).withResponse();
    expect(completion).toMatchObject({ object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'tok '.repeat(NORMAL_OUTPUT) }, finish_reason: 'stop' }], usage: { prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT } });
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL, type: 2 });
  });

  it('across protocols: an Anthropic client of an OpenAI-format channel that streams gets the Message, billed its usage', async () => {
    const before = await balanceOf(stack, account.id);
    const { data: message, response } = await anthropic.messages.create({ model: 'oai-ct-octet', max_tokens: 100, messages }).withResponse();
    expect(message).toMatchObject({ type: 'message', content: [{ type: 'text', text: 'tok '.repeat(NORMAL_OUTPUT) }], stop_reason: 'end_turn', usage: { input_tokens: NORMAL_INPUT, output_tokens: NORMAL_OUTPUT } });
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL, type: 2 });
  });

  it('a stream that ends with the provider\'s error: the error in the client\'s protocol, the provider\'s words kept out, what was generated billed', async () => {
    const before = await balanceOf(stack, account.id);
    const a = await failed(() => anthropic.messages.create({ model: 'stream-error', max_tokens: 100, messages }));
    expect(a.status).toBe(529);
    expect(a.error).toMatchObject({ type: 'error', error: { type: 'overloaded_error' }, request_id: a.requestId });
    expect(JSON.stringify(a.error)).not.toContain('org-123');
    // message_start's prompt, and the text generated before the error counted ('tok ' × 10: 10 cl100k
    // tokens, the space at its end left out: it would begin the next token), as the same stream cut is
    // billed (folded-stream-billing.integration.test.ts): message_start's one output token was all it
    // stated (before: billed 1, then 11).
    const rowA = await billOf(stack, account.id, a.requestId, before);
    expect(rowA).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: 10, quota: unnamedCost(NORMAL_INPUT, 10) });

    const mid = await balanceOf(stack, account.id);
    const o = await failed(() => openai.chat.completions.create({ model: 'oai-stream-error', max_tokens: 100, messages }));
    expect(o.status).toBe(502);
    expect(o.error).toMatchObject({ type: 'server_error' });
    expect(JSON.stringify(o.error)).not.toContain('org-123');
    // No usage stated: the prompt and the text are counted ('tok ' × 10 is 10 cl100k tokens, the space at its end left out, as above).
    const rowO = await billOf(stack, account.id, o.requestId, mid);
    expect(rowO.completion_tokens).toBe(10);
    expect(rowO.prompt_tokens).toBeGreaterThan(0);
    expect(rowO.quota).toBe(unnamedCost(rowO.prompt_tokens, 10));
  });
});

describe('a stream request answered otherwise', () => {
  // Before: the JSON went to the client as it was, which the SDKs, waiting for events, could not read
  // ("request ended without sending any chunks"), though it was billed.
  it('with JSON, by a provider that ignores `stream`: the SDK reads the answer as the stream it asked for, billed its usage', async () => {
    const before = await balanceOf(stack, account.id);
    const stream = anthropic.messages.stream({ model: 'json-for-stream', max_tokens: 100, messages });
    const events: string[] = [];
    stream.on('streamEvent', (e) => events.push(e.type));
    const message = await stream.finalMessage();
    expect(events).toEqual(['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
    expect(message).toMatchObject({ type: 'message', content: [{ type: 'text', text: NORMAL_TEXT }], stop_reason: 'end_turn', usage: { input_tokens: NORMAL_INPUT, output_tokens: NORMAL_OUTPUT } });
    expect(stream.response!.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const row = await billOf(stack, account.id, stream.response!.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL, type: 2 });
  });

  it('with JSON, OpenAI-format: the SDK reads chunks and the usage it asked for, billed its usage', async () => {
    const before = await balanceOf(stack, account.id);
    const { data: stream, response } = await openai.chat.completions.create({ model: 'oai-json-for-stream', max_tokens: 100, stream: true, stream_options: { include_usage: true }, messages }).withResponse();
    let text = '';
    let usage: unknown = null;
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(NORMAL_TEXT);
    expect(finish).toBe('stop');
    expect(usage).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT });
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL, type: 2 });
  });

  it('with a proxy\'s HTML page: the 500 of an answer that could not be read, billed nothing', async () => {
    const before = await balanceOf(stack, account.id);
    const r = await failed(() => anthropic.messages.create({ model: 'html-502', max_tokens: 100, stream: true, messages }));
    expect(r.status).toBe(500);
    expect(r.error).toMatchObject({ type: 'error', error: { type: 'api_error', message: expect.stringMatching(/could not be read/) } });
    expect(await billOf(stack, account.id, r.requestId, before)).toMatchObject({ quota: 0, type: 5 });
  });
});

describe('a 200 whose body is not the protocol\'s answer', () => {
  it('html-502 to /v1/messages: a 500 api_error "could not be read", billed nothing', async () => {
    const before = await balanceOf(stack, account.id);
    const r = await failed(() => anthropic.messages.create({ model: 'html-502', max_tokens: 100, messages }));
    expect(r.status).toBe(500);
    expect(r.error).toMatchObject({ type: 'error', error: { type: 'api_error', message: expect.stringMatching(/could not be read/) } });
    const row = await billOf(stack, account.id, r.requestId, before);
    expect(row).toMatchObject({ quota: 0, type: 5 });
  });

  it('oai-html-502 to /v1/chat/completions: a 500 server_error "could not be read", billed nothing', async () => {
    const before = await balanceOf(stack, account.id);
    const r = await failed(() => openai.chat.completions.create({ model: 'oai-html-502', max_tokens: 100, messages }));
    expect(r.status).toBe(500);
    expect(r.error).toMatchObject({ type: 'server_error', message: expect.stringMatching(/could not be read/) });
    const row = await billOf(stack, account.id, r.requestId, before);
    expect(row).toMatchObject({ quota: 0, type: 5 });
  });
});

// Before: converted for the other protocol's client, such a 200 became an empty answer (a Message with
// no content, a Chat Completion whose content is null): a success to the client, billed nothing.
describe('a 200 whose body is the provider\'s error', () => {
  it('error-200 to /v1/messages and to /v1/chat/completions: a 500 "could not be read", billed nothing', async () => {
    let before = await balanceOf(stack, account.id);
    const ant = await failed(() => anthropic.messages.create({ model: 'error-200', max_tokens: 100, messages }));
    expect(ant.status).toBe(500);
    expect(ant.error).toMatchObject({ type: 'error', error: { type: 'api_error', message: expect.stringMatching(/could not be read/) } });
    expect(await billOf(stack, account.id, ant.requestId, before)).toMatchObject({ quota: 0, type: 5 });
    before = await balanceOf(stack, account.id);
    const oai = await failed(() => openai.chat.completions.create({ model: 'oai-error-200', max_tokens: 100, messages }));
    expect(oai.status).toBe(500);
    expect(oai.error).toMatchObject({ type: 'server_error', message: expect.stringMatching(/could not be read/) });
    expect(await billOf(stack, account.id, oai.requestId, before)).toMatchObject({ quota: 0, type: 5 });
  });

  it('converted: oai-error-200 to the Anthropic SDK and error-200 to the openai SDK are the same 500, not an empty answer', async () => {
    let before = await balanceOf(stack, account.id);
    const ant = await failed(() => anthropic.messages.create({ model: 'oai-error-200', max_tokens: 100, messages }));
    expect(ant.status).toBe(500);
    expect(ant.error).toMatchObject({ type: 'error', error: { type: 'api_error', message: expect.stringMatching(/could not be read/) } });
    expect(JSON.stringify(ant.error)).not.toContain('org-123');
    expect(await billOf(stack, account.id, ant.requestId, before)).toMatchObject({ quota: 0, type: 5 });
    before = await balanceOf(stack, account.id);
    const oai = await failed(() => openai.chat.completions.create({ model: 'error-200', max_tokens: 100, messages }));
    expect(oai.status).toBe(500);
    expect(oai.error).toMatchObject({ type: 'server_error', message: expect.stringMatching(/could not be read/) });
    expect(await billOf(stack, account.id, oai.requestId, before)).toMatchObject({ quota: 0, type: 5 });
  });
});

describe('an answer in a content-coding the relay did not ask for', () => {
  for (const coding of ['gzip', 'br', 'deflate']) {
    it(`${coding} stream and JSON, both protocols: decoded, delivered and billed the provider's usage`, async () => {
      for (const [prefix, streamed, json] of [
        ['', anthropicStream, async (model: string) => {
          const { data, response } = await anthropic.messages.create({ model, max_tokens: 100, messages }).withResponse();
          return { text: data.content[0]?.type === 'text' ? data.content[0].text : '', requestId: response.headers.get('x-gateway-request-id')! };
        }],
        ['oai-', openaiStream, async (model: string) => {
          const { data, response } = await openai.chat.completions.create({ model, max_tokens: 100, messages }).withResponse();
          return { text: data.choices[0]?.message.content ?? '', requestId: response.headers.get('x-gateway-request-id')! };
        }],
      ] as const) {
        let before = await balanceOf(stack, account.id);
        const s = await streamed(`${prefix}${coding}-stream`);
        expect(s.text).toBe('tok '.repeat(NORMAL_OUTPUT));
        expect(await billOf(stack, account.id, s.requestId, before)).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL, type: 2 });
        // The relay asked for no coding: a proxy that honours accept-encoding sends none.
        expect(provider.seen.get(`${prefix}${coding}-stream`)!.headers['accept-encoding']).toBe('identity');
        before = await balanceOf(stack, account.id);
        const j = await json(`${prefix}${coding}-json`);
        expect(j.text).toBe('tok '.repeat(NORMAL_OUTPUT - 1) + 'tok');
        expect(await billOf(stack, account.id, j.requestId, before)).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL, type: 2 });
      }
    });
  }

  it('a coding the relay cannot decode: a 500 in the client\'s protocol, stream or not, billed nothing', async () => {
    for (const model of ['zstd-stream', 'zstd-json']) {
      const before = await balanceOf(stack, account.id);
      const r = await failed(() => anthropic.messages.create({ model, max_tokens: 100, stream: model.endsWith('stream') ? true : undefined, messages }));
      expect(r.status).toBe(500);
      expect(r.error).toMatchObject({ type: 'error', error: { type: 'api_error', message: expect.stringMatching(/could not be read/) } });
      expect(await billOf(stack, account.id, r.requestId, before)).toMatchObject({ quota: 0, type: 5 });
    }
    for (const model of ['oai-zstd-stream', 'oai-zstd-json']) {
      const before = await balanceOf(stack, account.id);
      const r = await failed(() => openai.chat.completions.create({ model, max_tokens: 100, stream: model.endsWith('stream') ? true : undefined, messages }));
      expect(r.status).toBe(500);
      expect(r.error).toMatchObject({ type: 'server_error', message: expect.stringMatching(/could not be read/) });
      expect(await billOf(stack, account.id, r.requestId, before)).toMatchObject({ quota: 0, type: 5 });
    }
  });
});

describe('a JSON answer that stops after its headers', () => {
  it('is answered, after the body timeout, with the 500 of a provider that stopped answering, billed nothing', async () => {
    const before = await balanceOf(stack, account.id);
    const t0 = performance.now();
    const r = await failed(() => anthropic.messages.create({ model: 'stall-json', max_tokens: 100, messages }));
    expect(performance.now() - t0).toBeGreaterThanOrEqual(BODY_TIMEOUT_MS - 100);
    expect(r.status).toBe(500);
    expect(r.error).toMatchObject({ type: 'error', error: { type: 'api_error', message: expect.stringMatching(/stopped answering/) } });
    expect(await billOf(stack, account.id, r.requestId, before)).toMatchObject({ quota: 0, type: 5 });
  });
});
