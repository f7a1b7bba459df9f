// Paged lists after their last page empties: deleting the only row of the last page moves the list to
// the page that is now the last one (not "No keys yet." beside "Page 2 of 1"). The rule lives in the
// shared Pager; API keys and redemption codes are checked here.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleCall } from '../harness/gateway-stack.js';
import { type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser } from './console-web-browser.js';

let b: ConsoleBrowser;

beforeAll(async () => {
  b = await startConsoleBrowser();
}, 120_000);

afterAll(async () => {
  await b?.close();
});

async function bodyRows(page: Page): Promise<number> {
  return page.locator('table tbody tr').count();
}

describe('the last page emptied', () => {
  it('API keys: deleting the only key of page 2 shows page 1', async () => {
    const user = await insertAccount(b.stack);
    for (let i = 1; i <= 11; i++) {
      const r = await consoleCall(b.stack, 'POST', '/api/token/', user.token, { name: `key-${String(i).padStart(2, '0')}`, expired_time: -1, remain_quota: 0, unlimited_quota: true });
      expect(r.json.success).toBe(true);
    }
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/keys');
    await page.getByText('Page 1 of 2 (11 in all)').waitFor();
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByText('Page 2 of 2 (11 in all)').waitFor();
    // Page 1's rows stay until page 2 has loaded.
    await page.locator('table tbody tr').nth(1).waitFor({ state: 'detached' });
    const only = (await page.locator('table tbody tr td:first-child').allTextContents())[0]!;
    expect(await bodyRows(page)).toBe(1);
    await page.getByRole('button', { name: `Delete ${only}`, exact: true }).click();
    await page.getByRole('button', { name: `Confirm deleting ${only}` }).click();
    await page.getByText('Page 1 of 1 (10 in all)').waitFor();
    await page.getByRole('row').filter({ hasText: 'key-' }).first().waitFor();
    expect(await bodyRows(page)).toBe(10);
    expect(await page.getByText('No keys').count()).toBe(0);
    expect(await page.getByText('Page 2 of 1').count()).toBe(0);
  }, 120_000);

  it('Redemption codes: deleting the only code of page 2 shows page 1', async () => {
    const made = await consoleCall<string[]>(b.stack, 'POST', '/api/redemption/', b.stack.adminToken, { name: 'paging', quota: 500_000, count: 21 });
    expect(made.json.success).toBe(true);
    const root = await insertAccount(b.stack, { role: 100, prefix: 'root' });
    const page = await b.newPage();
    await logIn(page, b.stack, root, '/admin/redemptions');
    await page.getByText('Page 1 of 2 (21 in all)').waitFor();
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByText('Page 2 of 2 (21 in all)').waitFor();
    await page.locator('table tbody tr').nth(1).waitFor({ state: 'detached' });
    expect(await bodyRows(page)).toBe(1);
    await page.locator('table tbody tr').getByRole('button', { name: /^Delete code / }).click();
    // Delete asks first, as everywhere.
    await page.locator('table tbody tr').getByRole('button', { name: /^Confirm deleting code / }).click();
    await page.getByText('Page 1 of 1 (20 in all)').waitFor();
    await page.locator('table tbody tr').nth(19).waitFor();
    expect(await page.getByText('No codes.').count()).toBe(0);
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
