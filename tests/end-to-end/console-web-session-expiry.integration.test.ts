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

  it('Profile\'s "Save name" and "Change password" with the session\'s cookies gone go to the login page, not a raw API error', async () => {
    const user = await insertAccount(b.stack);
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/profile');
    // As after a logout in another tab: console-api cleared both cookies.
    await page.context().clearCookies();
    await page.getByRole('textbox', { name: 'Display name' }).fill('Renamed');
    await page.getByRole('button', { name: 'Save name' }).click();
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    await page.getByText(EXPIRED).waitFor();
    expect(await page.getByText(/not logged in/).count()).toBe(0);
    expect(new URL(page.url()).pathname).toBe('/profile');

    await page.getByLabel('Username').fill(user.username);
    await page.getByLabel('Password').fill(user.password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Profile' }).waitFor();
    await page.context().clearCookies();
    await page.getByLabel('Current password').fill(user.password);
    await page.getByLabel('New password', { exact: true }).fill('another-password-1');
    await page.getByLabel('New password again').fill('another-password-1');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    await page.getByText(EXPIRED).waitFor();
    expect(await page.getByText(/not logged in/).count()).toBe(0);
  }, 120_000);

  it('a wrong current password stays an error of its field, signed in', async () => {
    const user = await insertAccount(b.stack);
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/profile');
    await page.getByLabel('Current password').fill('not-the-password-1');
    await page.getByLabel('New password', { exact: true }).fill('another-password-1');
    await page.getByLabel('New password again').fill('another-password-1');
    await page.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('the current password is incorrect').waitFor();
    expect(await page.getByLabel('Current password').getAttribute('aria-invalid')).toBe('true');
    expect(await page.getByRole('button', { name: 'Log out' }).count()).toBe(1);
    expect(await page.getByText(EXPIRED).count()).toBe(0);
  }, 120_000);

  it('a write refused for want of the session\'s CSRF token (its cookie gone) goes to the login page too', async () => {
    const user = await insertAccount(b.stack);
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/profile');
    // The session cookie stays; only the page's CSRF token is gone: console-api answers 403 CSRF_TOKEN_INVALID.
    const kept = (await page.context().cookies()).filter((c) => c.name !== 'console_csrf');
    expect(kept.map((c) => c.name)).toContain('console_session');
    await page.context().clearCookies();
    await page.context().addCookies(kept);
    await page.getByRole('textbox', { name: 'Display name' }).fill('Renamed');
    await page.getByRole('button', { name: 'Save name' }).click();
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    await page.getByText(EXPIRED).waitFor();
    expect(await page.getByText(/X-CSRF-Token/).count()).toBe(0);
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
