// A stream whose bill only its final usage says (stream-relay.ts billedByFinalUsage) is read on when
// its client leaves: through its generation, then for the final usage, each with a deadline; found by
// a review of that change, each case failed before its fix. pipeStream is driven as
// stream-relay.unit.test.ts drives it (a Readable for the provider's body, a recording fake of uWS's
// response, the real TokenCounter), the client leaving as onClientAborted does.
import { Readable } from 'node:stream';
import type { HttpResponse } from 'uWebSockets.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../infra/logger.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { SseUsageParser } from '../stream/sse-usage-parser.js';
import { ChatStreamMeter } from '../providers/openai/chat-usage.js';
import { TokenCounter } from '../token-count/token-counter.js';
import type { Outcome } from './settlement.js';
import { billedByFinalUsage, pipeStream, STREAM_FAILED_EVENT, type StreamingExchange } from './stream-relay.js';
import { messagesToChat } from '../providers/openai/from-messages.js';
import type { MessagesRequest } from './messages-request.js';

const log = createLogger(testConfig(), 'test');
let tokens: TokenCounter;
beforeAll(() => { tokens = new TokenCounter({ minThreads: 1, maxThreads: 1 }); });
afterAll(async () => { await tokens.close(); });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const tick = () => new Promise<void>((r) => setImmediate(r));
// Waits for `done`, 5 s at most: the deadlines under test are 50 ms, and a loaded machine (a CI run
// beside other tests) delays the timers that drive them; the assertions after say what must hold.
async function until(done: () => boolean, limitMs = 5000): Promise<void> {
  const t0 = performance.now();
  while (!done() && performance.now() - t0 < limitMs) await sleep(10);
}
function sse(name: string, data: unknown): string {
  return `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}
const chatChunk = (delta: unknown, finish: string | null = null) =>
  `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":${JSON.stringify(delta)},"finish_reason":${finish ? `"${finish}"` : 'null'}}],"usage":null}\n\n`;
const CHAT_USAGE = 'data: {"id":"c","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":5010,"total_tokens":6010,"completion_tokens_details":{"reasoning_tokens":5000}}}\n\ndata: [DONE]\n\n';

interface Rig { ex: StreamingExchange & { aborted: boolean }; body: Readable; finished: () => Outcome | undefined; setFull(v: boolean): void }

function rig(opts: { billed: boolean; meter: 'chat' | 'anthropic'; tailWaitMs?: number; flushBytes?: number; full?: boolean }): Rig {
  let full = opts.full ?? false;
  let outcome: Outcome | undefined;
  const res = {
    cork(fn: () => void) { fn(); return res; },
    writeStatus() { return res; },
    writeHeader() { return res; },
    write() { return !full; },
    end() { return res; },
    onWritable() { return res; },
  };
  const ex: StreamingExchange & { aborted: boolean } = {
    ctx: { log, tokens, deliveredFlushBytes: opts.flushBytes ?? 256 * 1024 },
    res: res as unknown as HttpResponse,
    requestId: 'req_gw', upstreamRequestId: 'req_up', t0: performance.now(), channel: null, tokenEncoding: 'cl100k_base',
    aborted: false, usagePending: false, billedByFinalUsage: opts.billed, responded: false, headersSent: false, streamLineAt: 0,
    done() {},
    finish(o: Outcome) { outcome = o; },
    afterSettled(then: () => void) { setImmediate(then); },
    countPromptTokens: () => Promise.resolve(77),
  };
  const body = new Readable({ read() {} });
  pipeStream(ex, body, {
    provider: { streamMeter: (sink) => opts.meter === 'chat' ? new ChatStreamMeter(sink) : new SseUsageParser(sink) },
    rewriter: null, failedEvent: STREAM_FAILED_EVENT, requestIdHeader: 'request-id', tailWaitMs: opts.tailWaitMs,
  });
  return { ex, body, finished: () => outcome, setFull: (v) => { full = v; } };
}

/** As messages-handler.ts onClientAborted. */
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

describe('a stream read on through its generation after its client left: the deadline of its final usage', () => {
  it('control (not billedByFinalUsage): a client leaving after the finish_reason, usage never comes -> cut after tailWaitMs', async () => {
    const { ex, body, finished } = rig({ billed: false, meter: 'chat', tailWaitMs: 50 });
    body.push(Buffer.from(chatChunk({ role: 'assistant', content: '' }) + chatChunk({ content: 'Hi' }) + chatChunk({}, 'stop')));
    await tick();
    leave(ex, body);
    const ping = setInterval(() => { if (!body.destroyed) body.push(Buffer.from(': keep-alive\n\n')); }, 10);
    await until(() => body.destroyed && finished() !== undefined);
    clearInterval(ping);
    expect(body.destroyed).toBe(true);
    expect(finished()).toBeDefined();
  });

  it('billedByFinalUsage, client left mid-generation, then finish_reason and only keep-alives -> should be cut after tailWaitMs too', async () => {
    const { ex, body, finished } = rig({ billed: true, meter: 'chat', tailWaitMs: 50 });
    body.push(Buffer.from(chatChunk({ role: 'assistant', content: '' }) + chatChunk({ content: 'Hi' })));
    await tick();
    leave(ex, body); // mid-generation: read on (by design)
    body.push(Buffer.from(chatChunk({}, 'stop')));
    const ping = setInterval(() => { if (!body.destroyed) body.push(Buffer.from(': keep-alive\n\n')); }, 10);
    await until(() => body.destroyed && finished() !== undefined);
    clearInterval(ping);
    // Before: no tail timer was armed (the abort's hook returned early and was not called again);
    // only the heartbeat's stall check (UPSTREAM_BODY_TIMEOUT_MS, 300 s) ended it.
    expect({ destroyed: body.destroyed, settled: finished() !== undefined }).toEqual({ destroyed: true, settled: true });
  });

  it('same, the provider sending empty chunks (events, so the stall check never fires either) -> held for as long as it sends', async () => {
    const { ex, body, finished } = rig({ billed: true, meter: 'chat', tailWaitMs: 50 });
    body.push(Buffer.from(chatChunk({ role: 'assistant', content: '' }) + chatChunk({ content: 'Hi' })));
    await tick();
    leave(ex, body);
    body.push(Buffer.from(chatChunk({}, 'stop')));
    const at = ex.streamLineAt;
    const beat = setInterval(() => { if (!body.destroyed) body.push(Buffer.from('data: {"id":"c","choices":[]}\n\n')); }, 10);
    await until(() => body.destroyed && finished() !== undefined);
    clearInterval(beat);
    expect(ex.streamLineAt).toBeGreaterThan(at); // the stall clock moves: nothing else would ever cut it
    expect({ destroyed: body.destroyed, settled: finished() !== undefined }).toEqual({ destroyed: true, settled: true });
  });

  it('Anthropic + thinking: client left mid-text, message_delta without usage, then pings -> should be cut after tailWaitMs', async () => {
    const { ex, body, finished } = rig({ billed: true, meter: 'anthropic', tailWaitMs: 50 });
    body.push(Buffer.from(sse('message_start', { type: 'message_start', message: { id: 'm', usage: { input_tokens: 10, output_tokens: 1 } } })
      + sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'tok ' } })));
    await tick();
    leave(ex, body);
    body.push(Buffer.from(sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' } })));
    const ping = setInterval(() => { if (!body.destroyed) body.push(Buffer.from('event: ping\ndata: {"type": "ping"}\n\n')); }, 10);
    await until(() => body.destroyed && finished() !== undefined);
    clearInterval(ping);
    expect({ destroyed: body.destroyed, settled: finished() !== undefined }).toEqual({ destroyed: true, settled: true });
  });
});

describe('a client that left while its socket was full, delivered-text counting lagging after', () => {
  async function run(full: boolean) {
    const r = rig({ billed: true, meter: 'chat', flushBytes: 64, full });
    const { ex, body } = r;
    body.push(Buffer.from(chatChunk({ role: 'assistant', content: '' }) + chatChunk({ content: 'Hi' })));
    await tick();
    await tick();
    leave(ex, body);
    // The generation goes on: pieces of 100 bytes, each a batch for the counter (flushBytes 64).
    body.push(Buffer.from(Array.from({ length: 20 }, (_, i) => chatChunk({ content: `${i} ${'word '.repeat(20)}` })).join('')));
    await sleep(300);
    body.push(Buffer.from(chatChunk({}, 'stop') + CHAT_USAGE));
    body.push(null);
    const t0 = performance.now();
    while (r.finished() === undefined && performance.now() - t0 < 15_000) await sleep(20);
    return { settled: r.finished(), paused: body.isPaused() };
  }

  it('control: socket not full -> read on to its usage, billed 5010', async () => {
    const { settled } = await run(false);
    expect(settled).toMatchObject({ usage: { outputTokens: 5010 } });
  });

  it('socket full when the client left -> read on to its usage too (before: paused for good)', async () => {
    const { settled, paused } = await run(true);
    // The body was paused for the full socket; onClientAborted resumed it; counting congestion paused it
    // again; congestion's end does not resume it because socketFull is still true (onWritable never
    // comes for a closed socket). Nothing then reads it until the stall check cuts it, settled by the
    // delivered text: the very under-billing billedByFinalUsage exists to prevent.
    expect({ settled: settled !== undefined, paused }).toEqual({ settled: true, paused: false });
  });
});

describe('billedByFinalUsage: the streams read on', () => {
  it('an Anthropic client\'s `thinking` to an OpenAI-format channel: the channel never gets it, so the stream is not read on', () => {
    const body = { model: 'gpt-4o', max_tokens: 4096, stream: true, thinking: { type: 'enabled', budget_tokens: 2048 }, messages: [{ role: 'user', content: 'hi' }] } as unknown as MessagesRequest;
    const sent = messagesToChat(body, 'gpt-4o');
    expect(JSON.stringify(sent)).not.toMatch(/thinking|reasoning/);
    // Before: true, so a cancelled gpt-4o answer was generated to max_tokens and billed in full.
    expect(billedByFinalUsage('openai', 'gpt-4o', { thinking: body.thinking, promptUncountable: false })).toBe(false);
  });

  it('goes by the name the channel is sent (messages-handler.ts passes the model_mapping\'s), not an alias', () => {
    expect(billedByFinalUsage('openai', 'house-reasoner' /* mapped to o3 */, { promptUncountable: false })).toBe(false);
    expect(billedByFinalUsage('openai', 'o3', { promptUncountable: false })).toBe(true);
  });

  it('holds for hidden-reasoning models outside OpenAI\'s names (Gemini 2.5 and grok-4 over OpenAI-compatible APIs)', () => {
    expect(billedByFinalUsage('openai', 'gemini-2.5-pro', { promptUncountable: false })).toBe(true);
    expect(billedByFinalUsage('openai', 'google/gemini-3-flash', { promptUncountable: false })).toBe(true);
    expect(billedByFinalUsage('openai', 'grok-4', { promptUncountable: false })).toBe(true);
    expect(billedByFinalUsage('openai', 'gemini-2.0-flash', { promptUncountable: false })).toBe(false);
    expect(billedByFinalUsage('openai', 'grok-2', { promptUncountable: false })).toBe(false);
  });

  it('holds for an Anthropic request offering server tools billed per use (web search)', () => {
    expect(billedByFinalUsage('anthropic', 'claude-sonnet-4-5', { promptUncountable: false, serverTools: true })).toBe(true);
    expect(billedByFinalUsage('anthropic', 'claude-sonnet-4-5', { promptUncountable: false, serverTools: false })).toBe(false);
  });
});

describe('a client that left before message_start: the generation that follows is read on', () => {
  it('Anthropic + thinking: left before message_start, message_start and thinking follow -> should be read on to the final usage', async () => {
    const { ex, body, finished } = rig({ billed: true, meter: 'anthropic', tailWaitMs: 50 });
    await tick();
    leave(ex, body); // before message_start: onAbortedWhilePending arms the tail timer
    body.push(Buffer.from(sse('message_start', { type: 'message_start', message: { id: 'm', usage: { input_tokens: 10, output_tokens: 1 } } })));
    let i = 0;
    const gen = setInterval(() => {
      if (body.destroyed) return clearInterval(gen);
      if (++i < 20) return void body.push(Buffer.from(sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'hmm ' } })));
      clearInterval(gen);
      body.push(Buffer.from(sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 3000 } }) + sse('message_stop', { type: 'message_stop' })));
      body.push(null);
    }, 10);
    while (finished() === undefined) await sleep(10);
    // Before: cut at 50 ms (the timer of the wait before message_start was never cleared), billed the ~5 deltas delivered.
    expect(finished()).toMatchObject({ usage: { outputTokens: 3000 } });
  });
});

describe('Anthropic server-tool fees, stated only in the final usage', () => {
  it('a client that leaves after the search results, before message_delta: the searches are billed', async () => {
    const { ex, body, finished } = rig({ billed: billedByFinalUsage('anthropic', 'claude-sonnet-4-5', { promptUncountable: false, serverTools: true }), meter: 'anthropic' });
    body.push(Buffer.from(sse('message_start', { type: 'message_start', message: { id: 'm', usage: { input_tokens: 10, output_tokens: 1, server_tool_use: { web_search_requests: 0 } } } })
      + sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'q' } } })
      + sse('content_block_stop', { type: 'content_block_stop', index: 0 })
      + sse('content_block_start', { type: 'content_block_start', index: 1, content_block: { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_1', content: [{ type: 'web_search_result', url: 'https://x', title: 't', encrypted_content: 'e' }] } })
      + sse('content_block_stop', { type: 'content_block_stop', index: 1 })
      + sse('content_block_delta', { type: 'content_block_delta', index: 2, delta: { type: 'text_delta', text: 'Per the results, ' } })));
    await tick();
    leave(ex, body);
    body.push(Buffer.from(sse('content_block_delta', { type: 'content_block_delta', index: 2, delta: { type: 'text_delta', text: 'the answer.' } })
      + sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 40, server_tool_use: { web_search_requests: 1 } } })
      + sse('message_stop', { type: 'message_stop' })));
    body.push(null);
    while (finished() === undefined) await sleep(10);
    // Before: webSearchRequests 0 (message_start states 0; the count comes in message_delta, never read).
    expect(finished()).toMatchObject({ usage: { webSearchRequests: 1, outputTokens: 40 } });
  });
});
