import { describe, expect, it } from 'vitest';
import { mayUseCache } from './cache-control.js';
import { messagesRequestSchema } from './messages-request.js';

const req = (extra: Record<string, unknown>, messages: unknown[] = [{ role: 'user', content: 'hi' }]) =>
  messagesRequestSchema.parse({ model: 'm', max_tokens: 1, messages, ...extra });
const cc = { type: 'ephemeral' };

describe('mayUseCache', () => {
  it('finds a breakpoint wherever Anthropic accepts one', () => {
    expect(mayUseCache(req({}))).toBe(false);
    expect(mayUseCache(req({ system: 'plain', tools: [{ name: 't', input_schema: {} }] }))).toBe(false);
    expect(mayUseCache(req({ cache_control: cc }))).toBe(true);
    expect(mayUseCache(req({ system: [{ type: 'text', text: 's', cache_control: cc }] }))).toBe(true);
    expect(mayUseCache(req({ tools: [{ name: 't', input_schema: {}, cache_control: cc }] }))).toBe(true);
    expect(mayUseCache(req({}, [{ role: 'user', content: [{ type: 'text', text: 'x', cache_control: cc }] }]))).toBe(true);
    expect(mayUseCache(req({}, [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'x', content: [{ type: 'text', text: 'r', cache_control: cc }] }] }]))).toBe(true);
  });

  it('is not fooled by an escaped key, nor by the words in a text', () => {
    const escaped = JSON.parse('{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"cache\\u005fcontrol":{"type":"ephemeral"}}');
    expect(mayUseCache(messagesRequestSchema.parse(escaped))).toBe(true);
    expect(mayUseCache(req({}, [{ role: 'user', content: '"cache_control": {"type":"ephemeral"}' }]))).toBe(false);
  });
});
