// key_quota_edits rows (one per remain_quota change of an API key) and their Redis markers are pruned
// once done and a day old. Before, neither was ever deleted: the rows grew for good and the markers
// held Redis for 30 days each.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConsoleHarness, type ConsoleHarness } from '../tests/harness/console-harness.js';
import { createLogger } from '../infra/logger.js';
import { pruneKeyQuotaEdits } from './key-quota-edit-pruning.js';

let h: ConsoleHarness;
beforeAll(async () => {
  h = await startConsoleHarness();
});
afterAll(async () => {
  await h?.close();
});

const deps = () => ({ sql: h.sql, quota: h.quotaStore, log: createLogger(h.config, 'key-quota-edit-pruning') });

describe('key quota edit pruning', () => {
  it('deletes done edits older than a day with their markers, and leaves pending and recent ones', async () => {
    const { user } = await h.account();
    const userId = Number(user.id);
    const [token] = await h.sql<{ id: string }[]>`
      INSERT INTO tokens (user_id, name, key_hash, key_ciphertext, key_mask, created_time, expired_time, remain_quota, unlimited_quota)
      VALUES (${userId}, 'k', ${Buffer.from(`h-${userId}`)}, ${Buffer.from('c')}, 'sk-x', 0, -1, 100, false) RETURNING id`;
    const tokenId = Number(token!.id);
    const edit = async (age: string, pending: boolean) => {
      const [row] = await h.sql<{ id: string }[]>`
        INSERT INTO key_quota_edits (user_id, token_id, delta, quota_seq, created_at, follow_up_pending)
        VALUES (${userId}, ${tokenId}, 1, 1, now() - ${age}::interval, ${pending}) RETURNING id`;
      const id = Number(row!.id);
      await h.redis.set(h.keys.keyQuotaEditApplied(userId, id), '1', 'EX', 30 * 24 * 3600);
      return id;
    };
    const oldDone = [await edit('25 hours', false), await edit('40 days', false)];
    const oldPending = await edit('3 days', true);
    const recentDone = await edit('23 hours', false);

    expect(await pruneKeyQuotaEdits(deps(), 1)).toBe(2);

    const left = (await h.sql<{ id: string }[]>`SELECT id FROM key_quota_edits WHERE token_id = ${tokenId} ORDER BY id`).map((r) => Number(r.id));
    expect(left).toEqual([oldPending, recentDone]);
    for (const id of oldDone) expect(await h.redis.exists(h.keys.keyQuotaEditApplied(userId, id)), `marker ${id}`).toBe(0);
    for (const id of left) expect(await h.redis.exists(h.keys.keyQuotaEditApplied(userId, id)), `marker ${id}`).toBe(1);
    expect(await pruneKeyQuotaEdits(deps(), 1)).toBe(0);
  });
});
