import { afterAll, describe, expect, it } from 'vitest';
import { countText } from '../token-count/bpe-count.js';
import { MESSAGE_OVERHEAD } from '../token-count/prompt-text.js';
import { TokenCounter } from '../token-count/token-counter.js';
import { RelayError } from '../errors.js';
import { checkCountTokensRequest, countTokensResponse } from './count-tokens-handler.js';

const counter = new TokenCounter({ maxThreads: 1 });
afterAll(() => counter.close());

describe('POST /v1/messages/count_tokens', () => {
  it('answers {input_tokens} for a body without max_tokens', async () => {
    const json = { model: 'claude-sonnet-4-5', system: 'Be brief.', messages: [{ role: 'user', content: 'Hello, world' }] };
    const body = checkCountTokensRequest(json);
    if (body instanceof RelayError) throw new Error(body.message);
    expect(body).toBe(json);
    const expected = countText('Be brief.') + countText('Hello, world') + MESSAGE_OVERHEAD;
    expect(await countTokensResponse(counter.takePromptPlace()!, body)).toEqual({ input_tokens: expected });
    expect(await countTokensResponse(counter.takePromptPlace()!, body, Buffer.from(JSON.stringify(json)))).toEqual({ input_tokens: expected });
  });

  it('counts a tool_use block whose name is no string (an object whose toString is none) as its JSON, not a failure', async () => {
    for (const name of [{ toString: 1 }, { toString: null, valueOf: 2 }, 7, null, ['x']]) {
      const json = { model: 'claude-sonnet-4-5', messages: [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name, input: {} }, { type: 'server_tool_use', id: 'srvtoolu_1', name, input: {} }] },
      ] };
      const body = checkCountTokensRequest(json);
      if (body instanceof RelayError) throw new Error(body.message);
      const named = name === null ? '""' : JSON.stringify(name);
      const expected = countText('q') + 2 * (countText(named) + countText('{}')) + 2 * MESSAGE_OVERHEAD;
      expect(await countTokensResponse(counter.takePromptPlace()!, body, Buffer.from(JSON.stringify(json)))).toEqual({ input_tokens: expected });
    }
  });

  it('requires model and messages, with Anthropic-style messages', () => {
    const problem = (body: unknown) => {
      const r = checkCountTokensRequest(body);
      return r instanceof RelayError ? r.message : null;
    };
    expect(problem({ messages: [{ role: 'user', content: 'x' }] })).toMatch(/^model:/);
    expect(problem({ model: 'm' })).toMatch(/^messages:/);
    expect(problem({ model: 'm', messages: [] })).toMatch(/at least one/);
    expect(problem({ model: 'm', messages: [{ role: 'user', content: 'x' }], tools: 'no' })).toMatch(/^tools:/);
    expect(problem({ model: 'm', messages: [{ role: 'user', content: 'x' }], max_tokens: 'ignored', thinking: {} })).toBeNull();
  });
});
