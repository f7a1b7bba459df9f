// The card provider's protocol, modelled on Stripe Checkout (named neutrally "cardpay"):
//   - create a session: POST <CardpayApiAddress>/v1/checkout/sessions, `Authorization: Bearer <secret>`,
//     form-encoded {mode, client_reference_id, metadata[trade_no], line_items[0][...], success_url,
//     cancel_url}; the answer is JSON {id, url}; the buyer pays at `url`;
//   - webhook: the provider POSTs the event JSON with the header
//       Cardpay-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(webhook secret, "<t>.<raw body>")>
//     (`Stripe-Signature` is accepted too). A `checkout.session.completed` event whose session is
//     paid names the order in client_reference_id (and metadata.trade_no). A delayed payment method
//     (bank debits, vouchers: the session does not restrict payment_method_types) completes the
//     session with payment_status `unpaid` and later sends `checkout.session.async_payment_succeeded`
//     (session paid) or `checkout.session.async_payment_failed`; each event's data.object is the
//     checkout session.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { request } from 'undici';
import { isHttpsOrLoopback } from '../options/option-catalogue.js';

/** Stripe's zero-decimal currencies: an amount is in whole units (¥750 is 750). */
const ZERO_DECIMAL_CURRENCIES = new Set(['bif', 'clp', 'djf', 'gnf', 'jpy', 'kmf', 'krw', 'mga', 'pyg', 'rwf', 'ugx', 'vnd', 'vuv', 'xaf', 'xof', 'xpf']);
/** Stripe's three-decimal currencies: an amount is in thousandths, its last digit 0 (charged to the cent). */
const THREE_DECIMAL_CURRENCIES = new Set(['bhd', 'jod', 'kwd', 'omr', 'tnd']);

/**
 * Minor units per major unit of a currency, as the provider counts amounts: 1 for the yen, 1000 for
 * the Kuwaiti dinar, 100 for the rest. Taking 100 everywhere charged a yen buyer 100 times the price
 * and a dinar buyer a tenth of it, and the webhook's amount, divided back the same way, still matched.
 */
export function minorUnitsOf(currency: string): number {
  if (ZERO_DECIMAL_CURRENCIES.has(currency)) return 1;
  return THREE_DECIMAL_CURRENCIES.has(currency) ? 1000 : 100;
}

/**
 * Currencies two-decimal in the provider's API whose amounts must still be whole units (a multiple of
 * 100 minor units): the Icelandic króna, whose fractional charges Stripe stopped taking in 2023. A
 * price with aurar was refused at checkout (review pay).
 */
const WHOLE_UNIT_TWO_DECIMAL_CURRENCIES = new Set(['isk']);

/** Decimals an order's price keeps in this currency: 0 for zero-decimal currencies and the króna, else 2 (see above). */
export function priceDecimalsOf(currency: string): number {
  return ZERO_DECIMAL_CURRENCIES.has(currency) || WHOLE_UNIT_TWO_DECIMAL_CURRENCIES.has(currency) ? 0 : 2;
}

export function cardpaySignature(secret: string, timestamp: number, rawBody: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.${rawBody}`, 'utf8').digest('hex');
}

export function cardpaySignatureHeader(secret: string, timestamp: number, rawBody: string): string {
  return `t=${timestamp},v1=${cardpaySignature(secret, timestamp, rawBody)}`;
}

/** True when one of the header's v1 signatures matches and t is within `toleranceSec` of now. */
export function cardpayVerify(header: string | undefined, rawBody: string, secret: string, nowSec: number, toleranceSec: number): boolean {
  if (!header || secret === '') return false;
  let t: number | undefined;
  const v1: string[] = [];
  for (const part of header.split(',')) {
    const [k, v] = part.split('=', 2).map((s) => s.trim());
    if (k === 't' && v && /^\d+$/.test(v)) t = Number(v);
    if (k === 'v1' && v && /^[0-9a-f]{64}$/i.test(v)) v1.push(v.toLowerCase());
  }
  if (t === undefined || v1.length === 0 || Math.abs(nowSec - t) > toleranceSec) return false;
  const expected = Buffer.from(cardpaySignature(secret, t, rawBody), 'hex');
  return v1.some((s) => timingSafeEqual(expected, Buffer.from(s, 'hex')));
}

export interface CheckoutSessionInput {
  tradeNo: string;
  /** In the currency's minor units (minorUnitsOf). */
  unitAmount: number;
  currency: string;
  productName: string;
  successUrl: string;
  cancelUrl: string;
}

/** The most of a checkout-session answer read (a session object is a few KiB); a longer one is refused. */
export const CHECKOUT_ANSWER_LIMIT_BYTES = 256 * 1024;

/** The body as text, or an error once it passes `limit` bytes (the rest is not read). */
async function readCapped(body: AsyncIterable<Buffer>, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) throw new Error(`card provider answer longer than ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Creates the checkout session. `timeoutMs` bounds the whole exchange (connection, headers and body):
 * undici's headersTimeout and bodyTimeout alone are idle timeouts, which a provider (or a proxy in
 * front of it) sending one byte every few seconds never meets.
 */
export async function createCheckoutSession(
  apiAddress: string,
  secret: string,
  input: CheckoutSessionInput,
  timeoutMs: number,
): Promise<{ id: string; url: string }> {
  const form = new URLSearchParams({
    mode: 'payment',
    client_reference_id: input.tradeNo,
    'metadata[trade_no]': input.tradeNo,
    'line_items[0][quantity]': '1',
    'line_items[0][price_data][currency]': input.currency,
    'line_items[0][price_data][unit_amount]': String(input.unitAmount),
    'line_items[0][price_data][product_data][name]': input.productName,
    success_url: input.successUrl,
    cancel_url: input.cancelUrl,
  });
  const signal = AbortSignal.timeout(timeoutMs);
  let text: string;
  let statusCode: number;
  try {
    const res = await request(`${apiAddress}/v1/checkout/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal,
    });
    statusCode = res.statusCode;
    // The signal ends this read too; leaving the loop early destroys the rest of the body.
    text = await readCapped(res.body, CHECKOUT_ANSWER_LIMIT_BYTES);
  } catch (err) {
    if (signal.aborted) throw new Error(`card provider timeout: no complete answer within ${timeoutMs} ms`);
    throw err;
  }
  if (statusCode !== 200) throw new Error(`card provider answered ${statusCode}: ${text.slice(0, 200)}`);
  const body = JSON.parse(text) as { id?: unknown; url?: unknown };
  if (typeof body.id !== 'string' || typeof body.url !== 'string') throw new Error('card provider answered without id and url');
  // The buyer's browser is sent there (console-web's top-up page): an https page, or http on this
  // machine (a sandbox). A javascript: or data: URL ran script in the console's origin, and a
  // plain-http page elsewhere could be swapped on the way (review pay).
  if (!isHttpsOrLoopback(body.url)) throw new Error('card provider answered a checkout url that is no https page');
  return { id: body.id, url: body.url };
}

/** The event types the webhook acts on (CardpayEvent.type); any other is acknowledged and ignored. */
export const CARDPAY_EVENT = {
  completed: 'checkout.session.completed',
  asyncPaymentSucceeded: 'checkout.session.async_payment_succeeded',
  asyncPaymentFailed: 'checkout.session.async_payment_failed',
} as const;

export interface CardpayEvent {
  id: string;
  type: string;
  data: {
    object: {
      id: string;
      client_reference_id?: string | null;
      metadata?: Record<string, string> | null;
      amount_total?: number | null;
      currency?: string | null;
      payment_status?: string | null;
    };
  };
}
