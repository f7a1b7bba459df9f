// Ends the console's rows that would otherwise grow for ever. Runs in the billing worker, the one
// process that is always there, every PRUNE_INTERVAL_MS:
//   - an unpaid top-up order older than a day becomes 'expired'. It is kept, not deleted: a provider
//     may still confirm the payment later (a delayed or retried notice), and completeOrder
//     (console-api/payments/topup-orders.ts) credits an expired order exactly like a pending one, so
//     a confirmed payment is never lost. Orders are claimed FOR UPDATE SKIP LOCKED: one a payment is
//     completing right now is left to that payment.
//   - console credentials (access_tokens) expired or revoked over a week ago, and e-mail codes expired
//     over a day ago, are deleted: they open nothing any more (a code's hourly rate limit counts only
//     the last hour's rows).
// Each statement handles at most BATCH rows, so no lock is held long; a run goes through at most
// MAX_BATCHES of each, and the next run continues a larger backlog.
import type { Logger } from '../infra/logger.js';
import type { Sql } from '../infra/postgres/client.js';
import { inBatches, startPeriodicJob } from './periodic-job.js';

export const PENDING_ORDER_TTL_SEC = 24 * 3600;
export const SPENT_CREDENTIAL_KEEP_SEC = 7 * 24 * 3600;
export const EXPIRED_EMAIL_CODE_KEEP_SEC = 24 * 3600;
/** Nothing here is urgent: the limits that matter (the order cap, token expiry) hold without it. */
export const PRUNE_INTERVAL_MS = 10 * 60_000;
const BATCH = 1000;
const MAX_BATCHES = 100;

export interface PruneDeps {
  sql: Sql;
  log: Logger;
}

export interface PruneResult {
  expiredOrders: number;
  deletedCredentials: number;
  deletedEmailCodes: number;
}

/** One pass; `nowSec` in Unix seconds (the console's clock: orders, tokens and codes store seconds). */
export async function pruneConsoleRows(d: PruneDeps, nowSec: number): Promise<PruneResult> {
  const { sql } = d;
  const orderCutoff = nowSec - PENDING_ORDER_TTL_SEC;
  // topups_status_created (migration 002) finds them; `status = 'pending'` again in the UPDATE because
  // a row completed between the sub-select and the update must stay 'success'.
  const expiredOrders = await inBatches(BATCH, MAX_BATCHES, async () => (await sql`
    UPDATE topups SET status = 'expired'
    WHERE id IN (
      SELECT id FROM topups WHERE status = 'pending' AND create_time < ${orderCutoff}
      ORDER BY create_time LIMIT ${BATCH} FOR UPDATE SKIP LOCKED)
      AND status = 'pending'`).count);

  const credentialCutoff = nowSec - SPENT_CREDENTIAL_KEEP_SEC;
  // Two statements, each on its own partial index (migration 020); a live access token has neither.
  const deletedCredentials = await inBatches(BATCH, MAX_BATCHES, async () => (await sql`
    DELETE FROM access_tokens WHERE id IN (
      SELECT id FROM access_tokens WHERE expires_at < ${credentialCutoff} LIMIT ${BATCH})`).count)
    + await inBatches(BATCH, MAX_BATCHES, async () => (await sql`
    DELETE FROM access_tokens WHERE id IN (
      SELECT id FROM access_tokens WHERE revoked_at < ${credentialCutoff} LIMIT ${BATCH})`).count);

  const deletedEmailCodes = await inBatches(BATCH, MAX_BATCHES, async () => (await sql`
    DELETE FROM email_codes WHERE id IN (
      SELECT id FROM email_codes WHERE expires_at < ${nowSec - EXPIRED_EMAIL_CODE_KEEP_SEC} LIMIT ${BATCH})`).count);

  const result = { expiredOrders, deletedCredentials, deletedEmailCodes };
  if (expiredOrders + deletedCredentials + deletedEmailCodes > 0) d.log.info(result, 'pruned console rows');
  return result;
}

export function startConsoleRowPruning(d: PruneDeps, intervalMs = PRUNE_INTERVAL_MS): { stop(): void } {
  return startPeriodicJob('console row pruning', intervalMs, d.log, () => pruneConsoleRows(d, Math.floor(Date.now() / 1000)));
}
