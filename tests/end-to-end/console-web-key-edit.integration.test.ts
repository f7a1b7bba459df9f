// Editing an API key: what was not edited is not sent. An expired key can be renamed (its expiry is
// not checked against now unless it was edited), and a rename leaves an expiry with seconds exactly
// as it was (the field shows minutes). The quota is a dollar amount read strictly.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleCall } from '../harness/gateway-stack.js';
import { type ConsoleAccount, type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser } from './console-web-browser.js';

let b: ConsoleBrowser;
let user: ConsoleAccount;

beforeAll(async () => {
  b = await startConsoleBrowser();
  user = await insertAccount(b.stack);
}, 120_000);

afterAll(async () => {
  await b?.close();
});

async function keyWithExpiry(name: string, expiredTime: number): Promise<void> {
  const r = await consoleCall(b.stack, 'POST', '/api/token/', user.token, { name, expired_time: Math.floor(Date.now() / 1000) + 3600, remain_quota: 0, unlimited_quota: true });
  expect(r.json.success).toBe(true);
  await b.stack.sql`UPDATE tokens SET expired_time = ${expiredTime} WHERE name = ${name} AND user_id = ${user.id}`;
}

async function stored(name: string): Promise<{ name: string; expired_time: number; remain_quota: number; unlimited_quota: boolean } | undefined> {
  const [row] = await b.stack.sql<{ name: string; expired_time: number; remain_quota: number; unlimited_quota: boolean }[]>`
    SELECT name, expired_time, remain_quota, unlimited_quota FROM tokens WHERE name = ${name} AND user_id = ${user.id}`;
  return row ? { ...row, expired_time: Number(row.expired_time), remain_quota: Number(row.remain_quota) } : undefined;
}

async function rename(page: Page, from: string, to: string): Promise<void> {
  await page.getByRole('button', { name: `Edit ${from}`, exact: true }).click();
  const form = page.getByRole('form', { name: 'Save key' });
  await form.getByLabel('Name').fill(to);
  await form.getByRole('button', { name: 'Save key' }).click();
  await form.waitFor({ state: 'detached' });
  await page.getByRole('row').filter({ hasText: to }).waitFor();
}

describe('editing a key', () => {
  it('renames an expired key and leaves its expiry alone', async () => {
    const past = Math.floor(Date.now() / 1000) - 7200 + 13;
    await keyWithExpiry('old-laptop', past);
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/keys');
    await rename(page, 'old-laptop', 'old-laptop-renamed');
    expect(await stored('old-laptop-renamed')).toMatchObject({ expired_time: past });
  }, 120_000);

  it('a rename keeps an expiry that has seconds', async () => {
    const inThreeDays = Math.floor(Date.now() / 1000) + 3 * 86_400;
    const later = inThreeDays - (inThreeDays % 60) + 37;
    await keyWithExpiry('ci', later);
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/keys');
    await rename(page, 'ci', 'ci-renamed');
    expect(await stored('ci-renamed')).toMatchObject({ expired_time: later });
  }, 120_000);

  it('an edited expiry in the past is still refused next to its field', async () => {
    await keyWithExpiry('tablet', Math.floor(Date.now() / 1000) + 86_400);
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/keys');
    await page.getByRole('button', { name: 'Edit tablet', exact: true }).click();
    const form = page.getByRole('form', { name: 'Save key' });
    await form.getByLabel('Expires at').fill('2020-01-01T00:00');
    await form.getByRole('button', { name: 'Save key' }).click();
    await form.getByText('must be in the future').waitFor();
  }, 120_000);

  it('reads the quota as a decimal dollar amount, and refuses anything else before sending', async () => {
    const r = await consoleCall(b.stack, 'POST', '/api/token/', user.token, { name: 'limited', expired_time: -1, remain_quota: 500_000, unlimited_quota: false });
    expect(r.json.success).toBe(true);
    const page = await b.newPage();
    const puts: string[] = [];
    page.on('request', (req) => {
      if (req.method() === 'PUT' && new URL(req.url()).pathname === '/api/token/') puts.push(req.postData() ?? '');
    });
    await logIn(page, b.stack, user, '/keys');
    await page.getByRole('button', { name: 'Edit limited', exact: true }).click();
    const form = page.getByRole('form', { name: 'Save key' });
    const quota = form.getByLabel('Quota (US dollars)');
    for (const typed of ['abc', '0x10', '1e3', '-2']) {
      await quota.fill(typed);
      await form.getByRole('button', { name: 'Save key' }).click();
      await form.getByText('a dollar amount above $0', { exact: false }).waitFor();
      expect(await quota.getAttribute('aria-invalid'), typed).toBe('true');
    }
    expect(puts).toEqual([]);
    expect(await stored('limited')).toMatchObject({ remain_quota: 500_000 });
    await quota.fill('2.50');
    await form.getByRole('button', { name: 'Save key' }).click();
    await form.waitFor({ state: 'detached' });
    expect(await stored('limited')).toMatchObject({ remain_quota: 1_250_000 });
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
