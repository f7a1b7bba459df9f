import { afterEach, describe, expect, it, vi } from 'vitest';
import type { RelayContext } from '../relay-context.js';
import { settlementsInFlight, settleWithRetry } from './settlement.js';

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

describe('settleWithRetry and the quota store\'s connection', () => {
  /** A context whose Redis is ready or not, and whose connection number the test moves. */
  function gated(settle: (s: { lost?: boolean }) => Promise<boolean>) {
    const state = { ready: true, connection: 0 };
    const log = { warn: vi.fn(), error: vi.fn() };
    const quota = { settle, settleSoon: settle, sliceOf: () => undefined };
    const ctx = {
      quota, log, quotaReady: () => state.ready, quotaConnectionDrops: () => state.connection, billsLostReservations: true,
    } as unknown as RelayContext;
    return { ctx, state, log };
  }
  const lostable = { ...settlement, minute: 1, limited: false };

  it('holds a settlement back, unsent, for as long as the Redis is not known to be ours, then bills a lost one once', async () => {
    vi.useFakeTimers();
    const sent: { lost?: boolean }[] = [];
    const { ctx, state } = gated(async (s) => {
      sent.push(s);
      return s.lost === true; // the reservation went with Redis's data
    });
    state.ready = false;
    settleWithRetry(ctx, lostable, 0);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(sent).toEqual([]);
    expect(settlementsInFlight()).toBe(1);
    state.ready = true;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(sent.map((s) => s.lost === true)).toEqual([false, true]);
    expect(settlementsInFlight()).toBe(0);
  });

  it('asks again, and bills nothing as lost, when the connection was made again while the settlement was out', async () => {
    vi.useFakeTimers();
    const sent: { lost?: boolean }[] = [];
    const { ctx, state, log } = gated(async (s) => {
      sent.push(s);
      // The call ran, its answer lost with the connection; ioredis's second send finds it settled.
      state.connection++;
      return false;
    });
    settleWithRetry(ctx, lostable, 0);
    await vi.runAllTimersAsync();
    expect(sent.every((s) => s.lost !== true)).toBe(true);
    expect(sent.length).toBeGreaterThan(1);
    expect(settlementsInFlight()).toBe(0);
    expect(log.warn).toHaveBeenCalledWith(expect.objectContaining({ requestId: 'r' }), expect.stringContaining('settled already by an earlier try'));
  });
});
