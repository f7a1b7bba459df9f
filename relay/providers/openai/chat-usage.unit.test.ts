// A Chat Completions usage object as the relay bills it (chat-usage.ts): the cached prompt tokens are
// cache reads, and a count a provider overstates is billed at MAX_USAGE_COUNT (stream/usage-count.ts).
import { describe, expect, it } from 'vitest';
import { MAX_USAGE_COUNT } from '../../stream/usage-count.js';
import { usageOfChatUsage } from './chat-usage.js';

describe('usageOfChatUsage', () => {
  it('takes the cached prompt tokens as cache reads and the rest as input', () => {
    expect(usageOfChatUsage({ prompt_tokens: 120, completion_tokens: 33, prompt_tokens_details: { cached_tokens: 20 } }))
      .toEqual({ inputTokens: 100, outputTokens: 33, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: 20 });
    expect(usageOfChatUsage({ object: 'chat.completion' })).toBeNull();
  });

  it('bills a count past any real request at the bound, so that what is derived from it stays a whole number the books hold', () => {
    expect(usageOfChatUsage(JSON.parse('{"prompt_tokens":1e400,"completion_tokens":3e9,"prompt_tokens_details":{"cached_tokens":1e300}}')))
      .toEqual({ inputTokens: 0, outputTokens: MAX_USAGE_COUNT, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: MAX_USAGE_COUNT });
    expect(usageOfChatUsage({ prompt_tokens: 5e8, completion_tokens: -1 }))
      .toEqual({ inputTokens: MAX_USAGE_COUNT, outputTokens: 0, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: 0 });
  });
});
