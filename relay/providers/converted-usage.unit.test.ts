// The usage a converted answer tells: the figures billed when the relay passes them (messageToChat,
// chatToMessage), and, streamed, the final usage events held until the stream is settled
// (holdsFinalUsage, heldEndEvents). The stack test is converted-usage.integration.test.ts.
import { describe, expect, it } from 'vitest';
import { AnthropicToChatStream, messageToChat } from './anthropic/to-chat.js';
import { ChatToAnthropicStream, chatToMessage } from './openai/to-messages.js';
import type { StreamUsage } from '../stream/sse-usage-parser.js';

const BILLED: StreamUsage = { inputTokens: 200, outputTokens: 100, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: 700 };

const sse = (event: string, data: unknown): string => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
const ANTHROPIC_STREAM = sse('message_start', { type: 'message_start', message: { id: 'msg_1', usage: { input_tokens: 1000, output_tokens: 1 } } })
  + sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
  + sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'tok' } })
  + sse('content_block_stop', { type: 'content_block_stop', index: 0 })
  + sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 1 } }).replace('"output_tokens":1', '"output_tokens":1e400')
  + sse('message_stop', { type: 'message_stop' });
const chunk = (c: Record<string, unknown>): string => `data: ${JSON.stringify({ id: 'chatcmpl-1', ...c })}\n\n`;
const CHAT_STREAM = chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: 'tok' }, finish_reason: null }] })
  + chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })
  + chunk({ choices: [], usage: { prompt_tokens: '1000', completion_tokens: '50', total_tokens: '1050' } })
  + 'data: [DONE]\n\n';

function dataOf(out: string): Array<Record<string, unknown>> {
  return out.split('\n').filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]').map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>);
}

describe('AnthropicToChatStream', () => {
  it('holds the usage chunk and [DONE] for the usage billed when holdsFinalUsage', () => {
    const s = new AnthropicToChatStream('m', true);
    s.holdsFinalUsage = true;
    const out = s.push(Buffer.from(ANTHROPIC_STREAM));
    expect(out).not.toContain('[DONE]');
    expect(dataOf(out).every((c) => c.usage === null)).toBe(true);
    const tail = s.heldEndEvents(BILLED);
    expect(tail.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(dataOf(tail)[0]!.usage).toEqual({ prompt_tokens: 900, completion_tokens: 100, total_tokens: 1000, prompt_tokens_details: { cached_tokens: 700 }, completion_tokens_details: { reasoning_tokens: 0 } });
    expect(s.heldEndEvents(BILLED)).toBe('');
  });

  it('writes them at message_stop with the provider figures as counts when not held (unchanged)', () => {
    const s = new AnthropicToChatStream('m', true);
    const out = s.push(Buffer.from(ANTHROPIC_STREAM));
    expect(out.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(s.heldEndEvents(BILLED)).toBe('');
  });

  it('holds nothing for a client that did not ask for the usage', () => {
    const s = new AnthropicToChatStream('m', false);
    s.holdsFinalUsage = true;
    expect(s.push(Buffer.from(ANTHROPIC_STREAM)).endsWith('data: [DONE]\n\n')).toBe(true);
    expect(s.heldEndEvents(BILLED)).toBe('');
  });
});

describe('ChatToAnthropicStream', () => {
  it('holds message_delta and message_stop for the usage billed when holdsFinalUsage', () => {
    const s = new ChatToAnthropicStream('m');
    s.holdsFinalUsage = true;
    const out = s.push(Buffer.from(CHAT_STREAM));
    expect(out).toContain('content_block_stop');
    expect(out).not.toContain('message_delta');
    expect(out).not.toContain('message_stop');
    const tail = s.heldEndEvents(BILLED);
    const [delta, stop] = dataOf(tail);
    expect(delta).toMatchObject({ type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { input_tokens: 200, cache_read_input_tokens: 700, cache_creation_input_tokens: 0, output_tokens: 100 } });
    expect(stop).toEqual({ type: 'message_stop' });
    expect(s.heldEndEvents(BILLED)).toBe('');
  });

  it('holds nothing after an error event', () => {
    const s = new ChatToAnthropicStream('m');
    s.holdsFinalUsage = true;
    s.push(Buffer.from(chunk({ error: { message: 'x', type: 'server_error' } }) + 'data: [DONE]\n\n'));
    expect(s.heldEndEvents(BILLED)).toBe('');
  });
});

describe('JSON answers', () => {
  it('messageToChat tells the usage billed when given', () => {
    const body = Buffer.from(JSON.stringify({ id: 'msg_1', content: [{ type: 'text', text: 'tok' }], stop_reason: 'end_turn', usage: { input_tokens: '1000', output_tokens: '50' } }));
    expect(JSON.parse(messageToChat(body, 'm', BILLED)!).usage).toMatchObject({ prompt_tokens: 900, completion_tokens: 100, total_tokens: 1000, prompt_tokens_details: { cached_tokens: 700 } });
    expect(JSON.parse(messageToChat(body, 'm')!).usage).toMatchObject({ prompt_tokens: 0, completion_tokens: 0 });
  });

  it('chatToMessage tells the usage billed when given', () => {
    const body = Buffer.from(JSON.stringify({ id: 'chatcmpl-1', choices: [{ message: { content: 'tok' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1000, completion_tokens: 1e300 } }));
    expect(JSON.parse(chatToMessage(body, 'm', undefined, BILLED)!).usage).toMatchObject({ input_tokens: 200, cache_read_input_tokens: 700, output_tokens: 100 });
  });
});
