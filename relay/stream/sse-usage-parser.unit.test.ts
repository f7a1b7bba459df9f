import { describe, expect, it } from 'vitest';
import { MAX_CARRIED_LINE } from './sse-bytes.js';
import { SseUsageParser, usageOfMessage } from './sse-usage-parser.js';
import { MAX_USAGE_COUNT } from './usage-count.js';

function event(name: string, data: unknown): string {
  return `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}

const STREAM = [
  event('message_start', { type: 'message_start', message: { id: 'msg_1', usage: { input_tokens: 321, output_tokens: 1, cache_creation_input_tokens: 7, cache_read_input_tokens: 11 } } }),
  event('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
  event('ping', { type: 'ping' }),
  ...Array.from({ length: 5 }, (_, i) => event('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: `wörd ${i} "message_delta" ` } })),
  event('content_block_stop', { type: 'content_block_stop', index: 0 }),
  event('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 42 } }),
  event('message_stop', { type: 'message_stop' }),
].join('');

describe('SseUsageParser', () => {
  it('takes input and cache tokens from message_start and output tokens from message_delta', () => {
    const p = new SseUsageParser();
    p.push(Buffer.from(STREAM));
    expect(p).toMatchObject({ inputTokens: 321, outputTokens: 42, cacheCreationTokens: 7, cacheReadTokens: 11, contentDeltas: 5, sawMessageStop: true, error: null });
  });

  it('is complete at message_stop after a message_start; a message_stop alone is no answer', () => {
    const whole = new SseUsageParser();
    whole.push(Buffer.from(STREAM));
    expect(whole.complete).toBe(true);
    const alone = new SseUsageParser();
    alone.push(Buffer.from(event('ping', { type: 'ping' }) + event('message_stop', { type: 'message_stop' })));
    expect(alone).toMatchObject({ complete: false, sawMessageStop: true, sawMessageStart: false });
  });

  it('reads the 5-minute / 1-hour split of the cache writes, kept when message_delta restates the total only', () => {
    const SPLIT = STREAM
      .replace('"cache_creation_input_tokens":7,', '"cache_creation_input_tokens":30,"cache_creation":{"ephemeral_5m_input_tokens":10,"ephemeral_1h_input_tokens":20},')
      .replace('"usage":{"output_tokens":42}', '"usage":{"output_tokens":42,"cache_creation_input_tokens":30,"cache_read_input_tokens":11}');
    expect(SPLIT).not.toBe(STREAM);
    const bytes = Buffer.from(SPLIT);
    for (const size of [1, 7, 64, bytes.length]) {
      const p = new SseUsageParser();
      for (let i = 0; i < bytes.length; i += size) p.push(bytes.subarray(i, i + size));
      expect([p.inputTokens, p.cacheReadTokens, p.cacheCreationTokens, p.cacheCreation1hTokens, p.outputTokens]).toEqual([321, 11, 30, 20, 42]);
    }
    // Without the split, every write is 5-minute.
    const p = new SseUsageParser();
    p.push(Buffer.from(STREAM));
    expect([p.cacheCreationTokens, p.cacheCreation1hTokens]).toEqual([7, 0]);
  });

  it('reads the web searches of the final message_delta (message_start says 0), however the stream is cut', () => {
    const SEARCH = STREAM
      .replace('"cache_read_input_tokens":11}', '"cache_read_input_tokens":11,"server_tool_use":{"web_search_requests":0}}')
      .replace('"usage":{"output_tokens":42}', '"usage":{"output_tokens":42,"server_tool_use":{"web_search_requests":3}}');
    expect(SEARCH).not.toBe(STREAM);
    const bytes = Buffer.from(SEARCH);
    for (const size of [1, 5, 64, bytes.length]) {
      const p = new SseUsageParser();
      for (let i = 0; i < bytes.length; i += size) p.push(bytes.subarray(i, i + size));
      expect([p.inputTokens, p.outputTokens, p.webSearchRequests]).toEqual([321, 42, 3]);
    }
    // A delta without server_tool_use keeps what message_start said; none at all is 0.
    const p = new SseUsageParser();
    p.push(Buffer.from(STREAM.replace('"cache_read_input_tokens":11}', '"cache_read_input_tokens":11,"server_tool_use":{"web_search_requests":2}}')));
    expect(p.webSearchRequests).toBe(2);
    const none = new SseUsageParser();
    none.push(Buffer.from(STREAM));
    expect(none.webSearchRequests).toBe(0);
  });

  it('gives the same answer however the stream is cut into chunks', () => {
    const bytes = Buffer.from(STREAM);
    for (let size = 1; size <= 64; size++) {
      const p = new SseUsageParser();
      for (let i = 0; i < bytes.length; i += size) p.push(bytes.subarray(i, i + size));
      expect([p.inputTokens, p.outputTokens, p.cacheReadTokens, p.contentDeltas, p.sawMessageStop]).toEqual([321, 42, 11, 5, true]);
    }
  });

  it('accepts CRLF line ends and reports an error event', () => {
    const p = new SseUsageParser();
    const text = (event('message_start', { type: 'message_start', message: { usage: { input_tokens: 3 } } }) +
      event('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })).replaceAll('\n', '\r\n');
    p.push(Buffer.from(text));
    expect(p.inputTokens).toBe(3);
    expect(p.error).toEqual({ type: 'overloaded_error', message: 'Overloaded' });
    expect(p.sawMessageStop).toBe(false);
  });

  it('counts a long delta split across chunks once, and still reads the usage after it', () => {
    const p = new SseUsageParser();
    const delta = event('content_block_delta', { type: 'content_block_delta', delta: { text: 'x'.repeat(100_000) } });
    p.push(Buffer.from(delta.slice(0, 50_000)));
    p.push(Buffer.from(delta.slice(50_000) + event('message_delta', { type: 'message_delta', usage: { output_tokens: 9 } })));
    expect(p.contentDeltas).toBe(1);
    expect(p.outputTokens).toBe(9);
  });
});

// A provider's count past any real request (a fault, or a number JSON cannot hold exactly) is billed
// at MAX_USAGE_COUNT: whatever is derived from it (the event's prompt_tokens sums three counts, the
// cost) stays a whole number the ledger's integer columns, Redis and Postgres take.
describe('usage counts a provider overstates', () => {
  const huge = { input_tokens: 1e300, output_tokens: 5e9, cache_creation_input_tokens: 2 ** 53 + 2, cache_read_input_tokens: 1e400,
    server_tool_use: { web_search_requests: 1e12 } };
  const capped = { inputTokens: MAX_USAGE_COUNT, outputTokens: MAX_USAGE_COUNT, cacheCreationTokens: MAX_USAGE_COUNT, cacheCreation1hTokens: 0,
    cacheReadTokens: MAX_USAGE_COUNT, webSearchRequests: MAX_USAGE_COUNT };

  it('bills each at the bound, in a JSON answer and in a stream alike', () => {
    // JSON.stringify writes 1e400 (Infinity) as null: the stream's text carries it as the provider would.
    const text = JSON.stringify({ usage: huge }).replace('"cache_read_input_tokens":null', '"cache_read_input_tokens":1e400');
    expect(usageOfMessage(JSON.parse(text))).toEqual(capped);
    const p = new SseUsageParser();
    p.push(Buffer.from(`event: message_start\ndata: {"type":"message_start","message":{"id":"m","usage":${text.slice(9, -1)}}}\n\n`));
    p.push(Buffer.from(event('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 5e9 } })));
    expect(p).toMatchObject({ inputTokens: MAX_USAGE_COUNT, outputTokens: MAX_USAGE_COUNT, cacheCreationTokens: MAX_USAGE_COUNT, cacheReadTokens: MAX_USAGE_COUNT });
    expect(3 * MAX_USAGE_COUNT).toBeLessThan(2 ** 31);
  });

  it('keeps counts up to the bound as they are, and reads nothing from what is not a positive number', () => {
    expect(usageOfMessage({ usage: { input_tokens: MAX_USAGE_COUNT, output_tokens: 2_000_000.7, cache_read_input_tokens: -5, cache_creation_input_tokens: '9' } }))
      .toEqual({ inputTokens: MAX_USAGE_COUNT, outputTokens: 2_000_000, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: 0 });
  });
});

describe('SseUsageParser.onContentDelta', () => {
  const deltaPayloads = STREAM.split('\n').filter((l) => l.startsWith('data: {"type":"content_block_delta"')).map((l) => l.slice(5));

  it('hands over the raw data payload of each content_block_delta, however the stream is cut', () => {
    const bytes = Buffer.from(STREAM);
    for (let size = 1; size <= 64; size++) {
      const got: string[] = [];
      const p = new SseUsageParser((data) => got.push(data.toString('utf8')));
      for (let i = 0; i < bytes.length; i += size) p.push(bytes.subarray(i, i + size));
      expect(got).toEqual(deltaPayloads);
      expect([p.inputTokens, p.outputTokens, p.contentDeltas, p.sawMessageStop]).toEqual([321, 42, 5, true]);
    }
  });

  it('works with CRLF line ends and with streams that carry the type only in the data', () => {
    const got: string[] = [];
    const p = new SseUsageParser((data) => got.push(data.toString('utf8').trim()));
    p.push(Buffer.from(STREAM.replaceAll('\n', '\r\n')));
    expect(got).toEqual(deltaPayloads.map((d) => d.trim()));

    const bare: string[] = [];
    const q = new SseUsageParser((data) => bare.push(data.toString('utf8').trim()));
    q.push(Buffer.from(STREAM.split('\n').filter((l) => !l.startsWith('event:')).join('\n')));
    expect(bare).toEqual(deltaPayloads.map((d) => d.trim()));
    expect(q.outputTokens).toBe(42);
  });

  it('joins a long delta line split across many chunks once', () => {
    const got: Buffer[] = [];
    const p = new SseUsageParser((data) => got.push(Buffer.from(data)));
    const delta = event('content_block_delta', { type: 'content_block_delta', delta: { type: 'text_delta', text: 'y'.repeat(100_000) } });
    const bytes = Buffer.from(delta + event('message_delta', { type: 'message_delta', usage: { output_tokens: 9 } }));
    for (let i = 0; i < bytes.length; i += 1000) p.push(bytes.subarray(i, i + 1000));
    expect(got).toHaveLength(1);
    expect((JSON.parse(got[0]!.toString()) as { delta: { text: string } }).delta.text).toHaveLength(100_000);
    expect(p.outputTokens).toBe(9);
  });

  it('without a hook, delta lines are still skipped and not kept', () => {
    const p = new SseUsageParser();
    p.push(Buffer.from(STREAM.slice(0, STREAM.indexOf('wörd 2') )));
    p.push(Buffer.from(STREAM.slice(STREAM.indexOf('wörd 2'))));
    expect([p.contentDeltas, p.outputTokens]).toEqual([5, 42]);
  });
});

describe('usageOfMessage', () => {
  it('reads the usage of a non-streaming message', () => {
    expect(usageOfMessage({ usage: { input_tokens: 5, output_tokens: 9, cache_read_input_tokens: 2 } }))
      .toEqual({ inputTokens: 5, outputTokens: 9, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: 2 });
    expect(usageOfMessage({})).toBeNull();
  });
});

describe('SseUsageParser with a sink', () => {
  const deltaPayloads = STREAM.split('\n').filter((l) => l.startsWith('data: {"type":"content_block_delta"')).map((l) => l.slice(5));

  it('hands over each payload in place, however the stream is cut, CRLF or not', () => {
    for (const text of [STREAM, STREAM.replaceAll('\n', '\r\n')]) {
      const bytes = Buffer.from(text);
      for (let size = 1; size <= 64; size++) {
        const got: string[] = [];
        const p = new SseUsageParser({ pushDelta: (buf, start, end) => got.push(buf.toString('utf8', start, end)) });
        for (let i = 0; i < bytes.length; i += size) p.push(bytes.subarray(i, i + size));
        expect(got.map((g) => g.trim())).toEqual(deltaPayloads.map((d) => d.trim()));
        expect([p.inputTokens, p.outputTokens, p.cacheReadTokens, p.contentDeltas, p.sawMessageStop]).toEqual([321, 42, 11, 5, true]);
      }
    }
  });

  it('reads event names with extra blanks, ignores names that only begin like one, and counts data-only deltas', () => {
    const got: string[] = [];
    const p = new SseUsageParser({ pushDelta: (buf, start, end) => got.push(buf.toString('utf8', start, end)) });
    p.push(Buffer.from('event:message_start \t\ndata: {"type":"message_start","message":{"usage":{"input_tokens":4}}}\n\n'));
    p.push(Buffer.from('event: message_delta_x\ndata: {"type":"message_delta","usage":{"output_tokens":99}}\n\n'));
    p.push(Buffer.from('event:  content_block_delta\ndata:{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}\n\n'));
    p.push(Buffer.from('data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"b"}}\n\n'));
    p.push(Buffer.from('data: {"index":0,"type":"content_block_delta","delta":{"type":"text_delta","text":"c"}}\n\n'));
    p.push(Buffer.from('event: message_stop\ndata: {"type":"message_stop"}\n\n'));
    expect(p.inputTokens).toBe(4);
    expect(p.outputTokens).toBe(0);
    expect(p.sawMessageDelta).toBe(false);
    expect(p.contentDeltas).toBe(3);
    expect(p.sawMessageStop).toBe(true);
    expect(got.map((g) => JSON.parse(g).delta.text)).toEqual(['a', 'b', 'c']);
  });

  it('reads a whole stream without `event:` lines: the usage, the deltas and its end', () => {
    const p = new SseUsageParser();
    p.push(Buffer.from('data: {"type":"message_start","message":{"usage":{"input_tokens":4,"output_tokens":1}}}\n\n'));
    p.push(Buffer.from('data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'));
    p.push(Buffer.from('data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}\n\n'));
    p.push(Buffer.from('data: {"type":"content_block_stop","index":0}\n\n'));
    p.push(Buffer.from('data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}\n\n'));
    expect(p.sawMessageStop).toBe(false);
    p.push(Buffer.from('data: {"type": "message_stop"}\n\n'));
    expect(p).toMatchObject({ inputTokens: 4, outputTokens: 7, sawMessageStart: true, sawMessageDelta: true, sawMessageStop: true, contentDeltas: 1, error: null });
  });
});

describe('a line that never ends', () => {
  it('is dropped past MAX_CARRIED_LINE, not carried without bound, and the stream is read on after its newline', () => {
    const p = new SseUsageParser();
    p.push(Buffer.from('event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":4}}}\n\n'));
    const junk = Buffer.alloc(64 * 1024, 0x61);
    p.push(Buffer.from('event: ping\ndata: '));
    for (let sent = 0; sent <= MAX_CARRIED_LINE * 2; sent += junk.length) p.push(junk);
    p.push(Buffer.from('\n\nevent: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":9}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'));
    expect(p).toMatchObject({ inputTokens: 4, outputTokens: 9, sawMessageDelta: true, sawMessageStop: true });
  });
});

// A usage the provider did not state must not be billed as stated: the relay's own count of the
// prompt and of the delivered text stands in for it (stream-relay.ts, messages-handler.ts).
describe('usage the provider left out', () => {
  const start = (usage?: unknown) => event('message_start', { type: 'message_start', message: { id: 'm', ...(usage === undefined ? {} : { usage }) } });
  const delta = event('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'tok ' } });
  const stop = event('message_stop', { type: 'message_stop' });

  it('takes a message_delta for the final usage only when it states output_tokens', () => {
    for (const tail of [
      event('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' } }),
      event('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: {} }),
      event('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: null } }),
    ]) {
      for (const text of [start({ input_tokens: 1000, output_tokens: 1 }) + delta.repeat(5) + tail + stop, (start({ input_tokens: 1000, output_tokens: 1 }) + delta.repeat(5) + tail + stop).replace(/^event: .*\n/gm, '')]) {
        const p = new SseUsageParser();
        p.push(Buffer.from(text));
        expect(p).toMatchObject({ inputTokens: 1000, outputTokens: 1, sawMessageDelta: false, sawMessageStop: true, contentDeltas: 5 });
      }
    }
    const p = new SseUsageParser();
    p.push(Buffer.from(start({ input_tokens: 1000, output_tokens: 1 }) + event('message_delta', { type: 'message_delta', usage: { output_tokens: 0 } }) + stop));
    expect(p).toMatchObject({ outputTokens: 0, sawMessageDelta: true });
  });

  it('says whether the stream stated its input: in message_start, or restated in message_delta', () => {
    const said = (text: string) => {
      const p = new SseUsageParser();
      p.push(Buffer.from(text));
      return p.inputStated;
    };
    // 0 states no prompt (a prompt is at least one token) unless cache tokens carry it; below 0 states nothing.
    expect(said(start({ input_tokens: 0, output_tokens: 1 }))).toBe(false);
    expect(said(start({ input_tokens: 0, output_tokens: 1, cache_read_input_tokens: 5 }))).toBe(true);
    expect(said(start({ input_tokens: -1000, output_tokens: 1 }))).toBe(false);
    expect(said(start({ input_tokens: 12 }))).toBe(true);
    expect(said(start())).toBe(false);
    expect(said(start({}))).toBe(false);
    expect(said(start({ output_tokens: 1, cache_read_input_tokens: 5 }))).toBe(false);
    expect(said(start({ input_tokens: null, output_tokens: 1 }))).toBe(false);
    expect(said(start() + event('message_delta', { type: 'message_delta', usage: { input_tokens: 7, output_tokens: 3 } }))).toBe(true);
    expect(said(start() + event('message_delta', { type: 'message_delta', usage: { output_tokens: 3 } }))).toBe(false);
    expect(new SseUsageParser().inputStated).toBe(false);
  });

  it('reads a JSON answer whose usage states no count as one without usage, and marks a side it does not state (the relay counts it)', () => {
    expect(usageOfMessage({ usage: {} })).toBeNull();
    expect(usageOfMessage({ usage: { cache_read_input_tokens: 3 } })).toBeNull();
    expect(usageOfMessage({ usage: { input_tokens: null, output_tokens: '9' } })).toBeNull();
    expect(usageOfMessage({ usage: { input_tokens: -1000, output_tokens: -5 } })).toBeNull();
    expect(usageOfMessage({ usage: 'none' })).toBeNull();
    // One count alone: the other side, billed 0 before (a prompt or an answer delivered free), is marked.
    const zero = { inputTokens: 0, outputTokens: 0, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: 0 };
    expect(usageOfMessage({ usage: { output_tokens: 40 } })).toEqual({ ...zero, outputTokens: 40, inputUnstated: true });
    expect(usageOfMessage({ usage: { input_tokens: 900 } })).toEqual({ ...zero, inputTokens: 900, outputUnstated: true });
    expect(usageOfMessage({ usage: { input_tokens: 900, output_tokens: -5 } })).toEqual({ ...zero, inputTokens: 900, outputUnstated: true });
    // An output of 0 is a count (the relay bills the text delivered only if there is any); an input
    // of 0 states no prompt unless its cache tokens do.
    expect(usageOfMessage({ usage: { input_tokens: 0, output_tokens: 0 } })).toEqual({ ...zero, inputUnstated: true });
    expect(usageOfMessage({ usage: { input_tokens: 0, output_tokens: 3, cache_read_input_tokens: 10 } })).toEqual({ ...zero, outputTokens: 3, cacheReadTokens: 10 });
  });
});

describe('the end of the generation', () => {
  it('is message_delta, with its usage or, from a provider that states it later, without', () => {
    const p = new SseUsageParser();
    const head = STREAM.slice(0, STREAM.indexOf('event: message_delta'));
    p.push(Buffer.from(head));
    // The content blocks' end says nothing: another block may follow.
    expect(p.generationDone).toBe(false);
    p.push(Buffer.from(event('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' } })));
    expect(p).toMatchObject({ generationDone: true, sawMessageDelta: false });
    p.push(Buffer.from(event('message_delta', { type: 'message_delta', usage: { output_tokens: 42 } })));
    expect(p).toMatchObject({ generationDone: true, sawMessageDelta: true, outputTokens: 42 });
    const dataOnly = new SseUsageParser();
    dataOnly.push(Buffer.from('data: {"type":"message_delta","delta":{"stop_reason":"end_turn"}}\n\n'));
    expect(dataOnly.generationDone).toBe(true);
  });
});

// The usage a stream states when its provider repeats or contradicts itself, and what its content
// delivered after that usage (stream-relay.ts bills the larger of the two then).
describe('counts that go back, or come before content', () => {
  const start = (usage: object) => event('message_start', { type: 'message_start', message: { id: 'm', usage } });
  const delta = event('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'tok ' } });
  const final = (output: number) => event('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: output } });

  it('reads the first message_start only', () => {
    const p = new SseUsageParser();
    p.push(Buffer.from(start({ input_tokens: 1000, output_tokens: 1 }) + delta + final(50) + start({ input_tokens: 7, output_tokens: 5 })));
    expect(p).toMatchObject({ inputTokens: 1000, outputTokens: 50, sawMessageDelta: true });
  });

  it('never lowers the output a message_delta stated, and takes none below 0', () => {
    const p = new SseUsageParser();
    p.push(Buffer.from(start({ input_tokens: 1000, output_tokens: 1 }) + delta + final(50) + final(3) + final(-9)));
    expect(p).toMatchObject({ outputTokens: 50, sawMessageDelta: true });
    const negative = new SseUsageParser();
    negative.push(Buffer.from(start({ input_tokens: 1000, output_tokens: 1 }) + delta + final(-5)));
    expect(negative).toMatchObject({ sawMessageDelta: false, generationDone: true });
  });

  it('says when content came after the output it stated', () => {
    for (const sink of [undefined, { pushDelta: () => {} }]) {
      const p = new SseUsageParser(sink);
      p.push(Buffer.from(start({ input_tokens: 10, output_tokens: 1 }) + delta + final(1)));
      expect(p.contentAfterUsage).toBe(false);
      p.push(Buffer.from(delta));
      expect(p.contentAfterUsage).toBe(true);
      p.push(Buffer.from(final(2)));
      expect(p.contentAfterUsage).toBe(false);
    }
  });
});

describe('SSE framing as the spec reads it', () => {
  const start = event('message_start', { type: 'message_start', message: { id: 'm', usage: { input_tokens: 1000, output_tokens: 1 } } });
  const delta = (text: string) => event('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } });
  const tail = event('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 50 } }) + event('message_stop', { type: 'message_stop' });
  /** Every event's data over two lines, split after its first comma. */
  const split = (text: string) => text.replace(/^data: (.*?),/gm, 'data: $1,\ndata: ');

  it('joins the data lines of one event, streamed with or without event names, however it is cut', () => {
    const whole = split(start + delta('a') + delta('b') + tail);
    for (const text of [whole, whole.replace(/^event: .*\n/gm, '')]) {
      const bytes = Buffer.from(text);
      for (const size of [1, 3, 17, bytes.length]) {
        const got: string[] = [];
        const p = new SseUsageParser({ pushDelta: (buf, s, e) => got.push((JSON.parse(buf.toString('utf8', s, e)) as { delta: { text: string } }).delta.text) });
        for (let i = 0; i < bytes.length; i += size) p.push(bytes.subarray(i, i + size));
        expect(p).toMatchObject({ inputTokens: 1000, inputStated: true, outputTokens: 50, sawMessageDelta: true, sawMessageStop: true, contentDeltas: 2 });
        expect(got).toEqual(['a', 'b']);
      }
    }
  });

  it('ends lines at a lone CR, and at a CRLF cut between chunks', () => {
    for (const eol of ['\r', '\r\n']) {
      const bytes = Buffer.from((start + delta('a') + delta('b') + tail).replaceAll('\n', eol));
      for (const size of [1, 2, 5, 64, bytes.length]) {
        const got: string[] = [];
        const p = new SseUsageParser({ pushDelta: (buf, s, e) => got.push(buf.toString('utf8', s, e)) });
        for (let i = 0; i < bytes.length; i += size) p.push(bytes.subarray(i, i + size));
        expect(p).toMatchObject({ inputTokens: 1000, outputTokens: 50, sawMessageStop: true, contentDeltas: 2 });
        expect(got).toHaveLength(2);
      }
    }
  });

  it('counts events for the stall check, never pings or comments', () => {
    const p = new SseUsageParser();
    p.push(Buffer.from(': comment\n\nevent: ping\ndata: {"type":"ping"}\n\ndata: {"type":"ping"}\n\n'));
    expect(p.events).toBe(0);
    p.push(Buffer.from(start + delta('a')));
    expect(p.events).toBe(2);
  });
});

describe('a content delta longer than MAX_CARRIED_LINE', () => {
  /** A sink that decodes the pieces of text it is handed, as the delivered-text counter's worker does. */
  function textSink() {
    const pieces: string[] = [];
    const whole: string[] = [];
    return {
      pieces,
      // A line that arrives whole in one chunk is handed over whole, as any delta.
      text: () => whole.join('') + (JSON.parse('"' + pieces.join('') + '"') as string),
      pushDelta: (b: Buffer, s: number, e: number) => void whole.push((JSON.parse(b.toString('utf8', s, e)) as { delta: { text: string } }).delta.text),
      pushText: (b: Buffer, s: number, e: number) => void pieces.push(b.toString('utf8', s, e)),
    };
  }
  const text = 'tök "quoted" \\ \u00e9\n '.repeat(60_000);
  const json = JSON.stringify(text).slice(1, -1);

  it('hands its text over piece by piece, each piece whole escapes and characters, however it is cut, named or data-only', () => {
    for (const named of [true, false]) {
      const line = `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"${json}"}}`;
      const stream = Buffer.from((named ? 'event: content_block_delta\n' : '') + line + '\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n');
      expect(stream.length).toBeGreaterThan(MAX_CARRIED_LINE);
      for (const size of [4093, 65_536, 65_537, 65_538, stream.length]) {
        const sink = textSink();
        const p = new SseUsageParser(sink);
        for (let i = 0; i < stream.length; i += size) p.push(stream.subarray(i, i + size));
        for (const piece of sink.pieces) expect(() => JSON.parse('"' + piece + '"')).not.toThrow();
        expect(sink.text()).toBe(text);
        expect(p).toMatchObject({ contentDeltas: 1, sawMessageStop: true });
      }
    }
  });
});

describe('SseUsageParser: the end of the stream', () => {
  const TAIL = event('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'late' } })
    + event('message_delta', { type: 'message_delta', delta: {}, usage: { output_tokens: 999 } });
  for (const [name, stream] of [
    ['named events', STREAM],
    ['a data-only stream', STREAM.replace(/^event: [a-z_]+\n/gm, '')],
    ['CRLF line breaks', STREAM.replace(/\n/g, '\r\n')],
  ] as const) {
    it(`${name}: endedAt is where message_stop's event ends, whatever the chunking, and nothing after it is read`, () => {
      const bytes = Buffer.from(stream + TAIL);
      for (const size of [1, 2, 7, 64, bytes.length]) {
        const p = new SseUsageParser();
        let passed = 0;
        for (let i = 0; i < bytes.length; i += size) {
          const chunk = bytes.subarray(i, i + size);
          p.push(chunk);
          if (p.endedAt >= 0) {
            passed = i + p.endedAt;
            break;
          }
          passed = i + chunk.length;
        }
        // A CRLF cut after its CR ends the event at the CR (a line break of its own), its LF unread.
        const whole = Buffer.byteLength(stream);
        expect(passed === whole || (stream.endsWith('\r\n') && passed === whole - 1)).toBe(true);
        // Pushed on regardless, the tail changes nothing.
        p.push(Buffer.from(TAIL));
        expect(p.endedAt).toBe(0);
        expect([p.outputTokens, p.contentDeltas]).toEqual([42, 5]);
      }
    });
  }

  it('stays -1 while message_stop has not come, or its event has not ended', () => {
    const p = new SseUsageParser();
    p.push(Buffer.from(STREAM.slice(0, STREAM.lastIndexOf('event: message_stop'))));
    expect(p.endedAt).toBe(-1);
    p.push(Buffer.from('event: message_stop\ndata: {"type":"message_stop"}\n'));
    expect([p.sawMessageStop, p.endedAt]).toEqual([true, -1]);
    p.push(Buffer.from('\nevent: ping\n\n'));
    expect(p.endedAt).toBe(1);
  });
});
