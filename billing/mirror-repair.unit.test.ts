// lostDebits (mirror-repair.ts): what a Redis restart took out of the mirrors, one repair per mirror
// and commit.
import { describe, expect, it } from 'vitest';
import { usageEvent, LOG_TYPE } from '../core/usage/usage-event.js';
import { lostDebits } from './mirror-repair.js';
import type { SettledEvent } from './settle-batch.js';

let nextId = 100;
function settled(quota: number, accountSeq: number, extra: Partial<SettledEvent> = {}, keySeq?: number): SettledEvent {
  const event = usageEvent({ type: LOG_TYPE.consume, request_id: `r${nextId}`, user_id: 7, token_id: 9, token_limited: keySeq !== undefined, quota, created_at: 1, content: '' });
  return { id: nextId++, event, applied: true, accountSeq, ...(keySeq !== undefined ? { keySeq } : {}), ...extra };
}

describe('lostDebits', () => {
  it('sums the debits of one commit per mirror, from its first ledger id', () => {
    nextId = 100;
    expect(lostDebits([settled(5, 3, {}, 11), settled(7, 3, {}, 11), settled(2, 3)])).toEqual([
      { userId: 7, tokenId: 0, debit: 14, ledgerId: 100, seq: 3 },
      { userId: 7, tokenId: 9, debit: 12, ledgerId: 100, seq: 11 },
    ]);
  });

  it('keeps the commits of a batch settled in parts apart: a refill between them holds the first only', () => {
    nextId = 200;
    expect(lostDebits([settled(5, 3), settled(7, 4), settled(1, 4)])).toEqual([
      { userId: 7, tokenId: 0, debit: 5, ledgerId: 200, seq: 3 },
      { userId: 7, tokenId: 0, debit: 8, ledgerId: 201, seq: 4 },
    ]);
  });

  it('leaves out replays, events that move no money, and zero debits', () => {
    nextId = 300;
    const topup = { ...settled(50, 5), event: usageEvent({ type: LOG_TYPE.topup, request_id: 'c1', user_id: 7, quota: 50, created_at: 1, content: '' }) };
    expect(lostDebits([settled(5, 5, { applied: false }), topup, settled(0, 5)])).toEqual([]);
  });
});
