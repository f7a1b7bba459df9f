// A session that ends under an open page (expired, revoked, its cookie gone): the next call's 401
// brings the login page, which now says why, and logging in again returns to the page that was open.
// A visit without a session, or the Log out button, shows no such message.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser } from './console-web-browser.js';

const EXPIRED = 'Your session expired; log in again.';
let b: ConsoleBrowser;

beforeAll(async () => {
  b = await startConsoleBrowser();
}, 120_000);

afterAll(async () => {
  await b?.close();
});

describe('session expiry', () => {
  it('says the session expired, and returns to the page after logging in again', async () => {
    const user = await insertAccount(b.stack);
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/keys');
    await page.getByRole('button', { name: 'Create key' }).click();
    const form = page.getByRole('form', { name: 'Create key' });
    await form.getByLabel('Name').fill('laptop');
    // The session ends (here: its cookies are gone) while the form is open.
    await page.context().clearCookies();
    await form.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    await page.getByText(EXPIRED).waitFor();
    expect(new URL(page.url()).pathname).toBe('/keys');

    await page.getByLabel('Username').fill(user.username);
    await page.getByLabel('Password').fill(user.password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'API keys' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/keys');
    expect(await page.getByText(EXPIRED).count()).toBe(0);
  }, 120_000);

  it('no message on a visit without a session or after Log out', async () => {
    const user = await insertAccount(b.stack);
    const page = await b.newPage();
    await page.goto(`${b.stack.consoleUrl}/keys`);
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    expect(await page.getByText(EXPIRED).count()).toBe(0);
    await logIn(page, b.stack, user, '/keys');
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    expect(await page.getByText(EXPIRED).count()).toBe(0);
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
