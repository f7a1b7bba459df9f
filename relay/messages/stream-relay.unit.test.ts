// pipeStream's writes to the client (stream-relay.ts, ClientStream): the head, the provider's chunks
// and the end reach the client in order and complete, in one corked write per tick of provider data
// (each cork is one send() to the client's socket), the end never before the settlement, nothing
// after the client left, and a full socket pauses the provider until uWS says it is writable.
// The provider's body is a real Readable fed as undici feeds it; the uWS response is a recording fake.
import { Readable } from 'node:stream';
import type { HttpResponse } from 'uWebSockets.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../infra/logger.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { SseUsageParser } from '../stream/sse-usage-parser.js';
import { ChatStreamMeter } from '../providers/openai/chat-usage.js';
import { TokenCounter } from '../token-count/token-counter.js';
import type { Outcome } from './settlement.js';
import { billedByFinalUsage, pipeStream, RELAY_CLOSING_EVENT, STREAM_FAILED_EVENT, type StreamingExchange } from './stream-relay.js';

const log = createLogger(testConfig(), 'test');
let tokens: TokenCounter;
beforeAll(() => {
  tokens = new TokenCounter({ minThreads: 1, maxThreads: 1 });
});
afterAll(async () => {
  await tokens.close();
});

function sse(name: string, data: unknown): string {
  return `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}
const START = sse('message_start', { type: 'message_start', message: { id: 'msg_1', usage: { input_tokens: 10, output_tokens: 1 } } });
const DELTA = sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'tok ' } });
const TAIL = sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 3 } })
  + sse('message_stop', { type: 'message_stop' });

type Call = ['cork'] | ['uncork'] | ['status', string] | ['header', string, string] | ['write', string] | ['end', string | undefined] | ['onWritable'] | ['finish', Outcome] | ['written'];

/** A uWS response that records its calls; `full` makes write() report a full socket. */
function fakeRes(calls: Call[], opts: { full?: () => boolean; ended?: () => boolean } = {}) {
  let writable: (() => boolean) | null = null;
  const res = {
    cork(fn: () => void) {
      calls.push(['cork']);
      fn();
      calls.push(['uncork']);
      return res;
    },
    writeStatus(s: string) { calls.push(['status', s]); return res; },
    writeHeader(k: string, v: string) { calls.push(['header', k, v]); return res; },
    write(b: Buffer | string) {
      calls.push(['write', b.toString()]);
      return !(opts.full?.() ?? false);
    },
    end(b?: string) { calls.push(['end', b]); return res; },
    onWritable(fn: () => boolean) { calls.push(['onWritable']); writable = fn; return res; },
  };
  return { res: res as unknown as HttpResponse, drain: () => writable?.() };
}

function exchange(calls: Call[], res: HttpResponse): StreamingExchange & { aborted: boolean } {
  return {
    ctx: { log, tokens, deliveredFlushBytes: 256 * 1024 },
    res,
    requestId: 'req_gw',
    upstreamRequestId: 'req_up',
    t0: performance.now(),
    channel: null,
    tokenEncoding: 'cl100k_base',
    aborted: false,
    usagePending: false,
    billedByFinalUsage: false,
    responded: false,
    headersSent: false,
    streamLineAt: 0,
    done() {},
    finish(outcome: Outcome) { calls.push(['finish', outcome]); },
    // As the spool does: the settlement is on disk at the end of the loop turn.
    afterSettled(then: () => void) { setImmediate(() => { calls.push(['written']); then(); }); },
    countPromptTokens: () => Promise.resolve(0),
  };
}

/** `prompt`: what the relay counts of the prompt, for a stream that states no input. */
function start(calls: Call[], opts: Parameters<typeof fakeRes>[1] = {}, prompt = 0, relayClosing = { cut: false }) {
  const { res, drain } = fakeRes(calls, opts);
  const ex = exchange(calls, res);
  ex.countPromptTokens = () => Promise.resolve(prompt);
  const body = new Readable({ read() {} });
  pipeStream(ex, body, {
    provider: { streamMeter: (sink) => new SseUsageParser(sink) },
    rewriter: null,
    failedEvent: STREAM_FAILED_EVENT,
    closingEvent: RELAY_CLOSING_EVENT,
    relayClosing,
    requestIdHeader: 'request-id',
  });
  return { ex, body, drain };
}

const tick = () => new Promise<void>((r) => setImmediate(r));
const corks = (calls: Call[]) => calls.filter((c) => c[0] === 'cork').length;
const written = (calls: Call[]) => calls.filter((c) => c[0] === 'write' || c[0] === 'end').map((c) => c[1] ?? '').join('');
const HEAD: Call[] = [
  ['status', '200 OK'],
  ['header', 'content-type', 'text/event-stream; charset=utf-8'],
  ['header', 'cache-control', 'no-cache'],
  ['header', 'request-id', 'req_up'],
  ['header', 'x-gateway-request-id', 'req_gw'],
  ['header', 'access-control-allow-origin', '*'],
  ['header', 'access-control-expose-headers', '*'],
];

describe('pipeStream writes to the client', () => {
  it('writes a stream that arrives in one read, head, chunks and end, in one cork once its settlement is written', async () => {
    const calls: Call[] = [];
    const { body } = start(calls);
    // undici hands over one socket read as several chunks and its end, synchronously.
    body.push(Buffer.from(START));
    body.push(Buffer.from(DELTA.repeat(3)));
    body.push(Buffer.from(TAIL));
    body.push(null);
    await tick();
    await tick();
    const finish = calls.findIndex((c) => c[0] === 'finish');
    expect(calls[finish]).toEqual(['finish', { kind: 'ok', usage: expect.objectContaining({ inputTokens: 10, outputTokens: 3 }) }]);
    expect(calls.slice(finish + 1)).toEqual([
      ['written'], ['cork'], ...HEAD, ['write', START], ['write', DELTA.repeat(3)], ['write', TAIL], ['end', undefined], ['uncork'],
    ]);
    expect(corks(calls)).toBe(1);
  });

  it('sends the head at once when no chunk comes with it, then each later chunk as it comes', async () => {
    const calls: Call[] = [];
    const { body } = start(calls);
    await tick();
    expect(calls).toEqual([['cork'], ...HEAD, ['uncork']]);
    body.push(Buffer.from(START));
    await tick();
    expect(calls.slice(-3)).toEqual([['cork'], ['write', START], ['uncork']]);
    // Two chunks in one tick share a cork; an event split mid-line goes whole once its end is in
    // (EventAligner), in one write.
    body.push(Buffer.from(DELTA.slice(0, 7)));
    body.push(Buffer.from(DELTA.slice(7) + DELTA));
    await tick();
    expect(calls.slice(-3)).toEqual([['cork'], ['write', DELTA + DELTA], ['uncork']]);
    // The stream ends with its message_stop's event, whether or not the provider's response has
    // ended: settled, then its last events go with the end, in one cork.
    body.push(Buffer.from(TAIL));
    await tick();
    await tick();
    expect(calls.slice(-6)).toEqual([['finish', expect.objectContaining({ kind: 'ok' })], ['written'], ['cork'], ['write', TAIL], ['end', undefined], ['uncork']]);
    body.push(null);
    await tick();
    expect(written(calls)).toBe(START + DELTA + DELTA + TAIL);
    expect(corks(calls)).toBe(4);
  });

  it('ends a stream this relay cut as it shut down with the relay-closing event, not the provider\'s failure', async () => {
    const calls: Call[] = [];
    const closing = { cut: false };
    const { body } = start(calls, {}, 0, closing);
    body.push(Buffer.from(START));
    body.push(Buffer.from(DELTA));
    await tick();
    // As UpstreamPools.destroy does: the flag first, then the bodies destroyed.
    closing.cut = true;
    body.destroy(new Error('the relay is closing'));
    await vi.waitFor(() => expect(calls.some((c) => c[0] === 'end')).toBe(true), { timeout: 20_000 });
    expect(written(calls)).toBe(START + DELTA + RELAY_CLOSING_EVENT);
    expect(RELAY_CLOSING_EVENT).toContain('"type":"overloaded_error"');
  });

  it('ends a cut stream with the failed event after settling what was delivered, the queued chunks first', async () => {
    const calls: Call[] = [];
    const { body } = start(calls);
    body.push(Buffer.from(START));
    body.push(Buffer.from(DELTA.repeat(2)));
    body.push(null); // no message_delta, no message_stop: cut
    // The delivered text is counted by a worker first.
    await vi.waitFor(() => expect(calls.some((c) => c[0] === 'end')).toBe(true), { timeout: 20_000 });
    const finish = calls.findIndex((c) => c[0] === 'finish');
    expect(calls[finish]).toEqual(['finish', { kind: 'partial', reason: expect.any(String), usage: expect.objectContaining({ inputTokens: 10, outputTokens: 2 }) }]);
    expect(written(calls)).toBe(START + DELTA.repeat(2) + STREAM_FAILED_EVENT);
    const end = calls.findIndex((c) => c[0] === 'end');
    // The chunks of the tick the provider stopped in wait to go with the end: one cork.
    expect(calls.slice(finish + 1, finish + 3)).toEqual([['written'], ['cork']]);
    expect(end).toBeGreaterThan(finish);
    expect(corks(calls)).toBe(1);
  });

  it('writes nothing more once the client left, the queued chunks included', async () => {
    const calls: Call[] = [];
    const { ex, body } = start(calls);
    // The client goes away in the tick its first chunk was queued, before the queue is written
    // (messages-handler.ts's onClientAborted sets both).
    body.once('data', () => {
      ex.aborted = true;
      ex.responded = true;
    });
    body.push(Buffer.from(START));
    body.push(Buffer.from(TAIL));
    body.push(null);
    await tick();
    expect(calls.filter((c) => c[0] !== 'finish')).toEqual([]);
    expect(calls.filter((c) => c[0] === 'finish')).toHaveLength(1);
  });

  it('pauses the provider when the client socket is full, and resumes it once writable', async () => {
    const calls: Call[] = [];
    let full = true;
    const { body, drain } = start(calls, { full: () => full });
    body.push(Buffer.from(START));
    body.push(Buffer.from(DELTA));
    await tick();
    // Both chunks of the tick are written (uWS buffers them), then the provider waits.
    expect(calls.filter((c) => c[0] === 'write')).toHaveLength(2);
    expect(calls.at(-1)).toEqual(['onWritable']);
    expect(body.isPaused()).toBe(true);
    body.push(Buffer.from(DELTA));
    await tick();
    expect(calls.filter((c) => c[0] === 'write')).toHaveLength(2);
    full = false;
    drain();
    expect(body.isPaused()).toBe(false);
    body.push(Buffer.from(TAIL));
    body.push(null);
    await tick();
    await tick();
    expect(written(calls)).toBe(START + DELTA + DELTA + TAIL);
    expect(calls.at(-1)).toEqual(['uncork']);
    expect(calls.at(-2)).toEqual(['end', undefined]);
  });
});

// What the provider did not state is billed as the relay counts it: the delivered text for the
// output, the prompt for the input. Never message_start's placeholder output (1) nor an input of 0.
describe('pipeStream settles a stream whose usage is missing a count', () => {
  const settle = async (text: string, prompt: number) => {
    const calls: Call[] = [];
    const { body } = start(calls, {}, prompt);
    body.push(Buffer.from(text));
    body.push(null);
    await vi.waitFor(() => expect(calls.some((c) => c[0] === 'end')).toBe(true), { timeout: 20_000 });
    const outcome = calls.find((c) => c[0] === 'finish')![1] as Extract<Outcome, { usage: unknown }>;
    return { kind: outcome.kind, input: outcome.usage.inputTokens, output: outcome.usage.outputTokens, cacheRead: outcome.usage.cacheReadTokens };
  };
  const start1000 = sse('message_start', { type: 'message_start', message: { id: 'msg_1', usage: { input_tokens: 1000, output_tokens: 1 } } });
  const STOP = sse('message_stop', { type: 'message_stop' });
  const bareDelta = sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' } });

  it('bills the delivered output when message_delta carries no output_tokens', async () => {
    expect(await settle(start1000 + DELTA.repeat(500) + bareDelta + STOP, 7)).toEqual({ kind: 'ok', input: 1000, output: 500, cacheRead: 0 });
    const emptyUsage = sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: {} });
    expect(await settle(start1000 + DELTA.repeat(40) + emptyUsage + STOP, 7)).toEqual({ kind: 'ok', input: 1000, output: 40, cacheRead: 0 });
  });

  it('counts the prompt when message_start states no input, whether the output is stated or counted', async () => {
    const noUsage = sse('message_start', { type: 'message_start', message: { id: 'msg_1' } });
    const noInput = sse('message_start', { type: 'message_start', message: { id: 'msg_1', usage: { output_tokens: 1 } } });
    expect(await settle(noUsage + DELTA.repeat(4) + TAIL, 777)).toEqual({ kind: 'ok', input: 777, output: 3, cacheRead: 0 });
    expect(await settle(noInput + DELTA.repeat(4) + TAIL, 777)).toEqual({ kind: 'ok', input: 777, output: 3, cacheRead: 0 });
    expect(await settle(noInput + DELTA.repeat(4) + bareDelta + STOP, 777)).toEqual({ kind: 'ok', input: 777, output: 4, cacheRead: 0 });
    // Cut before its end.
    expect(await settle(noUsage + DELTA.repeat(4), 777)).toEqual({ kind: 'partial', input: 777, output: 4, cacheRead: 0 });
    // The cache reads it did state are billed as such, not again as input.
    const cached = sse('message_start', { type: 'message_start', message: { id: 'msg_1', usage: { cache_read_input_tokens: 700, output_tokens: 1 } } });
    expect(await settle(cached + DELTA.repeat(4) + TAIL, 777)).toEqual({ kind: 'ok', input: 77, output: 3, cacheRead: 700 });
    // An input restated at the end is the provider's word.
    const restated = sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { input_tokens: 55, output_tokens: 3 } });
    expect(await settle(noUsage + DELTA.repeat(4) + restated + STOP, 777)).toEqual({ kind: 'ok', input: 55, output: 3, cacheRead: 0 });
    // A stated input of 0 (everything else cached) is not counted over.
    const zero = sse('message_start', { type: 'message_start', message: { id: 'msg_1', usage: { input_tokens: 0, cache_read_input_tokens: 700, output_tokens: 1 } } });
    expect(await settle(zero + DELTA.repeat(4) + TAIL, 777)).toEqual({ kind: 'ok', input: 0, output: 3, cacheRead: 700 });
  });
});

/** The client leaves, as messages-handler.ts's onClientAborted does it. */
function leave(ex: StreamingExchange & { aborted: boolean }, body: Readable): void {
  ex.aborted = true;
  ex.responded = true;
  if (ex.usagePending && !body.destroyed) {
    if (body.isPaused()) body.resume();
    ex.onAbortedWhilePending?.();
    return;
  }
  body.destroy(new Error('client went away'));
}

function startWith(calls: Call[], format: Omit<Parameters<typeof pipeStream>[2], 'failedEvent' | 'requestIdHeader'>, prompt = 0) {
  const { res } = fakeRes(calls);
  const ex = exchange(calls, res);
  ex.countPromptTokens = () => Promise.resolve(prompt);
  const body = new Readable({ read() {} });
  pipeStream(ex, body, { ...format, failedEvent: STREAM_FAILED_EVENT, requestIdHeader: 'request-id' });
  return { ex, body };
}

const finished = (calls: Call[]) => calls.find((c) => c[0] === 'finish')?.[1] as Extract<Outcome, { usage: unknown }> | undefined;

describe('a chunk the meter or the rewriter throws on', () => {
  it('ends that stream as failed, settled for what was delivered, instead of escaping the provider body\'s handler', async () => {
    const calls: Call[] = [];
    let n = 0;
    const { body } = startWith(calls, {
      provider: { streamMeter: (sink) => new SseUsageParser(sink) },
      rewriter: { push: (chunk) => { if (++n === 3) throw new TypeError('boom'); return chunk; } },
    });
    body.push(Buffer.from(START));
    body.push(Buffer.from(DELTA));
    expect(() => body.push(Buffer.from(DELTA))).not.toThrow();
    body.push(Buffer.from(TAIL));
    await vi.waitFor(() => expect(calls.some((c) => c[0] === 'end')).toBe(true), { timeout: 20_000 });
    expect(body.destroyed).toBe(true);
    expect(finished(calls)).toMatchObject({ kind: 'partial', usage: { inputTokens: 10 } });
    // What was written before, then the client is told the stream failed, in its protocol.
    expect(written(calls)).toBe(START + DELTA + STREAM_FAILED_EVENT);
    expect(calls.filter((c) => c[0] === 'finish')).toHaveLength(1);
  });

  it('from the meter likewise', async () => {
    const calls: Call[] = [];
    const meter = new SseUsageParser();
    const { body } = startWith(calls, { provider: { streamMeter: () => meter }, rewriter: null });
    body.push(Buffer.from(START));
    await tick();
    meter.push = () => { throw new TypeError('boom'); };
    expect(() => body.push(Buffer.from(DELTA))).not.toThrow();
    await vi.waitFor(() => expect(calls.some((c) => c[0] === 'end')).toBe(true), { timeout: 20_000 });
    expect(finished(calls)).toMatchObject({ kind: 'partial', usage: { inputTokens: 10 } });
    expect(written(calls)).toBe(START + STREAM_FAILED_EVENT);
  });
});

const chatChunk = (delta: unknown, finish: string | null = null) =>
  `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":${JSON.stringify(delta)},"finish_reason":${finish ? `"${finish}"` : 'null'}}],"usage":null}\n\n`;
const CHAT_USAGE = 'data: {"id":"c","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":5010,"total_tokens":6010,"prompt_tokens_details":{"cached_tokens":900},"completion_tokens_details":{"reasoning_tokens":5000}}}\n\n';

describe('a client that leaves once the generation is over', () => {
  const chat = (calls: Call[], tailWaitMs?: number) => startWith(calls, { provider: { streamMeter: (sink) => new ChatStreamMeter(sink) }, rewriter: null, tailWaitMs }, 77);

  it('Chat Completions, after the finish_reason: the provider is read on to its usage, nothing more written, billed by it', async () => {
    const calls: Call[] = [];
    const { ex, body } = chat(calls);
    body.push(Buffer.from(chatChunk({ role: 'assistant', content: '' }) + chatChunk({ content: 'Hi' })));
    await tick();
    expect(ex.usagePending).toBe(false);
    body.push(Buffer.from(chatChunk({}, 'stop')));
    await tick();
    // The usage is owed again: a client leaving now does not cancel the provider.
    expect(ex.usagePending).toBe(true);
    const before = written(calls);
    leave(ex, body);
    expect(body.destroyed).toBe(false);
    body.push(Buffer.from(CHAT_USAGE));
    await vi.waitFor(() => expect(finished(calls)).toBeDefined(), { timeout: 20_000 });
    expect(finished(calls)).toMatchObject({ kind: 'partial', usage: { inputTokens: 100, cacheReadTokens: 900, outputTokens: 5010 } });
    // Cancelled once the usage came; nothing written after the client left.
    expect(body.destroyed).toBe(true);
    expect(written(calls)).toBe(before);
  });

  it('a usage that does not come within the deadline: cut then, billed the local count', async () => {
    const calls: Call[] = [];
    const { ex, body } = chat(calls, 50);
    body.push(Buffer.from(chatChunk({ role: 'assistant', content: '' }) + chatChunk({ content: 'Hi there' }) + chatChunk({}, 'stop')));
    await tick();
    const t0 = performance.now();
    leave(ex, body);
    await vi.waitFor(() => expect(finished(calls)).toBeDefined(), { timeout: 20_000 });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(45);
    expect(body.destroyed).toBe(true);
    expect(finished(calls)).toMatchObject({ kind: 'partial', usage: { inputTokens: 77, outputTokens: 2 } });
  });

  it('a client leaving mid-generation still cancels at once', async () => {
    const calls: Call[] = [];
    const { ex, body } = chat(calls);
    body.push(Buffer.from(chatChunk({ role: 'assistant', content: '' }) + chatChunk({ content: 'Hi' })));
    await tick();
    leave(ex, body);
    expect(body.destroyed).toBe(true);
    await vi.waitFor(() => expect(finished(calls)).toBeDefined(), { timeout: 20_000 });
    expect(finished(calls)).toMatchObject({ kind: 'partial', usage: { inputTokens: 77, outputTokens: 1 } });
  });

  it('Anthropic, after a message_delta without the usage a later one states: read on to it', async () => {
    const calls: Call[] = [];
    const { ex, body } = startWith(calls, { provider: { streamMeter: (sink) => new SseUsageParser(sink) }, rewriter: null });
    body.push(Buffer.from(START + DELTA + sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' } })));
    await tick();
    expect(ex.usagePending).toBe(true);
    leave(ex, body);
    expect(body.destroyed).toBe(false);
    body.push(Buffer.from(sse('message_delta', { type: 'message_delta', usage: { output_tokens: 321 } })));
    await vi.waitFor(() => expect(finished(calls)).toBeDefined(), { timeout: 20_000 });
    expect(finished(calls)).toMatchObject({ usage: { inputTokens: 10, outputTokens: 321 } });
    expect(body.destroyed).toBe(true);
  });
});

describe('a client that leaves before message_start, from a provider that only pings', () => {
  const PING = 'event: ping\ndata: {"type": "ping"}\n\n';

  it('is read on only until the deadline, then cut and settled with nothing stated', async () => {
    const calls: Call[] = [];
    const { ex, body } = startWith(calls, { provider: { streamMeter: (sink) => new SseUsageParser(sink) }, rewriter: null, tailWaitMs: 50 });
    body.push(Buffer.from(PING));
    await tick();
    expect(ex.usagePending).toBe(true);
    const t0 = performance.now();
    leave(ex, body);
    expect(body.destroyed).toBe(false);
    const pinging = setInterval(() => { if (!body.destroyed) body.push(Buffer.from(PING)); }, 10);
    await vi.waitFor(() => expect(finished(calls)).toBeDefined(), { timeout: 20_000 });
    clearInterval(pinging);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(45);
    expect(body.destroyed).toBe(true);
    expect(calls.find((c) => c[0] === 'finish')?.[1]).toMatchObject({ kind: 'failed' });
  });

  it('a message_start within the deadline is billed, and the provider cancelled then', async () => {
    const calls: Call[] = [];
    const { ex, body } = startWith(calls, { provider: { streamMeter: (sink) => new SseUsageParser(sink) }, rewriter: null, tailWaitMs: 5_000 });
    body.push(Buffer.from(PING));
    await tick();
    leave(ex, body);
    body.push(Buffer.from(START));
    await vi.waitFor(() => expect(finished(calls)).toBeDefined(), { timeout: 20_000 });
    expect(body.destroyed).toBe(true);
    expect(finished(calls)).toMatchObject({ usage: { inputTokens: 10 } });
  });
});

describe('the stall clock (streamLineAt)', () => {
  it('moves on the stream\'s events, not on its pings nor its comments', async () => {
    const calls: Call[] = [];
    const { ex, body } = startWith(calls, { provider: { streamMeter: (sink) => new SseUsageParser(sink) }, rewriter: null });
    body.push(Buffer.from(START));
    await tick();
    const at = ex.streamLineAt;
    await new Promise((r) => setTimeout(r, 5));
    body.push(Buffer.from('event: ping\ndata: {"type": "ping"}\n\n: comment\n\n'));
    await tick();
    expect(ex.streamLineAt).toBe(at);
    body.push(Buffer.from(DELTA.replaceAll('\n', '\r')));
    await tick();
    expect(ex.streamLineAt).toBeGreaterThan(at);
  });
});

describe('a stated usage that does not cover what was delivered', () => {
  it('is billed the larger of the stated output and the delivered text', async () => {
    const calls: Call[] = [];
    const { body } = startWith(calls, { provider: { streamMeter: (sink) => new ChatStreamMeter(sink) }, rewriter: null }, 77);
    body.push(Buffer.from('data: {"choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":0}}\n\n'));
    body.push(Buffer.from(chatChunk({ content: 'tok ' }).repeat(30) + chatChunk({}, 'stop') + 'data: [DONE]\n\n'));
    body.push(null);
    await vi.waitFor(() => expect(finished(calls)).toBeDefined(), { timeout: 20_000 });
    expect(finished(calls)).toMatchObject({ kind: 'ok', usage: { inputTokens: 1000, outputTokens: 30 } });
  });

  it('an output of 0 stated for content delivered is no final usage either', async () => {
    const calls: Call[] = [];
    const { body } = startWith(calls, { provider: { streamMeter: (sink) => new SseUsageParser(sink) }, rewriter: null });
    body.push(Buffer.from(START + DELTA.repeat(12) + sse('message_delta', { type: 'message_delta', usage: { output_tokens: 0 } }) + sse('message_stop', { type: 'message_stop' })));
    body.push(null);
    await vi.waitFor(() => expect(finished(calls)).toBeDefined(), { timeout: 20_000 });
    expect(finished(calls)).toMatchObject({ kind: 'ok', usage: { inputTokens: 10, outputTokens: 12 } });
  });
});

// Before: a provider's error event quoting the key it was sent reached the client as it came, or
// copied into the converted error event; now every error event written is scrubbed of the channel's
// key and of key shapes, and the rest passes byte for byte.
describe('a provider error event on its way to the client', () => {
  const KEY = 'chan-cred-7Hq2Lr9Xw4Tb8Kz1';
  const SHAPED = 'sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv';
  const errorEvent = sse('error', { type: 'error', error: { type: 'authentication_error', message: `Incorrect API key provided: ${KEY} (${SHAPED})` } });

  function startKeyed(calls: Call[], rewriter: Parameters<typeof pipeStream>[2]['rewriter'], meter: 'anthropic' | 'chat') {
    const { res } = fakeRes(calls);
    const ex = exchange(calls, res);
    (ex as { channel: unknown }).channel = { id: 7, apiKey: KEY };
    const body = new Readable({ read() {} });
    pipeStream(ex, body, {
      provider: { streamMeter: (sink) => (meter === 'anthropic' ? new SseUsageParser(sink) : new ChatStreamMeter(sink)) },
      rewriter,
      failedEvent: STREAM_FAILED_EVENT,
      requestIdHeader: 'request-id',
    });
    return { ex, body };
  }

  it('same protocol: the error event is scrubbed, split across chunks or not; content with key shapes passes unchanged', async () => {
    const calls: Call[] = [];
    const { body } = startKeyed(calls, null, 'anthropic');
    const content = DELTA.replace('tok ', `use ${SHAPED}`);
    body.push(Buffer.from(START + content));
    const half = errorEvent.indexOf(KEY) + 5;
    body.push(Buffer.from(errorEvent.slice(0, half)));
    await tick();
    body.push(Buffer.from(errorEvent.slice(half)));
    body.push(null);
    await vi.waitFor(() => expect(calls.some((c) => c[0] === 'end')).toBe(true), { timeout: 20_000 });
    const out = written(calls);
    expect(out.startsWith(START + content)).toBe(true);
    const error = out.slice((START + content).length);
    expect(error).not.toContain(KEY);
    expect(error).not.toContain(SHAPED);
    expect(error).toContain('Incorrect API key provided: [redacted] (sk-[redacted])');
    expect(finished(calls)).toMatchObject({ kind: 'partial' });
  });

  it('an error event the rewriter wrote (a conversion copies the message) is scrubbed too', async () => {
    const calls: Call[] = [];
    const { body } = startKeyed(calls, { push: (chunk) => chunk.toString().replace('"type":"error",', '') }, 'anthropic');
    body.push(Buffer.from(START + errorEvent));
    body.push(null);
    await vi.waitFor(() => expect(calls.some((c) => c[0] === 'end')).toBe(true), { timeout: 20_000 });
    expect(written(calls)).toContain('event: error');
    expect(written(calls)).not.toContain(KEY);
    expect(written(calls)).not.toContain(SHAPED);
  });
});

describe('a rewriter that can convert no more (its failure set)', () => {
  it('what it returned is written, then the stream ends as failed, settled for what was delivered', async () => {
    const calls: Call[] = [];
    const rewriter = { failure: null as Error | null, push(chunk: Buffer) {
      if (chunk.toString().includes('flood')) this.failure = new Error('joined data too long');
      return chunk.toString().replace('flood', '');
    } };
    const { body } = startWith(calls, { provider: { streamMeter: (sink) => new SseUsageParser(sink) }, rewriter });
    body.push(Buffer.from(START));
    body.push(Buffer.from(DELTA + 'flood'));
    body.push(Buffer.from(DELTA));
    await vi.waitFor(() => expect(calls.some((c) => c[0] === 'end')).toBe(true), { timeout: 20_000 });
    expect(body.destroyed).toBe(true);
    expect(written(calls)).toBe(START + DELTA + STREAM_FAILED_EVENT);
    expect(finished(calls)).toMatchObject({ kind: 'partial', reason: 'provider stream failed', usage: { inputTokens: 10, outputTokens: 1 } });
    expect(calls.filter((c) => c[0] === 'finish')).toHaveLength(1);
  });
});

describe('billedByFinalUsage', () => {
  const text = { promptUncountable: false };
  it('holds for output a provider bills without streaming it: reasoning models, reasoning_effort, extended thinking', () => {
    expect(billedByFinalUsage('openai', 'o3-mini', text)).toBe(true);
    expect(billedByFinalUsage('openai', 'openai/gpt-5-mini', text)).toBe(true);
    expect(billedByFinalUsage('openai', 'grok-4', { ...text, reasoningEffort: 'high' })).toBe(true);
    expect(billedByFinalUsage('anthropic', 'claude-sonnet-4-5', { ...text, thinking: { type: 'enabled', budget_tokens: 1024 } })).toBe(true);
    expect(billedByFinalUsage('anthropic', 'claude-opus-4-6', { ...text, thinking: { type: 'adaptive' } })).toBe(true);
  });

  it('holds for an OpenAI-format prompt the relay cannot count (it states its prompt only at the end)', () => {
    expect(billedByFinalUsage('openai', 'gpt-4o-mini', { promptUncountable: true })).toBe(true);
    // An Anthropic stream states its prompt in message_start.
    expect(billedByFinalUsage('anthropic', 'claude-haiku-4-5', { promptUncountable: true })).toBe(false);
  });

  it('does not hold for a text stream of an ordinary model: a client leaving cuts it, billed what was delivered', () => {
    expect(billedByFinalUsage('openai', 'gpt-4o', text)).toBe(false);
    expect(billedByFinalUsage('openai', 'gpt-4o', { ...text, reasoningEffort: 'none' })).toBe(false);
    expect(billedByFinalUsage('anthropic', 'claude-haiku-4-5', { ...text, thinking: { type: 'disabled' } })).toBe(false);
    expect(billedByFinalUsage('anthropic', 'claude-haiku-4-5', text)).toBe(false);
  });
});
