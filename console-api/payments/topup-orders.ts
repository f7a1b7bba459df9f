// Top-up orders (the `topups` table): creation of a pending order, and its completion by a provider's
// callback, which credits the account exactly once:
//   one transaction locks the order row (SELECT ... FOR UPDATE), checks provider and amount paid,
//   moves it `pending` → `success` (UPDATE ... WHERE status = 'pending'), and records the credit with
//   the ledger request id `topup:<trade_no>` (UNIQUE). A repeated or concurrent callback waits for the
//   lock, then finds the order already `success` and credits nothing.
import { randomBytes } from 'node:crypto';
import { LOG_TYPE } from '../../core/usage/usage-event.js';
import type { ConsoleContext } from '../context.js';
import type { Db } from '../db.js';
import { afterConsoleCredit, recordConsoleCredit } from '../ledger/console-ledger.js';
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
}

/** The contract's Top-up order: the row without the provider's reference, `money` a number. */
export type TopupOrder = Omit<TopupRow, 'money' | 'provider_trade_no'> & { money: number };

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

export async function createPendingOrder(
  db: Db,
  o: { userId: number; amount: number; money: number; method: string; provider: PaymentProvider; now: number },
): Promise<TopupRow> {
  const [row] = await db<TopupRow[]>`
    INSERT INTO topups (user_id, amount, money, trade_no, payment_method, payment_provider, status, create_time)
    VALUES (${o.userId}, ${o.amount}, ${o.money.toFixed(2)}, ${newTradeNo(o.userId)}, ${o.method}, ${o.provider},
            'pending', ${o.now})
    RETURNING *`;
  return row!;
}

export type CompletionOutcome =
  | { outcome: 'credited'; order: TopupOrder; quota: number }
  | { outcome: 'already'; order: TopupOrder }
  | { outcome: 'unknown' }
  | { outcome: 'mismatch'; reason: string };

export interface PaymentConfirmation {
  tradeNo: string;
  provider: PaymentProvider;
  /** What the provider says was paid, in major units. */
  paidMoney: number;
  /** The provider's own reference (epay trade_no, card session id). */
  providerRef: string;
}

export async function completeOrder(ctx: ConsoleContext, p: PaymentConfirmation): Promise<CompletionOutcome> {
  const now = ctx.now();
  const result = await ctx.sql.begin(async (tx) => {
    const [order] = await tx<TopupRow[]>`SELECT * FROM topups WHERE trade_no = ${p.tradeNo} FOR UPDATE`;
    if (!order || order.payment_provider !== p.provider) return { outcome: 'unknown' as const };
    if (order.status === 'success') return { outcome: 'already' as const, order: toTopupOrder(order) };
    if (order.status !== 'pending') return { outcome: 'mismatch' as const, reason: `order is ${order.status}` };
    if (Math.round(Number(order.money) * 100) !== Math.round(p.paidMoney * 100)) {
      return { outcome: 'mismatch' as const, reason: `paid ${p.paidMoney.toFixed(2)}, order is ${Number(order.money).toFixed(2)}` };
    }
    const [done] = await tx<TopupRow[]>`
      UPDATE topups SET status = 'success', complete_time = ${now}, provider_trade_no = ${p.providerRef}
      WHERE trade_no = ${p.tradeNo} AND status = 'pending'
      RETURNING *`;
    if (!done) return { outcome: 'already' as const, order: toTopupOrder(order) };
    const quota = quotaOf(Number(done.amount));
    const credit = await recordConsoleCredit(tx, {
      requestId: `topup:${done.trade_no}`,
      type: LOG_TYPE.topup,
      userId: Number(done.user_id),
      delta: quota,
      content: `online top-up of ${done.amount} (${quota} quota), paid ${Number(done.money).toFixed(2)} via ${done.payment_method} (${done.payment_provider}), order ${done.trade_no}`,
      createdAt: now,
    });
    if (!credit) return { outcome: 'already' as const, order: toTopupOrder(done) };
    return { outcome: 'credited' as const, order: toTopupOrder(done), quota, credit };
  });
  if (result.outcome === 'credited') {
    await afterConsoleCredit(ctx, result.credit);
    return { outcome: 'credited', order: result.order, quota: result.quota };
  }
  return result;
}
