import { afterEach, describe, expect, it, vi } from 'vitest';
import { usageOfMessageBody } from './message-usage.js';

const message = (usage: unknown, text = 'hello') => Buffer.from(JSON.stringify({
  id: 'msg_1', type: 'message', role: 'assistant', model: 'm', content: [{ type: 'text', text }],
  stop_reason: 'end_turn', stop_sequence: null, usage,
}));

describe('usageOfMessageBody', () => {
  it('reads the usage object at the end of the message, nested objects included', () => {
    const body = message({ input_tokens: 12, cache_creation_input_tokens: 3, cache_read_input_tokens: 4, cache_creation: { ephemeral_5m_input_tokens: 3 }, output_tokens: 9, service_tier: 'standard' });
    expect(usageOfMessageBody(body)).toEqual({ inputTokens: 12, outputTokens: 9, cacheCreationTokens: 3, cacheCreation1hTokens: 0, cacheReadTokens: 4 });
  });

  it('reads the 5-minute / 1-hour split of the cache writes, and takes them all as 5-minute without it', () => {
    const split = message({ input_tokens: 12, cache_creation_input_tokens: 30, cache_read_input_tokens: 4, cache_creation: { ephemeral_5m_input_tokens: 10, ephemeral_1h_input_tokens: 20 }, output_tokens: 9 });
    expect(usageOfMessageBody(split)).toEqual({ inputTokens: 12, outputTokens: 9, cacheCreationTokens: 30, cacheCreation1hTokens: 20, cacheReadTokens: 4 });
    const noSplit = message({ input_tokens: 12, cache_creation_input_tokens: 30, output_tokens: 9 });
    expect(usageOfMessageBody(noSplit)).toEqual({ inputTokens: 12, outputTokens: 9, cacheCreationTokens: 30, cacheCreation1hTokens: 0, cacheReadTokens: 0 });
    // A split that disagrees with the total never bills fewer writes than either says.
    const more = message({ input_tokens: 1, cache_creation_input_tokens: 5, cache_creation: { ephemeral_5m_input_tokens: 4, ephemeral_1h_input_tokens: 3 }, output_tokens: 1 });
    expect(usageOfMessageBody(more)).toMatchObject({ cacheCreationTokens: 7, cacheCreation1hTokens: 3 });
  });

  it('reads usage.server_tool_use.web_search_requests, left out when there were none', () => {
    const body = message({ input_tokens: 12, output_tokens: 9, server_tool_use: { web_search_requests: 3 } });
    expect(usageOfMessageBody(body)).toEqual({ inputTokens: 12, outputTokens: 9, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: 0, webSearchRequests: 3 });
    expect(usageOfMessageBody(message({ input_tokens: 1, output_tokens: 1, server_tool_use: { web_search_requests: 0 } }))).not.toHaveProperty('webSearchRequests');
    expect(usageOfMessageBody(message({ input_tokens: 1, output_tokens: 1, server_tool_use: null }))).not.toHaveProperty('webSearchRequests');
  });

  it('is not fooled by the text "usage": inside the content', () => {
    const body = message({ input_tokens: 1, output_tokens: 2 }, 'the "usage": {"input_tokens": 999} field');
    expect(usageOfMessageBody(body)).toEqual({ inputTokens: 1, outputTokens: 2, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: 0 });
  });

  it('falls back to the whole body when usage is not last', () => {
    const body = Buffer.from(JSON.stringify({ usage: { input_tokens: 5, output_tokens: 6 }, content: [{ type: 'tool_use', input: { usage: 'x' } }] }));
    expect(usageOfMessageBody(body)).toEqual({ inputTokens: 5, outputTokens: 6, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: 0 });
  });

  it('answers null for a body without usage or not JSON', () => {
    expect(usageOfMessageBody(Buffer.from('{"type":"message"}'))).toBeNull();
    expect(usageOfMessageBody(Buffer.from('<html>'))).toBeNull();
  });

  // A provider that writes usage before content, answering a tool call whose input has a `usage` key
  // (a client can ask for one through its tool schema): the last `"usage":` is the client's.
  it('reads the top-level usage, not a tool input\'s, whatever the key order', () => {
    const want = { inputTokens: 5000, outputTokens: 3000, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: 0 };
    const toolUse = (input: unknown) => Buffer.from(JSON.stringify({ id: 'msg_1', type: 'message', usage: { input_tokens: 5000, output_tokens: 3000 },
      content: [{ type: 'tool_use', id: 't', name: 'f', input }], stop_reason: 'tool_use' }));
    expect(usageOfMessageBody(toolUse({ usage: { note: 'x' } }))).toEqual(want);
    expect(usageOfMessageBody(toolUse({ usage: { input_tokens: 1, output_tokens: 0 } }))).toEqual(want);
    // Nested as the last thing of the body but one level down.
    expect(usageOfMessageBody(Buffer.from(`{"usage":{"input_tokens":5000,"output_tokens":3000},"content":[{"type":"tool_use","input":{"a":{"usage":{"output_tokens":1}}}}]}`))).toEqual(want);
    // A tool input's usage that is no object, the object after it the body's last.
    expect(usageOfMessageBody(Buffer.from(`{"usage":{"input_tokens":5000,"output_tokens":3000},"content":[{"type":"tool_use","input":{"usage":"x"}}],"meta":{"output_tokens":1}}`))).toEqual(want);
    // A key that only ends in "usage (its quote escaped).
    expect(usageOfMessageBody(Buffer.from(`{"usage":{"input_tokens":5000,"output_tokens":3000},"content":[{"type":"tool_use","input":{"x\\"usage":{"output_tokens":1}}}]}`))).toEqual(want);
  });

  it('reads a usage that states no count as no usage', () => {
    expect(usageOfMessageBody(message({}))).toBeNull();
    expect(usageOfMessageBody(Buffer.from('{"content":[],"usage":{}}\n'))).toBeNull();
  });

  describe('the usual answer, usage last', () => {
    afterEach(() => vi.restoreAllMocks());
    it('is read without parsing the whole body', () => {
      const parse = vi.spyOn(JSON, 'parse');
      const body = Buffer.concat([message({ input_tokens: 12, output_tokens: 9 }, 'x'.repeat(10_000)), Buffer.from('\n')]);
      expect(usageOfMessageBody(body)).toMatchObject({ inputTokens: 12, outputTokens: 9 });
      expect(parse).toHaveBeenCalledTimes(1);
      expect((parse.mock.calls[0]![0] as string).length).toBeLessThan(100);
    });
  });
});
