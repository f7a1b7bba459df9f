// Top-up: the configuration, redemption codes, the own orders, and online payment through the QR-code
// provider (epay) and the card provider (cardpay), with their callbacks. Crediting is exactly-once:
// see payments/topup-orders.ts (orders) and the redemption handler below (codes).
import { z } from 'zod';
import { LOG_TYPE } from '../../core/usage/usage-event.js';
import { createRedemptionCodeCrypto } from '../../infra/secrets/redemption-code-crypto.js';
import type { UserRow } from '../accounts/account-view.js';
import { ACCOUNT_STATUS, ROLE } from '../accounts/roles.js';
import type { Db } from '../db.js';
import type { ConsoleContext } from '../context.js';
import type { Api } from '../http/api.js';
import { ok } from '../http/envelope.js';
import { ConsoleError } from '../http/errors.js';
import { epayPayDataSchema, pageOf, topupInfoSchema, topupOrderSchema } from '../http/schemas.js';
import { assertSafeInput, containsPattern, pageQuery, paging, queryInt, queryString } from '../http/validation.js';
import { afterConsoleCredit, creditTransaction, recordConsoleCredit } from '../ledger/console-ledger.js';
import { CARDPAY_EVENT, type CardpayEvent, cardpayVerify, createCheckoutSession, minorUnitsOf, priceDecimalsOf } from '../payments/cardpay.js';
import { EPAY_TRADE_SUCCESS, epayPurchase, epayVerify } from '../payments/epay.js';
import { centsOfDecimal, centsOfMinorUnits } from '../payments/paid-amount.js';
import { isPayableMoney, MAX_ORDER_MONEY, MAX_TOPUP_AMOUNT, priceOf, quotaOf } from '../payments/pricing.js';
import { completeOrder, createPendingOrder, failPendingOrder, isPayable, isTradeNo, OPENED_ORDERS_PER_WINDOW, PENDING_ORDERS_PER_WINDOW, type PaymentProvider, type TopupRow, toTopupOrder } from '../payments/topup-orders.js';
import { loadTopupSettings, methodMinimum, type TopupSettings, topupInfo } from '../payments/topup-settings.js';

/** Units of 1 US dollar; at most MAX_TOPUP_AMOUNT, which the unit price bounds are computed from. */
const amount = z
  .number({ error: 'must be an integer' })
  .int({ error: 'must be an integer' })
  .positive({ error: 'must be a positive integer' })
  .max(MAX_TOPUP_AMOUNT, { error: `must be at most ${MAX_TOPUP_AMOUNT}` });

export const redeemBody = z.object({
  key: z.string({ error: 'must be a string' }).trim().min(1, { error: 'is required' }).max(64, { error: 'must be at most 64 characters' }),
});
export const amountBody = z.object({ amount });
export const payBody = z.object({
  amount,
  payment_method: z.string({ error: 'must be a string' }).min(1, { error: 'is required' }).max(32, { error: 'must be at most 32 characters' }),
});
export const topupSelfQuery = pageQuery.extend({ keyword: queryString(64) });
export const topupAllQuery = topupSelfQuery.extend({
  user_id: queryInt({ min: 1 }),
  status: z.enum(['pending', 'success', 'expired'], { error: 'must be pending, success or expired' }).optional(),
});
export const completeTopupBody = z.object({
  trade_no: z.string({ error: 'must be a string' }).trim().min(1, { error: 'is required' }).max(64, { error: 'must be at most 64 characters' }),
});

/**
 * Redeeming a code is its creator crediting the redeemer, so the role rules of a quota edit apply: an
 * administrator (10) may not credit itself or another administrator; the super administrator may
 * credit anyone, itself included. Ordinary accounts redeem any code but their own, of a creator who
 * may still credit: an administrator demoted, banned or deleted (for abuse, say) could otherwise cash
 * the codes it wrote as one, itself or through a second account. Throwing rolls back the claim: the
 * code stays usable.
 */
async function assertCreatorMayCredit(tx: Db, creatorId: number, redeemer: UserRow): Promise<void> {
  if (redeemer.role >= ROLE.root) return;
  if (Number(creatorId) === Number(redeemer.id)) throw new ConsoleError('INSUFFICIENT_ROLE', 'an account cannot redeem a code of its own (it would be a quota edit on itself)');
  const [creator] = await tx<{ role: number; status: number; deleted: boolean }[]>`
    SELECT role, status, deleted_at IS NOT NULL AS deleted FROM users WHERE id = ${creatorId}`;
  if (!creator || creator.deleted || creator.status !== ACCOUNT_STATUS.enabled || creator.role < ROLE.admin) {
    throw new ConsoleError('INSUFFICIENT_ROLE', 'this code\'s creator is no longer an administrator: it cannot be redeemed (ask for a new code)');
  }
  if (redeemer.role < ROLE.admin || creator.role > redeemer.role) return;
  throw new ConsoleError('INSUFFICIENT_ROLE', 'an administrator cannot redeem a code created by an account of equal or lower role');
}

function belowMinimum(min: number): ConsoleError {
  return new ConsoleError('AMOUNT_BELOW_MINIMUM', `amount: must be at least ${min} (the minimum top-up)`);
}

/**
 * The money of an order, refused when it cannot be stored. The unit prices are bounded so that this
 * never happens (payments/pricing.ts, MAX_UNIT_PRICE), but a price stored before that bound still
 * reads as it was written (options/option-catalogue.ts), and is refused here order by order.
 */
function payable(money: number): number {
  if (!isPayableMoney(money)) {
    throw new ConsoleError('VALIDATION_FAILED', `amount: the price of this quantity is above the largest order (${MAX_ORDER_MONEY.toFixed(2)})`);
  }
  return money;
}

export function registerTopupRoutes(api: Api, ctx: ConsoleContext): void {
  const { sql } = ctx;
  const codes = createRedemptionCodeCrypto(ctx.config.KEY_SECRET);

  api.route({
    method: 'GET', path: '/api/user/topup/info', tag: 'top-up', access: ROLE.user, data: topupInfoSchema,
    summary: 'The top-up configuration (the contract\'s Top-up configuration)',
  }, async () => ok(topupInfo(await loadTopupSettings(sql))));

  api.route({
    method: 'POST', path: '/api/user/topup', tag: 'top-up', access: ROLE.user, body: redeemBody, data: z.number().int(),
    summary: 'Redeem a code: data is the quota added; a code works once, even under concurrent attempts',
    description: 'An administrator (role 10) may redeem only codes created by the super administrator (its own would credit itself).',
    errors: ['INVALID_JSON', 'NOT_FOUND', 'REDEMPTION_UNAVAILABLE', 'FEATURE_DISABLED'],
  }, async ({ body, user }) => {
    const settings = await loadTopupSettings(sql);
    if (!settings.redemptionEnabled) throw new ConsoleError('FEATURE_DISABLED', 'redemption codes are not enabled');
    const now = ctx.now();
    // No row holds a code in plain text (routes/redemption.ts): a code is found by its HMAC.
    const keyHash = codes.hash(body.key);
    const credit = await creditTransaction(ctx, async (tx) => {
      // The conditional UPDATE is the claim: of concurrent attempts exactly one finds status 1.
      const [code] = await tx<{ id: number; quota: number; name: string; created_by: number }[]>`
        UPDATE redemptions SET status = 3, redeemed_time = ${now}, used_user_id = ${user.id}
        WHERE key_hash = ${keyHash} AND status = 1 AND (expired_time = -1 OR expired_time = 0 OR expired_time > ${now})
        RETURNING id, quota, name, created_by`;
      if (!code) {
        const [found] = await tx<{ status: number; expired_time: number }[]>`
          SELECT status, expired_time FROM redemptions WHERE key_hash = ${keyHash}`;
        if (!found) throw new ConsoleError('NOT_FOUND', 'redemption code not found');
        if (found.status === 3) throw new ConsoleError('REDEMPTION_UNAVAILABLE', 'redemption code has already been used');
        if (found.status === 2) throw new ConsoleError('REDEMPTION_UNAVAILABLE', 'redemption code is disabled');
        throw new ConsoleError('REDEMPTION_UNAVAILABLE', 'redemption code has expired');
      }
      await assertCreatorMayCredit(tx, code.created_by, user);
      const recorded = await recordConsoleCredit(tx, {
        requestId: `redeem:${code.id}`,
        type: LOG_TYPE.topup,
        userId: Number(user.id),
        delta: Number(code.quota),
        content: `redeemed code #${code.id} "${code.name}": ${code.quota} quota`,
        createdAt: now,
      });
      // The ledger row cannot exist when the claim succeeded; if it did, roll everything back.
      if (!recorded) throw new ConsoleError('REDEMPTION_UNAVAILABLE', 'redemption code has already been used');
      return recorded;
    });
    await afterConsoleCredit(ctx, credit);
    return ok(credit.delta);
  });

  api.route({
    method: 'GET', path: '/api/user/topup/self', tag: 'top-up', access: ROLE.user, query: topupSelfQuery,
    data: pageOf(topupOrderSchema), summary: "The caller's top-up orders, newest first; keyword matches trade_no in part",
  }, async ({ query, user }) => {
    const { page, pageSize, offset } = paging(query);
    const where = sql`user_id = ${user.id}
      ${query.keyword !== undefined ? sql`AND trade_no ILIKE ${containsPattern(query.keyword)}` : sql``}`;
    const [rows, [count]] = await Promise.all([
      sql<TopupRow[]>`SELECT * FROM topups WHERE ${where} ORDER BY id DESC LIMIT ${pageSize} OFFSET ${offset}`,
      sql<{ total: number }[]>`SELECT count(*)::bigint AS total FROM topups WHERE ${where}`,
    ]);
    return ok({ items: rows.map(toTopupOrder), total: Number(count!.total), page, page_size: pageSize });
  });

  api.route({
    method: 'GET', path: '/api/user/topup', tag: 'admin: top-up', access: ROLE.admin, query: topupAllQuery,
    data: pageOf(topupOrderSchema),
    summary: 'Every account\'s top-up orders, newest first; keyword matches trade_no in part; filters user_id and status',
  }, async ({ query }) => {
    const { page, pageSize, offset } = paging(query);
    const where = sql`TRUE
      ${query.keyword !== undefined ? sql`AND trade_no ILIKE ${containsPattern(query.keyword)}` : sql``}
      ${query.user_id !== undefined ? sql`AND user_id = ${query.user_id}` : sql``}
      ${query.status !== undefined ? sql`AND status = ${query.status}` : sql``}`;
    const [rows, [count]] = await Promise.all([
      sql<TopupRow[]>`SELECT * FROM topups WHERE ${where} ORDER BY id DESC LIMIT ${pageSize} OFFSET ${offset}`,
      sql<{ total: number }[]>`SELECT count(*)::bigint AS total FROM topups WHERE ${where}`,
    ]);
    return ok({ items: rows.map(toTopupOrder), total: Number(count!.total), page, page_size: pageSize });
  });

  api.route({
    method: 'POST', path: '/api/user/topup/complete', tag: 'admin: top-up', access: ROLE.root, body: completeTopupBody,
    data: topupOrderSchema, errors: ['INVALID_JSON', 'NOT_FOUND', 'STATE_CONFLICT'],
    summary: 'Complete a pending or expired order by hand (the payment arrived but its notify did not): credits exactly once, like a notify',
  }, async ({ body, user }) => {
    const [order] = await sql<TopupRow[]>`SELECT * FROM topups WHERE trade_no = ${body.trade_no}`;
    if (!order) throw new ConsoleError('NOT_FOUND', 'order not found');
    // An expired order was only unpaid for a day: a payment the provider took later is still credited.
    if (!isPayable(order.status)) throw new ConsoleError('STATE_CONFLICT', `order is ${order.status}`);
    const result = await completeOrder(ctx, {
      tradeNo: order.trade_no,
      provider: order.payment_provider as PaymentProvider,
      paidCents: centsOfDecimal(String(order.money)),
      paidText: String(order.money),
      providerRef: `manual:${user.id}`,
    });
    if (result.outcome === 'credited') return ok(result.order);
    if (result.outcome === 'already') throw new ConsoleError('STATE_CONFLICT', 'order is already completed');
    throw new ConsoleError('STATE_CONFLICT', result.outcome === 'mismatch' ? result.reason : 'order not found');
  });

  // ------------------------------------------------------------------ QR-code provider (epay)

  api.route({
    method: 'POST', path: '/api/user/amount', tag: 'top-up', access: ROLE.user, body: amountBody, data: z.string(),
    summary: 'Price of a quantity for QR-code payment, discount applied: data is the money as a string with two decimals',
    errors: ['INVALID_JSON', 'AMOUNT_BELOW_MINIMUM'],
  }, async ({ body }) => {
    const s = await loadTopupSettings(sql);
    if (body.amount < s.minTopUp) throw belowMinimum(s.minTopUp);
    return ok(payable(priceOf(body.amount, s.price, s.discount)).toFixed(2));
  });

  api.route({
    method: 'POST', path: '/api/user/pay', tag: 'top-up', access: ROLE.user, body: payBody, data: epayPayDataSchema,
    summary: 'Start a QR-code payment: a pending order and the signed epay request to submit to data.url',
    description: `At most ${PENDING_ORDERS_PER_WINDOW} unpaid orders per account opened within an hour (QR-code and card together), and ${OPENED_ORDERS_PER_WINDOW} not paid counting those ended unpaid (a failed checkout); one more answers 429.`,
    errors: ['INVALID_JSON', 'AMOUNT_BELOW_MINIMUM', 'FEATURE_DISABLED', 'RATE_LIMITED'],
  }, async ({ body, user }) => {
    const s = await loadTopupSettings(sql);
    if (!s.epayEnabled) throw new ConsoleError('FEATURE_DISABLED', 'online payment is not enabled');
    const method = s.payMethods.find((m) => m.type === body.payment_method);
    if (!method) {
      throw new ConsoleError('VALIDATION_FAILED', `payment_method: must be one of ${s.payMethods.map((m) => m.type).join(', ')}`);
    }
    const min = methodMinimum(s, method);
    if (body.amount < min) throw belowMinimum(min);
    const money = payable(priceOf(body.amount, s.price, s.discount));
    if (money < 0.01) throw new ConsoleError('VALIDATION_FAILED', 'amount: the price of this quantity is below 0.01');
    const order = await createPendingOrder(sql, {
      userId: Number(user.id), amount: body.amount, money, method: method.type, provider: 'epay', now: ctx.now(),
    });
    const params = epayPurchase({
      pid: s.epay.pid,
      type: method.type,
      out_trade_no: order.trade_no,
      notify_url: `${s.serverAddress}/api/user/epay/notify`,
      return_url: `${s.serverAddress}/console/topup`,
      name: `TUC${body.amount}`,
      money: money.toFixed(2),
    }, s.epay.key);
    return ok({ url: `${s.epay.address}/submit.php`, params });
  });

  api.route({
    method: ['GET', 'POST'], path: '/api/user/epay/notify', tag: 'payment callbacks', access: 'provider', bodyMode: 'raw',
    // epay reads the answer's text only and sends the notice again on anything but `success`: every
    // failure answers `fail`, never the JSON envelope (the status says which failure).
    produces: 'text/plain', failText: 'fail', errors: ['VALIDATION_FAILED', 'NOT_FOUND', 'PAYLOAD_TOO_LARGE'],
    summary: 'epay notify: parameters in the query (GET) or a form body (POST); answers the text success or fail',
    description: 'success: the order is paid (credited now, or already before: a repeat credits nothing), or the notice is a ' +
      'valid one for a trade that is not TRADE_SUCCESS. Every failure answers the text fail: with 400, a bad signature or merchant id, ' +
      'an amount mismatch, a NUL character in a parameter, or a credit refused (the balance would pass 2^53 - 1); with 404, an unknown ' +
      'order; with 413, a body too large; with 500, an internal error. epay retries on anything but success.',
  }, async ({ request, reply }) => {
    const params: Record<string, string> = {};
    for (const [k, v] of Object.entries((request.query ?? {}) as Record<string, unknown>)) if (typeof v === 'string') params[k] = v;
    if (typeof request.body === 'string' && request.body.length > 0) {
      for (const [k, v] of new URLSearchParams(request.body)) params[k] = v;
    }
    // The raw body skipped Api.route's input guard (which the query got); the parsed form gets it here.
    assertSafeInput(params, 'body');
    reply.type('text/plain; charset=utf-8');
    const s = await loadTopupSettings(sql);
    // A notice names the provider's trade and none of a purchase's own URLs: so no purchase signature
    // (handed to the buyer by /api/user/pay) passes as a notice's, however its values split.
    if (!epayVerify(params, s.epay.key) || params.pid !== s.epay.pid || !params.trade_no
      || params.notify_url !== undefined || params.return_url !== undefined) {
      request.log.warn({ out_trade_no: params.out_trade_no }, 'epay notify with a bad signature refused');
      return reply.status(400).send('fail');
    }
    if (params.trade_status !== EPAY_TRADE_SUCCESS) return reply.send('success');
    if (!isTradeNo(params.out_trade_no)) return reply.status(404).send('fail');
    const result = await completeOrder(ctx, {
      tradeNo: params.out_trade_no,
      provider: 'epay',
      // epay states the amount as the decimal text it was sent (`7.30`).
      paidCents: centsOfDecimal(params.money),
      paidText: String(params.money ?? ''),
      providerRef: params.trade_no ?? '',
    });
    switch (result.outcome) {
      case 'credited':
      case 'already':
        return reply.send('success');
      case 'unknown':
        return reply.status(404).send('fail');
      case 'mismatch':
        request.log.error({ out_trade_no: params.out_trade_no, reason: result.reason }, 'epay notify does not match its order');
        return reply.status(400).send('fail');
    }
  });

  // ------------------------------------------------------------------ card provider (cardpay)

  const cardpayPrice = (s: TopupSettings, amount: number) => priceOf(amount, s.cardpayUnitPrice, s.discount, priceDecimalsOf(s.cardpay.currency));

  api.route({
    method: 'POST', path: '/api/user/cardpay/amount', tag: 'top-up', access: ROLE.user, body: amountBody, data: z.string(),
    summary: 'Price of a quantity for card payment (CardpayUnitPrice, discount applied), as a string with two decimals',
    errors: ['INVALID_JSON', 'AMOUNT_BELOW_MINIMUM'],
  }, async ({ body }) => {
    const s = await loadTopupSettings(sql);
    if (body.amount < s.cardpayMinTopUp) throw belowMinimum(s.cardpayMinTopUp);
    return ok(payable(cardpayPrice(s, body.amount)).toFixed(2));
  });

  api.route({
    method: 'POST', path: '/api/user/cardpay/pay', tag: 'top-up', access: ROLE.user, body: amountBody,
    data: z.object({ pay_link: z.string(), trade_no: z.string() }),
    summary: 'Start a card payment: a pending order and the provider\'s checkout link',
    description: `At most ${PENDING_ORDERS_PER_WINDOW} unpaid orders per account opened within an hour (QR-code and card together), and ${OPENED_ORDERS_PER_WINDOW} not paid counting those ended unpaid (a failed checkout); one more answers 429.`,
    errors: ['INVALID_JSON', 'AMOUNT_BELOW_MINIMUM', 'FEATURE_DISABLED', 'UPSTREAM_FAILED', 'RATE_LIMITED'],
  }, async ({ body, user }) => {
    const s = await loadTopupSettings(sql);
    if (!s.cardpayEnabled) throw new ConsoleError('FEATURE_DISABLED', 'card payment is not enabled');
    if (body.amount < s.cardpayMinTopUp) throw belowMinimum(s.cardpayMinTopUp);
    const money = payable(cardpayPrice(s, body.amount));
    if (money < 0.01) throw new ConsoleError('VALIDATION_FAILED', 'amount: the price of this quantity is below 0.01');
    const order = await createPendingOrder(sql, {
      userId: Number(user.id), amount: body.amount, money, method: 'card', provider: 'cardpay', now: ctx.now(),
      // The webhook is checked against this, not against CardpayCurrency then (which may have changed).
      currency: s.cardpay.currency,
    });
    let session: { id: string; url: string };
    try {
      session = await createCheckoutSession(s.cardpay.apiAddress, s.cardpay.apiSecret, {
        tradeNo: order.trade_no,
        unitAmount: Math.round(money * minorUnitsOf(s.cardpay.currency)),
        currency: s.cardpay.currency,
        productName: `Top-up ${body.amount} (${quotaOf(body.amount)} quota)`,
        successUrl: `${s.serverAddress}/console/topup?paid=1`,
        // paid=0: the Top up page says the payment was not completed (console-web/src/pages/topup.tsx);
        // without it, a buyer back from a cancelled checkout was told nothing.
        cancelUrl: `${s.serverAddress}/console/topup?paid=0`,
      }, ctx.settings.PAYMENT_PROVIDER_TIMEOUT_MS);
    } catch (err) {
      ctx.logger.error({ err, trade_no: order.trade_no }, 'card provider checkout session failed');
      // No one can pay an order without a session: left pending, it held one of the account's unpaid
      // orders for the hour, and 10 failed tries (a provider outage) locked the account out of every
      // online top-up. Expired, not deleted: a timeout may hide a session the provider did create,
      // and an expired order is still credited once should its payment be confirmed.
      // Its own failure (Postgres away) must not turn the answer into a 500: the order then stays
      // pending until it expires, as before.
      await failPendingOrder(sql, order.trade_no, 'cardpay').catch((failed: unknown) => {
        ctx.logger.error({ err: failed, trade_no: order.trade_no }, 'card order without a checkout session could not be ended');
      });
      throw new ConsoleError('UPSTREAM_FAILED', 'the card provider did not create a checkout session; try again later');
    }
    return ok({ pay_link: session.url, trade_no: order.trade_no });
  });

  api.route({
    method: 'POST', path: '/api/cardpay/webhook', tag: 'payment callbacks', access: 'provider', bodyMode: 'raw',
    data: z.object({ received: z.boolean(), credited: z.boolean() }),
    summary: 'Card provider webhook: signed event (Cardpay-Signature or Stripe-Signature: t=..,v1=HMAC-SHA256)',
    description: 'checkout.session.completed or checkout.session.async_payment_succeeded (a delayed payment method) with ' +
      'payment_status paid completes the order named by client_reference_id (or metadata.trade_no) and credits it once, ' +
      'checked against the amount and currency the order was created with; checkout.session.async_payment_failed ends a ' +
      'pending order as expired (nothing credited); other events, a completed session still unpaid, and a sale that is no card order ' +
      'of this console (another sale of the provider account) are acknowledged and ignored.',
    errors: ['INVALID_SIGNATURE', 'PAYMENT_MISMATCH', 'NOT_FOUND'],
  }, async ({ request }) => {
    const raw = typeof request.body === 'string' ? request.body : '';
    const header = (request.headers['cardpay-signature'] ?? request.headers['stripe-signature']) as string | undefined;
    const s = await loadTopupSettings(sql);
    if (!cardpayVerify(header, raw, s.cardpay.webhookSecret, ctx.now(), ctx.settings.CARDPAY_WEBHOOK_TOLERANCE_SEC)) {
      request.log.warn('card provider webhook with a bad signature refused');
      throw new ConsoleError('INVALID_SIGNATURE', 'webhook signature verification failed');
    }
    let event: CardpayEvent;
    try {
      event = JSON.parse(raw) as CardpayEvent;
    } catch {
      throw new ConsoleError('INVALID_JSON');
    }
    // The raw body skipped Api.route's input guard (its bytes are signed); the parsed event gets it here.
    assertSafeInput(event, 'body');
    const session = event?.data?.object;
    const named: unknown = session?.client_reference_id || session?.metadata?.trade_no;
    if (event?.type === CARDPAY_EVENT.asyncPaymentFailed) {
      // The delayed payment (a bank debit, a voucher) did not go through: the order ends unpaid.
      if (isTradeNo(named) && await failPendingOrder(sql, named, 'cardpay')) {
        request.log.info({ trade_no: named }, 'card payment failed at the provider: order expired unpaid');
      }
      return ok({ received: true, credited: false });
    }
    // A delayed payment method completes the session unpaid, then sends async_payment_succeeded when the
    // money arrived: both credit the same order once (completeOrder, ledger id topup:<trade_no>).
    if ((event?.type !== CARDPAY_EVENT.completed && event?.type !== CARDPAY_EVENT.asyncPaymentSucceeded)
      || !session || session.payment_status !== 'paid') {
      return ok({ received: true, credited: false });
    }
    // The currency the order was created in (migration 024); an order from before it has none stored
    // and is checked against CardpayCurrency, as it was then. Read before the completion's row lock: a
    // row's currency is never changed.
    const tradeNo = isTradeNo(named) ? named : undefined;
    const [stored] = tradeNo !== undefined
      ? await sql<{ currency: string | null }[]>`SELECT currency FROM topups WHERE trade_no = ${tradeNo} AND payment_provider = 'cardpay'`
      : [];
    // The provider sends every sale of its account here (a payment link, another shop on the same
    // account): one that is no order of this console is acknowledged and left alone. Answered 4xx, it
    // was sent again for days, and an endpoint answering errors is one the provider may disable, ours
    // with it (review pay). An order is recorded before its checkout exists: none here is none at all.
    if (!stored || tradeNo === undefined) {
      request.log.info({ session: typeof session.id === 'string' ? session.id.slice(0, 100) : undefined }, 'card payment event for no order of this console acknowledged');
      return ok({ received: true, credited: false });
    }
    const currency = stored.currency ?? s.cardpay.currency;
    // An event without a currency is a mismatch too: the amount means nothing without its currency.
    if (typeof session.currency !== 'string' || session.currency.toLowerCase() !== currency) {
      throw new ConsoleError('PAYMENT_MISMATCH', `currency ${typeof session.currency === 'string' ? session.currency : '(none)'} is not ${currency}`);
    }
    const result = await completeOrder(ctx, {
      tradeNo,
      provider: 'cardpay',
      paidCents: centsOfMinorUnits(session.amount_total, minorUnitsOf(currency)),
      paidText: JSON.stringify(session.amount_total ?? null),
      // Only a reference for the records: a session id that is not a string is not stored.
      providerRef: typeof session.id === 'string' ? session.id : '',
    });
    switch (result.outcome) {
      case 'credited':
        return ok({ received: true, credited: true });
      case 'already':
        return ok({ received: true, credited: false });
      case 'unknown':
        throw new ConsoleError('NOT_FOUND', `order ${tradeNo} not found`);
      case 'mismatch':
        throw new ConsoleError('PAYMENT_MISMATCH', `the payment does not match order ${tradeNo}: ${result.reason}`);
    }
  });
}
