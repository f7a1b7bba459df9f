import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { redisKeys } from './keys.js';

// The slot function ioredis routes by (its own dependency; untyped).
const calculateSlot = createRequire(import.meta.url)('cluster-key-slot') as (key: string) => number;

describe('redisKeys', () => {
  it('unsharded (shards 0): the single-Redis layout of before, one global stream and deadline set', () => {
    const k = redisKeys('gw');
    expect(k.shards).toBe(0);
    expect(k.streamShards).toBe(1);
    expect(k.accountBalance(42)).toBe('gw:{a42}:balance');
    expect(k.usageStream()).toBe('gw:usage');
    expect(k.usageStream(k.shardOf(42))).toBe('gw:usage');
    expect(k.reservationDeadlines(k.shardOf(42))).toBe('gw:rsv-deadlines');
    expect(k.usageDeadLetterStream()).toBe('gw:usage:dead');
  });

  it('sharded: every key a script or MULTI writes for an account is in its shard stream\'s slot', () => {
    const k = redisKeys('gw', 64);
    for (const userId of [1, 2, 63, 64, 65, 1000, 123457]) {
      const shard = k.shardOf(userId);
      expect(shard).toBe(userId % 64);
      const slot = calculateSlot(k.usageStream(shard));
      const perAccount = [
        k.accountBalance(userId), k.tokenRemain(userId, 7), k.reservation(userId, 'req-1'), k.reapedReservation(userId, 'req-1'), k.settledReservations(userId),
        k.adjustmentApplied(userId, 9), k.accountCreditSeq(userId), k.tokenQuotaSeq(userId, 7), k.keyQuotaEditApplied(userId, 3),
        k.keyRequestsInWindow(userId, 7), k.keyTokensInWindow(userId, 7), k.keyCountsInMinute(userId, 7, 100), k.apiKeyWritesInMinute(userId, 100), k.accessTokenIssues(userId),
        // A group's name is the operator's text: braces in it do not move the key off its account's slot.
        k.accountRequestsInGroupWindow(userId, 'vip'), k.accountTokensInGroupWindow(userId, '{x}'), k.accountRequestsInGroupWindow(userId, '}{'),
        k.keyDebitApplied(userId, 7, 5), k.reservationDeadlines(shard), k.usageDeadLetterStream(shard), k.billingShardLease(shard),
        k.redisIncarnation(shard),
      ];
      for (const key of perAccount) expect(calculateSlot(key), key).toBe(slot);
    }
  });

  it('the clock key (core/quota/redis-clock.ts) is one fixed slot whatever the layout: every process reads one node\'s clock', () => {
    expect(redisKeys('gw').clock()).toBe('gw:{clock}:clock');
    expect(calculateSlot(redisKeys('gw', 64).clock())).toBe(calculateSlot(redisKeys('gw').clock()));
  });

  it('sharded: the shards spread over the slots of a 3-master cluster', () => {
    const k = redisKeys('gw', 64);
    const perMaster = [0, 0, 0];
    for (let s = 0; s < 64; s++) perMaster[Math.min(2, Math.floor(calculateSlot(k.usageStream(s)) / 5462))]!++;
    for (const n of perMaster) expect(n).toBeGreaterThan(10);
  });
});
