// What settleExchange writes for a request: the log row's dates.
import { describe, expect, it, vi } from 'vitest';
import { decodeUsageEvent } from '../../core/usage/usage-event.js';
import type { ApiKeyRecord } from '../auth/key-directory.js';
import type { MessagesRequest } from './messages-request.js';
import { settleExchange, type SettledExchange } from './settlement.js';

describe('settleExchange', () => {
  it('dates the log row when the request ends, as new-api does: a stream of 90 s that just ended counts in the last minute\'s rpm and tpm', () => {
    const sent: { eventJson: string }[] = [];
    const settle = async (s: { eventJson: string }) => { sent.push(s); return true; };
    const ex = {
      ctx: { quota: { settle, settleSoon: settle, sliceOf: () => undefined }, log: { warn: vi.fn(), error: vi.fn() } },
      requestId: 'long-stream', upstreamRequestId: '', startedAt: Date.now() - 90_000, ip: '127.0.0.1',
      record: { userId: 1, tokenId: 2, name: 'k', username: 'u', unlimitedQuota: true } as unknown as ApiKeyRecord,
      body: { model: 'm', stream: true } as unknown as MessagesRequest, channel: null, group: 'default',
      price: { model: 1, completion: 5, group: 1, cacheRead: 0.1, cacheWrite: 1.25, cacheWrite1h: 2 }, tpmLimited: false,
    } as unknown as SettledExchange;
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
