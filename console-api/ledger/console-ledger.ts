// Money the console moves: top-ups (payments, redemption codes; log type 1) and administrator
// adjustments (log type 3). One module for all of them, so each follows the same order:
//
//   1. inside the caller's Postgres transaction, `recordConsoleCredit` changes users.quota and inserts
//      the ledger row. ledger.request_id is UNIQUE (`topup:<trade_no>`, `redeem:<code id>`,
//      `manage:<uuid>`): a second attempt to record the same event inserts nothing, changes no
//      balance, and the caller learns it was a repeat. This is what makes crediting exactly-once;
//   2. after COMMIT, `afterConsoleCredit` moves the relay's Redis mirror of the balance by the same
//      delta (a no-op when the mirror is not loaded: it is seeded from Postgres, which has the change),
//      appends the log event (billing/usage-event.ts, type 1 or 3) to the usage stream, and publishes
//      `{kind: 'user', id}`. The billing worker writes the ClickHouse log row with the ledger id as log
//      id and, for these types, moves no money (billing/usage-event.ts movesMoney).
//
// If step 2 fails after the commit, the money is still right (Postgres is the book of record and the
// mirror is re-seeded from it); the failure is logged with the event so the log row can be replayed.
import { randomUUID } from 'node:crypto';
import { encodeUsageEvent, LOG_TYPE, type UsageEvent } from '../../billing/usage-event.js';
import type { ConsoleContext } from '../context.js';
import type { Db } from '../db.js';

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
}

export interface RecordedCredit extends ConsoleCredit {
  ledgerId: number;
  username: string;
  group: string;
  /** users.quota after the change. */
  balance: number;
}

export function manageRequestId(): string {
  return `manage:${randomUUID()}`;
}

/**
 * Inside a transaction: inserts the ledger row and applies the delta to users.quota. Returns undefined
 * (and changes nothing) when a ledger row with this request id already exists.
 */
export async function recordConsoleCredit(tx: Db, credit: ConsoleCredit): Promise<RecordedCredit | undefined> {
  const [row] = await tx<{ id: number }[]>`
    INSERT INTO ledger (request_id, type, user_id, quota, quota_delta, created_at)
    VALUES (${credit.requestId}, ${credit.type}, ${credit.userId}, ${Math.abs(credit.delta)}, ${credit.delta}, ${credit.createdAt})
    ON CONFLICT (request_id) DO NOTHING
    RETURNING id`;
  if (!row) return undefined;
  const [user] = await tx<{ username: string; group: string; quota: number }[]>`
    UPDATE users SET quota = quota + ${credit.delta} WHERE id = ${credit.userId}
    RETURNING username, "group", quota`;
  if (!user) throw new Error(`recordConsoleCredit: no account ${credit.userId}`);
  return { ...credit, ledgerId: Number(row.id), username: user.username, group: user.group, balance: Number(user.quota) };
}

export function consoleUsageEvent(c: RecordedCredit): UsageEvent {
  return {
    v: 1,
    type: c.type,
    request_id: c.requestId,
    upstream_request_id: '',
    user_id: c.userId,
    quota_delta: c.delta,
    username: c.username,
    token_id: 0,
    token_name: '',
    token_limited: false,
    channel: 0,
    model_name: '',
    group: c.group,
    quota: Math.abs(c.delta),
    prompt_tokens: 0,
    completion_tokens: 0,
    is_stream: false,
    use_time_ms: 0,
    created_at: c.createdAt,
    content: c.content,
  };
}

/** After COMMIT: Redis mirror, log event, invalidation. Never throws (failures are logged). */
export async function afterConsoleCredit(ctx: ConsoleContext, c: RecordedCredit): Promise<void> {
  try {
    await ctx.quotaStore.adjustAccount(c.userId, c.delta);
  } catch (err) {
    ctx.logger.error({ err, userId: c.userId, delta: c.delta }, 'quota changed in Postgres but the Redis mirror was not adjusted');
  }
  const event = consoleUsageEvent(c);
  try {
    await ctx.redis.xadd(ctx.keys.usageStream(), '*', 'e', encodeUsageEvent(event));
  } catch (err) {
    ctx.logger.error({ err, event }, 'console ledger event not appended to the usage stream; its log row is missing');
  }
  await ctx.invalidate({ kind: 'user', id: c.userId });
}
