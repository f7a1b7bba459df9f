// Unit prices are bounded so that the largest order (1,000,000 units at the largest discount
// coefficient, 10) fits topups.money, NUMERIC(14, 2); a price stored before that bound is refused
// per order by the amount and pay routes instead of failing in Postgres.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
let root: TestAccount;
beforeAll(async () => {
  h = await startConsoleHarness();
  root = await h.account({ role: 100 });
  // Both providers enabled; neither is called before an order is priced.
  const options: Record<string, unknown> = {
    PaymentComplianceConfirmed: true, PayAddress: 'https://pay.example.com', EpayId: '1001', EpayKey: 'epay-key',
    CardpayApiAddress: 'https://card.example.com', CardpayApiSecret: 'sk_test', CardpayWebhookSecret: 'whsec_test',
  };
  for (const [key, value] of Object.entries(options)) {
    const res = await putOption(key, value);
    expect(res.statusCode, `${key}: ${res.body}`).toBe(200);
  }
});
afterAll(async () => {
  await h?.close();
});

function putOption(key: string, value: unknown) {
  return h.putOption(root, key, value);
}
const stored = (key: string) => h.storedOption(key);
/** Writes an option as an older version may have stored it, past today's rules. */
const storeRaw = (key: string, value: string) =>
  h.sql`INSERT INTO options (key, value) VALUES (${key}, ${value}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
const ordersOf = async (userId: number) => Number((await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM topups WHERE user_id = ${userId}`)[0]!.n);
const post = (url: string, who: TestAccount, payload: object) => h.app.inject({ method: 'POST', url, headers: who.auth, payload });

const TOO_LARGE = 'amount: the price of this quantity is above the largest order (999999999999.99)';

describe('Price and CardpayUnitPrice options', () => {
  it.each(['Price', 'CardpayUnitPrice'])('%s: refuses a price above 99999.99 (400 naming it) and keeps the stored one', async (key) => {
    expect((await putOption(key, '12.5')).statusCode).toBe(200);
    for (const value of ['100000', '99999.991', '2000000', '9'.repeat(400), `${'9'.repeat(400)}.5`]) {
      const res = await putOption(key, value);
      expect(res.statusCode, value).toBe(400);
      expect(res.json()).toEqual({ success: false, message: `value (${key}): must be at most 99999.99` });
    }
    expect(await stored(key)).toBe('12.5');
  });

  it('accepts 99999.99: the largest quantity at the largest discount still fits the order\'s money column', async () => {
    expect((await putOption('Price', '99999.99')).statusCode).toBe(200);
    expect((await putOption('AmountDiscount', { 1: 10 })).statusCode).toBe(200);
    try {
      const user = await h.account();
      const amount = await post('/api/user/amount', user, { amount: 1_000_000 });
      expect(amount.json()).toEqual({ success: true, message: '', data: '999999900000.00' });
      const pay = await post('/api/user/pay', user, { amount: 1_000_000, payment_method: 'alipay' });
      expect(pay.statusCode, pay.body).toBe(200);
      const [order] = await h.sql<{ money: string }[]>`SELECT money FROM topups WHERE user_id = ${user.user.id}`;
      expect(order!.money).toBe('999999900000.00');
    } finally {
      await putOption('AmountDiscount', {});
      await putOption('Price', '7.3');
    }
  });
});

describe('a unit price stored before the bound', () => {
  it.each([
    { what: 'Price 2000000, 500,000 units', price: '2000000', amount: 500_000, discount: '{}' },
    { what: 'Price 2000000, 50,000 units at coefficient 10', price: '2000000', amount: 50_000, discount: '{"1":10}' },
    { what: 'Price of 400 digits (Infinity)', price: '9'.repeat(400), amount: 1, discount: '{}' },
  ])('QR-code: $what is refused by amount and pay with 400, no order stored', async ({ price, amount, discount }) => {
    await storeRaw('Price', price);
    await storeRaw('AmountDiscount', discount);
    try {
      const user = await h.account();
      const quote = await post('/api/user/amount', user, { amount });
      expect(quote.statusCode, quote.body).toBe(400);
      expect(quote.json()).toEqual({ success: false, message: TOO_LARGE });
      const pay = await post('/api/user/pay', user, { amount, payment_method: 'alipay' });
      expect(pay.statusCode, pay.body).toBe(400);
      expect(pay.json()).toEqual({ success: false, message: TOO_LARGE });
      expect(await ordersOf(user.user.id)).toBe(0);
    } finally {
      await storeRaw('Price', '7.3');
      await storeRaw('AmountDiscount', '{}');
    }
  });

  it('still prices the quantities that fit at that price (2000000 a unit, 10 units)', async () => {
    await storeRaw('Price', '2000000');
    try {
      const user = await h.account();
      expect((await post('/api/user/amount', user, { amount: 10 })).json()).toEqual({ success: true, message: '', data: '20000000.00' });
    } finally {
      await storeRaw('Price', '7.3');
    }
  });

  it('card: a CardpayUnitPrice of 400 digits is refused by amount and pay with 400, no order stored', async () => {
    await storeRaw('CardpayUnitPrice', '9'.repeat(400));
    try {
      const user = await h.account();
      const quote = await post('/api/user/cardpay/amount', user, { amount: 5 });
      expect(quote.statusCode, quote.body).toBe(400);
      expect(quote.json()).toEqual({ success: false, message: TOO_LARGE });
      const pay = await post('/api/user/cardpay/pay', user, { amount: 5 });
      expect(pay.statusCode, pay.body).toBe(400);
      expect(pay.json()).toEqual({ success: false, message: TOO_LARGE });
      expect(await ordersOf(user.user.id)).toBe(0);
    } finally {
      await storeRaw('CardpayUnitPrice', '1');
    }
  });
});
