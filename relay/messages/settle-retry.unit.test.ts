import { afterEach, describe, expect, it, vi } from 'vitest';
import type { RelayContext } from '../relay-context.js';
import { settleWithRetry } from './settlement.js';

function ctxWith(settle: () => Promise<boolean>) {
  const log = { warn: vi.fn(), error: vi.fn() };
  return { ctx: { quota: { settle, settleSoon: settle, sliceOf: () => undefined }, log } as unknown as RelayContext, log };
}
const settlement = { userId: 1, tokenId: 2, requestId: 'r', cost: 5, eventJson: '{}' };

afterEach(() => {
  vi.useRealTimers();
});

describe('settleWithRetry', () => {
  it('tries a failed settlement again until it goes through', async () => {
    vi.useFakeTimers();
    let calls = 0;
    const { ctx, log } = ctxWith(async () => {
      calls++;
      if (calls < 3) throw new Error('connection lost');
      return true;
    });
    settleWithRetry(ctx, settlement, 0);
    await vi.runAllTimersAsync();
    expect(calls).toBe(3);
    expect(log.warn).toHaveBeenCalledTimes(2);
    expect(log.error).not.toHaveBeenCalled();
  });

  it('gives up after the last delay and leaves the reservation to the reaper', async () => {
    vi.useFakeTimers();
    let calls = 0;
    const { ctx, log } = ctxWith(async () => {
      calls++;
      throw new Error('down');
    });
    settleWithRetry(ctx, settlement, 0);
    await vi.runAllTimersAsync();
    expect(calls).toBe(5);
    expect(log.error).toHaveBeenCalledTimes(1);
  });
});
