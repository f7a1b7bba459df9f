// Money the console moves: top-ups (payments, redemption codes; log type 1) and administrator
// adjustments (log type 3). One module for all of them, so each follows the same order:
//
//   1. inside the caller's Postgres transaction, `recordConsoleCredit` changes users.quota and inserts
//      the ledger row. ledger.request_id is UNIQUE (`topup:<trade_no>`, `redeem:<code id>`,
//      `manage:<uuid>`): a second attempt to record the same event inserts nothing, changes no
//      balance, and the caller learns it was a repeat. This is what makes crediting exactly-once;
//   2. after COMMIT, `afterConsoleCredit` moves the relay's Redis mirror of the balance by the same
//      delta (a no-op when the mirror is not loaded: it is seeded from Postgres, which has the change),
//      appends the log event (core/usage/usage-event.ts, type 1 or 3) to the usage stream, and publishes
//      `{kind: 'user', id}`. The billing worker writes the ClickHouse log row with the ledger id as log
//      id and, for these types, moves no money (core/usage/usage-event.ts movesMoney).
//
// The ledger row is written `follow_up_pending` with its encoded log event; the billing worker clears it
// when it settles that event (an appended entry can still be lost with Redis). If step 2
// fails after the commit, the billing worker finishes it later (billing/console-follow-up.ts) with the
// same code (core/ledger/console-credit-follow-up.ts): the mirror update is applied once per ledger id
// (adjustAccountOnce-5.lua) and the log row collapses. The change increments users.credit_seq and keeps
// the value on the ledger row: a mirror seeded from Postgres after the commit already holds the change,
// and knows it by the sequence it was seeded with, so neither step adds it again.
//
// An administrator's debit (add_quota below zero, PUT /api/user/ lowering the balance) goes through
// `debitTransaction`: inside its transaction, after `assertDebitCovered` and `recordConsoleCredit`,
// `DebitHolds.take` takes a *console debit hold* of the amount from the mirror (holdConsoleDebit-4.lua,
// request id `console-debit:<ledger id>`), atomically against every reservation and credit slice, so
// that no request reserves in the window between the check and the mirror step; refused, the
// transaction rolls back. Step 2 then consumes the hold instead of moving the mirror
// (adjustAccountOnce-5.lua). A transaction that fails before its COMMIT releases the hold at once; one
// whose COMMIT's outcome is unknown leaves it to the mirror step of the billing follow-up (committed)
// or to the reaper at its deadline (not committed, or the follow-up came later): whichever runs
// first, the debit is in the mirror once (docs/billing.md, "Console debit holds").
import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { finishConsoleCredit } from '../../core/ledger/console-credit-follow-up.js';
import { encodeUsageEvent, LOG_TYPE, type UsageEvent, usageEvent } from '../../core/usage/usage-event.js';
import type { ConsoleContext } from '../context.js';
import type { Db } from '../db.js';
import { ConsoleError } from '../http/errors.js';

export type ConsoleLogType = typeof LOG_TYPE.topup | typeof LOG_TYPE.manage;

export interface ConsoleCredit {
  /** Unique per event: `topup:<trade_no>`, `redeem:<code id>`, `manage:<uuid>`. */
  requestId: string;
  type: ConsoleLogType;
  userId: number;
  /** Signed change of users.quota (a top-up is positive). */
  delta: number;
  /** Human-readable description, shown as the log entry's content. */
  content: string;
  /** Unix seconds. */
  createdAt: number;
  /**
   * Signed change of users.aff_quota (referral quota, console-api/referrals/): an inviter's reward is
   * positive (aff_history_quota rises with it), a transfer to the balance negative. Default 0.
   */
  affDelta?: number;
}

export interface RecordedCredit extends ConsoleCredit {
  ledgerId: number;
  username: string;
  group: string;
  /** users.quota after the change. */
  balance: number;
  /** users.credit_seq after the change, kept on the ledger row. */
  creditSeq: number;
}

/** The most quota (or referral quota) an account holds: Number.MAX_SAFE_INTEGER, about 18 billion US dollars. */
export const MAX_BALANCE = Number.MAX_SAFE_INTEGER;

export function manageRequestId(): string {
  return `manage:${randomUUID()}`;
}

/**
 * Inside a transaction: inserts the ledger row and applies the delta to users.quota. Returns undefined
 * (and changes nothing) when a ledger row with this request id already exists.
 */
export async function recordConsoleCredit(tx: Db, credit: ConsoleCredit): Promise<RecordedCredit | undefined> {
  const affDelta = credit.affDelta ?? 0;
  const [row] = await tx<{ id: number }[]>`
    INSERT INTO ledger (request_id, type, user_id, quota, quota_delta, aff_quota_delta, created_at, follow_up_pending)
    VALUES (${credit.requestId}, ${credit.type}, ${credit.userId}, ${Math.abs(credit.delta)}, ${credit.delta}, ${affDelta}, ${credit.createdAt}, true)
    ON CONFLICT (request_id) DO NOTHING
    RETURNING id`;
  if (!row) return undefined;
  // What this transaction wrote, for debitTransaction to look for should its COMMIT go unanswered.
  const written = WRITTEN.get(tx);
  if (written) written.push({ requestId: credit.requestId, userId: credit.userId });
  else WRITTEN.set(tx, [{ requestId: credit.requestId, userId: credit.userId }]);
  // A balance stays a whole number JavaScript holds exactly (and far inside BIGINT): past it, credits
  // repeated by an administrator would make every figure read from it inexact, then fail Postgres.
  const [user] = await tx<{ username: string; group: string; quota: number; credit_seq: string | number }[]>`
    UPDATE users SET quota = quota + ${credit.delta}, credit_seq = credit_seq + 1,
      aff_quota = aff_quota + ${affDelta}, aff_history_quota = aff_history_quota + ${Math.max(affDelta, 0)}
    WHERE id = ${credit.userId} AND quota + ${credit.delta} <= ${MAX_BALANCE}
      AND aff_history_quota + ${Math.max(affDelta, 0)} <= ${MAX_BALANCE}
    RETURNING username, "group", quota, credit_seq`;
  if (!user) {
    const [exists] = await tx`SELECT 1 FROM users WHERE id = ${credit.userId}`;
    if (!exists) throw new Error(`recordConsoleCredit: no account ${credit.userId}`);
    throw new ConsoleError('VALIDATION_FAILED', `the balance would exceed ${MAX_BALANCE} quota, the most an account holds`);
  }
  const recorded = { ...credit, ledgerId: Number(row.id), username: user.username, group: user.group, balance: Number(user.quota), creditSeq: Number(user.credit_seq) };
  // Kept with the row until the follow-up is done, so that the billing worker can replay it.
  await tx`UPDATE ledger SET log_event = ${encodeUsageEvent(consoleUsageEvent(recorded))}, credit_seq = ${recorded.creditSeq} WHERE id = ${row.id}`;
  return recorded;
}

/**
 * Inside the transaction, after the account row is locked: refuses a debit that would take the
 * spendable balance below zero. Spendable is the relay's mirror, which already has open reservations
 * and settled-but-unbilled debits taken off (Postgres alone would let the debit spend them again),
 * less the committed console debits that have not reached it yet (a committed debit whose hold is
 * still there counts as in the mirror, which it is; otherwise it reaches the mirror only through the
 * billing worker's follow-up 30 s later: two debits in that window both passed a check of
 * min(mirror, Postgres), each against what the other had spent); the lower of that and Postgres,
 * Postgres alone when the mirror is not loaded. This check reads: it is not atomic with anything. The
 * debit's hold (DebitHolds.take, after recordConsoleCredit) is what makes it stick against the
 * reservations made meanwhile: it takes the amount from the mirror in one Lua call, or refuses.
 * Counted once either way: the mirror, the markers and the holds are read in one MULTI, so a pending
 * debit is seen either as its hold (in the mirror) or as consumed (marker set). Conservative, never
 * short: the hold of a transaction that did not commit (its console died, or lost the COMMIT's answer)
 * stays off the mirror until the reaper gives it back (DEBIT_HOLD_MS), and a debit an older billing
 * worker applied while its hold was there is off twice until then (docs/billing.md, rolling upgrade).
 */
export async function assertDebitCovered(ctx: Pick<ConsoleContext, 'quotaStore'>, tx: Db, field: string, userId: number, pgQuota: number, delta: number): Promise<void> {
  if (delta >= 0) return;
  const spendable = await spendableBalance(ctx, tx, userId, pgQuota);
  if (spendable + delta < 0) throw debitRefused(field, spendable, pgQuota);
}

/** What a debit may take now: the spendable balance assertDebitCovered checks against (same transaction, after the row lock). */
export async function spendableBalance(ctx: Pick<ConsoleContext, 'quotaStore'>, tx: Db, userId: number, pgQuota: number): Promise<number> {
  const pending = await tx<{ id: number; credit_seq: number | null; quota_delta: number }[]>`
    SELECT id, credit_seq, quota_delta FROM ledger WHERE user_id = ${userId} AND follow_up_pending AND quota_delta < 0`;
  const mirror = await ctx.quotaStore.accountSpendable(userId, pending.map((r) => ({
    ledgerId: Number(r.id), creditSeq: r.credit_seq === null ? null : Number(r.credit_seq), delta: Number(r.quota_delta),
  })));
  return mirror === null ? pgQuota : Math.min(mirror, pgQuota);
}

/** The refusals of debitRefused (the check's and a hold's): an emptying retries on them (routes/user.ts). */
const DEBIT_REFUSALS = new WeakSet<ConsoleError>();

export function isDebitRefusal(err: unknown): boolean {
  return err instanceof ConsoleError && DEBIT_REFUSALS.has(err);
}

export function debitRefused(field: string, spendable: number, pgQuota: number): ConsoleError {
  // What holds the difference, so that an administrator zeroing an account knows a retry in a few
  // seconds may pass: a relay returns an idle credit slice within a second or two (credit-slices.ts).
  const held = pgQuota - spendable > 0
    ? `; ${pgQuota - spendable} of it is held by requests in flight, debits not yet billed, or credit a relay holds for the account's next requests (returned within seconds once idle; a stopped relay's, once its hold ends: RESERVATION_TTL_SEC after the reaper took it)`
    : '';
  const refusal = new ConsoleError('VALIDATION_FAILED', `${field}: would make the balance negative (spendable ${spendable}, Postgres ${pgQuota})${held}`);
  DEBIT_REFUSALS.add(refusal);
  return refusal;
}

/**
 * How long a console debit hold lives before the billing worker's reaper gives it back (dated on the
 * console's quota store clock, read by the reaper on Redis's: a few seconds of host clock skew do not
 * matter at this length). It matters only when the console died, or lost its COMMIT's answer, between
 * the hold and its mirror step: a committed debit's hold is consumed by the billing follow-up (30 s),
 * an uncommitted one keeps the amount from the account until then.
 */
export const DEBIT_HOLD_MS = 5 * 60_000;

type Tx = postgres.TransactionSql<Record<string, never>>;

/** The console debit holds one transaction took (debitTransaction). */
export class DebitHolds {
  readonly #ctx: Pick<ConsoleContext, 'quotaStore' | 'logger'>;
  readonly #taken: { userId: number; ledgerId: number }[] = [];

  constructor(ctx: Pick<ConsoleContext, 'quotaStore' | 'logger'>) {
    this.#ctx = ctx;
  }

  /**
   * Inside the transaction, after recordConsoleCredit: takes a debit's amount from the account's mirror
   * (a hold, request id `console-debit:<ledger id>`), atomically against every reservation; refused
   * with assertDebitCovered's error when the mirror has less (the transaction rolls back, nothing is
   * held). An unloaded mirror is seeded from Postgres first (its committed state, without this debit).
   * A credit (delta >= 0) takes nothing.
   */
  async take(credit: RecordedCredit, field: string): Promise<void> {
    if (credit.delta >= 0) return;
    const quota = this.#ctx.quotaStore;
    // Recorded before the call: a call whose answer is lost may have held, and the release of a hold
    // that is not there is a no-op.
    this.#taken.push({ userId: credit.userId, ledgerId: credit.ledgerId });
    // The committed state, the transaction holding the row: before this change (the only one it made).
    const pgQuota = credit.balance - credit.delta;
    const outcome = await quota.holdConsoleDebit(credit.userId, credit.ledgerId, -credit.delta, Math.floor(quota.clock.now()) + DEBIT_HOLD_MS,
      { quota: pgQuota, creditSeq: credit.creditSeq - 1 });
    if (outcome === 'held') return;
    const mirror = await quota.accountBalance(credit.userId);
    throw debitRefused(field, Math.min(mirror ?? pgQuota, pgQuota), pgQuota);
  }

  /**
   * The transaction failed. Before its COMMIT (`committing` false), or at a COMMIT Postgres answered
   * with an error, nothing committed: each hold goes back now, once (releaseDebitHold-4.lua), with no
   * log row. A COMMIT without an answer (the connection lost) may have committed: the holds stay, for
   * the billing follow-up to consume (it finds the pending ledger row) or the reaper to give back at
   * their deadline. Releasing them would be exactly-once too (the follow-up then finds no hold and
   * applies the debit), but would reopen, until the follow-up, the window the hold closes. A failed
   * release is left to the reaper. Never throws.
   */
  async afterFailure(err: unknown, committing: boolean): Promise<void> {
    if (this.#taken.length === 0) return;
    if (committing && !(err instanceof postgres.PostgresError)) {
      this.#ctx.logger.warn({ err, holds: this.#taken }, 'console debit: COMMIT outcome unknown; its holds are left to the billing follow-up or the reaper');
      return;
    }
    for (const h of this.#taken.splice(0)) {
      try {
        await this.#ctx.quotaStore.releaseConsoleDebit(h.userId, h.ledgerId);
      } catch (releaseErr) {
        this.#ctx.logger.error({ err: releaseErr, ...h }, 'console debit rolled back; its hold is left to the reaper');
      }
    }
  }
}

/**
 * `sql.begin(body)` for a transaction that may debit an account: `body` takes a hold for each debit it
 * records (holds.take), and the holds of a transaction that did not commit are released
 * (DebitHolds.afterFailure). After it resolves the caller runs afterConsoleCredit, which consumes them.
 */
export async function debitTransaction<T>(ctx: Pick<ConsoleContext, 'sql' | 'quotaStore' | 'logger'>, body: (tx: Tx, holds: DebitHolds) => Promise<T>): Promise<T> {
  const holds = new DebitHolds(ctx);
  let committing = false;
  let result: T | undefined;
  let written: readonly LedgerWrite[] = [];
  try {
    return await ctx.sql.begin(async (tx) => {
      result = await body(tx, holds);
      written = WRITTEN.get(tx) ?? [];
      committing = true;
      return result;
    }) as T;
  } catch (err) {
    // A COMMIT without an answer (the connection lost) may have committed. Answered "unreachable,
    // retry shortly", an administrator's add_quota credited twice on the retry, and a redemption was
    // both failed and spent (review faults): what it wrote is looked for first.
    if (committing && !(err instanceof postgres.PostgresError) && written.length > 0) {
      const outcome = await commitOutcome(ctx.sql, written);
      if (outcome === 'committed') {
        ctx.logger.warn({ err, request_ids: written.map((w) => w.requestId) }, 'console write: COMMIT answer lost, its rows are there: answered as done');
        return result as T;
      }
      if (outcome === 'rolled back') {
        await holds.afterFailure(err, false);
        throw err;
      }
      await holds.afterFailure(err, true);
      ctx.logger.error({ err, request_ids: written.map((w) => w.requestId) }, 'console write: COMMIT outcome unknown');
      throw new ConsoleError('COMMIT_OUTCOME_UNKNOWN');
    }
    await holds.afterFailure(err, committing);
    throw err;
  }
}

/**
 * `sql.begin(body)` for a transaction that records console credits and no debit (a redemption, a
 * referral transfer): as debitTransaction, a COMMIT whose answer was lost is settled by looking for
 * what it wrote, so that a credit made is never answered "retry".
 */
export function creditTransaction<T>(ctx: Pick<ConsoleContext, 'sql' | 'quotaStore' | 'logger'>, body: (tx: Tx) => Promise<T>): Promise<T> {
  return debitTransaction(ctx, (tx) => body(tx));
}

/** A ledger row a transaction wrote: looked for when its COMMIT went unanswered. */
interface LedgerWrite { requestId: string; userId: number }
/** The ledger rows each open transaction wrote (recordConsoleCredit), by its transaction. */
const WRITTEN = new WeakMap<object, LedgerWrite[]>();

/**
 * Whether a transaction whose COMMIT went unanswered committed its ledger rows, read on a new
 * connection once the accounts' rows are free: the lost transaction held them (recordConsoleCredit
 * updates each account), so a COMMIT Postgres received has finished by then, and one it did not has
 * been rolled back with the connection. 'unknown' when that cannot be read (the database still out
 * of reach), or when only some rows are there (never, for one transaction).
 */
async function commitOutcome(sql: ConsoleContext['sql'], written: readonly LedgerWrite[]): Promise<'committed' | 'rolled back' | 'unknown'> {
  let timer: NodeJS.Timeout | undefined;
  // Bounded: a database that accepts connections and resets them (a proxy before a dead server)
  // left a transaction's BEGIN unanswered for as long as that lasted.
  const late = new Promise<'unknown'>((resolve) => { timer = setTimeout(() => resolve('unknown'), COMMIT_OUTCOME_WAIT_MS); });
  try {
    return await Promise.race([late, readCommitOutcome(sql, written)]);
  } finally {
    clearTimeout(timer);
  }
}

/** The longest a lost COMMIT's outcome is waited for: past it, the answer says it is unknown. */
const COMMIT_OUTCOME_WAIT_MS = 5000;

async function readCommitOutcome(sql: ConsoleContext['sql'], written: readonly LedgerWrite[]): Promise<'committed' | 'rolled back' | 'unknown'> {
  try {
    return await sql.begin(async (tx) => {
      const users = [...new Set(written.map((w) => w.userId))];
      await tx`SELECT 1 FROM users WHERE id IN ${tx(users)} ORDER BY id FOR UPDATE`;
      const [found] = await tx<{ n: number }[]>`SELECT count(*)::int AS n FROM ledger WHERE request_id IN ${tx(written.map((w) => w.requestId))}`;
      const n = Number(found!.n);
      return n === written.length ? 'committed' : n === 0 ? 'rolled back' : 'unknown';
    });
  } catch {
    return 'unknown';
  }
}

export function consoleUsageEvent(c: RecordedCredit): UsageEvent {
  return usageEvent({
    type: c.type,
    request_id: c.requestId,
    user_id: c.userId,
    quota_delta: c.delta,
    username: c.username,
    // A group is what a request was priced and routed by: a top-up, a management or a referral row has
    // none, as its protocol is none (core/usage/log-rows.ts). With the account's, `?group=default`
    // counted an administrator's add_quota among the requests of the group.
    group: '',
    // A referral reward moves aff_quota only: its log row shows that amount (the content says where).
    quota: Math.abs(c.delta) || Math.abs(c.affDelta ?? 0),
    created_at: c.createdAt,
    content: c.content,
  });
}

/**
 * After COMMIT: Redis mirror, log event, invalidation; the billing worker marks the row done. Never
 * throws: what fails here stays pending, and the billing worker's follow-up finishes it
 * (billing/console-follow-up.ts); both steps are idempotent, so doing them twice is harmless.
 */
export async function afterConsoleCredit(ctx: ConsoleContext, c: RecordedCredit): Promise<void> {
  try {
    const stores = { sql: ctx.sql, redis: ctx.redis, quota: ctx.quotaStore, usageStream: ctx.keys.usageStream() };
    await finishConsoleCredit(stores, {
      ledgerId: c.ledgerId, userId: c.userId, delta: c.delta, creditSeq: c.creditSeq, logEvent: encodeUsageEvent(consoleUsageEvent(c)),
    });
  } catch (err) {
    ctx.logger.error({ err, ledgerId: c.ledgerId }, 'console credit committed; its mirror update or log event is left to the billing follow-up');
  }
  await ctx.invalidate({ kind: 'user', id: c.userId });
}
