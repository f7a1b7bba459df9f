// SSE framings the spec allows and the SDKs read, which the relay's meters must read alike: an event
// whose data spans several `data:` lines (joined with newlines), lines ended by a lone CR, and a
// content delta longer than the longest line the meters carry whole (1 MiB). The normal answer
// states 1000 input and 50 output tokens and delivers 50 deltas "tok ": 1250 quota at the test's ratios.
//
// Before: a message_start split over two data lines was not read (input billed 0), nor a
// message_delta so split; a stream with CR line ends was billed 0; a 1.2 MB delta was dropped by the
// meter, so a stream cut after it billed its input alone though the client had the 1.2 MB. Now the
// data lines of an event are joined as the spec says, a lone CR ends a line, and an overlong delta's
// text is counted piece by piece as it passes.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../../tests/harness/gateway-stack.js';
import {
  balanceOf, billOf, BLOCK_START, BLOCK_STOP, CHAT_DONE, CHAT_FINISH, CHAT_TOK, chatChunk, LONG_PROMPT, MESSAGE_STOP, messageDelta, messageStart,
  NORMAL_INPUT, NORMAL_OUTPUT, normalStream, startScriptedProvider, TOK, unnamedCost, type ScriptedProvider,
} from '../../tests/harness/scripted-provider.js';

const FUNDS = 100_000_000;
const NORMAL = unnamedCost(NORMAL_INPUT, NORMAL_OUTPUT);
/** 1.2 MB of text in one delta: 300,000 tokens "tok ". */
const LONG_TOKS = 300_000;

/** An event's data split over two data lines after its first comma (between JSON tokens). */
function splitData(event: string): string {
  return event.replace(/^data: (.*?),/m, 'data: $1,\ndata: ');
}

let stack: GatewayStack;
let provider: ScriptedProvider;
let account: TestAccount;
let key: string;
let anthropic: Anthropic;
let openai: OpenAI;
let counted: number;

beforeAll(async () => {
  provider = await startScriptedProvider(({ model }, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    switch (model) {
      case 'multiline-start':
        return void res.end(splitData(messageStart(model)) + BLOCK_START + TOK.repeat(NORMAL_OUTPUT) + BLOCK_STOP + messageDelta() + MESSAGE_STOP);
      case 'multiline-all':
        return void res.end([messageStart(model), BLOCK_START, ...Array<string>(NORMAL_OUTPUT).fill(TOK), BLOCK_STOP, messageDelta(), MESSAGE_STOP].map(splitData).join(''));
      case 'multiline-deltas-cut':
        // Cut after the deltas: billed the delivered text, which only the joined lines give.
        return void res.end(messageStart(model) + BLOCK_START + splitData(TOK).repeat(NORMAL_OUTPUT));
      case 'garbled-start':
        // A message_start that is no JSON: the input is not stated, the prompt is counted.
        return void res.end('event: message_start\ndata: {"type":"message_start","message":\n\n' + BLOCK_START + TOK.repeat(NORMAL_OUTPUT) + BLOCK_STOP + messageDelta() + MESSAGE_STOP);
      case 'cr-only':
        return void res.end(normalStream(model).replaceAll('\n', '\r'));
      case 'cr-only-cut':
        // Cut before the message_delta: billed the delivered text, counted on CR-ended lines.
        return void res.end((messageStart(model) + BLOCK_START + TOK.repeat(NORMAL_OUTPUT)).replaceAll('\n', '\r'));
      case 'overlong-cut':
        res.write(messageStart(model) + BLOCK_START);
        res.write(`event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`);
        for (let i = 0; i < 12; i++) res.write('tok '.repeat(LONG_TOKS / 12));
        return void res.end('"}}\n\n');
      case 'oai-multiline-usage':
        return void res.end(chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }) + CHAT_TOK.repeat(NORMAL_OUTPUT) + CHAT_FINISH
          + splitData(chatChunk({ choices: [], usage: { prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, total_tokens: NORMAL_INPUT + NORMAL_OUTPUT } })) + CHAT_DONE);
      case 'oai-cr-only-cut':
        return void res.end((chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }) + CHAT_TOK.repeat(NORMAL_OUTPUT)).replaceAll('\n', '\r'));
      case 'oai-overlong-cut':
        res.write(chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }));
        res.write('data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"');
        for (let i = 0; i < 12; i++) res.write('tok '.repeat(LONG_TOKS / 12));
        return void res.end('"},"finish_reason":null}]}\n\n');
      case 'cut-mid-event-reset':
      case 'cut-mid-event-end':
      case 'oai-cut-mid-event': {
        // Three deltas, then half of the next event, then the socket reset or the body ended.
        const openaiFormat = model.startsWith('oai-');
        res.write(openaiFormat
          ? chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }) + CHAT_TOK.repeat(3) + 'data: {"id":"chatcmpl-1","object":"chat.comp'
          : messageStart(model) + BLOCK_START + TOK.repeat(3) + 'event: content_block_delta\ndata: {"type":"content_blo');
        if (model.endsWith('-reset')) return void setTimeout(() => res.socket?.destroy(), 50);
        return void setTimeout(() => res.end(), 50);
      }
      default:
        throw new Error(`unscripted model ${model}`);
    }
  });
  stack = await startGatewayStack();
  await mockChannel(stack, ['multiline-start', 'multiline-all', 'multiline-deltas-cut', 'garbled-start', 'cr-only', 'cr-only-cut', 'overlong-cut', 'cut-mid-event-reset', 'cut-mid-event-end'], 'default', { base_url: provider.url });
  await mockChannel(stack, ['oai-multiline-usage', 'oai-cr-only-cut', 'oai-overlong-cut', 'oai-cut-mid-event'], 'default', { base_url: provider.url, type: 1, key: 'sk-x' });
  account = await fundedAccount(stack, FUNDS);
  key = (await createApiKey(stack, account)).key;
  anthropic = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
  openai = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
  counted = (await anthropic.messages.countTokens({ model: 'cr-only', messages })).input_tokens;
});
afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

const messages = [{ role: 'user' as const, content: LONG_PROMPT }];

async function anthropicStreamed(model: string): Promise<string> {
  const { data: stream, response } = await anthropic.messages.create({ model, max_tokens: 100, stream: true, messages }).withResponse();
  let text = '';
  for await (const event of stream) if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
  expect(text).toBe('tok '.repeat(NORMAL_OUTPUT));
  return response.headers.get('x-gateway-request-id')!;
}

/** A stream read as text (one that is cut ends with the relay's error event, which the SDKs raise). */
async function rawStream(route: '/v1/messages' | '/v1/chat/completions', model: string, maxTokens = 100): Promise<{ requestId: string; text: string }> {
  const res = await fetch(`${stack.relayUrl}${route}`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify({ model, max_tokens: maxTokens, stream: true, messages }),
  });
  expect(res.status).toBe(200);
  return { requestId: res.headers.get('x-gateway-request-id')!, text: await res.text() };
}

describe('an event whose data spans several data lines', () => {
  it('message_start so split: its input is billed', async () => {
    const before = await balanceOf(stack, account.id);
    const row = await billOf(stack, account.id, await anthropicStreamed('multiline-start'), before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL });
  });

  it('every event so split: billed the usage stated', async () => {
    const before = await balanceOf(stack, account.id);
    const row = await billOf(stack, account.id, await anthropicStreamed('multiline-all'), before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL });
  });

  it('split deltas of a stream cut before its usage: billed the 50 delivered', async () => {
    const before = await balanceOf(stack, account.id);
    const { requestId, text } = await rawStream('/v1/messages', 'multiline-deltas-cut');
    expect(text).toContain('event: error');
    const row = await billOf(stack, account.id, requestId, before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL });
  });

  it('a message_start that cannot be read, followed by content and a message_delta: the prompt is counted', async () => {
    const before = await balanceOf(stack, account.id);
    const { requestId } = await rawStream('/v1/messages', 'garbled-start');
    const row = await billOf(stack, account.id, requestId, before);
    expect(row).toMatchObject({ prompt_tokens: counted, completion_tokens: NORMAL_OUTPUT, quota: unnamedCost(counted, NORMAL_OUTPUT) });
  });

  it('an OpenAI-format usage chunk so split: billed the usage stated', async () => {
    const before = await balanceOf(stack, account.id);
    const { data: stream, response } = await openai.chat.completions.create({ model: 'oai-multiline-usage', max_tokens: 100, stream: true, messages }).withResponse();
    for await (const chunk of stream) void chunk;
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL });
  });
});

describe('lines ended by a lone CR', () => {
  it('a complete stream: billed its usage', async () => {
    const before = await balanceOf(stack, account.id);
    const row = await billOf(stack, account.id, await anthropicStreamed('cr-only'), before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: NORMAL });
  });

  it('a stream cut before its usage, both formats: billed the input and the 50 delivered', async () => {
    for (const [route, model, input] of [['/v1/messages', 'cr-only-cut', NORMAL_INPUT], ['/v1/chat/completions', 'oai-cr-only-cut', counted]] as const) {
      const before = await balanceOf(stack, account.id);
      const { requestId } = await rawStream(route, model);
      const row = await billOf(stack, account.id, requestId, before);
      expect(row).toMatchObject({ prompt_tokens: input, completion_tokens: NORMAL_OUTPUT, quota: unnamedCost(input, NORMAL_OUTPUT) });
    }
  });
});

describe('a content delta longer than a carried line', () => {
  it('1.2 MB in one delta, then the stream is cut, both formats: billed the input and the 300,000 tokens delivered', async () => {
    for (const [route, model, input] of [['/v1/messages', 'overlong-cut', NORMAL_INPUT], ['/v1/chat/completions', 'oai-overlong-cut', counted]] as const) {
      const before = await balanceOf(stack, account.id);
      const { requestId, text } = await rawStream(route, model, 400_000);
      expect(text.length).toBeGreaterThan(1_200_000);
      const row = await billOf(stack, account.id, requestId, before);
      expect(row).toMatchObject({ prompt_tokens: input, completion_tokens: LONG_TOKS, quota: unnamedCost(input, LONG_TOKS) });
    }
  }, 60_000);
});

// Before: the half event went to the client and the relay's error event straight after it
// (`data: {"type":"content_blo` + `event: error…`), which the SDKs failed to parse: a JSON syntax
// error, with no status or type for their retry logic. Now the half event is held back and the
// client reads the three whole deltas and then the error.
describe('a stream cut inside an event', () => {
  it.each(['cut-mid-event-reset', 'cut-mid-event-end'])('%s: Anthropic\'s SDK reads three deltas, then raises the error event as an APIError; billed the input and 3 delivered', async (model) => {
    const before = await balanceOf(stack, account.id);
    const stream = anthropic.messages.stream({ model, max_tokens: 100, messages });
    let text = '';
    stream.on('text', (t) => { text += t; });
    const err = await stream.finalMessage().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as Error).message).toContain('The model provider stream failed.');
    expect(text).toBe('tok '.repeat(3));
    const row = await billOf(stack, account.id, stream.response!.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: 3, quota: unnamedCost(NORMAL_INPUT, 3) });
  });

  it('an OpenAI-format stream: OpenAI\'s SDK reads three chunks, then raises the error as an APIError; billed the prompt and 3 delivered', async () => {
    const before = await balanceOf(stack, account.id);
    const { data: stream, response } = await openai.chat.completions.create({ model: 'oai-cut-mid-event', max_tokens: 100, stream: true, messages }).withResponse();
    let text = '';
    const err = await (async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(text).toBe('tok '.repeat(3));
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row).toMatchObject({ prompt_tokens: counted, completion_tokens: 3, quota: unnamedCost(counted, 3) });
  });
});
