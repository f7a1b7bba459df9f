// Online payment end to end: the console listens on a real port, the epay and card sandboxes
// (bench/payment-sandbox) take the signed requests and call the console back, signing correctly.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CardpaySandbox, cardpaySandboxSignature, startCardpaySandbox } from '../../bench/payment-sandbox/cardpay-sandbox.js';
import { type EpaySandbox, epaySandboxSign, startEpaySandbox } from '../../bench/payment-sandbox/epay-sandbox.js';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';
import { pruneConsoleRows } from '../../billing/console-row-pruning.js';
import { createLogger } from '../../infra/logger.js';
import { OPENED_ORDERS_PER_WINDOW, PENDING_ORDERS_PER_WINDOW } from '../payments/topup-orders.js';
import { expectShape, TOPUP_INFO, TOPUP_ORDER } from '../testing/contract.js';

const EPAY = { pid: '1001', key: 'epay-merchant-key-123' };
const CARD = { apiSecret: 'sk_test_abc', webhookSecret: 'whsec_test_abc' };
// PAYMENT_PROVIDER_TIMEOUT_MS: the whole checkout-session exchange, short for the dripping provider below.
const PROVIDER_TIMEOUT_MS = 1500;

let h: ConsoleHarness;
let root: TestAccount;
let base: string;
let epay: EpaySandbox;
let card: CardpaySandbox;
/** The console's log lines (info and above): a hand completion is logged with who made it. */
const logLines: string[] = [];

beforeAll(async () => {
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(chunk.toString('utf8'));
      done();
    },
  });
  h = await startConsoleHarness({ PAYMENT_PROVIDER_TIMEOUT_MS: String(PROVIDER_TIMEOUT_MS) },
    { logger: createLogger({ LOG_LEVEL: 'info' }, 'console-api', stream) });
  base = await h.app.listen({ host: '127.0.0.1', port: 0 });
  root = await h.account({ role: 100 });
  epay = await startEpaySandbox(EPAY);
  card = await startCardpaySandbox({ ...CARD, webhookUrl: `${base}/api/cardpay/webhook` });
  const options: Record<string, unknown> = {
    ServerAddress: base, PaymentComplianceConfirmed: true, PayAddress: epay.url, EpayId: EPAY.pid, EpayKey: EPAY.key,
    Price: '7.3', MinTopUp: 1, AmountDiscount: { 100: 0.9 }, CardpayApiAddress: card.url, CardpayApiSecret: CARD.apiSecret,
    CardpayWebhookSecret: CARD.webhookSecret, CardpayUnitPrice: '1', CardpayMinTopUp: 5,
  };
  for (const [key, value] of Object.entries(options)) {
    const res = await h.app.inject({ method: 'PUT', url: '/api/option/', headers: root.auth, payload: { key, value } });
    expect(res.statusCode, `${key}: ${res.body}`).toBe(200);
  }
});
afterAll(async () => {
  await epay?.close();
  await card?.close();
  await h?.close();
});

const inject = (method: 'GET' | 'POST', url: string, who: TestAccount, payload?: unknown) =>
  h.app.inject({ method, url, headers: who.auth, ...(payload === undefined ? {} : { payload: payload as object }) });
const quotaOf = async (id: number) => Number((await h.sql<{ quota: number }[]>`SELECT quota FROM users WHERE id = ${id}`)[0]!.quota);
const order = async (tradeNo: string) => (await h.sql<{ status: string; complete_time: number; money: string }[]>`
  SELECT status, complete_time, money FROM topups WHERE trade_no = ${tradeNo}`)[0]!;
const ledgerRows = (tradeNo: string) => h.sql`SELECT id FROM ledger WHERE request_id = ${`topup:${tradeNo}`}`;

async function startEpayPayment(user: TestAccount, amount: number, method = 'alipay') {
  const res = await inject('POST', '/api/user/pay', user, { amount, payment_method: method });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data as { url: string; params: Record<string, string> };
}

describe('QR-code payment (epay)', () => {
  it('is enabled in the top-up info once configured', async () => {
    const user = await h.account();
    const data = (await inject('GET', '/api/user/topup/info', user)).json().data;
    expectShape(data, TOPUP_INFO);
    expect(data).toMatchObject({ enable_online_topup: true, enable_cardpay_topup: true, cardpay_min_topup: 5 });
    expect(data.pay_methods.map((m: { type: string }) => m.type)).toEqual(['alipay', 'wxpay']);
  });

  it('pay returns the signed epay request; the sandbox pays and notifies; the account is credited once', async () => {
    const user = await h.account({ quota: 5 });
    const pay = await startEpayPayment(user, 100);
    expect(pay.url).toBe(`${epay.url}/submit.php`);
    expect(Object.keys(pay.params).sort()).toEqual(['money', 'name', 'notify_url', 'out_trade_no', 'pid', 'return_url', 'sign', 'sign_type', 'type']);
    expect(pay.params).toMatchObject({ pid: EPAY.pid, type: 'alipay', money: '657.00', sign_type: 'MD5', notify_url: `${base}/api/user/epay/notify`, name: 'TUC100' });
    // The sandbox's own signer agrees with the console's.
    expect(pay.params.sign).toBe(epaySandboxSign(pay.params, EPAY.key));
    const tradeNo = pay.params.out_trade_no!;
    expect(tradeNo).toMatch(new RegExp(`^USR${user.user.id}NO[0-9a-f]{16}$`));
    expect(await order(tradeNo)).toMatchObject({ status: 'pending', complete_time: 0 });

    // The browser submits the form to the provider; the provider notifies, then redirects back.
    const submit = await request(pay.url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(pay.params).toString() });
    expect(submit.statusCode).toBe(302);
    expect(String(submit.headers.location)).toContain(`${base}/console/topup`);
    await submit.body.dump();
    expect(epay.orders.get(tradeNo)!.notifyAnswers).toEqual(['200 success']);
    expect(await quotaOf(user.user.id)).toBe(5 + 100 * 500_000);
    expect(await order(tradeNo)).toMatchObject({ status: 'success', complete_time: expect.any(Number) });
    expect(await ledgerRows(tradeNo)).toHaveLength(1);

    // A repeated notice (GET and POST form) answers success and credits nothing.
    expect(await epay.notify(tradeNo)).toEqual({ status: 200, body: 'success' });
    expect(await epay.notify(tradeNo, { method: 'POST' })).toEqual({ status: 200, body: 'success' });
    expect(await quotaOf(user.user.id)).toBe(5 + 100 * 500_000);
    expect(await ledgerRows(tradeNo)).toHaveLength(1);

    const orders = (await inject('GET', `/api/user/topup/self?keyword=${tradeNo}`, user)).json().data;
    expect(orders.total).toBe(1);
    expectShape(orders.items[0], TOPUP_ORDER, 'items[]');
    expect(orders.items[0]).toMatchObject({ trade_no: tradeNo, amount: 100, money: 657, payment_method: 'alipay', payment_provider: 'epay', status: 'success' });
    const events = (await h.drainUsageStream()).filter((e) => e.user_id === user.user.id);
    expect(events).toEqual([expect.objectContaining({ type: 1, request_id: `topup:${tradeNo}`, quota: 100 * 500_000, quota_delta: 100 * 500_000 })]);
    expect(events[0]!.content).toBe(`online top-up of 100 (50000000 quota), paid 657.00 via alipay (epay), order ${tradeNo}`);
  });

  it('refuses a forged notice (400 fail) and credits nothing; a later genuine one credits once', async () => {
    const user = await h.account();
    const sandbox = await startEpaySandbox({ ...EPAY, autoPay: false });
    try {
      await h.sql`INSERT INTO options (key, value) VALUES ('PayAddress', ${sandbox.url}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
      const pay = await startEpayPayment(user, 10, 'wxpay');
      const submit = await request(`${pay.url}?${new URLSearchParams(pay.params)}`);
      await submit.body.dump();
      const tradeNo = pay.params.out_trade_no!;
      // Unpaid: the buyer is sent back without a signed notice to replay.
      expect(submit.statusCode).toBe(302);
      expect(new URL(String(submit.headers.location)).searchParams.has('sign')).toBe(false);
      expect(await sandbox.notify(tradeNo, { forge: true })).toEqual({ status: 400, body: 'fail' });
      expect(await sandbox.notify(tradeNo, { money: '0.01' }).then((r) => r.status)).toBe(400); // signed, but not what the order costs
      expect(await quotaOf(user.user.id)).toBe(0);
      expect(await order(tradeNo)).toMatchObject({ status: 'pending' });
      // An unsigned request straight to the endpoint.
      const bare = await request(`${base}/api/user/epay/notify?out_trade_no=${tradeNo}&trade_status=TRADE_SUCCESS&money=73.00`);
      expect(bare.statusCode).toBe(400);
      expect(await bare.body.text()).toBe('fail');

      // Ten concurrent genuine notices: one credit.
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => sandbox.notify(tradeNo, { method: i % 2 ? 'POST' : 'GET' })));
      expect(answers.every((a) => a.status === 200 && a.body === 'success')).toBe(true);
      expect(await quotaOf(user.user.id)).toBe(10 * 500_000);
      expect(await ledgerRows(tradeNo)).toHaveLength(1);
    } finally {
      await h.sql`UPDATE options SET value = ${epay.url} WHERE key = 'PayAddress'`;
      await sandbox.close();
    }
  });

  it('credits a signed notice only for the order\'s exact amount: a fraction of a cent off, or an amount that is no plain decimal, credits nothing', async () => {
    const user = await h.account();
    const sandbox = await startEpaySandbox({ ...EPAY, autoPay: false });
    try {
      await h.sql`INSERT INTO options (key, value) VALUES ('PayAddress', ${sandbox.url}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
      const pay = await startEpayPayment(user, 10);
      await (await request(`${pay.url}?${new URLSearchParams(pay.params)}`)).body.dump();
      const tradeNo = pay.params.out_trade_no!;
      expect((await order(tradeNo)).money).toBe('73.00');
      // Each of these credited the 73.00 order before (both sides were rounded to the cent as floats).
      for (const money of ['72.995', '73.0049999', '72.9999999', '73.0000001', '73.004', '73e0', '7.3e1', ' 73.00', '73.00 ', '0x49', '+73', '73.', '073.00.0']) {
        expect(await sandbox.notify(tradeNo, { money }), money).toEqual({ status: 400, body: 'fail' });
      }
      expect(await quotaOf(user.user.id)).toBe(0);
      expect(await ledgerRows(tradeNo)).toHaveLength(0);
      expect(await order(tradeNo)).toMatchObject({ status: 'pending' });
      // The same amount written with more zeros is the same amount.
      expect(await sandbox.notify(tradeNo, { money: '73.000' })).toEqual({ status: 200, body: 'success' });
      expect(await sandbox.notify(tradeNo, { money: '73' })).toEqual({ status: 200, body: 'success' });
      expect(await quotaOf(user.user.id)).toBe(10 * 500_000);
      expect(await ledgerRows(tradeNo)).toHaveLength(1);
    } finally {
      await h.sql`UPDATE options SET value = ${epay.url} WHERE key = 'PayAddress'`;
      await sandbox.close();
    }
  });

  it('a purchase signature cannot be replayed as a paid notice, whatever an administrator sets as a method type', async () => {
    // The signed string joins values unencoded: a method type holding `&trade_status=TRADE_SUCCESS`
    // made the purchase's signature a valid signature of a paid notice for it, so an administrator
    // could top itself up without paying. Options are root's now (an administrator's write is a 403),
    // and the type is refused for root too.
    const forgedType = 'a&trade_status=TRADE_SUCCESS';
    const admin = await h.account({ role: 10 });
    const methods = [{ name: 'x', type: forgedType }];
    expect((await h.app.inject({ method: 'PUT', url: '/api/option/', headers: admin.auth, payload: { key: 'PayMethods', value: methods } })).statusCode).toBe(403);
    const put = await h.app.inject({ method: 'PUT', url: '/api/option/', headers: root.auth, payload: { key: 'PayMethods', value: methods } });
    expect(put.statusCode).toBe(400);
    expect(put.json()).toMatchObject({ success: false, message: expect.stringMatching(/type/) });
    // Stored anyway (a value written before this rule): the notice is still refused.
    const [saved] = await h.sql`SELECT value FROM options WHERE key = 'PayMethods'`;
    await h.sql`INSERT INTO options (key, value) VALUES ('PayMethods', ${JSON.stringify(methods)}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
    try {
      const res = await inject('POST', '/api/user/pay', admin, { amount: 1000, payment_method: forgedType });
      if (res.statusCode === 200) {
        const p = (res.json().data as { params: Record<string, string> }).params;
        const forged = new URLSearchParams({
          money: p.money!, name: p.name!, notify_url: p.notify_url!, out_trade_no: p.out_trade_no!, pid: p.pid!,
          return_url: `${p.return_url}&type=a`, trade_status: 'TRADE_SUCCESS', sign: p.sign!, sign_type: 'MD5',
        });
        const notice = await request(`${base}/api/user/epay/notify?${forged}`);
        expect(notice.statusCode).toBe(400);
        expect(await notice.body.text()).toBe('fail');
        expect(await order(p.out_trade_no!)).toMatchObject({ status: 'pending' });
      } else {
        expect(res.statusCode).toBe(400);
      }
      expect(await quotaOf(admin.user.id)).toBe(0);
    } finally {
      if (saved) await h.sql`UPDATE options SET value = ${saved.value as string} WHERE key = 'PayMethods'`;
      else await h.sql`DELETE FROM options WHERE key = 'PayMethods'`;
    }
  });

  it('answers fail 404 for an unknown order and validates pay input', async () => {
    const params: Record<string, string> = { pid: EPAY.pid, trade_no: 'X1', out_trade_no: 'USR1NOnope', type: 'alipay', name: 'x', money: '1.00', trade_status: 'TRADE_SUCCESS' };
    const qs = new URLSearchParams({ ...params, sign: epaySandboxSign(params, EPAY.key), sign_type: 'MD5' });
    const res = await request(`${base}/api/user/epay/notify?${qs}`);
    expect(res.statusCode).toBe(404);
    expect(await res.body.text()).toBe('fail');

    const user = await h.account();
    const badMethod = await inject('POST', '/api/user/pay', user, { amount: 10, payment_method: 'bitcoin' });
    expect(badMethod.statusCode).toBe(400);
    expect(badMethod.json().message).toBe('payment_method: must be one of alipay, wxpay');
    const low = await inject('POST', '/api/user/pay', user, { amount: 0, payment_method: 'alipay' });
    expect(low.statusCode).toBe(400);
    expect(low.json().message).toMatch(/^amount: /);
  });
});

describe('card payment (cardpay webhook)', () => {
  it('pay creates a checkout session; paying it delivers a signed webhook that credits once', async () => {
    const user = await h.account();
    const low = await inject('POST', '/api/user/cardpay/pay', user, { amount: 4 });
    expect(low.statusCode).toBe(400);
    expect(low.json().message).toBe('amount: must be at least 5 (the minimum top-up)');
    expect((await inject('POST', '/api/user/cardpay/amount', user, { amount: 100 })).json().data).toBe('90.00');

    const res = await inject('POST', '/api/user/cardpay/pay', user, { amount: 20 });
    expect(res.statusCode, res.body).toBe(200);
    const { pay_link: link, trade_no: tradeNo } = res.json().data as { pay_link: string; trade_no: string };
    expect(link.startsWith(`${card.url}/pay/cs_test_`)).toBe(true);
    const sessionId = link.split('/').pop()!;
    expect(card.sessions.get(sessionId)).toMatchObject({ client_reference_id: tradeNo, amount_total: 2000, currency: 'usd' });
    // Back to the Top up page either way, saying which (paid=0 reads "not completed" there).
    expect(card.sessions.get(sessionId)!.success_url).toMatch(/\/console\/topup\?paid=1$/);
    expect(card.sessions.get(sessionId)!.cancel_url).toMatch(/\/console\/topup\?paid=0$/);

    const paid = await request(link);
    expect(paid.statusCode).toBe(302);
    await paid.body.dump();
    expect(card.sessions.get(sessionId)!.deliveries).toEqual(['200 {"success":true,"message":"","data":{"received":true,"credited":true}}']);
    expect(await quotaOf(user.user.id)).toBe(20 * 500_000);
    expect(await order(tradeNo)).toMatchObject({ status: 'success' });

    // Re-delivery (the provider retries) and concurrent deliveries credit nothing more.
    const again = await Promise.all(Array.from({ length: 8 }, () => card.deliver(sessionId)));
    expect(again.every((r) => r.status === 200 && JSON.parse(r.body).data.credited === false)).toBe(true);
    expect(await quotaOf(user.user.id)).toBe(20 * 500_000);
    expect(await ledgerRows(tradeNo)).toHaveLength(1);
  });

  it.each([
    // Stripe's minor units: none for the yen (150 a unit, 5 units: 750, not 75,000), thousandths for
    // the Kuwaiti dinar (0.3075 a unit, 5 units: 1.5375, charged 1.540 as 1540, not 154).
    { currency: 'jpy', unitPrice: '150', money: 750, unitAmount: 750 },
    { currency: 'kwd', unitPrice: '0.3075', money: 1.54, unitAmount: 1540 },
    { currency: 'jpy', unitPrice: '150.4', money: 752, unitAmount: 752 },
  ])('charges $currency in its own minor unit (unit price $unitPrice) and credits the paid order once', async ({ currency, unitPrice, money, unitAmount }) => {
    const set = async (key: string, value: string) => {
      const res = await h.app.inject({ method: 'PUT', url: '/api/option/', headers: root.auth, payload: { key, value } });
      expect(res.statusCode, res.body).toBe(200);
    };
    await set('CardpayCurrency', currency);
    await set('CardpayUnitPrice', unitPrice);
    try {
      const user = await h.account();
      const res = await inject('POST', '/api/user/cardpay/pay', user, { amount: 5 });
      expect(res.statusCode, res.body).toBe(200);
      const { pay_link: link, trade_no: tradeNo } = res.json().data as { pay_link: string; trade_no: string };
      expect(card.sessions.get(link.split('/').pop()!)).toMatchObject({ amount_total: unitAmount, currency });
      expect(Number((await order(tradeNo)).money)).toBe(money);
      const paid = await request(link);
      await paid.body.dump();
      expect(await quotaOf(user.user.id)).toBe(5 * 500_000);
      expect(await order(tradeNo)).toMatchObject({ status: 'success' });
    } finally {
      await set('CardpayCurrency', 'usd');
      await set('CardpayUnitPrice', '1');
    }
  });

  it('refuses a signed paid event without a currency (an amount without its currency is a mismatch)', async () => {
    const user = await h.account();
    const { pay_link: link, trade_no: tradeNo } = (await inject('POST', '/api/user/cardpay/pay', user, { amount: 10 })).json().data;
    const session = card.sessions.get(String(link).split('/').pop()!)!;
    session.payment_status = 'paid';
    const currency = session.currency;
    delete (session as { currency?: string }).currency;
    const bare = await card.deliver(session.id);
    expect(bare.status).toBe(400);
    expect(JSON.parse(bare.body)).toEqual({ success: false, message: 'currency (none) is not usd' });
    session.currency = 'eur';
    expect(JSON.parse((await card.deliver(session.id)).body).message).toBe('currency eur is not usd');
    expect(await quotaOf(user.user.id)).toBe(0);
    expect(await order(tradeNo)).toMatchObject({ status: 'pending' });
    session.currency = currency;
    expect((await card.deliver(session.id)).status).toBe(200);
    expect(await quotaOf(user.user.id)).toBe(10 * 500_000);
  });

  it('refuses forged, stale and mismatching webhooks without crediting', async () => {
    const user = await h.account();
    const { pay_link: link, trade_no: tradeNo } = (await inject('POST', '/api/user/cardpay/pay', user, { amount: 10 })).json().data;
    const sessionId = String(link).split('/').pop()!;
    card.sessions.get(sessionId)!.payment_status = 'paid';
    const forged = await card.deliver(sessionId, { forge: true });
    expect(forged.status).toBe(400);
    expect(JSON.parse(forged.body)).toEqual({ success: false, message: 'webhook signature verification failed' });
    const stale = await card.deliver(sessionId, { timestamp: Math.floor(Date.now() / 1000) - 3600 });
    expect(stale.status).toBe(400);
    const cheap = await card.deliver(sessionId, { amountTotal: 1 });
    expect(cheap.status).toBe(400);
    expect(JSON.parse(cheap.body).message).toMatch(/does not match order/);
    // amount_total is a whole number of minor units: a fraction, or the number as a string, is no
    // amount (99.6 and "1000" credited this 1000-cent order before).
    expect(card.sessions.get(sessionId)!.amount_total).toBe(1000);
    for (const amountTotal of [999.6, 1000.4, '1000', -1000] as unknown as number[]) {
      const odd = await card.deliver(sessionId, { amountTotal });
      expect(odd.status, String(amountTotal)).toBe(400);
      expect(JSON.parse(odd.body).message, String(amountTotal)).toMatch(/does not match order/);
    }
    const unsigned = await request(`${base}/api/cardpay/webhook`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(unsigned.statusCode).toBe(400);
    await unsigned.body.dump();
    expect(await quotaOf(user.user.id)).toBe(0);
    expect(await order(tradeNo)).toMatchObject({ status: 'pending' });

    // Other event types are acknowledged and ignored.
    const body = JSON.stringify({ id: 'evt_1', type: 'payment_intent.created', data: { object: { id: 'pi_1' } } });
    const other = await request(`${base}/api/cardpay/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': cardpaySandboxSignature(CARD.webhookSecret, Math.floor(Date.now() / 1000), body) },
      body,
    });
    expect(other.statusCode).toBe(200);
    expect(await other.body.json()).toEqual({ success: true, message: '', data: { received: true, credited: false } });

    expect((await card.deliver(sessionId)).status).toBe(200);
    expect(await quotaOf(user.user.id)).toBe(10 * 500_000);
  });
});

describe('card payment by a delayed method (async_payment_succeeded / async_payment_failed)', () => {
  /** A signed event of `type` carrying the sandbox session, its payment_status set. */
  async function sendEvent(type: string, sessionId: string, paymentStatus: 'paid' | 'unpaid') {
    const { deliveries: _d, success_url: _s, cancel_url: _c, ...session } = card.sessions.get(sessionId)!;
    const body = JSON.stringify({ id: `evt_${type}_${sessionId}`, object: 'event', type, data: { object: { ...session, payment_status: paymentStatus } } });
    const res = await request(`${base}/api/cardpay/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'cardpay-signature': cardpaySandboxSignature(CARD.webhookSecret, Math.floor(Date.now() / 1000), body) },
      body,
    });
    return { status: res.statusCode, body: await res.body.json() as { success: boolean; message: string; data?: { credited: boolean } } };
  }
  const startCard = async (user: TestAccount, amount: number) => {
    const res = await inject('POST', '/api/user/cardpay/pay', user, { amount });
    expect(res.statusCode, res.body).toBe(200);
    const { pay_link: link, trade_no: tradeNo } = res.json().data as { pay_link: string; trade_no: string };
    return { tradeNo, sessionId: link.split('/').pop()! };
  };

  it('acknowledges the unpaid completed event, then credits async_payment_succeeded once', async () => {
    const user = await h.account();
    const { tradeNo, sessionId } = await startCard(user, 10);
    const unpaid = await sendEvent('checkout.session.completed', sessionId, 'unpaid');
    expect(unpaid).toEqual({ status: 200, body: { success: true, message: '', data: { received: true, credited: false } } });
    expect(await quotaOf(user.user.id)).toBe(0);
    expect(await order(tradeNo)).toMatchObject({ status: 'pending' });

    const succeeded = await sendEvent('checkout.session.async_payment_succeeded', sessionId, 'paid');
    expect(succeeded).toEqual({ status: 200, body: { success: true, message: '', data: { received: true, credited: true } } });
    expect(await quotaOf(user.user.id)).toBe(10 * 500_000);
    expect(await order(tradeNo)).toMatchObject({ status: 'success' });

    // Repeats of either event, concurrent, credit nothing more (same order, same ledger id).
    const again = await Promise.all([
      ...Array.from({ length: 3 }, () => sendEvent('checkout.session.async_payment_succeeded', sessionId, 'paid')),
      ...Array.from({ length: 3 }, () => sendEvent('checkout.session.completed', sessionId, 'paid')),
    ]);
    expect(again.every((r) => r.status === 200 && r.body.data?.credited === false)).toBe(true);
    expect(await quotaOf(user.user.id)).toBe(10 * 500_000);
    expect(await ledgerRows(tradeNo)).toHaveLength(1);
    // A failure notice arriving after the success changes nothing.
    expect((await sendEvent('checkout.session.async_payment_failed', sessionId, 'unpaid')).status).toBe(200);
    expect(await order(tradeNo)).toMatchObject({ status: 'success' });
  });

  it('checks async_payment_succeeded as a paid completed event: amount and currency of the order', async () => {
    const user = await h.account();
    const { tradeNo, sessionId } = await startCard(user, 10);
    const session = card.sessions.get(sessionId)!;
    session.amount_total = 1;
    const cheap = await sendEvent('checkout.session.async_payment_succeeded', sessionId, 'paid');
    expect(cheap.status).toBe(400);
    expect(cheap.body.message).toMatch(/does not match order/);
    session.amount_total = 1000;
    // An unpaid async_payment_succeeded (no such event from the provider) credits nothing.
    expect((await sendEvent('checkout.session.async_payment_succeeded', sessionId, 'unpaid')).body.data).toEqual({ received: true, credited: false });
    expect(await quotaOf(user.user.id)).toBe(0);
    expect(await order(tradeNo)).toMatchObject({ status: 'pending' });
  });

  it('async_payment_failed ends the order unpaid (expired, out of the unpaid-order cap) and credits nothing', async () => {
    const user = await h.account();
    const { tradeNo, sessionId } = await startCard(user, 10);
    expect((await sendEvent('checkout.session.completed', sessionId, 'unpaid')).status).toBe(200);
    const failed = await sendEvent('checkout.session.async_payment_failed', sessionId, 'unpaid');
    expect(failed).toEqual({ status: 200, body: { success: true, message: '', data: { received: true, credited: false } } });
    expect(await order(tradeNo)).toMatchObject({ status: 'expired', complete_time: 0 });
    expect(await quotaOf(user.user.id)).toBe(0);
    expect(await ledgerRows(tradeNo)).toHaveLength(0);
    // Repeated: still acknowledged, still nothing. An epay order named by a card event is not touched.
    expect((await sendEvent('checkout.session.async_payment_failed', sessionId, 'unpaid')).status).toBe(200);
    const pay = await startEpayPayment(user, 10);
    card.sessions.get(sessionId)!.client_reference_id = pay.params.out_trade_no!;
    expect((await sendEvent('checkout.session.async_payment_failed', sessionId, 'unpaid')).status).toBe(200);
    expect(await order(pay.params.out_trade_no!)).toMatchObject({ status: 'pending' });
  });
});

describe('card orders keep the currency they were created in', () => {
  const setOption = async (key: string, value: string) => {
    const res = await h.app.inject({ method: 'PUT', url: '/api/option/', headers: root.auth, payload: { key, value } });
    expect(res.statusCode, res.body).toBe(200);
  };

  it('credits an order paid in its own currency after CardpayCurrency changed, and refuses the new currency for it', async () => {
    const user = await h.account();
    await setOption('CardpayCurrency', 'eur');
    try {
      const res = await inject('POST', '/api/user/cardpay/pay', user, { amount: 10 });
      expect(res.statusCode, res.body).toBe(200);
      const { pay_link: link, trade_no: tradeNo } = res.json().data as { pay_link: string; trade_no: string };
      const sessionId = link.split('/').pop()!;
      expect(card.sessions.get(sessionId)).toMatchObject({ amount_total: 1000, currency: 'eur' });
      const [row] = await h.sql<{ currency: string | null }[]>`SELECT currency FROM topups WHERE trade_no = ${tradeNo}`;
      expect(row!.currency).toBe('eur');
      await setOption('CardpayCurrency', 'jpy');

      // The option's currency now is not the order's: an event in it is a mismatch.
      const session = card.sessions.get(sessionId)!;
      session.payment_status = 'paid';
      session.currency = 'jpy';
      const wrong = await card.deliver(sessionId);
      expect(wrong.status).toBe(400);
      expect(JSON.parse(wrong.body)).toEqual({ success: false, message: 'currency jpy is not eur' });
      expect(await quotaOf(user.user.id)).toBe(0);

      // Paid in eur, as the session was made: credited once (1000 minor units of eur, not 1000 yen).
      session.currency = 'eur';
      const paid = await card.deliver(sessionId);
      expect(paid.status, paid.body).toBe(200);
      expect(JSON.parse(paid.body).data).toEqual({ received: true, credited: true });
      expect(await quotaOf(user.user.id)).toBe(10 * 500_000);
      expect(await order(tradeNo)).toMatchObject({ status: 'success' });
    } finally {
      await setOption('CardpayCurrency', 'usd');
    }
  });

  it('checks an order stored before the currency column (null) against CardpayCurrency', async () => {
    const user = await h.account();
    const { pay_link: link, trade_no: tradeNo } = (await inject('POST', '/api/user/cardpay/pay', user, { amount: 10 })).json().data as { pay_link: string; trade_no: string };
    await h.sql`UPDATE topups SET currency = NULL WHERE trade_no = ${tradeNo}`;
    const sessionId = link.split('/').pop()!;
    const session = card.sessions.get(sessionId)!;
    session.payment_status = 'paid';
    session.currency = 'eur';
    expect(JSON.parse((await card.deliver(sessionId)).body).message).toBe('currency eur is not usd');
    session.currency = 'usd';
    expect((await card.deliver(sessionId)).status).toBe(200);
    expect(await quotaOf(user.user.id)).toBe(10 * 500_000);
  });
});

describe('QR-code minimum: MinTopUp and the method\'s own min_topup', () => {
  it('refuses below the larger of the two on /api/user/pay, as /api/user/amount and the top-up info say', async () => {
    const [saved] = await h.sql<{ value: string }[]>`SELECT value FROM options WHERE key = 'PayMethods'`;
    const put = async (key: string, value: unknown) => {
      const res = await h.app.inject({ method: 'PUT', url: '/api/option/', headers: root.auth, payload: { key, value } });
      expect(res.statusCode, res.body).toBe(200);
    };
    await put('MinTopUp', 10);
    await put('PayMethods', [{ name: 'A', type: 'alipay', color: '', min_topup: '1' }, { name: 'W', type: 'wxpay', color: '', min_topup: '50' }]);
    try {
      const user = await h.account();
      const amount5 = await inject('POST', '/api/user/amount', user, { amount: 5 });
      expect(amount5.json()).toEqual({ success: false, message: 'amount: must be at least 10 (the minimum top-up)' });
      const pay5 = await inject('POST', '/api/user/pay', user, { amount: 5, payment_method: 'alipay' });
      expect(pay5.statusCode).toBe(400);
      expect(pay5.json()).toEqual({ success: false, message: 'amount: must be at least 10 (the minimum top-up)' });
      expect((await inject('POST', '/api/user/pay', user, { amount: 10, payment_method: 'alipay' })).statusCode).toBe(200);
      const pay20w = await inject('POST', '/api/user/pay', user, { amount: 20, payment_method: 'wxpay' });
      expect(pay20w.json()).toEqual({ success: false, message: 'amount: must be at least 50 (the minimum top-up)' });
      const info = (await inject('GET', '/api/user/topup/info', user)).json().data;
      expect(info.min_topup).toBe(10);
      expect(info.pay_methods.map((m: { min_topup: string }) => m.min_topup)).toEqual(['10', '50']);
      expect(await h.sql`SELECT id FROM topups WHERE user_id = ${user.user.id}`).toHaveLength(1);
    } finally {
      await put('MinTopUp', 1);
      if (saved) await h.sql`UPDATE options SET value = ${saved.value} WHERE key = 'PayMethods'`;
      else await h.sql`DELETE FROM options WHERE key = 'PayMethods'`;
    }
  });
});

describe('unpaid orders: the per-account cap and expiry', () => {
  const HOUR = 3600;
  const ordersOf = async (userId: number) => Number((await h.sql<{ n: number }[]>`
    SELECT count(*)::int AS n FROM topups WHERE user_id = ${userId}`)[0]!.n);
  const age = (tradeNo: string, sec: number) => h.sql`UPDATE topups SET create_time = create_time - ${sec} WHERE trade_no = ${tradeNo}`;
  // The billing worker's job (billing/console-row-pruning.ts), run now rather than on its timer.
  const prune = () => pruneConsoleRows({ sql: h.sql, log: createLogger(h.config, 'console-row-pruning') }, Math.floor(Date.now() / 1000));

  it('answers the 11th unpaid order within the hour 429 and inserts nothing (epay and card count together)', async () => {
    const user = await h.account();
    const started: string[] = [];
    for (let i = 0; i < 10; i++) {
      const res = i % 2 === 0
        ? await inject('POST', '/api/user/pay', user, { amount: 10, payment_method: 'alipay' })
        : await inject('POST', '/api/user/cardpay/pay', user, { amount: 10 });
      expect(res.statusCode, res.body).toBe(200);
      const data = res.json().data as { params?: { out_trade_no: string }; trade_no?: string };
      started.push(data.params?.out_trade_no ?? data.trade_no!);
    }
    for (const [url, payload] of [['/api/user/pay', { amount: 10, payment_method: 'alipay' }], ['/api/user/cardpay/pay', { amount: 10 }]] as const) {
      const res = await inject('POST', url, user, payload);
      expect(res.statusCode, res.body).toBe(429);
      expect(res.json()).toEqual({ success: false, message: expect.stringMatching(/^too many unpaid top-up orders: at most 10 .* retry in \d+ s$/) });
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(3000);
    }
    expect(await ordersOf(user.user.id)).toBe(10);
    // Another account is not affected.
    expect((await inject('POST', '/api/user/pay', await h.account(), { amount: 10, payment_method: 'alipay' })).statusCode).toBe(200);

    // A paid order is no longer open: the account may start another.
    const paid = await inject('POST', '/api/user/topup/complete', root, { trade_no: started[0] });
    expect(paid.statusCode, paid.body).toBe(200);
    expect((await inject('POST', '/api/user/pay', user, { amount: 10, payment_method: 'alipay' })).statusCode).toBe(200);
    expect((await inject('POST', '/api/user/pay', user, { amount: 10, payment_method: 'alipay' })).statusCode).toBe(429);
    // Orders opened over an hour ago no longer count.
    await h.sql`UPDATE topups SET create_time = create_time - ${HOUR + 1} WHERE user_id = ${user.user.id}`;
    expect((await inject('POST', '/api/user/pay', user, { amount: 10, payment_method: 'alipay' })).statusCode).toBe(200);
  });

  it('lets at most 10 of 15 concurrent orders of one account through', async () => {
    const user = await h.account();
    const answers = await Promise.all(Array.from({ length: 15 }, () => inject('POST', '/api/user/pay', user, { amount: 10, payment_method: 'wxpay' })));
    expect(answers.filter((r) => r.statusCode === 200)).toHaveLength(10);
    expect(answers.filter((r) => r.statusCode === 429)).toHaveLength(5);
    expect(await ordersOf(user.user.id)).toBe(10);
  });

  it('credits an expired epay order once when its paid notice arrives late', async () => {
    const user = await h.account();
    const sandbox = await startEpaySandbox({ ...EPAY, autoPay: false });
    try {
      await h.sql`UPDATE options SET value = ${sandbox.url} WHERE key = 'PayAddress'`;
      const pay = await startEpayPayment(user, 10, 'alipay');
      const submit = await request(`${pay.url}?${new URLSearchParams(pay.params)}`);
      await submit.body.dump();
      const tradeNo = pay.params.out_trade_no!;
      await age(tradeNo, 25 * HOUR);
      await prune();
      expect(await order(tradeNo)).toMatchObject({ status: 'expired', complete_time: 0 });
      const listed = (await inject('GET', `/api/user/topup?status=expired&user_id=${user.user.id}`, root)).json().data;
      expect(listed.items.map((o: { trade_no: string }) => o.trade_no)).toEqual([tradeNo]);

      // The provider took the money after all: its notice (and its repeats, concurrent) credit once.
      const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => sandbox.notify(tradeNo, { method: i % 2 ? 'POST' : 'GET' })));
      expect(answers).toEqual(Array.from({ length: 6 }, () => ({ status: 200, body: 'success' })));
      expect(await quotaOf(user.user.id)).toBe(10 * 500_000);
      expect(await order(tradeNo)).toMatchObject({ status: 'success', complete_time: expect.any(Number) });
      expect(await ledgerRows(tradeNo)).toHaveLength(1);
      // The job does not touch it again.
      await prune();
      expect(await order(tradeNo)).toMatchObject({ status: 'success' });
    } finally {
      await h.sql`UPDATE options SET value = ${epay.url} WHERE key = 'PayAddress'`;
      await sandbox.close();
    }
  });

  it('credits an expired card order once when its webhook arrives late', async () => {
    const user = await h.account();
    const { pay_link: link, trade_no: tradeNo } = (await inject('POST', '/api/user/cardpay/pay', user, { amount: 10 })).json().data;
    const sessionId = String(link).split('/').pop()!;
    await age(tradeNo, 25 * HOUR);
    await prune();
    expect(await order(tradeNo)).toMatchObject({ status: 'expired' });

    const paid = await request(link);
    await paid.body.dump();
    expect(card.sessions.get(sessionId)!.deliveries).toEqual(['200 {"success":true,"message":"","data":{"received":true,"credited":true}}']);
    const again = await Promise.all(Array.from({ length: 4 }, () => card.deliver(sessionId)));
    expect(again.every((r) => r.status === 200 && JSON.parse(r.body).data.credited === false)).toBe(true);
    expect(await quotaOf(user.user.id)).toBe(10 * 500_000);
    expect(await order(tradeNo)).toMatchObject({ status: 'success' });
    expect(await ledgerRows(tradeNo)).toHaveLength(1);
  });

  it('lets the super administrator complete an expired order by hand, once', async () => {
    const user = await h.account();
    const pay = await startEpayPayment(user, 10, 'wxpay');
    const tradeNo = pay.params.out_trade_no!;
    // The auto-paying sandbox was not asked: the order stays unpaid, then expires.
    await age(tradeNo, 25 * HOUR);
    await prune();
    expect(await order(tradeNo)).toMatchObject({ status: 'expired' });
    const done = await inject('POST', '/api/user/topup/complete', root, { trade_no: tradeNo });
    expect(done.statusCode, done.body).toBe(200);
    expect(done.json().data).toMatchObject({ trade_no: tradeNo, status: 'success' });
    const again = await inject('POST', '/api/user/topup/complete', root, { trade_no: tradeNo });
    expect(again.statusCode).toBe(409);
    expect(await quotaOf(user.user.id)).toBe(10 * 500_000);
    expect(await ledgerRows(tradeNo)).toHaveLength(1);
    // Its log row is told apart from a paid one's (new-api: "管理员补单成功") without naming the
    // administrator (as a balance change's); the order the API answers has no provider reference to show it.
    const events = (await h.drainUsageStream()).filter((e) => e.user_id === user.user.id);
    expect(events).toEqual([expect.objectContaining({ type: 1, request_id: `topup:${tradeNo}`, quota_delta: 10 * 500_000 })]);
    expect(events[0]!.content).toBe('An administrator completed a top-up of 10 (5000000 quota) by hand, ' +
      `without a payment confirmation from epay; order ${tradeNo} of 73.00 via wxpay`);
    expect(events[0]!.content).not.toContain(root.user.username);
    expect(Object.keys(done.json().data)).not.toContain('provider_trade_no');
    // Who did it is in the console's own log, once.
    const audit = logLines.map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'top-up completed by hand by an administrator' && l.tradeNo === tradeNo);
    expect(audit).toEqual([expect.objectContaining({ accountId: Number(user.user.id), by: Number(root.user.id), delta: 10 * 500_000 })]);
  });
});

describe('card checkout against a provider that misbehaves', () => {
  /** A stand-in card provider for one test, set as CardpayApiAddress; the sandbox is put back after. */
  async function withProvider(handler: (req: IncomingMessage, res: ServerResponse) => void, run: () => Promise<void>): Promise<void> {
    const server = createServer(handler);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    expect((await h.putOption(root, 'CardpayApiAddress', `http://127.0.0.1:${(server.address() as AddressInfo).port}`)).statusCode).toBe(200);
    try {
      await run();
    } finally {
      expect((await h.putOption(root, 'CardpayApiAddress', card.url)).statusCode).toBe(200);
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  }

  it('a session answer that drips is cut off at PAYMENT_PROVIDER_TIMEOUT_MS: 502 in the envelope', async () => {
    // Headers at once, then one byte every 200 ms for 8 s: undici's idle timeouts never fire.
    await withProvider((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{');
      const started = Date.now();
      const t = setInterval(() => (Date.now() - started >= 8000 ? (clearInterval(t), res.end('"id":"cs_x","url":"https://pay.example/cs_x"}')) : res.write(' ')), 200);
      res.on('close', () => clearInterval(t));
    }, async () => {
      const user = await h.account();
      const started = Date.now();
      const res = await inject('POST', '/api/user/cardpay/pay', user, { amount: 5 });
      const took = Date.now() - started;
      expect(res.statusCode, res.body).toBe(502);
      expect(res.json()).toEqual({ success: false, message: 'the card provider did not create a checkout session; try again later' });
      // The deadline held: well under the 8 s drip (generous margin over the 1.5 s deadline).
      expect(took).toBeLessThan(PROVIDER_TIMEOUT_MS + 3500);
    });
  }, 15_000);

  it('a session answer larger than the cap is refused, not read whole: 502 in the envelope', async () => {
    await withProvider((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'cs_big', url: 'https://pay.example/cs_big', padding: 'x'.repeat(2 * 1024 * 1024) }));
    }, async () => {
      const user = await h.account();
      const res = await inject('POST', '/api/user/cardpay/pay', user, { amount: 5 });
      expect(res.statusCode, res.body).toBe(502);
      expect(res.json()).toEqual({ success: false, message: 'the card provider did not create a checkout session; try again later' });
    });
  });

  // Before: each failed session left its order pending, which no one could pay, and held one of the
  // account's 10 unpaid orders for the hour: a provider outage locked the account out of every online
  // top-up (429) after the provider was back (review pay).
  it('a failed session ends its order (expired): 10 failures during an outage leave the account free to pay after it', async () => {
    const user = await h.account();
    await withProvider((req, res) => {
      req.resume();
      res.writeHead(503);
      res.end('maintenance');
    }, async () => {
      for (let i = 0; i < PENDING_ORDERS_PER_WINDOW; i++) expect((await inject('POST', '/api/user/cardpay/pay', user, { amount: 5 })).statusCode).toBe(502);
    });
    const rows = await h.sql<{ status: string }[]>`SELECT status FROM topups WHERE user_id = ${user.user.id}`;
    expect(rows.map((r) => r.status)).toEqual(Array(PENDING_ORDERS_PER_WINDOW).fill('expired'));
    const again = await inject('POST', '/api/user/cardpay/pay', user, { amount: 5 });
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json().data.pay_link).toMatch(/^http/);
  });

  // Before: each failed session expired its order, so nothing bounded how often one account made the
  // console call a failing card provider (and add an order row): 60 tries, 60 provider calls, 60 rows.
  it(`an account's orders opened and not paid within an hour are bounded (${OPENED_ORDERS_PER_WINDOW}), failed ones included: one more answers 429 without calling the provider`, async () => {
    const user = await h.account();
    let calls = 0;
    await withProvider((req, res) => {
      calls++;
      req.resume();
      res.writeHead(503);
      res.end('maintenance');
    }, async () => {
      for (let i = 0; i < OPENED_ORDERS_PER_WINDOW; i++) expect((await inject('POST', '/api/user/cardpay/pay', user, { amount: 5 })).statusCode).toBe(502);
      expect(calls).toBe(OPENED_ORDERS_PER_WINDOW);
      const over = await inject('POST', '/api/user/cardpay/pay', user, { amount: 5 });
      expect(over.statusCode, over.body).toBe(429);
      expect(over.json()).toMatchObject({ success: false, message: expect.stringMatching(/top-up orders/) });
      expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
      expect(calls).toBe(OPENED_ORDERS_PER_WINDOW);
    });
    const [n] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM topups WHERE user_id = ${user.user.id}`;
    expect(n!.n).toBe(OPENED_ORDERS_PER_WINDOW);
  });
});
