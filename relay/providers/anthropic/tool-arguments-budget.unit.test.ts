// Tool-call arguments are strings of JSON that the conversion parses: the body's guard
// (raw-json-guard.ts) counts each as one value, so one string of 2.6 million empty objects (7.8 MB)
// held the relay's event loop 2.6-6 s before anything was reserved (review http). The arguments of a
// request are bounded in all, before they are parsed, by the body's own fixed limits.
import { describe, expect, it } from 'vitest';
import { RelayError } from '../../errors.js';
import type { ChatRequest } from '../../chat-completions/chat-request.js';
import { chatToMessages, MAX_ARGUMENTS_KEYS, MAX_ARGUMENTS_VALUES } from './from-chat.js';

function withCalls(...args: string[]): ChatRequest {
  return {
    model: 'claude-x',
    messages: [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: null, tool_calls: args.map((a, i) => ({ id: `call_${i}`, type: 'function', function: { name: 'f', arguments: a } })) },
      ...args.map((_, i) => ({ role: 'tool', tool_call_id: `call_${i}`, content: 'ok' })),
      { role: 'user', content: 'and?' },
    ],
  } as unknown as ChatRequest;
}

const refusal = (r: unknown): string => {
  expect(r).toBeInstanceOf(RelayError);
  return (r as RelayError).message;
};

describe('tool-call arguments bounded before they are parsed', () => {
  it('one string of millions of empty objects is refused 400 on its field', () => {
    const args = `[${Array(2_600_000).fill('{}').join(',')}]`;
    const r = chatToMessages(withCalls(args));
    expect(refusal(r)).toMatch(/^messages\.1\.tool_calls\.0\.function\.arguments: the tool calls' arguments hold more than 200,000 JSON values/);
    expect((r as RelayError).status).toBe(400);
  });

  it('an object of more keys than the limit is refused', () => {
    const args = `{${Array.from({ length: MAX_ARGUMENTS_KEYS + 1 }, (_, i) => `"k${i}":1`).join(',')}}`;
    expect(refusal(chatToMessages(withCalls(args)))).toMatch(/hold more than 50,000 object keys in all/);
  });

  it('the limits are for all the calls of a request together', () => {
    const half = `[${Array(Math.ceil(MAX_ARGUMENTS_VALUES / 2) + 10).fill('1').join(',')}]`;
    expect(chatToMessages(withCalls(half))).not.toBeInstanceOf(RelayError);
    expect(refusal(chatToMessages(withCalls(half, half)))).toMatch(/^messages\.1\.tool_calls\.1\.function\.arguments: .*JSON values in all/);
  });

  it('brackets, commas and colons inside strings are text, not structure', () => {
    const text = `{"code": ${JSON.stringify('[{},{}],:'.repeat(100_000))}}`;
    const r = chatToMessages(withCalls(text));
    expect(r).not.toBeInstanceOf(RelayError);
  });

  it('arguments naming a key twice (the model wrote them so) are served, the last value read as JSON.parse reads it', () => {
    const r = chatToMessages(withCalls('{"path":"a","path":"b"}'));
    expect(r).not.toBeInstanceOf(RelayError);
    const assistant = (r as { messages: { role: string; content: { type: string; input?: unknown }[] }[] }).messages.find((m) => m.role === 'assistant')!;
    expect(assistant.content.find((b) => b.type === 'tool_use')!.input).toEqual({ path: 'b' });
  });

  it('nesting deeper than 120 levels is still refused, 120 served', () => {
    expect(refusal(chatToMessages(withCalls(`${'['.repeat(121)}${']'.repeat(121)}`)))).toMatch(/nests objects and arrays more than 120 levels deep/);
    expect(chatToMessages(withCalls(`{"a":${'['.repeat(119)}${']'.repeat(119)}}`))).not.toBeInstanceOf(RelayError);
  });
});
