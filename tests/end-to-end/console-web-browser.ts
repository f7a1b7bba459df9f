// What the web console's browser tests share: a whole test stack (tests/harness/gateway-stack.ts), one
// headless Chromium (Debian's, driven by playwright-core), accounts inserted straight into Postgres
// and the login form. Each test file starts one of these in beforeAll and closes it in afterAll.
// The console must be built first (`make build`, or the Vite step of it).
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser, type BrowserContext, type BrowserContextOptions, chromium, type Page } from 'playwright-core';
import { hashPassword } from '../../console-api/auth/password.js';
import { webConsoleDir } from '../../console-api/http/web-console.js';
import { type GatewayStack, login, startGatewayStack, uniqueName } from '../harness/gateway-stack.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export interface ConsoleAccount {
  id: number;
  username: string;
  password: string;
  /** A console access token of the account, for calls made beside the browser. */
  token: string;
}

export interface ConsoleBrowser {
  stack: GatewayStack;
  browser: Browser;
  /** Refusals by the Content-Security-Policy and page errors seen on any page. */
  problems: string[];
  newPage(options?: BrowserContextOptions & { url?: string }): Promise<Page>;
  close(): Promise<void>;
}

export async function startConsoleBrowser(opts: { args?: string[] } = {}): Promise<ConsoleBrowser> {
  if (!existsSync(join(webConsoleDir(''), 'index.html'))) throw new Error('the web console is not built: run `make build` first');
  const stack = await startGatewayStack();
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', ...(opts.args ?? [])],
  });
  const contexts: BrowserContext[] = [];
  const problems: string[] = [];
  return {
    stack,
    browser,
    problems,
    async newPage(options = {}) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, ...options });
      contexts.push(context);
      const page = await context.newPage();
      page.setDefaultTimeout(15_000);
      page.on('console', (msg) => {
        if (msg.type() === 'error' && /Content.Security.Policy|Refused to/i.test(msg.text())) problems.push(msg.text());
      });
      page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
      return page;
    },
    async close() {
      for (const c of contexts) await c.close().catch(() => undefined);
      await browser.close();
      await stack.close();
    },
  };
}

/** An account inserted into Postgres (role 1 user, 10 administrator, 100 root) and logged in through the API. */
export async function insertAccount(stack: GatewayStack, opts: { role?: number; quota?: number; prefix?: string } = {}): Promise<ConsoleAccount> {
  const username = uniqueName(opts.prefix ?? 'web');
  const password = `pw-${randomBytes(8).toString('hex')}`;
  const [row] = await stack.sql<{ id: number }[]>`
    INSERT INTO users (username, display_name, password_hash, role, aff_code, quota)
    VALUES (${username}, ${username}, ${await hashPassword(password)}, ${opts.role ?? 1}, ${randomBytes(6).toString('hex')}, ${opts.quota ?? 0})
    RETURNING id`;
  return { id: Number(row!.id), username, password, token: await login(stack, username, password) };
}

/** Logs in through the form at `path` (the dashboard by default) and waits for the signed-in shell. */
export async function logIn(page: Page, stack: GatewayStack, account: { username: string; password: string }, path = '/'): Promise<void> {
  await page.goto(`${stack.consoleUrl}${path}`);
  await page.getByLabel('Username').fill(account.username);
  await page.getByLabel('Password').fill(account.password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('button', { name: 'Log out' }).waitFor();
}

/** The value shown in a dashboard (or top-up) tile. */
export async function tileValue(page: Page, label: string): Promise<string> {
  return (await page.getByRole('group', { name: label, exact: true }).locator('.tile-value').textContent()) ?? '';
}
