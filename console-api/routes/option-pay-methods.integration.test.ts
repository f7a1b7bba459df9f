// The PayMethods option: a method's own min_topup is a positive integer quantity (written as a number
// or a string of digits), answered as a string in pay_methods[].min_topup.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
let admin: TestAccount;
let root: TestAccount;
beforeAll(async () => {
  h = await startConsoleHarness();
  admin = await h.account({ role: 10 });
  root = await h.account({ role: 100 });
  const res = await h.app.inject({ method: 'PUT', url: '/api/option/', headers: root.auth, payload: { key: 'PaymentComplianceConfirmed', value: true } });
  expect(res.statusCode, res.body).toBe(200);
});
afterAll(async () => {
  await h?.close();
});

// Options are root's: PUT /api/option/ refuses an administrator.
const putMethods = (value: unknown) => h.putOption(root, 'PayMethods', value);
const stored = () => h.storedOption('PayMethods');
const payMethodsShown = async () => (await h.app.inject({ method: 'GET', url: '/api/user/topup/info', headers: admin.auth })).json().data.pay_methods;

describe('PayMethods min_topup', () => {
  it.each(['-5', 'abc', '0', '1.5', ' 5', '1e3', '2000000', -1, 0, 2.5, 2_000_000, true, null])(
    'refuses min_topup %j with 400 naming it and keeps the stored methods',
    async (minTopup) => {
      const before = await stored();
      const res = await putMethods([{ name: 'Alipay', type: 'alipay', min_topup: minTopup }]);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({
        success: false,
        message: 'value (PayMethods): must be an array of {name, type, color, min_topup?} as JSON ' +
          "(min_topup must be a positive integer of at most 1000000, as a number or a string of digits, or '')",
      });
      expect(await stored()).toBe(before);
    },
  );

  it('accepts a string of digits, a number, an empty string or none, and answers each as a string', async () => {
    const methods = [
      { name: 'A', type: 'a', min_topup: '5' },
      { name: 'B', type: 'b', min_topup: 7 },
      { name: 'C', type: 'c', min_topup: '' },
      { name: 'D', type: 'd' },
      { name: 'E', type: 'e', min_topup: '1000000' },
    ];
    const res = await putMethods(methods);
    expect(res.statusCode, res.body).toBe(200);
    expect((await payMethodsShown()).map((m: { min_topup: string }) => m.min_topup)).toEqual(['5', '7', '1', '1', '1000000']);
  });

  it('reads a list stored before the check with its own methods, a bad minimum falling back to MinTopUp', async () => {
    const legacy = [{ name: 'Old', type: 'old', color: 'red', min_topup: '-5' }, { name: 'Odd', type: 'odd', min_topup: 'abc' }];
    await h.sql`INSERT INTO options (key, value) VALUES ('PayMethods', ${JSON.stringify(legacy)}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
    expect(await payMethodsShown()).toEqual([
      { name: 'Old', type: 'old', color: 'red', min_topup: '1' },
      { name: 'Odd', type: 'odd', color: '', min_topup: '1' },
    ]);
  });
});
