// How the console writes money. Quota as US dollars: decimals chosen after rounding, thousands
// grouped. The top-up page: quantities are US dollars of credit, discounts read "5% off", money paid
// has two decimals and says whose currency it is (the API returns no currency: the user's page says
// "the payment provider's currency"; the administrators' page names the currency the options set).
import { randomBytes } from 'node:crypto';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleCall } from '../harness/gateway-stack.js';
import { type ConsoleAccount, type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser, tileValue } from './console-web-browser.js';

let b: ConsoleBrowser;
let user: ConsoleAccount;
const epayTrade = { no: '', money: 138.7, amount: 20 };
const cardTrade = { no: '', money: 7, amount: 7 };

beforeAll(async () => {
  b = await startConsoleBrowser();
  const options: Record<string, unknown> = {
    PaymentComplianceConfirmed: true, PayAddress: 'http://127.0.0.1:9', EpayId: '1001', EpayKey: 'epay-key', MinTopUp: 1,
    CardpayApiAddress: 'http://127.0.0.1:9', CardpayApiSecret: 'sk_test_x', CardpayWebhookSecret: 'whsec_x', CardpayMinTopUp: 5,
    AmountOptions: '[10,20]', AmountDiscount: '{"20":0.95}', Price: '7.3',
  };
  for (const [key, value] of Object.entries(options)) {
    const res = await consoleCall(b.stack, 'PUT', '/api/option/', b.stack.adminToken, { key, value });
    if (!res.json.success) throw new Error(`option ${key}: ${res.json.message}`);
  }
  // $99.9996 left, $1,234.5679 spent: shown to the last quota unit, never rounded up.
  user = await insertAccount(b.stack, { quota: 49_999_800 });
  await b.stack.sql`UPDATE users SET used_quota = 617283950 WHERE id = ${user.id}`;
  const now = Math.floor(Date.now() / 1000);
  for (const [t, provider, method] of [[epayTrade, 'epay', 'alipay'], [cardTrade, 'cardpay', 'card']] as const) {
    t.no = `USR${user.id}NO${randomBytes(8).toString('hex')}`;
    await b.stack.sql`INSERT INTO topups (user_id, amount, money, trade_no, payment_method, payment_provider, status, create_time, complete_time)
                      VALUES (${user.id}, ${t.amount}, ${t.money}, ${t.no}, ${method}, ${provider}, 'success', ${now}, ${now})`;
  }
}, 120_000);

afterAll(async () => {
  await b?.close();
});

/** A table row's cells by column header. */
async function rowCells(page: Page, hasText: string): Promise<Record<string, string>> {
  const row = page.getByRole('row').filter({ hasText });
  await row.waitFor();
  const table = page.locator('table').filter({ has: row });
  const headers = (await table.locator('thead th').allTextContents()).map((h) => h.trim());
  const cells = (await row.locator('td').allTextContents()).map((c) => c.trim());
  return Object.fromEntries(headers.map((h, i) => [h, cells[i] ?? '']));
}

describe('money in the console', () => {
  it('the Dashboard: every quota unit shown, thousands grouped', async () => {
    const page = await b.newPage();
    await logIn(page, b.stack, user);
    await page.getByRole('group', { name: 'Used', exact: true }).locator('.tile-value', { hasText: '$' }).waitFor();
    expect(await tileValue(page, 'Balance')).toBe('$99.9996');
    expect(await tileValue(page, 'Used')).toBe('$1,234.5679');
  }, 120_000);

  it('a balance of any size fits its tile, on the Dashboard and the Top up page (review webconsole: $12,345,678.912346 read $12,345,678.91, the rest under the next tile)', async () => {
    const rich = await insertAccount(b.stack, { quota: Number.MAX_SAFE_INTEGER });
    const page = await b.newPage();
    await page.setViewportSize({ width: 1280, height: 800 });
    await logIn(page, b.stack, rich);
    for (const path of ['/', '/topup']) {
      await page.goto(`${b.stack.consoleUrl}${path}`);
      const value = page.getByRole('group', { name: 'Balance', exact: true }).locator('.tile-value', { hasText: '$' });
      await value.waitFor();
      expect(await value.textContent()).toBe('$18,014,398,509.481982');
      const box = await value.evaluate((el) => ({ scroll: el.scrollWidth, client: el.clientWidth }));
      expect(box.scroll, path).toBeLessThanOrEqual(box.client);
    }
  }, 120_000);

  it('the Top up page: credit in dollars, discounts as a percentage, money with two decimals and whose currency', async () => {
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/topup');
    const amounts = page.getByRole('group', { name: 'Amounts' });
    await amounts.getByRole('button', { name: '$10', exact: true }).waitFor();
    await amounts.getByRole('button', { name: '$20 (5% off)', exact: true }).click();
    expect(await page.getByText('×0.95').count()).toBe(0);
    expect(await page.getByLabel('Amount (US dollars of credit)').inputValue()).toBe('20');
    await page.getByRole('button', { name: 'Show price' }).click();
    await page.getByText("To pay: 138.70 in the payment provider's currency, for $20.00 of credit (5% off)").waitFor();

    expect(await rowCells(page, epayTrade.no)).toMatchObject({ 'Credit (US dollars)': '$20.00', Paid: '138.70' });
    expect(await rowCells(page, cardTrade.no)).toMatchObject({ 'Credit (US dollars)': '$7.00', Paid: '7.00' });
    await page.getByText("Paid is in the payment provider's currency").waitFor();
  }, 120_000);

  it('All top-up orders: the same, with the currency the options set', async () => {
    const root = await insertAccount(b.stack, { role: 100, prefix: 'root' });
    const page = await b.newPage();
    await logIn(page, b.stack, root, '/admin/topups');
    await page.getByLabel('Account id').fill(String(user.id));
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('Page 1 of 1 (2 in all)').waitFor();
    expect(await rowCells(page, cardTrade.no)).toMatchObject({ 'Credit (US dollars)': '$7.00', Paid: '7.00 USD' });
    expect(await rowCells(page, epayTrade.no)).toMatchObject({ 'Credit (US dollars)': '$20.00', Paid: '138.70' });
    await page.getByText('QR-code orders are in the currency of the Price option (7.3 per $1 of credit)').waitFor();
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
