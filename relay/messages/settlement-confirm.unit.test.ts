// The spool with replicas (issue 11): a settlement Redis took leaves the spool only once the replication
// check confirms it; the check runs once for all the settlements answered meanwhile; what it does not
// confirm is replayed (settled again, checked again) until it is.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Logger } from '../../infra/logger.js';
import type { SettleRequest } from '../../core/quota/quota-store.js';
import { pendingIn, SettlementSpool } from './settlement-spool.js';

const log = { info: vi.fn(), warn: vi.fn(), error: vi.fn() } as unknown as Logger;
const s = (requestId: string, userId = 1) => ({ userId, tokenId: 2, requestId, cost: 7, eventJson: '{}', tokens: 3, minute: 9, limited: false });
const dirs: string[] = [];
const dir = () => {
  const d = mkdtempSync(join(tmpdir(), 'spool-confirm-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tick = () => new Promise((r) => setImmediate(r));

describe('SettlementSpool with a replication check', () => {
  it('lets a settlement go only once its replicas have it, checking a batch at once', async () => {
    const spool = SettlementSpool.open(dir(), log);
    const batches: string[][] = [];
    // Account 2's shard has no replica answering.
    spool.confirmReplicationWith(async (batch) => {
      batches.push(batch.map((x) => x.requestId));
      return batch.filter((x) => x.userId !== 2);
    });
    for (const [id, user] of [['a', 1], ['b', 2], ['c', 1]] as const) {
      spool.add(s(id, user));
      spool.settled(id);
    }
    expect(spool.pendingCount).toBe(3);
    await tick();
    await tick();
    expect(batches).toEqual([['a', 'b', 'c']]);
    expect(spool.pendingCount).toBe(1);
    expect(spool.stalledCount).toBe(1);
    await vi.waitFor(() => expect(pendingIn(readFileSync(spool.path, 'utf8')).map((x) => x.requestId)).toEqual(['b']), { timeout: 1000 });
    spool.close();
  });

  it('replays an unconfirmed settlement and lets it go once a later check confirms it', async () => {
    const spool = SettlementSpool.open(dir(), log);
    let replicaBack = false;
    spool.confirmReplicationWith(async (batch) => (replicaBack ? [...batch] : []));
    spool.add(s('x'));
    spool.settled('x');
    await tick();
    await tick();
    expect(spool.stalledCount).toBe(1);
    const settled: SettleRequest[] = [];
    replicaBack = true;
    expect(await spool.replay(async (x) => { settled.push(x); return true; })).toBe(1);
    expect(settled.map((x) => x.requestId)).toEqual(['x']);
    await tick();
    await tick();
    expect(spool.pendingCount).toBe(0);
    spool.close();
  });

  it('keeps the settlements when the check itself fails (the master is failing over)', async () => {
    const spool = SettlementSpool.open(dir(), log);
    spool.confirmReplicationWith(async () => { throw new Error('CLUSTERDOWN'); });
    spool.add(s('y'));
    spool.settled('y');
    await tick();
    await tick();
    expect(spool.pendingCount).toBe(1);
    expect(spool.stalledCount).toBe(1);
    spool.close();
  });
});
