// The replication check's marker test (settlement-confirm.ts), on the test Redis with WAIT 0, which a
// lone Redis answers at once: what WAIT says is then always enough, as it is on a promoted master
// with a replica of its own, and only the markers decide. A settlement whose marker the answering
// node lacks (it ran on a master that died before replicating it) is not confirmed, and is once its
// replay ran there; one that leaves no marker at all is confirmed, not kept in the spool for good.
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { Logger } from '../../infra/logger.js';
import { createRedis } from '../../infra/redis/client.js';
import { redisKeys } from '../../infra/redis/keys.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { currentMinute, QuotaStore, type SettleRequest } from '../../core/quota/quota-store.js';
import { replicationCheck } from './settlement-confirm.js';

const config = testConfig();
const redis = createRedis(config, 'confirm-markers-test');
const prefix = `${config.REDIS_PREFIX}-confirm-markers`;
const keys = redisKeys(prefix, 4);
const source = { accountQuota: async () => 10_000, tokenRemainQuota: async () => 1_000 };
const store = new QuotaStore(redis, keys, source, { settledMarkerSec: 600 });
const log = { debug: vi.fn(), info: vi.fn(), warn: vi.fn(), error: vi.fn() } as unknown as Logger;
const check = replicationCheck(redis, keys, 0, 200, log);

let seq = 0;
function settlement(extra: Partial<SettleRequest> = {}): SettleRequest {
  seq++;
  const requestId = `confirm-${seq}`;
  return { userId: 8000 + seq, tokenId: 9000 + seq, requestId, cost: 50, eventJson: JSON.stringify({ request_id: requestId }), minute: currentMinute(), limited: false, ...extra };
}

async function reserved(s: SettleRequest): Promise<SettleRequest> {
  expect(await store.reserve({ userId: s.userId, tokenId: s.tokenId, requestId: s.requestId, tokenLimited: false, amount: 200, deadlineMs: Date.now() + 60_000 })).toBe('reserved');
  return s;
}

const ids = (list: readonly SettleRequest[]) => list.map((s) => s.requestId).sort();

afterAll(async () => {
  store.stop();
  const found = await redis.keys(`${prefix}:*`);
  if (found.length) await redis.del(...found);
  await redis.quit();
});

describe('replicationCheck with settled markers', () => {
  it('confirms the settlements, of several shards, whose marker the node has', async () => {
    const batch = await Promise.all([settlement(), settlement(), settlement()].map(reserved));
    expect(await store.settleMany(batch)).toEqual([true, true, true]);
    expect(new Set(batch.map((s) => keys.shardOf(s.userId))).size).toBe(3);
    expect(ids(await check(batch))).toEqual(ids(batch));
  });

  it('keeps a settlement the answering node never had (its master died first) until its replay ran there', async () => {
    // The reservation reached the replica promoted since; the settlement went with the old master.
    const lost = await reserved(settlement());
    const kept = await reserved(settlement({ userId: lost.userId }));
    expect(await store.settle(kept)).toBe(true);
    expect(ids(await check([lost, kept]))).toEqual([kept.requestId]);

    expect(await store.settle(lost)).toBe(true);
    expect(ids(await check([lost]))).toEqual([lost.requestId]);
    expect(await store.accountBalance(lost.userId)).toBe(10_000 - 2 * 50);
  });

  it('keeps one whose reservation the failover lost too, until its replay billed it as lost', async () => {
    const lost = settlement();
    await store.seedAccount(lost.userId);
    expect(await check([lost])).toEqual([]);
    expect(await store.settle(lost)).toBe(true);
    expect(ids(await check([lost]))).toEqual([lost.requestId]);
    expect(await store.accountBalance(lost.userId)).toBe(10_000 - 50);
  });

  it('does not take the reaper\'s tombstone for a settled marker', async () => {
    const s = await reserved(settlement());
    await redis.set(keys.reapedReservation(s.userId, s.requestId), '0', 'EX', 60);
    expect(await check([s])).toEqual([]);
  });

  it('confirms a shard no replica confirms for giveUpMs on its master alone, markers still checked; never with 0', async () => {
    // The test Redis has no replica: WAIT 1 answers 0.
    const warn = vi.fn();
    const quiet = { ...log, warn } as unknown as Logger;
    let unreplicated = 0;
    const patient = replicationCheck(redis, keys, 1, 50, quiet, { giveUpMs: 400, onUnreplicated: (n) => { unreplicated += n; } });
    const strict = replicationCheck(redis, keys, 1, 50, quiet, { giveUpMs: 0 });
    const s = await reserved(settlement());
    expect(await store.settle(s)).toBe(true);
    expect(await patient([s])).toEqual([]);
    expect(await strict([s])).toEqual([]);
    await new Promise((r) => setTimeout(r, 450));
    const lost = settlement(); // its marker is nowhere: a replay must settle it first
    await store.seedAccount(lost.userId);
    expect(ids(await patient([s, lost]))).toEqual([s.requestId]);
    expect(unreplicated).toBe(1);
    expect(warn.mock.calls.filter(([, msg]) => String(msg).includes('master alone'))).toHaveLength(1);
    expect(await strict([s])).toEqual([]);
  });

  it('confirms on WAIT alone the settlements that leave no marker, which a replay could not change', async () => {
    const legacy = settlement({ minute: undefined, limited: undefined });
    const late = settlement({ minute: currentMinute() - 10 });
    const slice = settlement({ slice: { id: 'slice-1', draw: 1 } });
    const batch = [legacy, late, slice];
    expect(ids(await check(batch))).toEqual(ids(batch));
  });
});
