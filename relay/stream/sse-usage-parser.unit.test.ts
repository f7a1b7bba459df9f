import { describe, expect, it } from 'vitest';
import { SseUsageParser, usageOfMessage } from './sse-usage-parser.js';

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

describe('usageOfMessage', () => {
  it('reads the usage of a non-streaming message', () => {
    expect(usageOfMessage({ usage: { input_tokens: 5, output_tokens: 9, cache_read_input_tokens: 2 } }))
      .toEqual({ inputTokens: 5, outputTokens: 9, cacheCreationTokens: 0, cacheReadTokens: 2 });
    expect(usageOfMessage({})).toBeNull();
  });
});
