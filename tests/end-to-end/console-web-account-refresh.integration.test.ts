// The account figures the console shows (Balance, Used, Requests) are read again when they can have
// changed: when the Dashboard is opened (requests made and credits received since sign-in), and on the
// Top up page when an order completes while the page is open (the provider confirms after the browser
// came back).
import { randomBytes } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { billingSettled, consoleCall, createApiKey, mockChannel } from '../harness/gateway-stack.js';
import { type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser, tileValue } from './console-web-browser.js';

const MODEL = 'claude-haiku-4-5';
let b: ConsoleBrowser;

beforeAll(async () => {
  b = await startConsoleBrowser();
  await mockChannel(b.stack, [MODEL]);
}, 120_000);

afterAll(async () => {
  await b?.close();
});

describe('account figures', () => {
  it('the Dashboard shows the requests and balance of now, not of sign-in', async () => {
    const user = await insertAccount(b.stack, { quota: 5_000_000 });
    const key = await createApiKey(b.stack, user);
    const page = await b.newPage();
    await logIn(page, b.stack, user);
    expect(await tileValue(page, 'Requests')).toBe('0');
    expect(await tileValue(page, 'Balance')).toBe('$10.00');
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('heading', { name: 'API keys' }).waitFor();

    // Two requests through the relay and a credit by an administrator, while the page stays open.
    const sdk = new Anthropic({ apiKey: key.key, baseURL: b.stack.relayUrl, maxRetries: 0 });
    for (let i = 0; i < 2; i++) await sdk.messages.create({ model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'hello' }] });
    await billingSettled(b.stack);
    const credit = await consoleCall(b.stack, 'POST', '/api/user/manage', b.stack.adminToken, { id: user.id, action: 'add_quota', value: 500_000 });
    expect(credit.json.success).toBe(true);
    const [row] = await b.stack.sql<{ quota: number; used_quota: number; request_count: number }[]>`
      SELECT quota, used_quota, request_count FROM users WHERE id = ${user.id}`;
    expect(Number(row!.request_count)).toBe(2);

    await page.getByRole('link', { name: 'Dashboard' }).click();
    await page.getByRole('group', { name: 'Requests', exact: true }).locator('.tile-value', { hasText: /^2$/ }).waitFor();
    await page.getByRole('group', { name: "Today's requests" }).locator('.tile-value', { hasText: /^2$/ }).waitFor();
    // The balance to the last quota unit: its dollars, trailing zeros trimmed to two decimals.
    const balance = (Number(row!.quota) / 500_000).toFixed(6).replace(/(\.\d\d\d*?)0+$/, '$1');
    await page.getByRole('group', { name: 'Balance', exact: true }).locator('.tile-value', { hasText: `$${balance}` }).waitFor();
    expect(await tileValue(page, 'Used')).not.toBe('$0.00');
  }, 120_000);

  it('the Top up page shows the new balance when an order completes while it is open', async () => {
    const user = await insertAccount(b.stack, { quota: 500_000 });
    const tradeNo = `USR${user.id}NO${randomBytes(8).toString('hex')}`;
    await b.stack.sql`INSERT INTO topups (user_id, amount, money, trade_no, payment_method, payment_provider, status, create_time)
                      VALUES (${user.id}, 20, 20, ${tradeNo}, 'card', 'cardpay', 'pending', ${Math.floor(Date.now() / 1000)})`;
    const page = await b.newPage();
    // Back from the provider's page before the provider confirmed the payment.
    await logIn(page, b.stack, user, '/console/topup?paid=1');
    await page.getByText('Back from the payment provider').waitFor();
    const row = page.getByRole('row').filter({ hasText: tradeNo });
    await row.getByRole('cell', { name: 'Awaiting payment' }).waitFor();
    expect(await page.getByTestId('balance').textContent()).toBe('$1.00');

    const done = await consoleCall(b.stack, 'POST', '/api/user/topup/complete', b.stack.adminToken, { trade_no: tradeNo });
    expect(done.json.success).toBe(true);
    await row.getByRole('cell', { name: 'Completed', exact: true }).waitFor({ timeout: 20_000 });
    await page.getByTestId('balance').filter({ hasText: '$21.00' }).waitFor();
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
