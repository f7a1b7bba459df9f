// What settleExchange writes for a request: the log row's dates and duration.
import { describe, expect, it, vi } from 'vitest';
import { decodeUsageEvent } from '../../core/usage/usage-event.js';
import type { ApiKeyRecord } from '../auth/key-directory.js';
import type { MessagesRequest } from './messages-request.js';
import { settleExchange, type SettledExchange } from './settlement.js';

function exchange(requestId: string, startedAt: number, sent: { eventJson: string }[]): SettledExchange {
  const settle = async (s: { eventJson: string }) => { sent.push(s); return true; };
  return {
    ctx: { quota: { settle, settleSoon: settle, sliceOf: () => undefined }, log: { warn: vi.fn(), error: vi.fn() } },
    requestId, upstreamRequestId: '', startedAt, ip: '127.0.0.1',
    record: { userId: 1, tokenId: 2, name: 'k', username: 'u', unlimitedQuota: true } as unknown as ApiKeyRecord,
    body: { model: 'm', stream: true } as unknown as MessagesRequest, channel: null, group: 'default',
    price: { model: 1, completion: 5, group: 1, cacheRead: 0.1, cacheWrite: 1.25, cacheWrite1h: 2 }, tpmLimited: false,
  } as unknown as SettledExchange;
}

describe('settleExchange', () => {
  it('writes a duration of 0, never a negative one, when the wall clock stepped back during the request', () => {
    // An NTP step or a VM resume: the request "started" 1.5 s after it ended. Redis debits the event
    // as written; a negative duration made the billing worker refuse it (no ledger row, ever).
    const sent: { eventJson: string }[] = [];
    settleExchange(exchange('stepped-back', Date.now() + 1_500, sent), { kind: 'ok', usage: { inputTokens: 10, outputTokens: 20, cacheReadTokens: 0, cacheCreationTokens: 0, cacheCreation1hTokens: 0 } });
    expect(sent).toHaveLength(1);
    expect(JSON.parse(sent[0]!.eventJson)).toMatchObject({ use_time_ms: 0 });
    expect(decodeUsageEvent(sent[0]!.eventJson)).toMatchObject({ use_time_ms: 0, quota: 10 + 20 * 5 });
  });

  it('dates the log row when the request ends, as new-api does: a stream of 90 s that just ended counts in the last minute\'s rpm and tpm', () => {
    const sent: { eventJson: string }[] = [];
    const ex = exchange('long-stream', Date.now() - 90_000, sent);
    settleExchange(ex, { kind: 'ok', usage: { inputTokens: 10, outputTokens: 20, cacheReadTokens: 0, cacheCreationTokens: 0, cacheCreation1hTokens: 0 } });
    expect(sent).toHaveLength(1);
    const event = decodeUsageEvent(sent[0]!.eventJson);
    const nowSec = Math.floor(Date.now() / 1000);
    expect(event.created_at).toBeGreaterThanOrEqual(nowSec - 1);
    expect(event.created_at).toBeLessThanOrEqual(nowSec);
    expect(event.use_time_ms).toBeGreaterThanOrEqual(90_000);
    expect(event.quota).toBe(10 + 20 * 5);
  });
});

describe('settleExchange bounds the usage by the request', () => {
  const decoded = (sent: { eventJson: string }[]) => decodeUsageEvent(sent[0]!.eventJson);

  it('bills output above max_tokens × n, a prompt above its bytes and searches above max_uses at those bounds, and says so', () => {
    const sent: { eventJson: string }[] = [];
    const ex = { ...exchange('above', Date.now(), sent), usageBound: { input: 1200, output: 100, searches: 2 } } as SettledExchange;
    settleExchange(ex, { kind: 'ok', usage: { inputTokens: 100_000_000, outputTokens: 100_000_000, cacheReadTokens: 500, cacheCreationTokens: 0, cacheCreation1hTokens: 0, webSearchRequests: 9 } });
    expect(decoded(sent)).toMatchObject({ prompt_tokens: 1200, completion_tokens: 100, cache_read_tokens: 0, web_search_requests: 2, quota: 1200 + 100 * 5 });
    expect(decoded(sent).content).toMatch(/above what the request could use/);
  });

  it('brings a prompt down input first, then cache writes, then cache reads; leaves a usage within the bound as it is', () => {
    const sent: { eventJson: string }[] = [];
    settleExchange({ ...exchange('split', Date.now(), sent), usageBound: { input: 1000, output: 100, searches: 0 } } as SettledExchange,
      { kind: 'ok', usage: { inputTokens: 600, outputTokens: 10, cacheReadTokens: 600, cacheCreationTokens: 300, cacheCreation1hTokens: 300 } });
    expect(decoded(sent)).toMatchObject({ prompt_tokens: 1000, cache_write_1h_tokens: 300, cache_read_tokens: 100 });
    const within: { eventJson: string }[] = [];
    settleExchange({ ...exchange('within', Date.now(), within), usageBound: { input: 1000, output: 100, searches: 0 } } as SettledExchange,
      { kind: 'ok', usage: { inputTokens: 900, outputTokens: 100, cacheReadTokens: 100, cacheCreationTokens: 0, cacheCreation1hTokens: 0 } });
    expect(decoded(within)).toMatchObject({ prompt_tokens: 1000, completion_tokens: 100 });
    expect(decoded(within).content).not.toMatch(/above/);
  });
});
