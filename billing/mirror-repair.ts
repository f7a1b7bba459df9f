// Debits that a Redis restart took out of the balance mirrors before Postgres had them (issue 15,
// item 5). A Redis without persistence comes back empty while the worker holds a batch it read
// before: the relay refills each mirror it needs from Postgres, which lacks that batch, then the
// worker commits it. Postgres is right, and a mirror refilled before the commit is richer than it by
// the batch's debits, for good. So the worker learns which Redis data each entry's debit was made in
// (the random id at keys.redisIncarnation(), created with SET NX and lost with the data, read in the
// same MULTI as the entries; a dead letter keeps it in its `i` field), and after the commit, for the
// debits made in data other than the current one, moves each account's and limited key's mirror
// once (adjustAccountOnce-5.lua, adjustBalanceOnce-3.lua for a key) unless it was refilled from a Postgres state that holds them:
// settle-batch gives each debited balance a new users.credit_seq / tokens.quota_seq, and a refill
// records the one it read (seedBalance-2.lua). A mirror not loaded yet is left to its refill, which is
// made to read Postgres after this commit. Debits made in the current data are in its mirrors already.
import type { Logger } from '../infra/logger.js';
import type { QuotaStore } from '../core/quota/quota-store.js';
import { movesMoney } from '../core/usage/usage-event.js';
import type { SettledEvent } from './settle-batch.js';

/** The stream entry field naming the Redis data an entry's debit was made in (set on dead letters). */
export const INCARNATION_FIELD = 'i';

export interface LostDebit {
  userId: number;
  /** 0: the account's mirror; else this limited key's. */
  tokenId: number;
  debit: number;
  /** The first ledger id of these debits: names the repair, so a retry applies it once. */
  ledgerId: number;
  /** users.credit_seq (tokens.quota_seq) after the commit. */
  seq: number;
}

/**
 * The debits of `settled` (events whose debit a Redis restart took out of the mirrors), per mirror and
 * commit: a batch settled in parts (billing-worker.ts, when Postgres refused an event's values) gave a
 * mirror one seq per part, and a refill between two parts holds the first part's debits only.
 */
export function lostDebits(settled: readonly SettledEvent[]): LostDebit[] {
  const byMirror = new Map<string, LostDebit>();
  const add = (userId: number, tokenId: number, debit: number, ledgerId: number, seq: number) => {
    const key = `${userId}:${tokenId}:${seq}`;
    const d = byMirror.get(key);
    if (d === undefined) byMirror.set(key, { userId, tokenId, debit, ledgerId, seq });
    else {
      d.debit += debit;
      d.ledgerId = Math.min(d.ledgerId, ledgerId);
    }
  };
  for (const s of settled) {
    if (!s.applied || !movesMoney(s.event) || s.event.quota === 0) continue;
    if (s.accountSeq !== undefined) add(s.event.user_id, 0, s.event.quota, s.id, s.accountSeq);
    if (s.keySeq !== undefined) add(s.event.user_id, s.event.token_id, s.event.quota, s.id, s.keySeq);
  }
  return [...byMirror.values()];
}

/** Applies each once; returns those that failed (Redis away), for the caller to try again. */
export async function repairMirrors(quota: QuotaStore, debits: readonly LostDebit[], log: Logger): Promise<LostDebit[]> {
  const failed: LostDebit[] = [];
  for (const d of debits) {
    try {
      if (d.tokenId === 0) await quota.adjustAccountOnce(d.userId, -d.debit, d.ledgerId, d.seq);
      else await quota.debitTokenOnce(d.userId, d.tokenId, d.debit, d.ledgerId, d.seq);
    } catch (err) {
      log.error({ err, userId: d.userId, tokenId: d.tokenId, debit: d.debit }, 'balance mirror repair after a Redis restart failed; retrying');
      failed.push(d);
    }
  }
  if (debits.length > failed.length) log.warn({ repaired: debits.length - failed.length }, 'debits committed after a Redis restart were applied to the mirrors refilled before the commit');
  return failed;
}
