// Deletes the key_quota_edits rows (one per remain_quota change of an API key: console-api/routes/token.ts)
// that are done and over a day old, with their Redis markers (adjustTokenOnce's `key-adj:<id>`, set for
// 30 days even when the key has no mirror). Before, neither was ever deleted: every edit held a row for
// good and a marker for a month. Runs in the billing worker, next to the console follow-up.
//
// Why a marker may go with its row: it only makes the console and the follow-up apply the same pending
// edit once (adjustBalanceOnce-3.lua). A row no longer follow_up_pending was applied (or its mirror was
// seeded after it), and nothing runs it again: the follow-up reads pending rows only, and the console
// finishes its own edit right after the commit, far within the day. The markers of rows still pending
// keep their 30-day TTL: a row left pending while the billing worker was down must still find its own.
import type { Logger } from '../infra/logger.js';
import type { Sql } from '../infra/postgres/client.js';
import type { QuotaStore } from '../core/quota/quota-store.js';
import { inBatches, startPeriodicJob } from './periodic-job.js';

/** Rows per DELETE: bounds one transaction and the markers removed with it. */
const BATCH = 1000;
/** Batches per pass: a backlog is worked off over a few passes instead of holding one for long. */
const MAX_BATCHES_PER_PASS = 50;
/** Between passes: rows live a day anyway, so minutes of lag are noise. */
export const KEY_QUOTA_EDIT_PRUNE_INTERVAL_MS = 10 * 60_000;

export interface KeyQuotaEditPruningDeps {
  sql: Sql;
  quota: QuotaStore;
  log: Logger;
}

/** One pass: deletes done rows created over a day ago, and their markers; returns how many rows went. */
export async function pruneKeyQuotaEdits(d: KeyQuotaEditPruningDeps, batchSize = BATCH): Promise<number> {
  // The markers go inside the transaction: when their UNLINK fails the rows stay, so the next pass
  // removes them; the reverse order would leave markers nobody deletes before their TTL.
  // SKIP LOCKED: the workers of a sharded billing each run this job without waiting on one another.
  const pruned = await inBatches(batchSize, MAX_BATCHES_PER_PASS, () => d.sql.begin(async (tx) => {
    const rows = await tx<{ id: string; user_id: string }[]>`
      DELETE FROM key_quota_edits WHERE id IN (
        SELECT id FROM key_quota_edits
        WHERE NOT follow_up_pending AND created_at < now() - interval '1 day'
        ORDER BY id LIMIT ${batchSize} FOR UPDATE SKIP LOCKED)
      RETURNING id, user_id`;
    if (rows.length > 0) await d.quota.forgetKeyQuotaEdits(rows.map((r) => ({ userId: Number(r.user_id), editId: Number(r.id) })));
    return rows.length;
  }));
  if (pruned > 0) d.log.info({ pruned }, 'pruned key quota edits done over a day ago');
  return pruned;
}

export function startKeyQuotaEditPruning(d: KeyQuotaEditPruningDeps, intervalMs = KEY_QUOTA_EDIT_PRUNE_INTERVAL_MS, runsWhen?: () => boolean): { stop(): void } {
  return startPeriodicJob('key quota edit pruning', intervalMs, d.log, () => pruneKeyQuotaEdits(d), runsWhen);
}
