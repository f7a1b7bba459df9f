// Options whose value bounds an input (a minimum, a quick amount, a discount tier, a port) take only
// values that input can meet: passwords are at most 64 characters, a top-up quantity at most
// 1,000,000 (payments/pricing.ts MAX_TOPUP_AMOUNT), a port at most 65535. Beyond: 400 naming the
// option, the stored value kept. A value stored before the bound reads as the nearest meetable one
// (a minimum) or as written (a list), never as the default.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
let root: TestAccount;
beforeAll(async () => {
  h = await startConsoleHarness();
  root = await h.account({ role: 100 });
});
afterAll(async () => {
  await h?.close();
});

const putOption = (key: string, value: unknown) =>
  h.putOption(root, key, value);
const stored = (key: string) => h.storedOption(key);
const storeRaw = (key: string, value: string) =>
  h.sql`INSERT INTO options (key, value) VALUES (${key}, ${value}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
const topupInfo = async () => (await h.app.inject({ method: 'GET', url: '/api/user/topup/info', headers: root.auth })).json().data;
const register = (password: string) => h.app.inject({
  method: 'POST', url: '/api/user/register', payload: { username: `u${Math.random().toString(36).slice(2, 12)}`, password },
});

describe('PasswordMinLength', () => {
  it('refuses a minimum above 64, the longest password accepted, and keeps the stored one', async () => {
    expect((await putOption('PasswordMinLength', 12)).statusCode).toBe(200);
    for (const value of [65, '65', 1000, Number.MAX_SAFE_INTEGER]) {
      const res = await putOption('PasswordMinLength', value);
      expect(res.statusCode, String(value)).toBe(400);
      expect(res.json()).toEqual({ success: false, message: 'value (PasswordMinLength): must be at most 64' });
    }
    expect(await stored('PasswordMinLength')).toBe('12');
  });

  it('accepts 64, and a password of 64 characters then registers', async () => {
    expect((await putOption('PasswordMinLength', 64)).statusCode).toBe(200);
    expect((await register('a'.repeat(63))).statusCode).toBe(400);
    const res = await register('a'.repeat(64));
    expect(res.statusCode, res.body).toBe(200);
  });

  it('reads a minimum stored above 64 as 64, so that registration stays possible', async () => {
    await storeRaw('PasswordMinLength', '65');
    const res = await register('b'.repeat(64));
    expect(res.statusCode, res.body).toBe(200);
    expect((await putOption('PasswordMinLength', 8)).statusCode).toBe(200);
  });
});

describe('top-up minimums', () => {
  const KEYS = ['MinTopUp', 'CardpayMinTopUp', 'GlobalpayMinTopUp', 'GlobalpayPancakeMinTopUp'];

  it.each(KEYS)('%s: refuses a minimum above 1000000, the largest quantity of an order', async (key) => {
    expect((await putOption(key, 5)).statusCode).toBe(200);
    for (const value of [1_000_001, '2000000', Number.MAX_SAFE_INTEGER]) {
      const res = await putOption(key, value);
      expect(res.statusCode, String(value)).toBe(400);
      expect(res.json()).toEqual({ success: false, message: `value (${key}): must be at most 1000000` });
    }
    expect(await stored(key)).toBe('5');
    expect((await putOption(key, 1_000_000)).statusCode).toBe(200);
    expect((await putOption(key, 1)).statusCode).toBe(200);
  });

  it('reads a minimum stored above 1000000 as 1000000', async () => {
    await storeRaw('MinTopUp', String(Number.MAX_SAFE_INTEGER));
    await storeRaw('CardpayMinTopUp', '5000000');
    const info = await topupInfo();
    expect(info.min_topup).toBe(1_000_000);
    expect(info.cardpay_min_topup).toBe(1_000_000);
    await storeRaw('MinTopUp', '1');
    await storeRaw('CardpayMinTopUp', '1');
  });
});

describe('AmountOptions and AmountDiscount', () => {
  it('refuses a quick amount no order can be made of (not a whole quantity from 1 to 1000000)', async () => {
    expect((await putOption('AmountOptions', [10, 20])).statusCode).toBe(200);
    for (const value of [[10, 1_000_001], [2.5], [0], [-5]]) {
      const res = await putOption('AmountOptions', value);
      expect(res.statusCode, JSON.stringify(value)).toBe(400);
      expect(res.json().message).toMatch(/^value \(AmountOptions\): must be an array of whole quantities from 1 to 1000000 as JSON/);
    }
    expect(await stored('AmountOptions')).toBe('[10,20]');
    expect((await putOption('AmountOptions', [1, 1_000_000])).statusCode).toBe(200);
  });

  it('reads quick amounts stored before the check as written', async () => {
    await storeRaw('AmountOptions', '[2.5,2000000]');
    expect((await topupInfo()).amount_options).toEqual([2.5, 2_000_000]);
  });

  it('refuses a discount tier no quantity reaches (a key above 1000000)', async () => {
    expect((await putOption('AmountDiscount', { 100: 0.9 })).statusCode).toBe(200);
    const res = await putOption('AmountDiscount', { 100: 0.9, 1000001: 0.5 });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(/^value \(AmountDiscount\): must be an object of quantity to coefficient as JSON/);
    expect(JSON.parse((await stored('AmountDiscount'))!)).toEqual({ 100: 0.9 });
    expect((await putOption('AmountDiscount', { 0: 1, 1000000: 0.5 })).statusCode).toBe(200);
  });

  it('reads discount tiers stored before the check as written', async () => {
    await storeRaw('AmountDiscount', '{"10":0.9,"5000000":0.5}');
    expect((await topupInfo()).discount).toEqual({ 10: 0.9, 5000000: 0.5 });
  });
});

describe('SMTPPort', () => {
  it('refuses a port above 65535', async () => {
    for (const value of [65_536, 1_000_000]) {
      const res = await putOption('SMTPPort', value);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ success: false, message: 'value (SMTPPort): must be at most 65535' });
    }
    expect((await putOption('SMTPPort', 65_535)).statusCode).toBe(200);
  });
});

describe('oidc.well_known (D3)', () => {
  it.each([
    'http://10.0.0.1/.well-known/openid-configuration', 'http://idp.example.com', 'http://127.0.0.1.example.com',
  ])('refuses plain http to a host that is not loopback: %s', async (value) => {
    const res = await putOption('oidc.well_known', value);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'value (oidc.well_known): must be an https URL (http only on a loopback host: localhost, 127.0.0.0/8 or [::1])' });
    expect(await stored('oidc.well_known')).not.toBe(value);
  });

  it.each(['https://idp.example.com', 'http://127.0.0.1:9000', 'http://localhost:9000/realms/x', 'http://[::1]:9000', ''])('accepts %s', async (value) => {
    const res = await putOption('oidc.well_known', value);
    expect(res.statusCode, res.body).toBe(200);
  });
});

describe('ratio tables naming __proto__ (D4)', () => {
  it.each(['ModelRatio', 'CompletionRatio', 'GroupRatio', 'ModelContextWindow'])('%s sent as JSON text: 400 naming it, nothing stored', async (key) => {
    const before = await stored(key);
    const value = key === 'GroupRatio' ? '{"default":1,"__proto__":2}' : '{"__proto__":2}';
    const res = await putOption(key, value);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ success: false, message: `value (${key}): the property name "__proto__" is refused (it names an object's prototype); it cannot name a model or a group` });
    expect(await stored(key)).toBe(before);
  });
});
