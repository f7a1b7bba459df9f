// Small things of the pages: the registration form's display name is bounded as the API bounds it
// (50 characters, as in Profile), and the page names an icon of its own, so the browser asks the
// console for no /favicon.ico (which it does not have).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleBrowser, startConsoleBrowser } from './console-web-browser.js';

let b: ConsoleBrowser;

beforeAll(async () => {
  b = await startConsoleBrowser();
}, 120_000);

afterAll(async () => {
  await b?.close();
});

describe('page details', () => {
  it('the registration form takes at most 50 characters of display name', async () => {
    const page = await b.newPage();
    await page.goto(`${b.stack.consoleUrl}/register`);
    const name = page.getByLabel('Display name');
    expect(await name.getAttribute('maxlength')).toBe('50');
    await name.fill('x'.repeat(60));
    expect((await name.inputValue()).length).toBe(50);
  }, 120_000);

  it('has an icon of its own: no request answered 404', async () => {
    const page = await b.newPage();
    const missing: string[] = [];
    page.on('response', (r) => {
      if (r.status() === 404) missing.push(r.url());
    });
    await page.goto(`${b.stack.consoleUrl}/login`);
    await page.getByRole('button', { name: 'Log in' }).waitFor();
    const icon = await page.locator('link[rel="icon"]').getAttribute('href');
    expect(icon).toMatch(/^data:image\/svg\+xml,/);
    await page.waitForTimeout(500);
    expect(missing).toEqual([]);
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
