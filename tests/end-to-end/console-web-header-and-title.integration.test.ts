// The header on a phone (390 px wide): "Log out" stays on one line, the account's name giving way. The
// window's title names the page on a page loaded signed in, such as a payment provider's return to
// /console/topup.
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

/** The lines a button's text is drawn on. */
async function textLines(page: Page, name: string): Promise<number> {
  return page.getByRole('button', { name, exact: true }).evaluate((button) => {
    const range = button.ownerDocument.createRange();
    range.selectNodeContents(button);
    return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
  });
}

describe('the header on a phone', () => {
  it('keeps "Log out" on one line at 390 px', async () => {
    const user = await insertAccount(b.stack, { prefix: 'a-rather-long-name' });
    const page = await b.newPage({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 3 });
    await logIn(page, b.stack, user, '/');
    expect(await textLines(page, 'Log out')).toBe(1);
    // The header fits the screen: nothing scrolls sideways.
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
  }, 120_000);
});

describe('the window\'s title', () => {
  it('is "Top up · Gateway console" on /console/topup loaded signed in', async () => {
    const user = await insertAccount(b.stack);
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/');
    await page.goto(`${b.stack.consoleUrl}/console/topup?paid=0`);
    await page.getByRole('heading', { level: 1, name: 'Top up' }).waitFor();
    await page.waitForFunction('document.title === "Top up · Gateway console"', undefined, { timeout: 5_000 }).catch(() => undefined);
    expect(await page.title()).toBe('Top up · Gateway console');
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
