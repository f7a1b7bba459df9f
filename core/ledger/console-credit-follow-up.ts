// The after-commit step of a console credit (a top-up, a redemption, an administrator's adjustment),
// the one implementation of it. The console runs it right after its transaction commits
// (console-api/ledger/console-ledger.ts afterConsoleCredit); the billing worker runs it again for a
// ledger row still `follow_up_pending` a while later, because the console failed or died in between
// (billing/console-follow-up.ts). Running it twice is harmless: the mirror moves once per ledger id
// (adjustAccountOnce-5.lua; not at all when the mirror was seeded from
// Postgres after the commit: the row's credit_seq is at most the seed's) and a repeated log event collapses in the log table.
// An administrator's debit took its amount from the mirror before its commit, as a hold
// (console-api/ledger/console-ledger.ts DebitHolds): this step consumes the hold instead of moving the
// mirror, or, when the reaper gave the hold back first (its deadline passed), applies the debit; once
// either way.
// The row stays pending until the billing worker has settled its log event, not merely appended it.
import type { Redis } from 'ioredis';
import type { Sql } from '../../infra/postgres/client.js';
import type { QuotaStore } from '../quota/quota-store.js';
import { appendUsageEvent } from '../usage/usage-event.js';

export interface ConsoleCreditStores {
  sql: Sql;
  redis: Redis;
  /** Also names the account's usage stream (its shard's, in the sharded layout). */
  quota: QuotaStore;
}

/** A committed ledger row whose follow-up is pending. */
export interface PendingConsoleCredit {
  ledgerId: number;
  userId: number;
  /** Signed change of users.quota the row recorded. */
  delta: number;
  /** users.credit_seq this change produced (ledger.credit_seq); null on rows from before sequences. */
  creditSeq: number | null;
  /** The encoded log event kept with the row; null when there is none to append. */
  logEvent: string | null;
}

/**
 * Moves the Redis mirror and appends the log event. Throws on failure. A row with a log event stays
 * pending: an appended entry is not yet a log row (a Redis restart without persistence loses it
 * before the billing worker reads it), so the row is marked done by the billing worker in the
 * transaction that settles its event (billing/settle-batch.ts), and until then the follow-up appends
 * it again. settled_at records the last append, so a slow billing worker sees one repeat per
 * follow-up age, not one per pass; repeats collapse (unique request_id, ReplacingMergeTree log).
 */
export async function finishConsoleCredit(s: ConsoleCreditStores, c: PendingConsoleCredit): Promise<void> {
  await s.quota.adjustAccountOnce(c.userId, c.delta, c.ledgerId, c.creditSeq);
  if (c.logEvent === null) {
    await s.sql`UPDATE ledger SET follow_up_pending = false WHERE id = ${c.ledgerId}`;
    return;
  }
  await appendUsageEvent(s.redis, s.quota.usageStreamOf(c.userId), c.logEvent);
  await s.sql`UPDATE ledger SET settled_at = now() WHERE id = ${c.ledgerId} AND follow_up_pending`;
}

/** A key's remain_quota edit (key_quota_edits row) whose mirror step is pending. */
export interface PendingKeyQuotaEdit {
  editId: number;
  userId: number;
  tokenId: number;
  delta: number;
  /** tokens.quota_seq the edit produced. */
  quotaSeq: number;
}

/**
 * The after-commit step of a key quota edit (console-api/routes/token.ts), run again by the billing
 * worker for a row still pending: moves a loaded key mirror once, then marks the row done. Throws on
 * failure. There is no log event: a key's quota is a limit inside the account's, no money moves.
 */
export async function finishKeyQuotaEdit(s: Pick<ConsoleCreditStores, 'sql' | 'quota'>, e: PendingKeyQuotaEdit): Promise<void> {
  await s.quota.adjustTokenOnce(e.userId, e.tokenId, e.delta, e.editId, e.quotaSeq);
  await s.sql`UPDATE key_quota_edits SET follow_up_pending = false WHERE id = ${e.editId}`;
}
