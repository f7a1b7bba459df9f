// A provider's 200 whose body the relay decodes (a proxy that gzips), or that is no stream though
// labelled one, is bounded and billed as the same answer uncompressed (review provider misbehaviour):
//   - a gzipped JSON answer trickled to a stream request was cut ~10 s in, not at
//     UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS: the wait for its first decoded byte (the decoder gives none
//     until it has read the block's code tables, ~50 bytes) had no bound, and the body's bound only
//     began after it;
//   - a request without `stream` had its answer's body bounded only by the reservation heartbeat,
//     whose beat is a third of RESERVATION_TTL_SEC (300 s by default): a trickle that ended within that
//     was answered and billed, gzipped or not;
//   - a JSON answer labelled text/event-stream to a stream request held no event: answered as a failed
//     stream and billed 0, though it stated its usage (the same bytes to a request without `stream`
//     were billed it), and a trickled one ran to the provider's end;
//   - an empty body labelled text/event-stream was a 200 failed stream to a stream client and the
//     relay's 500 "could not be read" to a JSON client.
// Each case is checked in every book: the ledger, ClickHouse's logs and the balance.
import { gzipSync } from 'node:zlib';
import type { ServerResponse } from 'node:http';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { billingSettled, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../../tests/harness/gateway-stack.js';
import {
  balanceOf, billOf, BLOCK_START, BLOCK_STOP, chatCompletion, LONG_PROMPT, MESSAGE_STOP, messageDelta, messageStart, NORMAL_INPUT, NORMAL_OUTPUT, normalMessage, startScriptedProvider, TOK, unnamedCost,
  type ScriptedProvider,
} from '../../tests/harness/scripted-provider.js';

const BOUND_MS = 2500;
/** Bytes of the (gzipped) body written at once, and how far it is then trickled before the rest follows. */
const HEAD = 20;
const TRICKLED_TO = 55;
const TRICKLE_MS = 200;

let stack: GatewayStack;
let provider: ScriptedProvider;
let account: TestAccount;
let key: string;
const timers = new Set<NodeJS.Timeout>();
/** Models whose provider answer was written to its end. */
const ended = new Set<string>();

/**
 * The body's first HEAD bytes, then a byte every TRICKLE_MS up to TRICKLED_TO, then the rest: the
 * body ends (TRICKLED_TO - HEAD) * TRICKLE_MS = 7 s after its headers, past BOUND_MS, and, gzipped,
 * its first decoded byte comes only ~6 s in (byte 51 of the gzip stream).
 */
function trickle(model: string, res: ServerResponse, headers: Record<string, string>, body: Buffer, status = 200): void {
  res.writeHead(status, headers);
  res.write(body.subarray(0, HEAD));
  let at = HEAD;
  const t = setInterval(() => {
    if (res.destroyed) return void clearInterval(t);
    if (at < TRICKLED_TO) return void res.write(body.subarray(at, ++at));
    clearInterval(t);
    res.end(body.subarray(at));
    ended.add(model);
  }, TRICKLE_MS);
  timers.add(t);
}

beforeAll(async () => {
  provider = await startScriptedProvider(({ model }, res) => {
    const json = Buffer.from(model.startsWith('oai-') ? chatCompletion({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, total_tokens: NORMAL_INPUT + NORMAL_OUTPUT }) : normalMessage(model));
    switch (model.replace(/^oai-/, '')) {
      case 'gz-trickle': return trickle(model, res, { 'content-type': 'application/json', 'content-encoding': 'gzip' }, gzipSync(json));
      case 'plain-trickle': return trickle(model, res, { 'content-type': 'application/json' }, json);
      case 'gz-529-trickle': {
        const error = JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded '.repeat(40) } });
        return trickle(model, res, { 'content-type': 'application/json', 'content-encoding': 'gzip' }, gzipSync(error), 529);
      }
      case 'gz-trickle-as-sse': return trickle(model, res, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' }, gzipSync(json));
      case 'plain-trickle-as-sse': return trickle(model, res, { 'content-type': 'text/event-stream' }, json);
      case 'gz-json-as-sse':
        res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
        return void res.end(gzipSync(json));
      case 'plain-json-as-sse':
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        return void res.end(json);
      case 'empty':
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        return void res.end();
      case 'late-start': {
        // message_start 800 ms after the headers, then text for 4 s.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.flushHeaders();
        let n = 0;
        const start = setTimeout(() => {
          const t = setInterval(() => {
            if (res.destroyed) return void clearInterval(t);
            if (n === 0) res.write(messageStart(model) + BLOCK_START);
            else if (n < 40) res.write(TOK);
            else {
              clearInterval(t);
              res.end(BLOCK_STOP + messageDelta() + MESSAGE_STOP);
              ended.add(model);
            }
            n++;
          }, 100);
          timers.add(t);
        }, 700);
        return void timers.add(start);
      }
      case 'only-stop':
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        return void res.end(model.startsWith('oai-') ? 'data: [DONE]\n\n' : `event: ping\ndata: {"type":"ping"}\n\n${MESSAGE_STOP}`);
      default:
        res.writeHead(500);
        res.end();
    }
  });
  // RESERVATION_TTL_SEC is left at its default: the heartbeat beats every 300 s, so no beat bounds a body here.
  stack = await startGatewayStack({ env: { CHANNEL_COOLDOWN_FAILURES: '0', UPSTREAM_HEADERS_TIMEOUT_MS: '1500', UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS: String(BOUND_MS) } });
  const names = ['late-start', 'gz-529-trickle', 'gz-trickle', 'plain-trickle', 'gz-trickle-as-sse', 'plain-trickle-as-sse', 'gz-json-as-sse', 'plain-json-as-sse', 'empty', 'only-stop'];
  await mockChannel(stack, names, 'default', { base_url: provider.url, priority: 10 });
  await mockChannel(stack, names.map((n) => `oai-${n}`), 'default', { base_url: provider.url, type: 1, key: 'sk-x', priority: 10 });
  // A provider that answers, after the scripted one: a failure the relay retries reaches it.
  await mockChannel(stack, ['gz-529-trickle', 'gz-trickle', 'plain-trickle', 'empty'], 'default', { priority: 0 });
  account = await fundedAccount(stack, 1_000_000_000);
  // A limited key: reserved request by request, so that the reservation itself can be looked for.
  key = (await createApiKey(stack, account, { unlimited_quota: false, remain_quota: 1_000_000_000 })).key;
}, 120_000);

afterAll(async () => {
  for (const t of timers) clearInterval(t);
  await stack?.close();
  await provider?.close();
});

const messages = [{ role: 'user' as const, content: LONG_PROMPT }];
const anthropic = (): Anthropic => new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0, timeout: 60_000 });
const openai = (): OpenAI => new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0, timeout: 60_000 });

interface Outcome { status: number; requestId: string; error: unknown; inputTokens?: number; outputTokens?: number }

/** An Anthropic request, streamed (read to its end) or not; a failure's status and body kept. */
async function send(model: string, stream: boolean): Promise<Outcome> {
  try {
    if (stream) {
      const { data, response } = await anthropic().messages.create({ model, max_tokens: 100, stream: true, messages }).withResponse();
      const requestId = response.headers.get('x-gateway-request-id') ?? '';
      let usage: { input_tokens: number; output_tokens: number } | null = null;
      try {
        for await (const e of data) {
          if (e.type === 'message_start') usage = { ...e.message.usage };
          if (e.type === 'message_delta') usage = { input_tokens: usage?.input_tokens ?? 0, output_tokens: e.usage.output_tokens };
        }
      } catch (err) {
        // An error event inside a 200 stream.
        return { status: 200, requestId, error: err };
      }
      return { status: 200, requestId, error: null, inputTokens: usage?.input_tokens, outputTokens: usage?.output_tokens };
    }
    const { data, response } = await anthropic().messages.create({ model, max_tokens: 100, messages }).withResponse();
    return { status: 200, requestId: response.headers.get('x-gateway-request-id') ?? '', error: null, inputTokens: data.usage.input_tokens, outputTokens: data.usage.output_tokens };
  } catch (err) {
    if (!(err instanceof Anthropic.APIError)) throw err;
    return { status: err.status ?? 0, requestId: (err.headers as Headers | undefined)?.get('x-gateway-request-id') ?? '', error: err.error };
  }
}

/** The request billed nothing in any book, and its reservation is gone. */
async function billedNothing(requestId: string, before: number): Promise<void> {
  expect(requestId).toBeTruthy();
  await billingSettled(stack);
  const [ledger] = await stack.sql`SELECT COUNT(*)::int AS n, COALESCE(SUM(quota), 0)::bigint AS q FROM ledger WHERE request_id = ${requestId}`;
  expect(Number(ledger!.q)).toBe(0);
  const rs = await stack.ch.query({ query: 'SELECT toInt64(sum(quota)) AS q FROM logs FINAL WHERE request_id = {r:String}', query_params: { r: requestId }, format: 'JSONEachRow' });
  const [logs] = await rs.json<{ q: string | number }>();
  expect(Number(logs?.q ?? 0)).toBe(0);
  expect(await balanceOf(stack, account.id)).toBe(before);
  await vi.waitFor(async () => {
    expect(await stack.redis.zscore(stack.keys.reservationDeadlines(stack.keys.shardOf(account.id)), `${account.id}:${requestId}`)).toBeNull();
  }, { timeout: 5_000 });
}

/** The provider was let go before it wrote its answer's end. */
async function cutBeforeItsEnd(model: string): Promise<void> {
  await vi.waitFor(() => expect(provider.seen.get(model)!.closedAt).toBeGreaterThan(0), { timeout: 15_000 });
  expect(ended.has(model)).toBe(false);
}

const STOPPED = { type: 'error', error: { type: 'api_error', message: expect.stringMatching(/stopped answering/) } };

describe('a JSON answer trickled past UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS', () => {
  for (const stream of [true, false]) {
    for (const model of ['plain-trickle', 'gz-trickle']) {
      it(`${model} to a request ${stream ? 'with' : 'without'} stream: cut at the bound, no other channel tried, billed nothing`, async () => {
        const before = await balanceOf(stack, account.id);
        const o = await send(model, stream);
        // A 200 that may have generated is not tried again elsewhere (messages-handler.ts).
        expect(o.status).toBe(500);
        expect(o.error).toMatchObject(STOPPED);
        await cutBeforeItsEnd(model);
        await billedNothing(o.requestId, before);
      }, 60_000);
    }
  }
});

describe('a gzipped overloaded error trickled past UPSTREAM_HEADERS_TIMEOUT_MS', () => {
  it('to a stream request: its read is cut, and the next channel answers, billed what it generated', async () => {
    const before = await balanceOf(stack, account.id);
    const o = await send('gz-529-trickle', true);
    expect(o.error).toBeNull();
    expect(o.outputTokens).toBeGreaterThan(0);
    await cutBeforeItsEnd('gz-529-trickle');
    const row = await billOf(stack, account.id, o.requestId, before);
    expect(row.quota).toBeGreaterThan(0);
    expect(row.completion_tokens).toBe(o.outputTokens);
  }, 60_000);
});

describe('a JSON answer labelled text/event-stream', () => {
  for (const model of ['plain-json-as-sse', 'gz-json-as-sse']) {
    for (const stream of [true, false]) {
      it(`${model} to a request ${stream ? 'with' : 'without'} stream: answered, and billed the usage it states`, async () => {
        const before = await balanceOf(stack, account.id);
        const o = await send(model, stream);
        expect(o.error).toBeNull();
        expect({ input: o.inputTokens, output: o.outputTokens }).toEqual({ input: NORMAL_INPUT, output: NORMAL_OUTPUT });
        const row = await billOf(stack, account.id, o.requestId, before);
        expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: unnamedCost(NORMAL_INPUT, NORMAL_OUTPUT), type: 2 });
      }, 60_000);
    }
  }

  it('oai-gz-json-as-sse to a Chat Completions stream: answered, and billed the usage it states', async () => {
    const before = await balanceOf(stack, account.id);
    const { data, response } = await openai().chat.completions.create({ model: 'oai-gz-json-as-sse', max_tokens: 100, stream: true, stream_options: { include_usage: true }, messages }).withResponse();
    let usage: OpenAI.CompletionUsage | null | undefined = null;
    for await (const chunk of data) usage = chunk.usage ?? usage;
    expect(usage).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT });
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id') ?? '', before);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, quota: unnamedCost(NORMAL_INPUT, NORMAL_OUTPUT), type: 2 });
  }, 60_000);

  for (const model of ['plain-trickle-as-sse', 'gz-trickle-as-sse']) {
    it(`${model}, trickled, to a stream request: cut at the bound, billed nothing`, async () => {
      const before = await balanceOf(stack, account.id);
      const o = await send(model, true);
      expect(o.status).toBe(500);
      expect(o.error).toMatchObject(STOPPED);
      await cutBeforeItsEnd(model);
      await billedNothing(o.requestId, before);
    }, 60_000);
  }
});

describe('a body with no answer in it (empty, or only message_stop), labelled text/event-stream', () => {
  const UNREADABLE = { type: 'error', error: { type: 'api_error', message: expect.stringMatching(/could not be read/) } };
  for (const [model, stream] of [['empty', false], ['empty', true], ['only-stop', false]] as const) {
    it(`${model} to a request ${stream ? 'with' : 'without'} stream: the relay's error of an answer that could not be read, billed nothing`, async () => {
      const before = await balanceOf(stack, account.id);
      const o = await send(model, stream);
      expect(o.status).toBe(500);
      expect(o.error).toMatchObject(UNREADABLE);
      await billedNothing(o.requestId, before);
    }, 60_000);
  }

  it('only-stop to a request with stream: no answer in a 200 (the headers went out), the stream\'s error event alone, billed nothing', async () => {
    const before = await balanceOf(stack, account.id);
    const { data, response } = await anthropic().messages.create({ model: 'only-stop', max_tokens: 100, stream: true, messages }).withResponse();
    const events: string[] = [];
    const err = await (async () => {
      for await (const e of data) events.push(e.type);
    })().then(() => null, (e: unknown) => e);
    // Before, the stream was message_stop alone, complete: a raw reader took it for an empty answer.
    expect(events).not.toContain('message_stop');
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: 'error', error: { type: 'api_error' } });
    await billedNothing(response.headers.get('x-gateway-request-id') ?? '', before);
  }, 60_000);

  it('oai-only-stop ([DONE] alone) to a Chat Completions stream: the stream\'s error chunk, no [DONE], billed nothing', async () => {
    const before = await balanceOf(stack, account.id);
    const { data, response } = await openai().chat.completions.create({ model: 'oai-only-stop', max_tokens: 100, stream: true, messages }).withResponse();
    const chunks: unknown[] = [];
    const err = await (async () => {
      for await (const c of data) chunks.push(c);
    })().then(() => null, (e: unknown) => e);
    expect(chunks).toEqual([]);
    // Before, the stream was [DONE] alone: the SDK ended it as an answer of no chunk.
    expect(err).toBeInstanceOf(OpenAI.APIError);
    await billedNothing(response.headers.get('x-gateway-request-id') ?? '', before);
  }, 60_000);

  it('oai-empty to a Chat Completions request: OpenAI\'s error JSON, billed nothing', async () => {
    const before = await balanceOf(stack, account.id);
    const err = await openai().chat.completions.create({ model: 'oai-empty', max_tokens: 100, messages }).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    const e = err as InstanceType<typeof OpenAI.APIError>;
    expect(e.status).toBe(500);
    expect(e.error).toMatchObject({ type: 'server_error', message: expect.stringMatching(/could not be read/) });
    await billedNothing((e.headers as Headers | undefined)?.get('x-gateway-request-id') ?? '', before);
  }, 60_000);
});

describe('a stream the client left before its first chunk', () => {
  it('is read on until message_start, billed its input, then the provider is cancelled', async () => {
    // An account of its own: the client leaves before the answer's headers, so its request id is found by the account.
    const own = await fundedAccount(stack, 10_000_000);
    const ownKey = (await createApiKey(stack, own)).key;
    const before = await balanceOf(stack, own.id);
    const ctl = new AbortController();
    const left = new Anthropic({ apiKey: ownKey, baseURL: stack.relayUrl, maxRetries: 0 })
      .messages.create({ model: 'late-start', max_tokens: 100, stream: true, messages }, { signal: ctl.signal })
      .then(async (s) => { for await (const _ of s); }, () => undefined);
    // Left once the provider has its request and has answered its headers, before message_start.
    await vi.waitFor(() => expect(provider.seen.get('late-start')).toBeDefined(), { timeout: 10_000 });
    await new Promise((r) => setTimeout(r, 200));
    ctl.abort();
    await left;
    await cutBeforeItsEnd('late-start');
    await vi.waitFor(async () => {
      await billingSettled(stack);
      const [n] = await stack.sql`SELECT COUNT(*)::int AS n FROM ledger WHERE user_id = ${own.id} AND type = 2`;
      expect(n!.n).toBe(1);
    }, { timeout: 15_000 });
    const [row] = await stack.sql`SELECT request_id FROM ledger WHERE user_id = ${own.id} AND type = 2`;
    const bill = await billOf(stack, own.id, String(row!.request_id), before);
    expect(bill).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: 0, quota: unnamedCost(NORMAL_INPUT, 0) });
  }, 60_000);
});
