// The relay's compiled body schemas: a valid body comes back as the same object (nothing copied), and
// the first problem of an invalid one is worded as Anthropic words its validation errors, naming the
// field. The same bodies through zod agree on valid/invalid: the compiled schema is zod's.
import { describe, expect, it } from 'vitest';
import { checkChatRequest, chatRequestSchema } from './chat-completions/chat-request.js';
import { RelayError } from './errors.js';
import { checkCountTokensRequest } from './messages/count-tokens-handler.js';
import { checkMessagesRequest, messagesRequestSchema } from './messages/messages-request.js';

const user = { role: 'user', content: 'hi' };
const valid = { model: 'claude-sonnet-4-5', max_tokens: 16, messages: [user] };
const problem = (r: unknown): string | null => (r instanceof RelayError ? r.message : null);

describe('checkMessagesRequest', () => {
  it('answers a valid body with the same object, unknown fields and blocks kept', () => {
    const body = {
      ...valid, stream: true, system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }], metadata: { user_id: 'u' },
      messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] }, { role: 'assistant', content: 'b' }],
    };
    expect(checkMessagesRequest(body)).toBe(body);
  });

  it.each([
    ['no model', { ...valid, model: undefined }, 'model: required string'],
    ['an empty model', { ...valid, model: '' }, 'model: must not be empty'],
    ['a numeric model', { ...valid, model: 7 }, 'model: must be a string'],
    ['no messages', { ...valid, messages: undefined }, 'messages: required array'],
    ['messages as a string', { ...valid, messages: 'hello' }, 'messages: must be an array'],
    ['no message at all', { ...valid, messages: [] }, 'messages: at least one is required'],
    ['an unknown role', { ...valid, messages: [user, { role: 'robot', content: 'x' }] }, "messages.1.role: must be one of 'user', 'assistant'"],
    ['a message without content', { ...valid, messages: [{ role: 'user' }] }, 'messages.0.content: required string or an array'],
    ['content of the wrong type', { ...valid, messages: [{ role: 'user', content: 5 }] }, 'messages.0.content: must be a string or an array'],
    ['a block without a string type', { ...valid, messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 1 }] }] }, 'messages.0.content.1.type: must be a string'],
    ['a block without type', { ...valid, messages: [{ role: 'user', content: [{ text: 'a' }] }] }, 'messages.0.content.0.type: required string'],
    ['no max_tokens', { ...valid, max_tokens: undefined }, 'max_tokens: required integer'],
    ['a string max_tokens', { ...valid, max_tokens: '10' }, 'max_tokens: must be an integer'],
    ['a fractional max_tokens', { ...valid, max_tokens: 1.5 }, 'max_tokens: must be an integer'],
    ['a zero max_tokens', { ...valid, max_tokens: 0 }, 'max_tokens: must be positive'],
    ['a max_tokens past 2^53', { ...valid, max_tokens: 1e300 }, 'max_tokens: must be a safe integer'],
    ['a stream that is not a boolean', { ...valid, stream: 'yes' }, 'stream: must be a boolean'],
    ['a system of the wrong type', { ...valid, system: { text: 'x' } }, 'system: must be a string or an array'],
    ['an array body', [1, 2, 3], 'invalid request: the body must be a JSON object'],
    ['a null body', null, 'invalid request: the body must be a JSON object'],
  ])('words %s as "%s"', (_what, body, message) => {
    expect(problem(checkMessagesRequest(body))).toBe(message);
    expect(checkMessagesRequest(body)).toMatchObject({ code: 'invalid_request', status: 400 });
    // zod, from which the compiled schema comes, refuses the same body.
    expect(messagesRequestSchema.safeParse(body).success).toBe(false);
  });

  it('checks a long conversation whole: a bad role in its last message is found', () => {
    const messages = Array.from({ length: 500 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: [{ type: 'text', text: `turn ${i}` }] }));
    const body = { ...valid, messages };
    expect(checkMessagesRequest(body)).toBe(body);
    messages[499]!.role = 'system';
    expect(problem(checkMessagesRequest(body))).toBe("messages.499.role: must be one of 'user', 'assistant'");
  });
});

describe('checkChatRequest', () => {
  const chat = { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] };

  it('answers a valid body with the same object, nulls where the API allows them', () => {
    const body = { ...chat, max_tokens: null, stream: null, stream_options: { include_usage: true }, temperature: 0.2, stop: ['a'], messages: [{ role: 'assistant', content: null, tool_calls: [] }, { role: 'tool', content: 'x', tool_call_id: 't' }] };
    expect(checkChatRequest(body)).toBe(body);
  });

  it.each([
    ['a temperature above 2', { ...chat, temperature: 3 }, 'temperature: must be at most 2'],
    ['a string temperature', { ...chat, temperature: 'hot' }, 'temperature: must be a number or null'],
    ['n past 128', { ...chat, n: 129 }, 'n: must be at most 128'],
    ['five stop sequences', { ...chat, stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop: at most 4 allowed'],
    ['an unknown role', { ...chat, messages: [{ role: 'robot', content: 'x' }] }, "messages.0.role: must be one of 'system', 'developer', 'user', 'assistant', 'tool', 'function'"],
    ['a part without a string type', { ...chat, messages: [{ role: 'user', content: [{ type: 2 }] }] }, 'messages.0.content.0.type: must be a string'],
    ['tools that are not an array', { ...chat, tools: 'all' }, 'tools: must be an array or null'],
    ['no messages', { model: 'gpt-4o' }, 'messages: required array'],
  ])('words %s as "%s"', (_what, body, message) => {
    expect(problem(checkChatRequest(body))).toBe(message);
    expect(chatRequestSchema.safeParse(body).success).toBe(false);
  });
});

describe('checkCountTokensRequest', () => {
  it('takes a body without max_tokens and refuses tools that are not an array', () => {
    const body = { model: 'm', messages: [user], tools: [{ name: 'f', input_schema: {} }] };
    expect(checkCountTokensRequest(body)).toBe(body);
    expect(problem(checkCountTokensRequest({ ...body, tools: 'no' }))).toBe('tools: must be an array');
  });
});
