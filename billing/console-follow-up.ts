// Finishes console credits whose after-commit step failed (console-api/ledger/console-ledger.ts): a
// ledger row still `follow_up_pending` a while after it was written goes through the same step again
// (core/ledger/console-credit-follow-up.ts); so does a key quota edit (key_quota_edits, written by
// console-api/routes/token.ts). Runs in the billing worker, next to the reservation reaper.
import type { Redis } from 'ioredis';
import type { Logger } from '../infra/logger.js';
import type { Sql } from '../infra/postgres/client.js';
import { finishConsoleCredit, finishKeyQuotaEdit } from '../core/ledger/console-credit-follow-up.js';
import type { QuotaStore } from '../core/quota/quota-store.js';
import { startPeriodicJob } from './periodic-job.js';

const BATCH = 100;

export interface FollowUpDeps {
  sql: Sql;
  redis: Redis;
  quota: QuotaStore;
  log: Logger;
}

/** One pass over rows pending for longer than `minAgeSec`; returns how many were finished. */
export async function finishConsoleFollowUps(d: FollowUpDeps, minAgeSec: number): Promise<number> {
  const rows = await d.sql`
    SELECT id, user_id, quota_delta, credit_seq, log_event FROM ledger
    WHERE follow_up_pending AND settled_at <= now() - make_interval(secs => ${minAgeSec})
    ORDER BY id LIMIT ${BATCH}`;
  let finished = 0;
  for (const r of rows as unknown as { id: number; user_id: number; quota_delta: number; credit_seq: string | number | null; log_event: string | null }[]) {
    const stores = { sql: d.sql, redis: d.redis, quota: d.quota };
    await finishConsoleCredit(stores, {
      ledgerId: r.id, userId: r.user_id, delta: r.quota_delta,
      creditSeq: r.credit_seq === null ? null : Number(r.credit_seq), logEvent: r.log_event || null,
    });
    finished++;
  }
  const edits = await d.sql`
    SELECT id, user_id, token_id, delta, quota_seq FROM key_quota_edits
    WHERE follow_up_pending AND created_at <= now() - make_interval(secs => ${minAgeSec})
    ORDER BY id LIMIT ${BATCH}`;
  for (const e of edits as unknown as { id: string; user_id: string; token_id: string; delta: string; quota_seq: string }[]) {
    await finishKeyQuotaEdit(d, {
      editId: Number(e.id), userId: Number(e.user_id), tokenId: Number(e.token_id), delta: Number(e.delta), quotaSeq: Number(e.quota_seq),
    });
    finished++;
  }
  if (finished > 0) d.log.warn({ finished }, 'finished console credits and key quota edits their console could not');
  return finished;
}

export function startConsoleFollowUp(d: FollowUpDeps, intervalMs: number, minAgeSec: number, runsWhen?: () => boolean): { stop(): void } {
  return startPeriodicJob('console follow-up', intervalMs, d.log, () => finishConsoleFollowUps(d, minAgeSec), runsWhen);
}
