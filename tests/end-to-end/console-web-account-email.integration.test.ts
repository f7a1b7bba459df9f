// The account flows the API has, in the web console: it reads GET /api/status and offers what the
// options open. Registration closed: no Register link, and /register says so before anything is
// typed. E-mail verification on: the Register form asks for the address and the mailed code (a
// "Send code" button), and registers with them. Mail configured: "Forgot password?" resets the
// password with a mailed code, and Profile binds an address. OpenID Connect on: a sign-on button.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { mailText, mailThroughSink, type SmtpSink, startSmtpSink } from '../harness/smtp-sink.js';
import { consoleCall, uniqueName } from '../harness/gateway-stack.js';
import { type ConsoleAccount, type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser } from './console-web-browser.js';

let b: ConsoleBrowser;
let sink: SmtpSink;
let root: ConsoleAccount;

beforeAll(async () => {
  b = await startConsoleBrowser();
  sink = await startSmtpSink();
  root = await insertAccount(b.stack, { role: 100, prefix: 'root' });
}, 120_000);

afterAll(async () => {
  await b?.close();
  await sink?.close();
});

async function setOption(key: string, value: unknown): Promise<void> {
  const r = await consoleCall(b.stack, 'PUT', '/api/option/', root.token, { key, value });
  expect(r.json.success, `${key}: ${r.json.message}`).toBe(true);
}

/** Opens a signed-out page once the page has read GET /api/status (what it offers depends on it). */
async function openSignedOut(path: string): Promise<Page> {
  const page = await b.newPage();
  await page.goto(`${b.stack.consoleUrl}${path}`, { waitUntil: 'networkidle' });
  await page.getByRole('heading', { level: 1 }).waitFor();
  // The answer drawn.
  await page.waitForTimeout(200);
  return page;
}

/** The code of the next mail to `to` (6 digits; a reset code is 32 hexadecimal characters). */
async function mailedCode(to: string): Promise<string> {
  const text = mailText(await sink.next(to));
  const code = /(?:code is|code:) ([0-9a-f]+)/.exec(text)?.[1];
  expect(code, text).toBeDefined();
  return code!;
}

describe('registration closed', () => {
  it('open: the login page offers Register; closed: no Register link, and /register says it is closed with no form', async () => {
    const open = await openSignedOut('/login');
    expect(await open.getByRole('link', { name: 'Register' }).count()).toBe(1);

    await setOption('RegisterEnabled', false);
    try {
      const login = await openSignedOut('/login');
      await login.getByRole('button', { name: 'Log in' }).waitFor();
      expect(await login.getByRole('link', { name: 'Register' }).count()).toBe(0);

      const register = await openSignedOut('/register');
      await register.getByText(/Registration is closed/).waitFor();
      expect(await register.getByLabel('Username').count()).toBe(0);
      expect(await register.getByRole('button', { name: 'Register' }).count()).toBe(0);
      expect(await register.getByRole('link', { name: 'Log in' }).count()).toBe(1);
    } finally {
      await setOption('RegisterEnabled', true);
    }
    // PasswordRegisterEnabled off closes the form too (sign-on alone may still create accounts).
    await setOption('PasswordRegisterEnabled', false);
    try {
      const login = await openSignedOut('/login');
      expect(await login.getByRole('link', { name: 'Register' }).count()).toBe(0);
    } finally {
      await setOption('PasswordRegisterEnabled', true);
    }
  }, 120_000);
});

describe('e-mail', () => {
  beforeAll(async () => {
    await mailThroughSink(b.stack.sql, sink);
  });

  it('with e-mail verification on, registers with the address and the mailed code', async () => {
    await setOption('EmailVerificationEnabled', true);
    try {
      const page = await openSignedOut('/register');
      const form = page.getByRole('form', { name: 'Register' });
      const username = uniqueName('mail');
      const address = `${username}@example.test`;
      await form.getByLabel('Username').fill(username);
      await form.getByLabel('Password', { exact: true }).fill('pw-abcdefgh12');
      await form.getByLabel('Repeat password').fill('pw-abcdefgh12');
      await form.getByLabel('E-mail address').fill(address);
      await form.getByRole('button', { name: 'Send code' }).click();
      await page.getByText(`A code was sent to ${address}`).waitFor();
      await form.getByLabel('Verification code').fill(await mailedCode(address));
      await form.getByRole('button', { name: 'Register' }).click();
      await page.getByRole('button', { name: 'Log out' }).waitFor();
      const [row] = await b.stack.sql<{ email: string }[]>`SELECT email FROM users WHERE username = ${username}`;
      expect(row?.email).toBe(address);
    } finally {
      await setOption('EmailVerificationEnabled', false);
    }
  }, 120_000);

  it('a wrong code is refused with a readable message, not the API\'s field name or route', async () => {
    await setOption('EmailVerificationEnabled', true);
    try {
      const page = await openSignedOut('/register');
      const form = page.getByRole('form', { name: 'Register' });
      await form.getByLabel('Username').fill(uniqueName('mail'));
      await form.getByLabel('Password', { exact: true }).fill('pw-abcdefgh12');
      await form.getByLabel('Repeat password').fill('pw-abcdefgh12');
      await form.getByLabel('E-mail address').fill('nobody@example.test');
      await form.getByLabel('Verification code').fill('000000');
      await form.getByRole('button', { name: 'Register' }).click();
      const alert = page.getByRole('alert');
      await alert.first().waitFor();
      const shown = (await alert.allInnerTexts()).join(' ');
      expect(shown).toMatch(/code is wrong, expired or already used/);
      expect(shown).not.toMatch(/verification_code:|GET \/api/);
    } finally {
      await setOption('EmailVerificationEnabled', false);
    }
  }, 120_000);

  it('"Forgot password?" resets the password with the mailed code', async () => {
    const user = await insertAccount(b.stack);
    const address = `${user.username}@example.test`;
    await b.stack.sql`UPDATE users SET email = ${address} WHERE id = ${user.id}`;
    const page = await openSignedOut('/login');
    await page.getByRole('link', { name: 'Forgot password?' }).click();
    await page.getByRole('heading', { name: 'Reset password' }).waitFor();
    const form = page.getByRole('form', { name: 'Reset password' });
    await form.getByLabel('E-mail address').fill(address);
    await form.getByRole('button', { name: 'Send code' }).click();
    await page.getByText(/a reset code was sent to it/).waitFor();
    await form.getByLabel('Reset code').fill(await mailedCode(address));
    await form.getByLabel('New password', { exact: true }).fill('pw-new-password-9');
    await form.getByLabel('New password again').fill('pw-new-password-9');
    await form.getByRole('button', { name: 'Reset password' }).click();
    await page.getByText(/Password changed/).waitFor();
    await page.getByRole('link', { name: 'Log in' }).first().click();
    await logIn(page, b.stack, { username: user.username, password: 'pw-new-password-9' }, '/login');
  }, 120_000);

  it('Profile binds an e-mail address with the mailed code', async () => {
    const user = await insertAccount(b.stack);
    const address = `${user.username}@example.test`;
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/profile');
    const card = page.getByRole('region', { name: 'E-mail address' });
    await card.getByLabel('New e-mail address').fill(address);
    await card.getByRole('button', { name: 'Send code' }).click();
    await card.getByText(`A code was sent to ${address}`).waitFor();
    await card.getByLabel('Verification code').fill(await mailedCode(address));
    // A bound address resets the password: binding asks for the current one (console-api email-routes.ts).
    await card.getByLabel('Current password').fill(user.password);
    await card.getByRole('button', { name: 'Bind e-mail' }).click();
    await card.getByText(`E-mail address ${address} bound.`).waitFor();
    const [row] = await b.stack.sql<{ email: string }[]>`SELECT email FROM users WHERE id = ${user.id}`;
    expect(row?.email).toBe(address);
    await page.getByText(`Bound address: ${address}`).waitFor();
  }, 120_000);
});

describe('OpenID Connect', () => {
  it('offers "Sign in with OpenID Connect" only when sign-on is on, and asks the API to start it', async () => {
    const off = await openSignedOut('/login');
    expect(await off.getByRole('button', { name: 'Sign in with OpenID Connect' }).count()).toBe(0);
    // An issuer nobody answers at: the start fails at discovery, and says so.
    for (const [key, value] of [['oidc.well_known', 'http://127.0.0.1:9/issuer'], ['oidc.client_id', 'gateway'], ['oidc.enabled', true]] as const) await setOption(key, value);
    try {
      const page = await openSignedOut('/login');
      const start = page.waitForRequest((r) => new URL(r.url()).pathname === '/api/oauth/oidc/start');
      await page.getByRole('button', { name: 'Sign in with OpenID Connect' }).click();
      await start;
      await page.getByText('the OpenID provider could not be reached (discovery failed)').waitFor();
    } finally {
      await setOption('oidc.enabled', false);
    }
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
