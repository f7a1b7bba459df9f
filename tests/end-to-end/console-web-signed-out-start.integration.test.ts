// A signed-out start of the console makes no request that fails: without a session the page does not
// ask who is signed in (GET /api/user/self could only answer 401, which the browser logs as an error
// in its console). With a session it does ask, and stays signed in across a reload; after Log out, a
// reload is a signed-out start again.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser } from './console-web-browser.js';

let b: ConsoleBrowser;

beforeAll(async () => {
  b = await startConsoleBrowser();
}, 120_000);

afterAll(async () => {
  await b?.close();
});

/**
 * What went wrong on a page until stop(): answers of 400 and above, failed requests, errors in its
 * console; and how often it asked who is signed in.
 */
function watch(page: Page): { failures: string[]; selfAsked: () => number; stop: () => void } {
  const failures: string[] = [];
  let self = 0;
  let on = true;
  page.on('response', (r) => { if (on && r.status() >= 400) failures.push(`${r.status()} ${r.url()}`); });
  page.on('requestfailed', (r) => { if (on) failures.push(`failed ${r.url()}: ${r.failure()?.errorText ?? ''}`); });
  page.on('console', (m) => { if (on && m.type() === 'error') failures.push(`console: ${m.text()}`); });
  page.on('request', (r) => { if (on && new URL(r.url()).pathname === '/api/user/self') self++; });
  return { failures, selfAsked: () => self, stop: () => { on = false; } };
}

/** Waits until the Dashboard's own reads are answered: a reload or Log out would cancel one still under way. */
async function dashboardRead(page: Page): Promise<void> {
  await page.getByRole('group', { name: "Today's requests" }).locator('.tile-value', { hasText: /^\d/ }).waitFor();
  await page.getByRole('group', { name: 'RPM / TPM' }).locator('.tile-value', { hasText: /^\d/ }).waitFor();
}

describe('a signed-out start', () => {
  for (const [path, heading] of [['/', 'Log in'], ['/login', 'Log in'], ['/register', 'Register'], ['/keys', 'Log in'], ['/console/topup?paid=1', 'Log in']] as const) {
    it(`${path}: the ${heading} form, and no failed request or console error`, async () => {
      const page = await b.newPage();
      const seen = watch(page);
      await page.goto(`${b.stack.consoleUrl}${path}`, { waitUntil: 'networkidle' });
      await page.getByRole('heading', { name: heading }).waitFor();
      await page.waitForTimeout(300);
      expect(seen.failures).toEqual([]);
      expect(seen.selfAsked()).toBe(0);
    }, 60_000);
  }

  it('signed in, a reload asks who is signed in and stays signed in; after Log out it is a signed-out start', async () => {
    const user = await insertAccount(b.stack);
    const page = await b.newPage();
    await logIn(page, b.stack, user);
    await dashboardRead(page);
    const seen = watch(page);
    await page.reload({ waitUntil: 'networkidle' });
    await page.getByRole('button', { name: 'Log out' }).waitFor();
    await dashboardRead(page);
    seen.stop();
    expect(seen.failures).toEqual([]);
    expect(seen.selfAsked()).toBeGreaterThan(0);
    // The Log in page reads the service status (what it offers): a reload while that read is under
    // way cancels it (net::ERR_ABORTED), as it would the Dashboard's reads above.
    const statusRead = page.waitForResponse((r) => new URL(r.url()).pathname === '/api/status');
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    await statusRead;
    const after = watch(page);
    await page.reload({ waitUntil: 'networkidle' });
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    await page.waitForTimeout(300);
    expect(after.failures).toEqual([]);
    expect(after.selfAsked()).toBe(0);
  }, 60_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
