// A provider whose JSON is valid but not the object its protocol promises: SSE lines `data: null`,
// `data: 1`, `data: "x"`, `data: []` (under event names too), and JSON answers `null`, `[]`,
// `{"choices":null}`, `{"usage":null}`, `{"content":null}`, a `null` tool call. Through /v1/messages
// and /v1/chat/completions, on an Anthropic-format and an OpenAI-format channel, with the official
// SDKs. Before, `data: null` threw a TypeError out of the provider body's 'data' handler: the relay
// process logged it fatal and exited, cutting every user's stream. Now such a line is skipped, the
// relay stays up (the next request is served), and each request is billed what the provider stated
// (or, when it stated nothing, what the relay counted, or nothing for an answer that is none).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  billingSettled, createApiKey, settledAccountQuota, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

const FUNDS = 10_000_000;
const INPUT = 100;
const OUTPUT = 7;
// Models no ratio names: model ratio 1, completion ratio 5, group default 1.
const cost = (input: number, output: number) => input + output * 5;
/** A prompt whose bytes bound the INPUT tokens the scripted provider states (the relay bills no more input than a text prompt can hold). */
const PROMPT = 'Say hi. '.repeat(20);
const HOSTILE = ['null', '1', '"x"', '[]', 'true'];

let stack: GatewayStack;
let provider: Server;
let account: TestAccount;
let anthropic: Anthropic;
let openai: OpenAI;
let key: string;

function sse(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** An Anthropic stream with every hostile payload, bare and under each event name, among its events. */
function anthropicStream(model: string): string {
  const hostile = HOSTILE.flatMap((d) => [`data: ${d}\n\n`, ...['message_start', 'message_delta', 'content_block_delta', 'error'].map((e) => `event: ${e}\ndata: ${d}\n\n`)]).join('');
  const delta = sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'tok ' } });
  return sse('message_start', { type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model, content: [], usage: { input_tokens: INPUT, output_tokens: 1 } } })
    + hostile
    + sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
    + delta + hostile + delta
    + sse('content_block_stop', { type: 'content_block_stop', index: 0 })
    + sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: OUTPUT } })
    + sse('message_stop', { type: 'message_stop' });
}

/** A Chat Completions stream with the hostile payloads and members that are not objects. */
function chatStream(): string {
  const chunk = (c: object) => `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'm', ...c })}\n\n`;
  const hostile = HOSTILE.map((d) => `data: ${d}\n\n`).join('')
    + chunk({ choices: null }) + chunk({ choices: [null] }) + chunk({ choices: [{ index: 0, delta: null }] })
    + chunk({ choices: [{ index: 0, delta: { tool_calls: [null, 3] } }] });
  return hostile
    + chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] })
    + hostile
    + chunk({ choices: [{ index: 0, delta: { content: 'tok ' }, finish_reason: null }] })
    + chunk({ choices: [{ index: 0, delta: { content: 'tok ' }, finish_reason: null }] })
    + chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })
    + hostile
    + chunk({ choices: [], usage: { prompt_tokens: INPUT, completion_tokens: OUTPUT, total_tokens: INPUT + OUTPUT } })
    + 'data: [DONE]\n\n';
}

const USAGE_A = { input_tokens: INPUT, output_tokens: OUTPUT };
const USAGE_O = { prompt_tokens: INPUT, completion_tokens: OUTPUT, total_tokens: INPUT + OUTPUT };
/**
 * JSON answers by model: the body, and what it bills (null: no usage stated, nothing countable;
 * 'counted': no usage stated, an answer without text, so the prompt the relay counts).
 */
const JSON_ANSWERS: Record<string, { body: string; billed: number | null | 'counted' }> = {
  'anth-json-null': { body: 'null', billed: null },
  'anth-json-array': { body: '[]', billed: null },
  'anth-json-number': { body: '1', billed: null },
  'anth-json-content-null': { body: JSON.stringify({ id: 'msg_2', type: 'message', role: 'assistant', content: null, stop_reason: 'end_turn', usage: USAGE_A }), billed: cost(INPUT, OUTPUT) },
  'anth-json-content-items': { body: JSON.stringify({ id: 'msg_3', type: 'message', role: 'assistant', content: [null, 1, { type: 'tool_use', input: null }], stop_reason: 'end_turn', usage: USAGE_A }), billed: cost(INPUT, OUTPUT) },
  'anth-json-usage-null': { body: JSON.stringify({ id: 'msg_4', type: 'message', role: 'assistant', content: null, usage: null }), billed: null },
  'oai-json-null': { body: 'null', billed: null },
  'oai-json-array': { body: '[]', billed: null },
  'oai-json-string': { body: '"x"', billed: null },
  'oai-json-choices-null': { body: JSON.stringify({ id: 'chatcmpl-2', object: 'chat.completion', choices: null, usage: USAGE_O }), billed: cost(INPUT, OUTPUT) },
  'oai-json-choice-null': { body: JSON.stringify({ id: 'chatcmpl-3', object: 'chat.completion', choices: [null], usage: USAGE_O }), billed: cost(INPUT, OUTPUT) },
  'oai-json-tool-calls-null': { body: JSON.stringify({ id: 'chatcmpl-4', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [null, 1, { id: 'c', function: null }] }, finish_reason: 'tool_calls' }], usage: USAGE_O }), billed: cost(INPUT, OUTPUT) },
  'oai-json-usage-null': { body: JSON.stringify({ id: 'chatcmpl-5', object: 'chat.completion', choices: [{ index: 0, message: null }], usage: null }), billed: 'counted' },
};
const ANTHROPIC_MODELS = ['anth-stream', ...Object.keys(JSON_ANSWERS).filter((m) => m.startsWith('anth-'))];
const OPENAI_MODELS = ['oai-stream', ...Object.keys(JSON_ANSWERS).filter((m) => m.startsWith('oai-'))];

function scripted(req: IncomingMessage, res: ServerResponse): void {
  let raw = '';
  req.on('data', (c: Buffer) => { raw += c.toString(); });
  req.on('end', () => {
    const { model, stream } = JSON.parse(raw) as { model: string; stream?: boolean };
    if (stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(model.startsWith('anth-') ? anthropicStream(model) : chatStream());
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON_ANSWERS[model]?.body ?? 'null');
  });
}

beforeAll(async () => {
  provider = createServer(scripted);
  await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;
  stack = await startGatewayStack();
  await mockChannel(stack, ANTHROPIC_MODELS, 'default', { base_url: url });
  await mockChannel(stack, OPENAI_MODELS, 'default', { base_url: url, key: 'sk-proj-scripted', type: 1 });
  account = await fundedAccount(stack, FUNDS);
  key = (await createApiKey(stack, account)).key;
  anthropic = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
  openai = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  await stack?.close();
  provider?.closeAllConnections();
  await new Promise((r) => provider?.close(r));
});

const balance = (): Promise<number> => settledAccountQuota(stack, account.id);

/** The relay still serves: a plain request on the Anthropic channel's model is answered. */
async function stillServing(): Promise<void> {
  const msg = await anthropic.messages.create({ model: 'anth-json-content-null', max_tokens: 20, messages: [{ role: 'user', content: PROMPT }] });
  expect(msg.usage).toMatchObject({ input_tokens: INPUT, output_tokens: OUTPUT });
  // Its bill in the books before the next test reads the balance.
  await billingSettled(stack);
}

/**
 * A stream in the provider's own protocol passes as the provider wrote it (the relay only reads it),
 * its hostile lines included, which the SDKs themselves cannot read: read here as text.
 */
async function passThrough(route: string, body: object): Promise<{ text: string; requestId: string }> {
  const res = await fetch(`${stack.relayUrl}${route}`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  return { text: await res.text(), requestId: res.headers.get('x-gateway-request-id')! };
}

describe('a provider stream with JSON lines that are not objects', () => {
  it('anth-stream to /v1/messages and oai-stream to /v1/chat/completions, passed as they are: read past them, billed the provider\'s usage', async () => {
    for (const [route, model, end] of [['/v1/messages', 'anth-stream', 'event: message_stop'], ['/v1/chat/completions', 'oai-stream', 'data: [DONE]']] as const) {
      const before = await balance();
      const { text, requestId } = await passThrough(route, { model, max_tokens: 20, stream: true, stream_options: route === '/v1/chat/completions' ? { include_usage: true } : undefined, messages: [{ role: 'user', content: PROMPT }] });
      expect(text).toContain('data: null');
      expect(text.trimEnd().endsWith(end) || text.includes(`${end}\n`)).toBe(true);
      const row = await ledgerRow(stack, requestId);
      expect(row).toMatchObject({ prompt_tokens: INPUT, completion_tokens: OUTPUT, quota: cost(INPUT, OUTPUT), type: 2 });
      expect(await balance()).toBe(before - cost(INPUT, OUTPUT));
      await stillServing();
    }
  });

  it('oai-stream to /v1/messages: the lines are skipped, the stream converted completes, billed the provider\'s usage', async () => {
    const before = await balance();
    const { data: stream, response } = await anthropic.messages.create({ model: 'oai-stream', max_tokens: 20, stream: true, messages: [{ role: 'user', content: PROMPT }] }).withResponse();
    let text = '';
    let stop: string | null = null;
    for await (const event of stream) {
      if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
      if (event.type === 'message_delta') stop = event.delta.stop_reason;
    }
    expect(text).toBe('tok tok ');
    expect(stop).toBe('end_turn');
    const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
    expect(row).toMatchObject({ prompt_tokens: INPUT, completion_tokens: OUTPUT, quota: cost(INPUT, OUTPUT), type: 2 });
    expect(await balance()).toBe(before - cost(INPUT, OUTPUT));
    await stillServing();
  });

  it('anth-stream to /v1/chat/completions: the lines are skipped, the stream converted completes, billed the provider\'s usage', async () => {
    const before = await balance();
    const { data: stream, response } = await openai.chat.completions.create({ model: 'anth-stream', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: PROMPT }] }).withResponse();
    let text = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe('tok tok ');
    expect(finish).toBe('stop');
    expect(usage).toMatchObject({ prompt_tokens: INPUT, completion_tokens: OUTPUT });
    const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
    expect(row).toMatchObject({ prompt_tokens: INPUT, completion_tokens: OUTPUT, quota: cost(INPUT, OUTPUT), type: 2 });
    expect(await balance()).toBe(before - cost(INPUT, OUTPUT));
    await stillServing();
  });
});

/** The request's gateway id and status, from the answer or the SDK's error. */
async function call(run: () => Promise<{ response: Response }>): Promise<{ status: number; requestId: string; error: unknown }> {
  try {
    const { response } = await run();
    return { status: response.status, requestId: response.headers.get('x-gateway-request-id')!, error: null };
  } catch (err) {
    if (!(err instanceof Anthropic.APIError) && !(err instanceof OpenAI.APIError)) throw err;
    const headers = err.headers as Headers | undefined;
    return { status: err.status!, requestId: headers?.get('x-gateway-request-id') ?? '', error: err };
  }
}

describe('a JSON answer that is not the object its protocol promises', () => {
  for (const [model, { billed }] of Object.entries(JSON_ANSWERS)) {
    for (const route of ['/v1/messages', '/v1/chat/completions'] as const) {
      it(`${model} to ${route}: answered (a 200, or the 500 of an answer that could not be read), billed ${billed ?? 'nothing'}`, async () => {
        const before = await balance();
        const messages = [{ role: 'user' as const, content: PROMPT }];
        const r = route === '/v1/messages'
          ? await call(() => anthropic.messages.create({ model, max_tokens: 20, messages }).withResponse())
          : await call(() => openai.chat.completions.create({ model, max_tokens: 20, messages }).withResponse());
        if (r.status !== 200) {
          // The provider's answer is none the client's protocol can carry: the relay's own error, in the client's shape.
          expect(r.status).toBe(500);
          const body = (r.error as { error?: unknown }).error;
          if (route === '/v1/messages') expect(body).toMatchObject({ type: 'error', error: { type: 'api_error', message: expect.stringMatching(/could not be read/) } });
          else expect(r.error).toMatchObject({ type: 'server_error', message: expect.stringMatching(/could not be read/) });
        }
        expect(r.requestId).not.toBe('');
        const row = await ledgerRow(stack, r.requestId);
        // The usage stated is billed; none stated, what the relay counts: the prompt of an answer
        // without text, nothing for a body that is no answer.
        const expected = billed === 'counted' ? cost(row.prompt_tokens, 0) : billed ?? 0;
        if (billed === 'counted') expect(row).toMatchObject({ completion_tokens: 0, prompt_tokens: expect.any(Number) });
        if (billed === 'counted') expect(row.prompt_tokens).toBeGreaterThan(0);
        expect(row.quota).toBe(expected);
        expect(await balance()).toBe(before - expected);
        await stillServing();
      });
    }
  }
});
