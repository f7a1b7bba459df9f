import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';
import { expectEnvelope, expectShape, LOG_PAGE, ORDER_PAGE, PAY_METHOD, TOPUP_INFO, TOPUP_ORDER, SERVED_LOG_ENTRY } from '../testing/contract.js';

let h: ConsoleHarness;
let admin: TestAccount;
let root: TestAccount;
beforeAll(async () => {
  h = await startConsoleHarness();
  admin = await h.account({ role: 10 });
  root = await h.account({ role: 100 });
});
afterAll(async () => {
  await h?.close();
});

const inject = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, who: TestAccount, payload?: unknown) =>
  h.app.inject({ method, url, headers: who.auth, ...(payload === undefined ? {} : { payload: payload as object }) });
const setOption = async (key: string, value: unknown) => {
  const res = await inject('PUT', '/api/option/', root, { key, value });
  expect(res.statusCode, res.body).toBe(200);
};
const makeCodes = async (quota: number, count = 1, extra: object = {}) => {
  const res = await inject('POST', '/api/redemption/', admin, { name: 'gift', quota, count, ...extra });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data as string[];
};

describe('GET /api/user/topup/info', () => {
  it('answers every field of the contract with its type; pay_methods empty until compliance is confirmed', async () => {
    const user = await h.account();
    const res = await inject('GET', '/api/user/topup/info', user);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expectEnvelope(body, true);
    expectShape(body.data, TOPUP_INFO);
    expect(body.data).toMatchObject({
      enable_online_topup: false, enable_cardpay_topup: false, enable_redemption: true, payment_compliance_confirmed: false,
      pay_methods: [], globalpay_pay_methods: null, productpay_products: null, min_topup: 1, topup_link: '',
    });
  });

  it('reflects the options an administrator sets: methods with string minimums, discount, amounts', async () => {
    await setOption('PaymentComplianceConfirmed', true);
    await setOption('PayMethods', [{ name: 'Alipay', type: 'alipay', color: 'blue' }, { name: 'WeChat', type: 'wxpay', color: 'green', min_topup: 5 }]);
    await setOption('MinTopUp', 2);
    await setOption('AmountDiscount', { 100: 0.9, 500: 0.8 });
    await setOption('AmountOptions', [5, 10, 100]);
    await setOption('TopUpLink', 'https://shop.example/topup');
    const data = (await inject('GET', '/api/user/topup/info', admin)).json().data;
    expectShape(data, TOPUP_INFO);
    expect(data.pay_methods).toEqual([
      { name: 'Alipay', type: 'alipay', color: 'blue', min_topup: '2' },
      { name: 'WeChat', type: 'wxpay', color: 'green', min_topup: '5' },
    ]);
    for (const m of data.pay_methods) expectShape(m, PAY_METHOD, 'pay_methods[]');
    expect(data).toMatchObject({ min_topup: 2, discount: { 100: 0.9, 500: 0.8 }, amount_options: [5, 10, 100], topup_link: 'https://shop.example/topup', payment_compliance_confirmed: true });
    // Credentials missing: payments stay off.
    expect(data.enable_online_topup).toBe(false);
  });
});

describe('POST /api/user/amount', () => {
  it('prices a quantity as a string with the discount tier applied', async () => {
    const user = await h.account();
    const price = async (amount: number) => inject('POST', '/api/user/amount', user, { amount });
    await setOption('Price', '7.3');
    expect((await price(10)).json()).toEqual({ success: true, message: '', data: '73.00' });
    expect((await price(100)).json().data).toBe('657.00'); // 100 x 7.3 x 0.9
    expect((await price(499)).json().data).toBe((499 * 7.3 * 0.9).toFixed(2));
    expect((await price(600)).json().data).toBe((600 * 7.3 * 0.8).toFixed(2));
  });

  it('errors below min_topup (400, naming amount) and on a bad amount', async () => {
    const user = await h.account();
    const low = await inject('POST', '/api/user/amount', user, { amount: 1 });
    expect(low.statusCode).toBe(400);
    expect(low.json()).toEqual({ success: false, message: 'amount: must be at least 2 (the minimum top-up)' });
    for (const amount of [0, -5, 1.5, '10']) {
      const bad = await inject('POST', '/api/user/amount', user, { amount });
      expect(bad.statusCode).toBe(400);
      expect(bad.json().message).toMatch(/^amount: /);
    }
  });
});

describe('POST /api/user/topup (redeem a code)', () => {
  it('credits the code\'s quota once: data is the quota, a ledger row and a type-1 log event; the mirror moves', async () => {
    const user = await h.account({ quota: 100 });
    await h.redis.set(h.keys.accountBalance(user.user.id), 60); // loaded mirror, 40 reserved
    const [code] = await makeCodes(250_000);
    const res = await inject('POST', '/api/user/topup', user, { key: code });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true, message: '', data: 250_000 });
    const [u] = await h.sql<{ quota: number }[]>`SELECT quota FROM users WHERE id = ${user.user.id}`;
    expect(u!.quota).toBe(250_100);
    expect(await h.quotaStore.accountBalance(user.user.id)).toBe(250_060);
    const ledger = await h.sql<{ request_id: string; type: number; quota: number; quota_delta: number }[]>`
      SELECT request_id, type, quota, quota_delta FROM ledger WHERE user_id = ${user.user.id}`;
    expect(ledger).toEqual([{ request_id: expect.stringMatching(/^redeem:\d+$/), type: 1, quota: 250_000, quota_delta: 250_000 }]);
    const [{ id: codeId }] = (await inject('GET', `/api/redemption/?keyword=${code}`, admin)).json().data.items;
    const [row] = await h.sql<{ status: number; used_user_id: number }[]>`SELECT status, used_user_id FROM redemptions WHERE id = ${codeId}`;
    expect(row).toEqual({ status: 3, used_user_id: user.user.id });

    const again = await inject('POST', '/api/user/topup', user, { key: code });
    expect(again.statusCode).toBe(409);
    expect(again.json()).toEqual({ success: false, message: 'redemption code has already been used' });

    // The billing worker turns the event into the type-1 log row, with the ledger id as log id.
    const events = await h.drainUsageStream();
    expect(events.filter((e) => e.user_id === user.user.id)).toEqual([
      expect.objectContaining({ type: 1, quota: 250_000, quota_delta: 250_000, token_id: 0, channel: 0, model_name: '', is_stream: false }),
    ]);
    const [{ id: ledgerId }] = await h.sql<{ id: number }[]>`SELECT id FROM ledger WHERE user_id = ${user.user.id}` as unknown as [{ id: number }];
    const logs = (await inject('GET', '/api/log/self?type=1', user)).json().data;
    expectShape(logs, LOG_PAGE);
    expect(logs.total).toBe(1);
    expectShape(logs.items[0], SERVED_LOG_ENTRY, 'items[]');
    expect(logs.items[0]).toMatchObject({ id: Number(ledgerId), type: 1, quota: 250_000, user_id: user.user.id, username: user.user.username });
    // A top-up is not consumption: the stat does not count it.
    expect((await inject('GET', '/api/log/self/stat', user)).json().data.quota).toBe(0);
    // The worker moved no money for it.
    const [after] = await h.sql<{ quota: number; used_quota: number }[]>`SELECT quota, used_quota FROM users WHERE id = ${user.user.id}`;
    expect(after).toEqual({ quota: 250_100, used_quota: 0 });
  });

  it('lets exactly one of 20 concurrent redemptions of one code succeed', async () => {
    const users = await Promise.all(Array.from({ length: 4 }, () => h.account()));
    const [code] = await makeCodes(77_777);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => inject('POST', '/api/user/topup', users[i % users.length]!, { key: code })),
    );
    const wins = results.filter((r) => r.statusCode === 200);
    expect(wins).toHaveLength(1);
    expect(results.filter((r) => r.statusCode === 409)).toHaveLength(19);
    const ids = users.map((u) => u.user.id);
    const [sum] = await h.sql<{ q: number }[]>`SELECT COALESCE(SUM(quota), 0)::bigint AS q FROM users WHERE id IN ${h.sql(ids)}`;
    expect(Number(sum!.q)).toBe(77_777);
    const ledger = await h.sql`SELECT id FROM ledger WHERE user_id IN ${h.sql(ids)}`;
    expect(ledger).toHaveLength(1);
  });

  it('names the cause: unknown (404), disabled, expired (409), redemption switched off (403), bad body (400)', async () => {
    const user = await h.account();
    expect((await inject('POST', '/api/user/topup', user, { key: 'no-such-code' })).json()).toEqual({ success: false, message: 'redemption code not found' });
    const [disabled] = await makeCodes(10);
    const [{ id }] = (await inject('GET', `/api/redemption/?keyword=${disabled}`, admin)).json().data.items;
    expect((await inject('PUT', '/api/redemption/?status_only=true', admin, { id, status: 2 })).statusCode).toBe(200);
    const d = await inject('POST', '/api/user/topup', user, { key: disabled });
    expect(d.statusCode).toBe(409);
    expect(d.json().message).toBe('redemption code is disabled');
    const [expiring] = await makeCodes(10, 1, { expired_time: Math.floor(Date.now() / 1000) + 3600 });
    const [{ id: expiringId }] = (await inject('GET', `/api/redemption/?keyword=${expiring}`, admin)).json().data.items;
    await h.sql`UPDATE redemptions SET expired_time = 1000 WHERE id = ${expiringId}`;
    const e = await inject('POST', '/api/user/topup', user, { key: expiring });
    expect(e.statusCode).toBe(409);
    expect(e.json().message).toBe('redemption code has expired');
    const missing = await inject('POST', '/api/user/topup', user, {});
    expect(missing.statusCode).toBe(400);
    expect(missing.json().message).toMatch(/^key: /);

    await setOption('RedemptionEnabled', false);
    const [code] = await makeCodes(10);
    const off = await inject('POST', '/api/user/topup', user, { key: code });
    expect(off.statusCode).toBe(403);
    expect(off.json()).toEqual({ success: false, message: 'redemption codes are not enabled' });
    await setOption('RedemptionEnabled', true);
    expect((await inject('POST', '/api/user/topup', user, { key: code })).statusCode).toBe(200);
  });
});

describe('GET /api/user/topup/self', () => {
  it('pages the caller\'s orders, newest first, with the contract\'s fields; keyword matches trade_no', async () => {
    const user = await h.account();
    const other = await h.account();
    const now = Math.floor(Date.now() / 1000);
    for (let i = 0; i < 3; i++) {
      await h.sql`
        INSERT INTO topups (user_id, amount, money, trade_no, payment_method, payment_provider, status, create_time, complete_time)
        VALUES (${user.user.id}, ${10 + i}, ${(i + 1) * 7.3}, ${`USR${user.user.id}NOtest${i}abc`}, 'alipay', 'epay',
                ${i === 0 ? 'success' : 'pending'}, ${now + i}, ${i === 0 ? now + 5 : 0})`;
    }
    await h.sql`INSERT INTO topups (user_id, amount, money, trade_no, payment_method, payment_provider) VALUES (${other.user.id}, 1, 1, ${`USR${other.user.id}NOx`}, 'alipay', 'epay')`;
    const res = await inject('GET', '/api/user/topup/self?page=1&page_size=2', user);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expectEnvelope(body, true);
    expectShape(body.data, ORDER_PAGE);
    expect(body.data).toMatchObject({ total: 3, page: 1, page_size: 2 });
    for (const item of body.data.items) expectShape(item, TOPUP_ORDER, 'items[]');
    expect(body.data.items.map((o: { amount: number }) => o.amount)).toEqual([12, 11]);
    expect(body.data.items[0]).toMatchObject({ money: 21.9, status: 'pending', complete_time: 0, payment_provider: 'epay' });
    const page2 = (await inject('GET', '/api/user/topup/self?page=2&page_size=2', user)).json().data;
    expect(page2.items).toHaveLength(1);
    expect(page2.items[0]).toMatchObject({ amount: 10, money: 7.3, status: 'success', complete_time: now + 5 });
    const kw = (await inject('GET', '/api/user/topup/self?keyword=test1', user)).json().data;
    expect(kw.total).toBe(1);
    expect(kw.items[0].trade_no).toBe(`USR${user.user.id}NOtest1abc`);
    expect((await inject('GET', '/api/user/topup/self?p=0', user)).statusCode).toBe(400);
  });
});

describe('administration of top-up orders', () => {
  it('lists every account\'s orders to an administrator, with filters', async () => {
    const admin = await h.account({ role: 10 });
    const a = await h.account();
    const b = await h.account();
    await h.sql`INSERT INTO topups (user_id, amount, money, trade_no, payment_method, payment_provider, status)
                VALUES (${a.user.id}, 5, 5, ${`USR${a.user.id}NOadm1`}, 'alipay', 'epay', 'pending'),
                       (${b.user.id}, 6, 6, ${`USR${b.user.id}NOadm2`}, 'alipay', 'epay', 'success')`;
    const all = (await inject('GET', `/api/user/topup?keyword=NOadm&page_size=50`, admin)).json();
    expectEnvelope(all, true);
    for (const item of all.data.items) expectShape(item, TOPUP_ORDER, 'items[]');
    expect(all.data.items.map((o: { trade_no: string }) => o.trade_no).sort()).toEqual([`USR${a.user.id}NOadm1`, `USR${b.user.id}NOadm2`]);
    const pendingOfA = (await inject('GET', `/api/user/topup?user_id=${a.user.id}&status=pending`, admin)).json();
    expect(pendingOfA.data.total).toBe(1);
  });

  it('lets the super administrator complete a pending order by hand, crediting exactly once', async () => {
    const root = await h.account({ role: 100 });
    const user = await h.account({ quota: 0 });
    const tradeNo = `USR${user.user.id}NOmanual`;
    await h.sql`INSERT INTO topups (user_id, amount, money, trade_no, payment_method, payment_provider, status)
                VALUES (${user.user.id}, 3, 3, ${tradeNo}, 'alipay', 'epay', 'pending')`;
    const results = await Promise.all(Array.from({ length: 5 }, () => inject('POST', '/api/user/topup/complete', root, { trade_no: tradeNo })));
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 409, 409, 409, 409]);
    const [u] = await h.sql`SELECT quota FROM users WHERE id = ${user.user.id}`;
    expect(Number(u!.quota)).toBe(3 * 500_000);
    const ledger = await h.sql`SELECT quota_delta FROM ledger WHERE request_id = ${`topup:${tradeNo}`}`;
    expect(ledger.map((r) => Number(r.quota_delta))).toEqual([3 * 500_000]);
    const admin = await h.account({ role: 10 });
    expect((await inject('POST', '/api/user/topup/complete', admin, { trade_no: tradeNo })).statusCode).toBe(403);
  });
});
