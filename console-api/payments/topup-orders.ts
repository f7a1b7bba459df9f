// Top-up orders (the `topups` table): creation of a pending order, and its completion by a provider's
// callback, which credits the account exactly once:
//   one transaction locks the order row (SELECT ... FOR UPDATE), checks provider and amount paid,
//   moves it `pending` (or `expired`) → `success` (UPDATE ... WHERE status IN ('pending', 'expired')),
//   and records the credit with the ledger request id `topup:<trade_no>` (UNIQUE). A repeated or
//   concurrent callback waits for the lock, then finds the order already `success` and credits nothing.
// An unpaid order becomes `expired` after a day (billing/console-row-pruning.ts); a provider may still
// confirm its payment later, so an expired order completes like a pending one.
import { randomBytes } from 'node:crypto';
import { LOG_TYPE } from '../../core/usage/usage-event.js';
import type { Sql } from '../../infra/postgres/client.js';
import type { ConsoleContext } from '../context.js';
import { ConsoleError } from '../http/errors.js';
import { afterConsoleCredit, recordConsoleCredit } from '../ledger/console-ledger.js';
import { centsOfDecimal } from './paid-amount.js';
import { quotaOf } from './pricing.js';

export type PaymentProvider = 'epay' | 'cardpay';

export interface TopupRow {
  id: number;
  user_id: number;
  amount: number;
  money: string | number;
  trade_no: string;
  payment_method: string;
  payment_provider: string;
  status: string;
  create_time: number;
  complete_time: number;
  provider_trade_no: string;
  /** Card orders: the currency the checkout session was created in (migration 024); null otherwise and before 024. */
  currency: string | null;
}

/** The contract's Top-up order: the row without the provider's reference and currency, `money` a number. */
export type TopupOrder = Omit<TopupRow, 'money' | 'provider_trade_no' | 'currency'> & { money: number };

export function toTopupOrder(r: TopupRow): TopupOrder {
  return {
    id: Number(r.id),
    user_id: Number(r.user_id),
    amount: Number(r.amount),
    money: Number(r.money),
    trade_no: r.trade_no,
    payment_method: r.payment_method,
    payment_provider: r.payment_provider,
    status: r.status,
    create_time: Number(r.create_time),
    complete_time: Number(r.complete_time),
  };
}

/** `USR<id>NO<16 hex>`: unique (the column is UNIQUE too) and says whose order it is, as new-api's. */
export function newTradeNo(userId: number): string {
  return `USR${userId}NO${randomBytes(8).toString('hex')}`;
}

const TRADE_NO = /^USR[0-9]{1,20}NO[0-9a-f]{16}$/;

/**
 * Whether a provider's callback names a trade number of newTradeNo's shape. A signed callback still
 * carries whatever the signer put in it (a boolean, an object, a NUL, megabytes): anything else is
 * no order of ours, and never reaches a query.
 */
export function isTradeNo(value: unknown): value is string {
  return typeof value === 'string' && TRADE_NO.test(value);
}

/**
 * Unpaid orders one account may open per PENDING_ORDER_WINDOW_SEC, both providers together. Each order
 * is a row (kept after it expires, see above), so without a cap one account could add millions a day.
 * Reusing an open order instead is not an option: epay and card checkout sessions are made for one
 * out_trade_no each, and a provider may refuse or mix up a second purchase under the same number.
 */
export const PENDING_ORDERS_PER_WINDOW = 10;
export const PENDING_ORDER_WINDOW_SEC = 3600;
/**
 * Orders one account may open per PENDING_ORDER_WINDOW_SEC that are not paid, those already ended
 * unpaid included (a checkout session the card provider failed to create, a payment it reports
 * failed: failPendingOrder). Those leave the pending cap, so that a provider outage does not lock the
 * account out once it is over; this bounds how often one account can make the console call a failing
 * provider and add a row meanwhile.
 */
export const OPENED_ORDERS_PER_WINDOW = 30;

/** A new pending order; RATE_LIMITED (429, with Retry-After) when the account has too many unpaid ones. */
export async function createPendingOrder(
  sql: Sql,
  o: { userId: number; amount: number; money: number; method: string; provider: PaymentProvider; now: number; currency?: string },
): Promise<TopupRow> {
  return sql.begin(async (tx) => {
    // The count and the insert of an account's parallel requests do not interleave: 15 at once open 10.
    await tx`SELECT pg_advisory_xact_lock(hashtext(${`topup-pending:${o.userId}`}))`;
    // topups_user_created (migration 025): only the account's orders of the window are read, however
    // many it made. An order expired within the hour of its opening was ended unpaid (a day makes the others expire).
    const [open] = await tx<{ pending: number; oldest_pending: string | null; opened: number; oldest: string | null }[]>`
      SELECT count(*) FILTER (WHERE status = 'pending')::int AS pending, min(create_time) FILTER (WHERE status = 'pending') AS oldest_pending,
             count(*)::int AS opened, min(create_time) AS oldest
      FROM topups
      WHERE user_id = ${o.userId} AND create_time > ${o.now - PENDING_ORDER_WINDOW_SEC} AND status IN ('pending', 'expired')`;
    // The oldest counted order leaves the window first (or is paid sooner).
    const retryAfter = (oldest: string | null): number => Math.max(1, Number(oldest) + PENDING_ORDER_WINDOW_SEC - o.now);
    if (open!.pending >= PENDING_ORDERS_PER_WINDOW) {
      const retryAfterSec = retryAfter(open!.oldest_pending);
      throw new ConsoleError('RATE_LIMITED',
        `too many unpaid top-up orders: at most ${PENDING_ORDERS_PER_WINDOW} may be opened per hour; pay one of them or retry in ${retryAfterSec} s`,
        { retryAfterSec });
    }
    if (open!.opened >= OPENED_ORDERS_PER_WINDOW) {
      const retryAfterSec = retryAfter(open!.oldest);
      throw new ConsoleError('RATE_LIMITED',
        `too many top-up orders not paid: at most ${OPENED_ORDERS_PER_WINDOW} may be opened per hour, failed ones included; retry in ${retryAfterSec} s`,
        { retryAfterSec });
    }
    const [row] = await tx<TopupRow[]>`
      INSERT INTO topups (user_id, amount, money, trade_no, payment_method, payment_provider, status, create_time, currency)
      VALUES (${o.userId}, ${o.amount}, ${o.money.toFixed(2)}, ${newTradeNo(o.userId)}, ${o.method}, ${o.provider},
              'pending', ${o.now}, ${o.currency ?? null})
      RETURNING *`;
    return row!;
  });
}

/**
 * Ends an unpaid order of `provider` whose payment the provider reports as failed (the card provider's
 * checkout.session.async_payment_failed): `pending` → `expired`, as an order left unpaid for a day, so
 * that it no longer counts toward PENDING_ORDERS_PER_WINDOW. Nothing is credited, and a paid or
 * already expired order is left as it is. `expired` (not a status of its own) keeps the contract's
 * statuses; should the provider confirm a payment for it after all, it completes once like any expired
 * order. True when an order was ended.
 */
export async function failPendingOrder(sql: Sql, tradeNo: string, provider: PaymentProvider): Promise<boolean> {
  const rows = await sql`
    UPDATE topups SET status = 'expired' WHERE trade_no = ${tradeNo} AND payment_provider = ${provider} AND status = 'pending'
    RETURNING id`;
  return rows.length > 0;
}

/** Statuses a confirmed payment completes: `expired` too (see the top of this file). */
export function isPayable(status: string): boolean {
  return status === 'pending' || status === 'expired';
}

export type CompletionOutcome =
  | { outcome: 'credited'; order: TopupOrder; quota: number }
  | { outcome: 'already'; order: TopupOrder }
  | { outcome: 'unknown' }
  | { outcome: 'mismatch'; reason: string };

export interface PaymentConfirmation {
  tradeNo: string;
  provider: PaymentProvider;
  /**
   * What the provider says was paid, in cents exactly (paid-amount.ts); null when it stated no such
   * amount (a fraction of a cent, not a plain number), which matches no order.
   */
  paidCents: bigint | null;
  /** That amount as the provider stated it, for the log of a mismatch. */
  paidText: string;
  /** The provider's own reference (epay trade_no, card session id). */
  providerRef: string;
}

/**
 * The root user who completed an order by hand (POST /api/user/topup/complete records
 * `manual:<root id>` as the provider's reference), or undefined for a provider's confirmation.
 */
export function manualCompletionBy(providerRef: string): number | undefined {
  const m = /^manual:([0-9]{1,20})$/.exec(providerRef);
  return m ? Number(m[1]) : undefined;
}

export async function completeOrder(ctx: ConsoleContext, p: PaymentConfirmation): Promise<CompletionOutcome> {
  const now = ctx.now();
  const result = await ctx.sql.begin(async (tx) => {
    const [order] = await tx<TopupRow[]>`SELECT * FROM topups WHERE trade_no = ${p.tradeNo} FOR UPDATE`;
    if (!order || order.payment_provider !== p.provider) return { outcome: 'unknown' as const };
    if (order.status === 'success') return { outcome: 'already' as const, order: toTopupOrder(order) };
    // Expired only means nobody paid within a day; a payment the provider confirms later still counts.
    if (!isPayable(order.status)) return { outcome: 'mismatch' as const, reason: `order is ${order.status}` };
    if (p.paidCents === null || p.paidCents !== centsOfDecimal(String(order.money))) {
      return { outcome: 'mismatch' as const, reason: `paid ${JSON.stringify(p.paidText.slice(0, 40))}, order is ${Number(order.money).toFixed(2)}` };
    }
    const [done] = await tx<TopupRow[]>`
      UPDATE topups SET status = 'success', complete_time = ${now}, provider_trade_no = ${p.providerRef}
      WHERE trade_no = ${p.tradeNo} AND status IN ('pending', 'expired')
      RETURNING *`;
    if (!done) return { outcome: 'already' as const, order: toTopupOrder(order) };
    const quota = quotaOf(Number(done.amount));
    const manualBy = manualCompletionBy(p.providerRef);
    const credit = await recordConsoleCredit(tx, {
      requestId: `topup:${done.trade_no}`,
      type: LOG_TYPE.topup,
      userId: Number(done.user_id),
      delta: quota,
      // A hand completion says so (new-api: "管理员补单成功"): no provider confirmed this payment. The
      // account's own log names no administrator (as a balance change's); who did it is in the
      // console's log (below).
      content: manualBy !== undefined
        ? `An administrator completed a top-up of ${done.amount} (${quota} quota) by hand, ` +
          `without a payment confirmation from ${done.payment_provider}; order ${done.trade_no} of ${Number(done.money).toFixed(2)} via ${done.payment_method}`
        : `online top-up of ${done.amount} (${quota} quota), paid ${Number(done.money).toFixed(2)} via ${done.payment_method} (${done.payment_provider}), order ${done.trade_no}`,
      createdAt: now,
    });
    if (!credit) return { outcome: 'already' as const, order: toTopupOrder(done) };
    return { outcome: 'credited' as const, order: toTopupOrder(done), quota, credit };
  });
  if (result.outcome === 'credited') {
    const manualBy = manualCompletionBy(p.providerRef);
    if (manualBy !== undefined) {
      // The audit line operators read (the account's log row names no administrator).
      ctx.logger.info({ accountId: result.credit.userId, by: manualBy, tradeNo: result.order.trade_no, delta: result.credit.delta, ledgerId: result.credit.ledgerId },
        'top-up completed by hand by an administrator');
    }
    await afterConsoleCredit(ctx, result.credit);
    return { outcome: 'credited', order: result.order, quota: result.quota };
  }
  return result;
}
