// A converted answer tells its client the usage the request is billed: the ledger row's prompt_tokens
// and completion_tokens. An Anthropic-format channel answering the openai SDK (/v1/chat/completions)
// and an OpenAI-format channel answering the @anthropic-ai/sdk (/v1/messages), streamed and not, with
// usage figures a provider states that are no counts: a string ("50"), a fraction (0.5), a boolean,
// 1e400 (which JSON.parse makes Infinity), and ordinary counts beside cache reads.
//
// Before: billing was right (the relay counts what is no count and bounds what is above the request's
// bound) but the converted answer said otherwise: completion_tokens 100000000 for 100 billed (1e400),
// 0 for 50 billed ("50", 0.5), input_tokens 0 for 245 billed.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { billingSettled, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type LedgerRow, type TestAccount } from '../../tests/harness/gateway-stack.js';
import {
  balanceOf, billOf, BLOCK_START, BLOCK_STOP, CHAT_DONE, CHAT_FINISH, CHAT_TOK, chatChunk, chatCompletion, LONG_PROMPT, MESSAGE_STOP, messageDelta, messageStart,
  NORMAL_INPUT, NORMAL_OUTPUT, normalMessage, startScriptedProvider, TOK, type ScriptedProvider,
} from '../../tests/harness/scripted-provider.js';

const MAX_TOKENS = 100;
const OAI_ROLE = chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
const oaiUsage = (usage: Record<string, unknown>): string => chatChunk({ choices: [], usage });
const INF = (text: string, field: string): string => text.replace(`"${field}":1`, `"${field}":1e400`);
const BODY50 = BLOCK_START + TOK.repeat(NORMAL_OUTPUT) + BLOCK_STOP;

/** Anthropic-format channel: each model's answer, streamed and as JSON. */
const ANT: Record<string, { stream: (model: string) => string; json: (model: string) => string }> = {
  'cu-normal': {
    stream: (m) => messageStart(m) + BODY50 + messageDelta() + MESSAGE_STOP,
    json: (m) => normalMessage(m),
  },
  'cu-cached': {
    stream: (m) => messageStart(m, { input_tokens: 200, cache_read_input_tokens: 700, output_tokens: 1 }) + BODY50 + messageDelta() + MESSAGE_STOP,
    json: (m) => normalMessage(m, { input_tokens: 200, cache_read_input_tokens: 700, output_tokens: NORMAL_OUTPUT }),
  },
  'cu-string': {
    stream: (m) => messageStart(m) + BODY50 + messageDelta({ output_tokens: '50' }) + MESSAGE_STOP,
    json: (m) => normalMessage(m, { input_tokens: '1000', output_tokens: '50' }),
  },
  'cu-fraction': {
    stream: (m) => messageStart(m) + BODY50 + messageDelta({ output_tokens: 0.5 }) + MESSAGE_STOP,
    json: (m) => normalMessage(m, { input_tokens: NORMAL_INPUT, output_tokens: 0.5 }),
  },
  'cu-bool': {
    stream: (m) => messageStart(m, { input_tokens: true, output_tokens: 1 }) + BODY50 + messageDelta({ output_tokens: true }) + MESSAGE_STOP,
    json: (m) => normalMessage(m, { input_tokens: true, output_tokens: true }),
  },
  'cu-inf': {
    stream: (m) => messageStart(m) + BODY50 + INF(messageDelta({ output_tokens: 1 }), 'output_tokens') + MESSAGE_STOP,
    json: (m) => INF(normalMessage(m, { input_tokens: NORMAL_INPUT, output_tokens: 1 }), 'output_tokens'),
  },
  'cu-inf-input': {
    stream: (m) => INF(messageStart(m, { input_tokens: 1, output_tokens: 1 }), 'input_tokens') + BODY50 + messageDelta() + MESSAGE_STOP,
    json: (m) => INF(normalMessage(m, { input_tokens: 1, output_tokens: NORMAL_OUTPUT }), 'input_tokens'),
  },
};

const FULL_USAGE = { prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, total_tokens: NORMAL_INPUT + NORMAL_OUTPUT };
/** OpenAI-format channel: each model's usage (a string to write in place of a `1` for 1e400). */
const OAI: Record<string, { usage: Record<string, unknown>; inf?: string }> = {
  'cu-oai-normal': { usage: FULL_USAGE },
  'cu-oai-cached': { usage: { ...FULL_USAGE, prompt_tokens_details: { cached_tokens: 600 } } },
  'cu-oai-string': { usage: { prompt_tokens: '1000', completion_tokens: '50', total_tokens: '1050' } },
  'cu-oai-fraction': { usage: { prompt_tokens: NORMAL_INPUT, completion_tokens: 0.5, total_tokens: 1000.5 } },
  'cu-oai-inf': { usage: { prompt_tokens: NORMAL_INPUT, completion_tokens: 1, total_tokens: 1 }, inf: 'completion_tokens' },
  'cu-oai-inf-input': { usage: { prompt_tokens: 1, completion_tokens: NORMAL_OUTPUT, total_tokens: 1 }, inf: 'prompt_tokens' },
};

/**
 * A provider that keeps the connection open, pinging, after its stream's last event: the answer, and
 * what it writes 100 ms later ('' for nothing).
 */
const LINGER: Record<string, (model: string) => [string, string]> = {
  'cu-linger-ant': (m) => [messageStart(m) + BODY50 + messageDelta() + MESSAGE_STOP, ''],
  'cu-linger-oai': () => [OAI_ROLE + CHAT_TOK.repeat(NORMAL_OUTPUT) + CHAT_FINISH + oaiUsage(FULL_USAGE) + CHAT_DONE, ''],
  // Complete at its usage chunk; its [DONE] in a later write (as OpenAI and vLLM often send it).
  'cu-linger-oai-done-later': () => [OAI_ROLE + CHAT_TOK.repeat(NORMAL_OUTPUT) + CHAT_FINISH + oaiUsage(FULL_USAGE), CHAT_DONE],
  // message_stop's event line in one write, its data line in the next: the stream is complete only
  // at the blank line that ends the event (before, it was ended at the event line, before the
  // conversion had seen message_stop: no usage chunk, no [DONE]).
  'cu-linger-ant-split': (m) => [messageStart(m) + BODY50 + messageDelta() + 'event: message_stop\n', 'data: {"type":"message_stop"}\n\n'],
  // The same without message_delta: the finish_reason too comes only with message_stop's data.
  'cu-linger-ant-split-no-delta': (m) => [messageStart(m) + BODY50 + 'event: message_stop\ndata: {"type":"mess', 'age_stop"}\n\n'],
};
const releaseLinger: Array<() => void> = [];
/** The lingering answers whose provider ended the connection itself (its 20 s), not the relay. */
const providerEnded = new Set<string>();

let stack: GatewayStack;
let provider: ScriptedProvider;
let account: TestAccount;
let anthropic: Anthropic;
let openai: OpenAI;

beforeAll(async () => {
  provider = await startScriptedProvider(({ model, body }, res) => {
    const stream = body.stream === true;
    res.writeHead(200, { 'content-type': stream ? 'text/event-stream' : 'application/json' });
    if (model in LINGER) {
      // The whole answer, then pings, the connection kept open until the test lets it go (or 20 s).
      const [answer, tail] = LINGER[model]!(model);
      res.write(answer);
      // Before the first ping (200 ms): a ping inside message_stop's split event would be no stream a provider sends.
      if (tail !== '') setTimeout(() => { if (!res.destroyed) res.write(tail); }, 100);
      const ping = setInterval(() => { if (!res.destroyed) res.write(model.startsWith('cu-linger-oai') ? ': keep-alive\n\n' : 'event: ping\ndata: {"type": "ping"}\n\n'); }, 200);
      const close = () => {
        clearInterval(ping);
        if (res.destroyed) return;
        providerEnded.add(model);
        res.end();
      };
      releaseLinger.push(close);
      setTimeout(close, 20_000);
      return;
    }
    if (model === 'cu-no-delta') return void res.end(messageStart(model) + BODY50 + MESSAGE_STOP);
    const ant = ANT[model];
    if (ant) return void res.end(stream ? ant.stream(model) : ant.json(model));
    const oai = OAI[model];
    if (!oai) throw new Error(`unscripted model ${model}`);
    const answer = stream ? OAI_ROLE + CHAT_TOK.repeat(NORMAL_OUTPUT) + CHAT_FINISH + oaiUsage(oai.usage) + CHAT_DONE : chatCompletion(oai.usage);
    res.end(oai.inf ? INF(answer, oai.inf) : answer);
  });
  stack = await startGatewayStack();
  await mockChannel(stack, [...Object.keys(ANT), 'cu-linger-ant', 'cu-linger-ant-split', 'cu-linger-ant-split-no-delta', 'cu-no-delta'], 'default', { base_url: provider.url });
  await mockChannel(stack, [...Object.keys(OAI), 'cu-linger-oai', 'cu-linger-oai-done-later'], 'default', { base_url: provider.url, type: 1, key: 'sk-x' });
  account = await fundedAccount(stack, 100_000_000);
  const key = (await createApiKey(stack, account)).key;
  anthropic = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
  openai = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  for (const close of releaseLinger) close();
  await stack?.close();
  await provider?.close();
});

const messages = [{ role: 'user' as const, content: LONG_PROMPT }];

/** The usage the openai SDK was told (the usage chunk of a stream), and the request's bill. */
async function viaOpenAI(model: string, stream: boolean): Promise<{ text: string; told: OpenAI.CompletionUsage | null; row: LedgerRow }> {
  const before = await balanceOf(stack, account.id);
  if (stream) {
    const { data: s, response } = await openai.chat.completions.create({ model, max_tokens: MAX_TOKENS, stream: true, stream_options: { include_usage: true }, messages }).withResponse();
    let text = '';
    let told: OpenAI.CompletionUsage | null = null;
    for await (const c of s) {
      text += c.choices[0]?.delta.content ?? '';
      if (c.usage) told = c.usage;
    }
    return { text, told, row: await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before) };
  }
  const { data, response } = await openai.chat.completions.create({ model, max_tokens: MAX_TOKENS, messages }).withResponse();
  return { text: data.choices[0]?.message.content ?? '', told: data.usage ?? null, row: await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before) };
}

/** The usage the Anthropic SDK was told (the final message's: message_start's, then message_delta's), and the request's bill. */
async function viaAnthropic(model: string, stream: boolean): Promise<{ text: string; told: Anthropic.Usage; row: LedgerRow }> {
  const before = await balanceOf(stack, account.id);
  if (stream) {
    const s = anthropic.messages.stream({ model, max_tokens: MAX_TOKENS, messages });
    let text = '';
    s.on('text', (t) => { text += t; });
    const msg = await s.finalMessage();
    return { text, told: msg.usage, row: await billOf(stack, account.id, s.response!.headers.get('x-gateway-request-id')!, before) };
  }
  const { data, response } = await anthropic.messages.create({ model, max_tokens: MAX_TOKENS, messages }).withResponse();
  const text = data.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
  return { text, told: data.usage, row: await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before) };
}

const TEXT = /^(tok ?){50}$/;

describe('Anthropic-format channel, openai SDK: the usage told is the usage billed', () => {
  for (const model of Object.keys(ANT)) {
    for (const stream of [true, false]) {
      it(`${model}, ${stream ? 'streamed' : 'JSON'}`, async () => {
        const { text, told, row } = await viaOpenAI(model, stream);
        expect(text).toMatch(TEXT);
        expect(row.completion_tokens).toBeGreaterThanOrEqual(NORMAL_OUTPUT);
        expect(row.completion_tokens).toBeLessThanOrEqual(MAX_TOKENS);
        expect(told).not.toBeNull();
        expect({ prompt: told!.prompt_tokens, completion: told!.completion_tokens, total: told!.total_tokens })
          .toEqual({ prompt: row.prompt_tokens, completion: row.completion_tokens, total: row.prompt_tokens + row.completion_tokens });
        if (model === 'cu-cached') expect(told!.prompt_tokens_details?.cached_tokens).toBe(700);
      });
    }
  }
});

describe('OpenAI-format channel, Anthropic SDK: the usage told is the usage billed', () => {
  for (const model of Object.keys(OAI)) {
    for (const stream of [true, false]) {
      it(`${model}, ${stream ? 'streamed' : 'JSON'}`, async () => {
        const { text, told, row } = await viaAnthropic(model, stream);
        expect(text).toMatch(TEXT);
        expect(row.completion_tokens).toBeGreaterThanOrEqual(NORMAL_OUTPUT);
        expect(row.completion_tokens).toBeLessThanOrEqual(MAX_TOKENS);
        const prompt = told.input_tokens + (told.cache_creation_input_tokens ?? 0) + (told.cache_read_input_tokens ?? 0);
        expect({ prompt, completion: told.output_tokens }).toEqual({ prompt: row.prompt_tokens, completion: row.completion_tokens });
        if (model === 'cu-oai-cached') expect(told.cache_read_input_tokens).toBe(600);
      });
    }
  }
});

// Before (the first cut of the change above): a converted stream's last events waited for the
// provider to close its connection, so a provider pinging on after its last event held the client's
// usage chunk and [DONE] (or message_delta and message_stop) for as long (4 s in the review's probe).
// The stream is settled and ended once the provider's stream is complete, and the provider's
// connection is let go then (read on, a provider pinging for ever held a pooled connection, and a
// relay's close, for ever: the settled request had left the stall check). An OpenAI-format stream is
// complete at its usage chunk: a [DONE] written later must not be needed for the conversion's end.
describe('a provider that keeps its connection open after its last event', () => {
  it('openai SDK on an Anthropic-format channel: the usage chunk and the end come, and the provider is let go', async () => {
    const { told, row } = await viaOpenAI('cu-linger-ant', true);
    expect(providerEnded.has('cu-linger-ant')).toBe(false);
    expect({ prompt: told!.prompt_tokens, completion: told!.completion_tokens }).toEqual({ prompt: row.prompt_tokens, completion: row.completion_tokens });
    await vi.waitFor(() => expect(provider.seen.get('cu-linger-ant')!.closedAt).toBeGreaterThan(0), { timeout: 5000 });
  });

  it('openai SDK on an Anthropic-format channel, message_stop split across reads: the usage chunk and [DONE] come', async () => {
    const { text, told, row } = await viaOpenAI('cu-linger-ant-split', true);
    expect(text).toMatch(TEXT);
    expect(told).not.toBeNull();
    expect({ prompt: told!.prompt_tokens, completion: told!.completion_tokens }).toEqual({ prompt: row.prompt_tokens, completion: row.completion_tokens });
    expect(providerEnded.has('cu-linger-ant-split')).toBe(false);
  });

  it('openai SDK\'s stream helper, message_stop split and no message_delta: finish_reason "stop" and the usage', async () => {
    const s = openai.chat.completions.stream({ model: 'cu-linger-ant-split-no-delta', max_tokens: MAX_TOKENS, stream_options: { include_usage: true }, messages });
    const done = await s.finalChatCompletion();
    expect(done.choices[0]!.finish_reason).toBe('stop');
    expect(done.choices[0]!.message.content).toMatch(TEXT);
    expect(done.usage?.completion_tokens).toBeGreaterThan(0);
    expect(providerEnded.has('cu-linger-ant-split-no-delta')).toBe(false);
    // Its bill lands before the next test reads the balance it starts from.
    await billingSettled(stack);
  });

  it.each(['cu-linger-oai', 'cu-linger-oai-done-later'])('Anthropic SDK on an OpenAI-format channel (%s): message_delta and message_stop come, and the provider is let go', async (model) => {
    const { text, told, row } = await viaAnthropic(model, true);
    expect(text).toMatch(TEXT);
    expect(providerEnded.has(model)).toBe(false);
    expect({ prompt: told.input_tokens, completion: told.output_tokens }).toEqual({ prompt: row.prompt_tokens, completion: row.completion_tokens });
    await vi.waitFor(() => expect(provider.seen.get(model)!.closedAt).toBeGreaterThan(0), { timeout: 5000 });
  });
});

// Before: an Anthropic-format stream ending with message_stop and no message_delta (no stop_reason
// said) gave the openai SDK no finish_reason, and its stream helper threw "missing finish_reason for
// choice 0" at finalChatCompletion().
it('an Anthropic-format stream without message_delta: the openai SDK\'s stream helper gets finish_reason "stop"', async () => {
  const s = openai.chat.completions.stream({ model: 'cu-no-delta', max_tokens: MAX_TOKENS, stream_options: { include_usage: true }, messages });
  const done = await s.finalChatCompletion();
  expect(done.choices[0]!.finish_reason).toBe('stop');
  expect(done.choices[0]!.message.content).toMatch(TEXT);
  expect(done.usage?.completion_tokens).toBeGreaterThan(0);
});
