// Usage logs and All usage logs: the amount of each entry is signed by what it did to the balance (a
// top-up +, a consumption −, a management entry as its content records it), and the request-only
// columns (Duration, Stream) read "–" on entries that are no request. The time filter's "To" includes
// the minute it names, and a range that ends before it starts is refused next to "To".
import Anthropic from '@anthropic-ai/sdk';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { billingSettled, consoleCall, createApiKey, mockChannel } from '../harness/gateway-stack.js';
import { type ConsoleAccount, type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser } from './console-web-browser.js';

const MODEL = 'claude-haiku-4-5';
let b: ConsoleBrowser;
let user: ConsoleAccount;
let requestId = '';
let requestAt = 0;

beforeAll(async () => {
  b = await startConsoleBrowser();
  await mockChannel(b.stack, [MODEL]);
  user = await insertAccount(b.stack, { quota: 1_000_000 });
  const key = await createApiKey(b.stack, user);
  const sdk = new Anthropic({ apiKey: key.key, baseURL: b.stack.relayUrl, maxRetries: 0 });
  const { response } = await sdk.messages.create({ model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'hello' }] }).withResponse();
  requestId = response.headers.get('x-gateway-request-id')!;
  // A top-up (a redemption code of $5), and four management entries: $1 added, $0.50 removed, $1.50
  // added with a reason that names a removal (the reason does not sign the amount), the balance set
  // $2 lower.
  const codes = await consoleCall<string[]>(b.stack, 'POST', '/api/redemption/', b.stack.adminToken, { name: 'logs', quota: 2_500_000, count: 1 });
  expect((await consoleCall(b.stack, 'POST', '/api/user/topup', user.token, { key: codes.json.data![0] })).json.success).toBe(true);
  expect((await consoleCall(b.stack, 'POST', '/api/user/manage', b.stack.adminToken, { id: user.id, action: 'add_quota', value: 500_000 })).json.success).toBe(true);
  expect((await consoleCall(b.stack, 'POST', '/api/user/manage', b.stack.adminToken, { id: user.id, action: 'add_quota', value: -250_000 })).json.success).toBe(true);
  expect((await consoleCall(b.stack, 'POST', '/api/user/manage', b.stack.adminToken, { id: user.id, action: 'add_quota', value: 750_000, reason: 'refund: the outage removed 750000 quota from you' })).json.success).toBe(true);
  const [now] = await b.stack.sql<{ quota: number }[]>`SELECT quota FROM users WHERE id = ${user.id}`;
  expect((await consoleCall(b.stack, 'PUT', '/api/user/', b.stack.adminToken, { id: user.id, quota: Number(now!.quota) - 1_000_000 })).json.success).toBe(true);
  await billingSettled(b.stack);
  const [ledger] = await b.stack.sql<{ created_at: number }[]>`SELECT created_at FROM ledger WHERE request_id = ${requestId}`;
  requestAt = Number(ledger!.created_at);
}, 120_000);

afterAll(async () => {
  await b?.close();
});

/** The cells of the table's entries, by column header; Details is each entry's second line. */
async function rows(page: Page): Promise<Record<string, string>[]> {
  const table = page.locator('table.logs');
  await table.waitFor();
  const headers = (await table.locator('thead tr').first().locator('th').allTextContents()).map((h) => h.trim());
  const out: Record<string, string>[] = [];
  for (const entry of await table.locator('tbody.entry').all()) {
    const cells = (await entry.locator('tr').first().locator('td').allTextContents()).map((c) => c.trim());
    const details = (await entry.locator('tr.entry-details td').textContent())?.trim() ?? '';
    out.push({ ...Object.fromEntries(headers.map((h, i) => [h, cells[i] ?? ''])), Details: details });
  }
  return out;
}

function checkAmounts(all: Record<string, string>[]): void {
  const byDetail = (re: RegExp) => all.find((r) => re.test(r.Details ?? ''));
  const consumption = all.find((r) => r.Type === 'Consumption')!;
  expect(consumption).toBeTruthy();
  expect(consumption.Amount).toMatch(/^-\$0\.\d{2,6}$/);
  expect(consumption.Duration).toMatch(/^\d+ s$/);
  expect(consumption.Stream).toBe('No');
  const topup = all.find((r) => r.Type === 'Top-up')!;
  expect(topup).toMatchObject({ Amount: '+$5.00', Duration: '–', Stream: '–' });
  // The details' quota figures are grouped by thousands, as every number the console shows.
  expect(byDetail(/ added 500,000 quota/)).toMatchObject({ Type: 'Management', Amount: '+$1.00', Duration: '–', Stream: '–' });
  expect(byDetail(/ removed 250,000 quota/)).toMatchObject({ Type: 'Management', Amount: '-$0.50', Duration: '–', Stream: '–' });
  expect(byDetail(/ added 750,000 quota: refund: the outage removed 750,000 quota/)).toMatchObject({ Type: 'Management', Amount: '+$1.50' });
  expect(byDetail(/ set the balance from /)).toMatchObject({ Type: 'Management', Amount: '-$2.00', Duration: '–', Stream: '–' });
}

/** A datetime-local input's value for a Unix time, in UTC (the pages run with timezoneId UTC). */
function minuteOf(unixSec: number): string {
  return new Date(unixSec * 1000).toISOString().slice(0, 16);
}

describe('usage log amounts', () => {
  it('Usage logs sign each amount by its type and leave request columns empty on other entries', async () => {
    const page = await b.newPage({ timezoneId: 'UTC' });
    await logIn(page, b.stack, user, '/logs');
    await page.getByRole('row').filter({ hasText: 'Top-up' }).first().waitFor();
    await page.getByRole('columnheader', { name: 'Amount' }).waitFor();
    expect(await page.getByRole('columnheader', { name: 'Cost' }).count()).toBe(0);
    const all = await rows(page);
    expect(all).toHaveLength(6);
    checkAmounts(all);
  }, 120_000);

  it('All usage logs does the same', async () => {
    const admin = await insertAccount(b.stack, { role: 100, prefix: 'root' });
    const page = await b.newPage({ timezoneId: 'UTC' });
    await logIn(page, b.stack, admin, '/admin/logs');
    await page.getByLabel('Account username').fill(user.username);
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('Page 1 of 1 (6 in all)').waitFor();
    checkAmounts(await rows(page));
  }, 120_000);
});

/**
 * How far the log table reaches past its scroll box at the page's width (0: every column in view),
 * its last column (Request ID) past the box's right edge, and how much narrower than the table an
 * entry's details line is (0: it spans the table).
 */
async function overflow(page: Page): Promise<{ px: number; lastColumn: number; detailsNarrower: number }> {
  const table = page.locator('table.logs');
  await table.waitFor();
  return table.evaluate((t) => {
    const box = t.parentElement!.getBoundingClientRect();
    const last = t.querySelector('thead tr:first-child th:last-child')!.getBoundingClientRect();
    const details = t.querySelector('tbody.entry tr.entry-details td')!.getBoundingClientRect();
    const scroll = t.parentElement!;
    return {
      px: scroll.scrollWidth - scroll.clientWidth,
      lastColumn: Math.max(0, Math.round(last.right - box.right)),
      detailsNarrower: Math.max(0, Math.round(t.getBoundingClientRect().width - details.width)),
    };
  });
}

describe('usage logs at 1280 px', () => {
  // Review webconsole: All usage logs (two columns more than a user's) showed 70% of Details at 1280 px.
  it('Usage logs and All usage logs keep every column in view, each entry\'s details on a line across the table', async () => {
    const page = await b.newPage({ timezoneId: 'UTC', viewport: { width: 1280, height: 860 } });
    await logIn(page, b.stack, user, '/logs');
    await page.getByRole('row').filter({ hasText: requestId }).waitFor();
    expect(await overflow(page)).toEqual({ px: 0, lastColumn: 0, detailsNarrower: 0 });
    const admin = await insertAccount(b.stack, { role: 100, prefix: 'root' });
    const adminPage = await b.newPage({ timezoneId: 'UTC', viewport: { width: 1280, height: 860 } });
    await logIn(adminPage, b.stack, admin, '/admin/logs');
    await adminPage.getByLabel('Account username').fill(user.username);
    await adminPage.getByRole('button', { name: 'Apply filters' }).click();
    await adminPage.getByText('Page 1 of 1 (6 in all)').waitFor();
    await adminPage.getByRole('row').filter({ hasText: requestId }).waitFor();
    expect(await overflow(adminPage)).toEqual({ px: 0, lastColumn: 0, detailsNarrower: 0 });
  }, 120_000);
});

describe('usage log time filter', () => {
  it('"To" includes the minute it names', async () => {
    expect(requestAt).toBeGreaterThan(0);
    const page = await b.newPage({ timezoneId: 'UTC' });
    await logIn(page, b.stack, user, '/logs');
    await page.getByRole('row').filter({ hasText: 'Top-up' }).first().waitFor();
    await page.getByLabel('Type').selectOption({ label: 'Consumption' });
    // The minute before the request to the request's own minute.
    await page.getByLabel('From').fill(minuteOf(requestAt - 60));
    await page.getByLabel('To', { exact: true }).fill(minuteOf(requestAt));
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('Page 1 of 1 (1 in all)').waitFor();
    await page.getByRole('row').filter({ hasText: requestId }).waitFor();
  }, 120_000);

  it('a range that ends before it starts is an error next to "To", and is not applied', async () => {
    const page = await b.newPage({ timezoneId: 'UTC' });
    const reads: string[] = [];
    page.on('request', (r) => {
      if (new URL(r.url()).pathname === '/api/log/self') reads.push(r.url());
    });
    await logIn(page, b.stack, user, '/logs');
    await page.getByRole('row').filter({ hasText: 'Top-up' }).first().waitFor();
    const before = reads.length;
    await page.getByLabel('From').fill('2026-03-02T10:00');
    await page.getByLabel('To', { exact: true }).fill('2026-03-01T10:00');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByRole('alert').filter({ hasText: 'must not be before "From"' }).waitFor();
    expect(await page.getByLabel('To', { exact: true }).getAttribute('aria-invalid')).toBe('true');
    await page.waitForTimeout(300);
    expect(reads.length).toBe(before);
    // The table still shows what was applied before.
    expect(await page.getByRole('row').filter({ hasText: 'Top-up' }).count()).toBe(1);
  }, 120_000);

  it('All usage logs refuses an inverted range too', async () => {
    const admin = await insertAccount(b.stack, { role: 100, prefix: 'root' });
    const page = await b.newPage({ timezoneId: 'UTC' });
    await logIn(page, b.stack, admin, '/admin/logs');
    await page.getByLabel('From').fill('2026-03-02T10:00');
    await page.getByLabel('To', { exact: true }).fill('2026-03-01T10:00');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByRole('alert').filter({ hasText: 'must not be before "From"' }).waitFor();
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
