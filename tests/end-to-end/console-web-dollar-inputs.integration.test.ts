// Dollar amounts typed in the administrators' forms are read strictly (digits and a decimal point),
// checked before anything is sent, and refused in dollars next to their field: "abc" is not sent as
// quota null, "0x10" is not $16. Redemption codes, the account editor and the top-up Amount (whole
// dollars: "1e3" does not start a $1,000 payment) are checked here (the API key form's quota in
// console-web-key-edit.integration.test.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleCall } from '../harness/gateway-stack.js';
import { type ConsoleAccount, type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser } from './console-web-browser.js';

let b: ConsoleBrowser;
let root: ConsoleAccount;

beforeAll(async () => {
  b = await startConsoleBrowser();
  root = await insertAccount(b.stack, { role: 100, prefix: 'root' });
}, 120_000);

afterAll(async () => {
  await b?.close();
});

describe('dollar inputs', () => {
  it('Redemption codes: the value per code', async () => {
    const page = await b.newPage();
    const posts: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && new URL(r.url()).pathname === '/api/redemption/') posts.push(r.postData() ?? '');
    });
    await logIn(page, b.stack, root, '/admin/redemptions');
    const form = page.getByRole('form', { name: 'Create codes' });
    await form.getByLabel('Name').fill('strict');
    const value = form.getByLabel('Value per code (US dollars)');
    for (const typed of ['abc', '0x10', '1e2', '0', '-5', ' ']) {
      await value.fill(typed);
      await form.getByRole('button', { name: 'Create codes' }).click();
      await form.getByRole('alert').filter({ hasText: 'a dollar amount above $0, such as 10 or 2.50' }).waitFor();
      expect(await value.getAttribute('aria-invalid'), typed).toBe('true');
    }
    await page.waitForTimeout(200);
    expect(posts).toEqual([]);
    await value.fill('2.50');
    await form.getByRole('button', { name: 'Create codes' }).click();
    await page.getByTestId('new-codes').waitFor();
    expect(JSON.parse(posts[0]!)).toMatchObject({ name: 'strict', quota: 1_250_000, count: 1 });
    expect(await value.getAttribute('aria-invalid')).toBeNull();
  }, 120_000);

  it('Accounts: the balance and the amount to add', async () => {
    const user = await insertAccount(b.stack, { quota: 500_000 });
    const page = await b.newPage();
    const writes: string[] = [];
    page.on('request', (r) => {
      const path = new URL(r.url()).pathname;
      if ((r.method() === 'PUT' && path === '/api/user/') || (r.method() === 'POST' && path === '/api/user/manage')) writes.push(r.postData() ?? '');
    });
    await logIn(page, b.stack, root, '/admin/users');
    await page.getByLabel('Id, username, display name or e-mail').fill(user.username);
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('Page 1 of 1 (1 in all)').waitFor();
    await page.getByRole('button', { name: `Edit ${user.username}` }).click();
    const edit = page.getByRole('form', { name: `Edit account ${user.username}` });
    const balance = edit.getByLabel('Balance (US dollars)');
    await balance.fill('0x10');
    await edit.getByRole('button', { name: 'Save account' }).click();
    await edit.getByRole('alert').filter({ hasText: 'a dollar amount of $0 or more, such as 10 or 2.50' }).waitFor();
    expect(await balance.getAttribute('aria-invalid')).toBe('true');

    const credit = page.getByRole('form', { name: 'Add or remove quota' });
    const add = credit.getByLabel('Add to balance (US dollars)');
    for (const typed of ['abc', '0x10', '0']) {
      await add.fill(typed);
      await credit.getByRole('button', { name: 'Add quota' }).click();
      await credit.getByRole('alert').filter({ hasText: 'a non-zero dollar amount, such as 10 or -2.50 (negative removes)' }).waitFor();
      expect(await add.getAttribute('aria-invalid'), typed).toBe('true');
    }
    await page.waitForTimeout(200);
    expect(writes).toEqual([]);
    await add.fill('-0.5');
    await credit.getByRole('button', { name: 'Add quota' }).click();
    await credit.waitFor({ state: 'detached' });
    expect(JSON.parse(writes[0]!)).toMatchObject({ id: user.id, action: 'add_quota', value: -250_000 });
    const [row] = await b.stack.sql<{ quota: number }[]>`SELECT quota FROM users WHERE id = ${user.id}`;
    expect(Number(row!.quota)).toBe(250_000);

    // Below the smallest unit ($0.000002): refused, not saved as $0 with the form closing as if saved.
    await page.getByRole('button', { name: `Edit ${user.username}` }).click();
    const again = page.getByRole('form', { name: `Edit account ${user.username}` });
    await again.getByLabel('Balance (US dollars)').fill('0.0000001');
    await again.getByRole('button', { name: 'Save account' }).click();
    await again.getByRole('alert').filter({ hasText: 'below $0.000002 (1 quota), the smallest amount' }).waitFor();
    await page.waitForTimeout(200);
    expect(writes).toHaveLength(1);
    const [kept] = await b.stack.sql<{ quota: number }[]>`SELECT quota FROM users WHERE id = ${user.id}`;
    expect(Number(kept!.quota)).toBe(250_000);
  }, 120_000);

  it('Top up: the Amount is whole dollars, "1e3" refused before any payment starts', async () => {
    const options: Record<string, unknown> = {
      PaymentComplianceConfirmed: true, PayAddress: 'http://127.0.0.1:9', EpayId: '1001', EpayKey: 'epay-key', MinTopUp: 1,
      CardpayApiAddress: 'http://127.0.0.1:9', CardpayApiSecret: 'sk_test_x', CardpayWebhookSecret: 'whsec_x', CardpayMinTopUp: 1,
      AmountOptions: '[10,20]', Price: '7.3',
    };
    for (const [key, value] of Object.entries(options)) {
      const res = await consoleCall(b.stack, 'PUT', '/api/option/', b.stack.adminToken, { key, value });
      if (!res.json.success) throw new Error(`option ${key}: ${res.json.message}`);
    }
    const user = await insertAccount(b.stack, {});
    const page = await b.newPage();
    const posts: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && /^\/api\/user\/(pay|amount|cardpay\/)/.test(new URL(r.url()).pathname)) posts.push(new URL(r.url()).pathname);
    });
    await logIn(page, b.stack, user, '/topup');
    const amount = page.getByLabel('Amount (US dollars of credit)');
    await amount.waitFor();
    const pay = page.getByRole('button', { name: /^Pay with / }).first();
    for (const typed of ['1e3', '0x10', '20.5', '0', '-5']) {
      await amount.fill(typed);
      for (const button of [pay, page.getByRole('button', { name: 'Pay by card' }), page.getByRole('button', { name: 'Show price' })]) {
        await button.click();
        await page.getByRole('alert').filter({ hasText: 'a whole number of dollars, such as 20' }).waitFor();
        expect(await amount.getAttribute('aria-invalid'), typed).toBe('true');
      }
    }
    await page.waitForTimeout(200);
    expect(posts).toEqual([]);
    expect(new URL(page.url()).pathname).toBe('/topup');
    // The field's error goes once it is edited; a whole amount is quoted.
    await amount.fill('20');
    expect(await amount.getAttribute('aria-invalid')).toBeNull();
    await page.getByRole('button', { name: 'Show price' }).click();
    await page.getByText('for $20.00 of credit').waitFor();
    expect(posts).toEqual(['/api/user/amount']);
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
