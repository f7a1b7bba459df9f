import { describe, expect, it } from 'vitest';
import { cacheUseOf } from './cache-control.js';
import { messagesRequestSchema } from './messages-request.js';

const req = (extra: Record<string, unknown>, messages: unknown[] = [{ role: 'user', content: 'hi' }]) =>
  messagesRequestSchema.parse({ model: 'm', max_tokens: 1, messages, ...extra });
const cc = { type: 'ephemeral' };
const hour = { type: 'ephemeral', ttl: '1h' };

describe('cacheUseOf', () => {
  it('finds a breakpoint wherever Anthropic accepts one', () => {
    expect(cacheUseOf(req({}))).toBe('none');
    expect(cacheUseOf(req({ system: 'plain', tools: [{ name: 't', input_schema: {} }] }))).toBe('none');
    expect(cacheUseOf(req({ cache_control: cc }))).toBe('5m');
    expect(cacheUseOf(req({ system: [{ type: 'text', text: 's', cache_control: cc }] }))).toBe('5m');
    expect(cacheUseOf(req({ tools: [{ name: 't', input_schema: {}, cache_control: cc }] }))).toBe('5m');
    expect(cacheUseOf(req({}, [{ role: 'user', content: [{ type: 'text', text: 'x', cache_control: cc }] }]))).toBe('5m');
    expect(cacheUseOf(req({}, [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'x', content: [{ type: 'text', text: 'r', cache_control: cc }] }] }]))).toBe('5m');
  });

  it('is an hour when any breakpoint asks for ttl "1h", wherever it stands; "5m" or no ttl is 5 minutes', () => {
    expect(cacheUseOf(req({ cache_control: hour }))).toBe('1h');
    expect(cacheUseOf(req({ cache_control: { type: 'ephemeral', ttl: '5m' } }))).toBe('5m');
    expect(cacheUseOf(req({ system: [{ type: 'text', text: 's', cache_control: hour }], cache_control: cc }))).toBe('1h');
    expect(cacheUseOf(req({ tools: [{ name: 't', input_schema: {}, cache_control: cc }, { name: 'u', input_schema: {}, cache_control: hour }] }))).toBe('1h');
    expect(cacheUseOf(req({ system: [{ type: 'text', text: 's', cache_control: cc }] }, [
      { role: 'user', content: [{ type: 'text', text: 'x', cache_control: cc }] },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'x', content: [{ type: 'text', text: 'r', cache_control: hour }] }] },
    ]))).toBe('1h');
    expect(cacheUseOf(req({ cache_control: { type: 'ephemeral', ttl: '1H' } }))).toBe('5m');
  });

  // Before: 'none' for each (one level looked into), and the writes they caused billed as plain input.
  it('finds a breakpoint nested deeper: a search result\'s text in a tool result, a document\'s content source', () => {
    const searchResult = (mark: unknown) => ({ type: 'search_result', source: 'https://a.example', title: 't', content: [{ type: 'text', text: 'r', cache_control: mark }] });
    expect(cacheUseOf(req({}, [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'x', content: [searchResult(cc)] }] }]))).toBe('5m');
    expect(cacheUseOf(req({}, [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'x', content: [searchResult(hour)] }] }]))).toBe('1h');
    expect(cacheUseOf(req({}, [{ role: 'user', content: [searchResult(hour)] }]))).toBe('1h');
    const contentDocument = (mark: unknown) => ({ type: 'document', source: { type: 'content', content: [{ type: 'text', text: 'page', cache_control: mark }] } });
    expect(cacheUseOf(req({}, [{ role: 'user', content: [contentDocument(cc)] }]))).toBe('5m');
    expect(cacheUseOf(req({}, [{ role: 'user', content: [contentDocument(hour)] }]))).toBe('1h');
    expect(cacheUseOf(req({ system: [{ type: 'text', text: 's' }] }, [{ role: 'user', content: [contentDocument(undefined), searchResult(undefined)] }]))).toBe('none');
  });

  it('is not fooled by an escaped key, nor by the words in a text', () => {
    const escaped = JSON.parse('{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"cache\\u005fcontrol":{"type":"ephemeral"}}');
    expect(cacheUseOf(messagesRequestSchema.parse(escaped))).toBe('5m');
    expect(cacheUseOf(req({}, [{ role: 'user', content: '"cache_control": {"type":"ephemeral","ttl":"1h"}' }]))).toBe('none');
  });
});
