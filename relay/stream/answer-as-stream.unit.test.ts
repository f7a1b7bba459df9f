// A JSON answer as the stream the client asked for: fed to the SDKs' own stream accumulators, the
// events give back the answer they were made from.
import { MessageStream } from '@anthropic-ai/sdk/lib/MessageStream';
import { ChatCompletionStream } from 'openai/lib/ChatCompletionStream';
import { describe, expect, it } from 'vitest';
import { completionAsChunks, messageAsEvents } from './answer-as-stream.js';

/** The data of each SSE event, as the newline-delimited JSON that the SDKs' fromReadableStream reads. */
function asJsonLines(sse: string): ReadableStream<Uint8Array> {
  const lines = sse.split('\n\n').filter((e) => e !== '').map((e) => e.split('\n').find((l) => l.startsWith('data: '))!.slice(6)).filter((d) => d !== '[DONE]');
  const bytes = new TextEncoder().encode(lines.map((l) => `${l}\n`).join(''));
  return new ReadableStream({ start(c) { c.enqueue(bytes); c.close(); } });
}

const MESSAGE = {
  id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-x', container: null,
  content: [
    { type: 'thinking', thinking: 'Let me look.', signature: 'sig==' },
    { type: 'redacted_thinking', data: 'opaque' },
    { type: 'text', text: 'Calling two tools.', citations: null },
    { type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: 'é', n: [1, 2] } },
    { type: 'tool_use', id: 'toolu_2', name: 'now', input: {} },
  ],
  stop_reason: 'tool_use', stop_sequence: null,
  usage: { input_tokens: 12, output_tokens: 34, cache_read_input_tokens: 5, cache_creation_input_tokens: 0, service_tier: 'standard' },
};

describe('messageAsEvents', () => {
  it('Anthropic\'s SDK assembles the Message back from the events', async () => {
    const sse = messageAsEvents(Buffer.from(JSON.stringify(MESSAGE)))!;
    expect(sse.startsWith('event: message_start\n')).toBe(true);
    expect(sse.endsWith('event: message_stop\ndata: {"type":"message_stop"}\n\n')).toBe(true);
    const final = await MessageStream.fromReadableStream(asJsonLines(sse)).finalMessage();
    // The SDK adds fields of its own (parsed_output): every field of the Message is back as it was.
    expect(final).toMatchObject(MESSAGE);
    expect(final.content).toEqual(MESSAGE.content);
    expect(final.usage).toEqual(MESSAGE.usage);
  });

  it('null for what is no Message: the answer then goes as JSON', () => {
    expect(messageAsEvents('{"type":"error"}')).toBeNull();
    expect(messageAsEvents('[1]')).toBeNull();
    expect(messageAsEvents('not json')).toBeNull();
    expect(messageAsEvents('{"type":"message","content":"x"}')).toBeNull();
  });
});

const COMPLETION = {
  id: 'chatcmpl-1', object: 'chat.completion', created: 1_700_000_000, model: 'gpt-x', system_fingerprint: 'fp_1',
  choices: [
    { index: 0, message: { role: 'assistant', content: 'Hello there', refusal: null }, logprobs: null, finish_reason: 'stop' },
    { index: 1, message: { role: 'assistant', content: null, refusal: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] }, logprobs: null, finish_reason: 'tool_calls' },
  ],
  usage: { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 },
};

describe('completionAsChunks', () => {
  it('OpenAI\'s SDK assembles the Chat Completion back from the chunks, usage included when asked', async () => {
    const sse = completionAsChunks(JSON.stringify(COMPLETION), true)!;
    expect(sse.endsWith('data: [DONE]\n\n')).toBe(true);
    const final = await ChatCompletionStream.fromReadableStream(asJsonLines(sse)).finalChatCompletion();
    expect(final.choices.map((c) => ({ index: c.index, finish_reason: c.finish_reason, content: c.message.content, tool_calls: c.message.tool_calls ?? null })))
      .toEqual(COMPLETION.choices.map((c) => ({ index: c.index, finish_reason: c.finish_reason, content: c.message.content, tool_calls: c.message.tool_calls ?? null })));
    expect(final.usage).toEqual(COMPLETION.usage);
    expect(final).toMatchObject({ id: 'chatcmpl-1', model: 'gpt-x', created: COMPLETION.created });
  });

  it('without include_usage: no usage chunk, no usage key', () => {
    const sse = completionAsChunks(JSON.stringify(COMPLETION), false)!;
    expect(sse).not.toContain('"usage"');
  });

  it('null for what is no Chat Completion', () => {
    expect(completionAsChunks('{"error":{}}', true)).toBeNull();
    expect(completionAsChunks('nope', true)).toBeNull();
  });
});
