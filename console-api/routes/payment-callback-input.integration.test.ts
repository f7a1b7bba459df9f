// Correctly signed payment callbacks whose values are of the wrong type or shape: the signature says
// who sent them, not that what they carry is usable. A trade number that is not one this console
// makes is answered as an unknown order; a NUL in the epay form is refused like one in a query.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { epaySandboxSign } from '../../bench/payment-sandbox/epay-sandbox.js';
import { cardpaySandboxSignature } from '../../bench/payment-sandbox/cardpay-sandbox.js';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';

const EPAY = { pid: '1001', key: 'epay-merchant-key-123' };
const CARD = { webhookSecret: 'whsec_test_abc' };

let h: ConsoleHarness;
let user: TestAccount;
beforeAll(async () => {
  h = await startConsoleHarness();
  const root = await h.account({ role: 100 });
  user = await h.account();
  const options: Record<string, unknown> = {
    PaymentComplianceConfirmed: true, PayAddress: 'https://pay.example.com', EpayId: EPAY.pid, EpayKey: EPAY.key, Price: '7.3',
    CardpayApiAddress: 'https://card.example.com', CardpayApiSecret: 'sk_test', CardpayWebhookSecret: CARD.webhookSecret,
  };
  for (const [key, value] of Object.entries(options)) {
    const res = await h.app.inject({ method: 'PUT', url: '/api/option/', headers: root.auth, payload: { key, value } });
    expect(res.statusCode, `${key}: ${res.body}`).toBe(200);
  }
});
afterAll(async () => {
  await h?.close();
});

/** A pending epay order of 10 units (73.00), as /api/user/pay makes it. */
async function epayOrder(): Promise<string> {
  const res = await h.app.inject({ method: 'POST', url: '/api/user/pay', headers: user.auth, payload: { amount: 10, payment_method: 'alipay' } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data.params.out_trade_no as string;
}
const orderStatus = async (tradeNo: string) => (await h.sql<{ status: string }[]>`SELECT status FROM topups WHERE trade_no = ${tradeNo}`)[0]?.status;
const quota = async () => Number((await h.sql<{ quota: number }[]>`SELECT quota FROM users WHERE id = ${user.user.id}`)[0]!.quota);

function signedNotice(fields: Record<string, string>): URLSearchParams {
  const params = { pid: EPAY.pid, trade_no: 'EP123', type: 'alipay', name: 'TUC10', money: '73.00', trade_status: 'TRADE_SUCCESS', ...fields };
  return new URLSearchParams({ ...params, sign: epaySandboxSign(params, EPAY.key), sign_type: 'MD5' });
}
const postNotice = (form: URLSearchParams) => h.app.inject({
  method: 'POST', url: '/api/user/epay/notify', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: form.toString(),
});

/** epay reads only the text of the answer: every failure is `fail` in text/plain, never the JSON envelope. */
function expectFail(res: { statusCode: number; body: string; headers: Record<string, unknown> }, status: number): void {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.body).toBe('fail');
  expect(String(res.headers['content-type'])).toMatch(/^text\/plain/);
}

describe('epay notify', () => {
  it('refuses a signed form with a NUL in out_trade_no (400 fail, as text) and credits nothing', async () => {
    const tradeNo = await epayOrder();
    expectFail(await postNotice(signedNotice({ out_trade_no: `${tradeNo}\u0000` })), 400);
    expect(await orderStatus(tradeNo)).toBe('pending');
    expect(await quota()).toBe(0);
  });

  it('refuses a NUL in any other field, in a field name or in the query the same way', async () => {
    const tradeNo = await epayOrder();
    expectFail(await postNotice(signedNotice({ out_trade_no: tradeNo, name: 'TUC\u000010' })), 400);
    expectFail(await postNotice(signedNotice({ out_trade_no: tradeNo, 'x\u0000': '1' })), 400);
    expectFail(await h.app.inject({ method: 'GET', url: `/api/user/epay/notify?${signedNotice({ out_trade_no: `${tradeNo}\u0000` })}` }), 400);
    expect(await orderStatus(tradeNo)).toBe('pending');
  });

  it('answers fail (400, as text) when the credit is refused: the balance would pass 2^53 - 1; the order stays pending', async () => {
    const rich = await h.account({ quota: Number.MAX_SAFE_INTEGER - 10 });
    const pay = await h.app.inject({ method: 'POST', url: '/api/user/pay', headers: rich.auth, payload: { amount: 10, payment_method: 'alipay' } });
    expect(pay.statusCode, pay.body).toBe(200);
    const tradeNo = pay.json().data.params.out_trade_no as string;
    expectFail(await postNotice(signedNotice({ out_trade_no: tradeNo })), 400);
    expectFail(await h.app.inject({ method: 'GET', url: `/api/user/epay/notify?${signedNotice({ out_trade_no: tradeNo })}` }), 400);
    expect(await orderStatus(tradeNo)).toBe('pending');
    const [row] = await h.sql<{ quota: string }[]>`SELECT quota::text FROM users WHERE id = ${rich.user.id}`;
    expect(row!.quota).toBe(String(Number.MAX_SAFE_INTEGER - 10));
  });

  it('answers fail (413, as text) to a body over the limit', async () => {
    const res = await h.app.inject({
      method: 'POST', url: '/api/user/epay/notify', headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: `out_trade_no=${'x'.repeat(2 * 1024 * 1024)}`,
    });
    expectFail(res, 413);
  });

  it('answers fail (500, as text) when the merchant key cannot be read', async () => {
    const tradeNo = await epayOrder();
    const [saved] = await h.sql<{ value: string }[]>`SELECT value FROM options WHERE key = 'EpayKey'`;
    // Sealed under another KEY_SECRET (a restore from another installation): opening it throws.
    await h.sql`UPDATE options SET value = 'sealed:v1:AAAAAAAAAAAAAAAA:AAAAAAAAAAAAAAAAAAAAAA' WHERE key = 'EpayKey'`;
    try {
      expectFail(await postNotice(signedNotice({ out_trade_no: tradeNo })), 500);
    } finally {
      await h.sql`UPDATE options SET value = ${saved!.value} WHERE key = 'EpayKey'`;
    }
    expect(await orderStatus(tradeNo)).toBe('pending');
  });

  it.each(['', 'x'.repeat(5000), "USR1NO' OR '1'='1", 'usr1no0123456789abcdef', 'USR1NO0123456789ABCDEF'])(
    'answers a signed notice for out_trade_no %j as for an unknown order (404 fail)',
    async (outTradeNo) => {
      const res = await postNotice(signedNotice({ out_trade_no: outTradeNo }));
      expect(res.statusCode, res.body).toBe(404);
      expect(res.body).toBe('fail');
    },
  );

  it('still credits a genuine notice once', async () => {
    const tradeNo = await epayOrder();
    const res = await postNotice(signedNotice({ out_trade_no: tradeNo }));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body).toBe('success');
    expect(await orderStatus(tradeNo)).toBe('success');
  });
});

describe('card webhook', () => {
  async function cardOrder(): Promise<string> {
    const [row] = await h.sql<{ trade_no: string }[]>`
      INSERT INTO topups (user_id, amount, money, trade_no, payment_method, payment_provider, status, create_time)
      VALUES (${user.user.id}, 10, 10, ${`USR${user.user.id}NO${randomBytes(8).toString('hex')}`}, 'card', 'cardpay', 'pending', ${Math.floor(Date.now() / 1000)})
      RETURNING trade_no`;
    return row!.trade_no;
  }
  const deliver = (session: Record<string, unknown>) => {
    const body = JSON.stringify({
      id: 'evt_1', type: 'checkout.session.completed',
      data: { object: { id: 'cs_test_1', payment_status: 'paid', currency: 'usd', amount_total: 1000, ...session } },
    });
    return h.app.inject({
      method: 'POST', url: '/api/cardpay/webhook', payload: body,
      headers: { 'content-type': 'application/json', 'stripe-signature': cardpaySandboxSignature(CARD.webhookSecret, Math.floor(Date.now() / 1000), body) },
    });
  };

  it.each([
    { what: 'client_reference_id "" and metadata.trade_no true', session: { client_reference_id: '', metadata: { trade_no: true } } },
    { what: 'client_reference_id a number', session: { client_reference_id: 12345 } },
    { what: 'client_reference_id an object', session: { client_reference_id: { trade_no: 'USR1NO0123456789abcdef' } } },
    { what: 'metadata.trade_no an array', session: { metadata: { trade_no: ['USR1NO0123456789abcdef'] } } },
    { what: 'client_reference_id of 10,000 characters', session: { client_reference_id: 'U'.repeat(10_000) } },
    { what: 'no trade number at all', session: {} },
    // The provider sends every sale of its account to the endpoint (a payment link, another shop on
    // the same account): answered 4xx, each was retried for days and the endpoint, ours included, set
    // at risk of being disabled (review pay).
    { what: 'no trade number, in another currency (another shop\'s sale)', session: { client_reference_id: null, currency: 'eur' } },
    { what: 'a trade number of no order of this console', session: { client_reference_id: 'USR999999NO00000000000000000000' } },
    { what: 'a trade number of no order of this console, in another currency', session: { client_reference_id: 'USR999999NO00000000000000000000', currency: 'eur' } },
  ])('acknowledges a signed paid event with $what (not an order of this console) and credits nothing', async ({ session }) => {
    const before = await quota();
    const res = await deliver(session);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ success: true, message: '', data: { received: true, credited: false } });
    expect(await quota()).toBe(before);
  });

  it('still refuses a payment in another currency for an order of this console, crediting nothing', async () => {
    const tradeNo = await cardOrder();
    const before = await quota();
    const res = await deliver({ client_reference_id: tradeNo, currency: 'eur' });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'currency eur is not usd' });
    expect(await quota()).toBe(before);
    expect(await orderStatus(tradeNo)).toBe('pending');
  });

  it('credits a paid event whose session id is not a string, without storing it', async () => {
    const tradeNo = await cardOrder();
    const res = await deliver({ client_reference_id: tradeNo, id: true });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ success: true, message: '', data: { received: true, credited: true } });
    const [row] = await h.sql<{ status: string; provider_trade_no: string }[]>`SELECT status, provider_trade_no FROM topups WHERE trade_no = ${tradeNo}`;
    expect(row).toEqual({ status: 'success', provider_trade_no: '' });
  });

  it('still completes an order named by metadata.trade_no when client_reference_id is empty', async () => {
    const tradeNo = await cardOrder();
    const res = await deliver({ client_reference_id: '', metadata: { trade_no: tradeNo } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data).toEqual({ received: true, credited: true });
    expect(await orderStatus(tradeNo)).toBe('success');
  });
});
