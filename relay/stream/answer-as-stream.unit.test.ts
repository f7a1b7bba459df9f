// A JSON answer as the stream the client asked for: fed to the SDKs' own stream accumulators, the
// events give back the answer they were made from.
import { MessageStream } from '@anthropic-ai/sdk/lib/MessageStream';
import { ChatCompletionStream } from 'openai/lib/ChatCompletionStream';
import { describe, expect, it } from 'vitest';
import { COMPLETION, MESSAGE } from '../../tests/harness/answer-fixtures.js';
import { completionAsChunks, messageAsEvents } from './answer-as-stream.js';

/** The data of each SSE event, as the newline-delimited JSON that the SDKs' fromReadableStream reads. */
function asJsonLines(sse: string): ReadableStream<Uint8Array> {
  const lines = sse.split('\n\n').filter((e) => e !== '').map((e) => e.split('\n').find((l) => l.startsWith('data: '))!.slice(6)).filter((d) => d !== '[DONE]');
  const bytes = new TextEncoder().encode(lines.map((l) => `${l}\n`).join(''));
  return new ReadableStream({ start(c) { c.enqueue(bytes); c.close(); } });
}


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

  it('a message\'s reasoning (reasoning_content, or OpenRouter\'s reasoning) goes in its delta, as the provider\'s own stream carries it', () => {
    const answer = { ...COMPLETION, choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'Paris.', reasoning_content: 'The capital of France', reasoning: 'is Paris' } }] };
    const deltas = completionAsChunks(JSON.stringify(answer), false)!.split('\n\n').filter((e) => e.startsWith('data: {'))
      .map((e) => (JSON.parse(e.slice(6)) as { choices: Array<{ delta: Record<string, unknown> }> }).choices[0]!.delta);
    expect(deltas[0]).toEqual({ role: 'assistant', content: 'Paris.', reasoning_content: 'The capital of France', reasoning: 'is Paris' });
    expect(deltas[1]).toEqual({});
  });

  it('null for what is no Chat Completion', () => {
    expect(completionAsChunks('{"error":{}}', true)).toBeNull();
    expect(completionAsChunks('nope', true)).toBeNull();
  });
});
