// Finishes console credits whose after-commit steps failed (console-api/ledger/console-ledger.ts):
// a ledger row still `follow_up_pending` a while after it was written gets its Redis mirror update
// (once per ledger id) and its log event (collapsing in the log table if it was already sent), then is
// marked done. Runs in the billing worker, next to the reservation reaper.
import type { Redis } from 'ioredis';
import type { Logger } from '../infra/logger.js';
import type { Sql } from '../infra/postgres/client.js';
import type { QuotaStore } from '../core/quota/quota-store.js';
import { startPeriodicJob } from './periodic-job.js';

const BATCH = 100;

export interface FollowUpDeps {
  sql: Sql;
  redis: Redis;
  quota: QuotaStore;
  stream: string;
  log: Logger;
}

/** One pass over rows pending for longer than `minAgeSec`; returns how many were finished. */
export async function finishConsoleFollowUps(d: FollowUpDeps, minAgeSec: number): Promise<number> {
  const rows = await d.sql`
    SELECT id, user_id, quota_delta, log_event FROM ledger
    WHERE follow_up_pending AND settled_at <= now() - make_interval(secs => ${minAgeSec})
    ORDER BY id LIMIT ${BATCH}`;
  let finished = 0;
  for (const r of rows as unknown as { id: number; user_id: number; quota_delta: number; log_event: string | null }[]) {
    await d.quota.adjustAccountOnce(r.user_id, r.quota_delta, r.id);
    if (r.log_event) await d.redis.xadd(d.stream, '*', 'e', r.log_event);
    await d.sql`UPDATE ledger SET follow_up_pending = false, log_event = NULL WHERE id = ${r.id}`;
    finished++;
  }
  if (finished > 0) d.log.warn({ finished }, 'finished console credits their console could not');
  return finished;
}

export function startConsoleFollowUp(d: FollowUpDeps, intervalMs: number, minAgeSec: number): { stop(): void } {
  return startPeriodicJob('console follow-up', intervalMs, d.log, () => finishConsoleFollowUps(d, minAgeSec));
}
