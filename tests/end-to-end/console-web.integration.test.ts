// The web console in a real browser (Debian's chromium driven by playwright-core) against a whole
// test stack: an administrator creates a channel and redemption codes; a new account registers,
// redeems a code and sees its balance rise, creates an API key and reads it once, calls the relay
// with it through the official SDK, and finds the request in Usage logs and in the dashboard totals;
// an administrator renames the account and resets its password, after which only the new name and
// password log in; an ordinary account sees no administration page and the API refuses it.
// CONSOLE_SCREENSHOTS=docs/screenshots saves a screenshot of each main page (README "Web console").
import { existsSync, mkdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../../console-api/auth/password.js';
import { webConsoleDir } from '../../console-api/http/web-console.js';
import { projectRoot } from '../../infra/project-root.js';
import { type CardpaySandbox, startCardpaySandbox } from '../../bench/payment-sandbox/cardpay-sandbox.js';
import { type EpaySandbox, startEpaySandbox } from '../../bench/payment-sandbox/epay-sandbox.js';
import { billingSettled, consoleCall, MOCK_CHANNEL_KEY, startGatewayStack, type GatewayStack, uniqueName } from '../harness/gateway-stack.js';

// claude-haiku-4-5: model ratio 0.5, completion ratio 5 (core/pricing/ratios.ts); group default: 1.
const MODEL = 'claude-haiku-4-5';
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SHOTS = process.env.CONSOLE_SCREENSHOTS ? join(projectRoot(), process.env.CONSOLE_SCREENSHOTS) : undefined;

let stack: GatewayStack;
let epay: EpaySandbox;
let card: CardpaySandbox;
let browser: Browser;
const contexts: BrowserContext[] = [];
/** What the browser reported as refused by the Content-Security-Policy, or as a page error, on any page. */
const pageProblems: string[] = [];
const admin = { username: uniqueName('root'), password: `pw-${randomBytes(8).toString('hex')}`, affCode: randomBytes(6).toString('hex') };

beforeAll(async () => {
  if (!existsSync(join(webConsoleDir(''), 'index.html'))) throw new Error('the web console is not built: run `make build` first');
  stack = await startGatewayStack();
  await stack.sql`INSERT INTO users (username, display_name, password_hash, role, aff_code)
                  VALUES (${admin.username}, 'Root', ${await hashPassword(admin.password)}, 100, ${admin.affCode})`;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  if (SHOTS) mkdirSync(SHOTS, { recursive: true });
  // QR-code payments through the local epay sandbox, which pays at once and returns the browser.
  const EPAY = { pid: '1001', key: `epay-${randomBytes(8).toString('hex')}` };
  epay = await startEpaySandbox(EPAY);
  // Card payments through the card provider's sandbox, which pays on its page and sends the webhook.
  const CARD = { apiSecret: `sk_test_${randomBytes(6).toString('hex')}`, webhookSecret: `whsec_${randomBytes(6).toString('hex')}` };
  card = await startCardpaySandbox({ ...CARD, webhookUrl: `${stack.consoleUrl}/api/cardpay/webhook` });
  const options: Record<string, unknown> = {
    ServerAddress: stack.consoleUrl, PaymentComplianceConfirmed: true, PayAddress: epay.url, EpayId: EPAY.pid, EpayKey: EPAY.key, MinTopUp: 1,
    CardpayApiAddress: card.url, CardpayApiSecret: CARD.apiSecret, CardpayWebhookSecret: CARD.webhookSecret, CardpayUnitPrice: '1', CardpayMinTopUp: 5,
  };
  for (const [key, value] of Object.entries(options)) {
    const res = await consoleCall(stack, 'PUT', '/api/option/', stack.adminToken, { key, value });
    if (!res.json.success) throw new Error(`option ${key}: ${res.json.message}`);
  }
}, 120_000);

afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => undefined);
  await browser?.close();
  await epay?.close();
  await card?.close();
  await stack?.close();
});

async function newPage(): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  contexts.push(context);
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  page.on('console', (msg) => {
    if (msg.type() === 'error' && /Content.Security.Policy|Refused to/i.test(msg.text())) pageProblems.push(msg.text());
  });
  page.on('pageerror', (err) => pageProblems.push(`page error: ${err.message}`));
  return page;
}

async function shot(page: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
}

async function logIn(page: Page, username: string, password: string): Promise<void> {
  await page.goto(`${stack.consoleUrl}/`);
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('button', { name: 'Log out' }).waitFor();
}

async function tileValue(page: Page, label: string): Promise<string> {
  return (await page.getByRole('group', { name: label, exact: true }).locator('.tile-value').textContent()) ?? '';
}

describe('web console', () => {
  const channelName = uniqueName('mock-');
  let codes: string[] = [];
  // The password changes in the profile test, then the administrator renames the account and resets
  // its password; later tests log in with the new ones.
  const user = { username: uniqueName('web'), password: `pw-${randomBytes(8).toString('hex')}` };
  let apiKey = '';
  let requestId = '';

  it('an administrator creates a channel and redemption codes', async () => {
    const page = await newPage();
    await logIn(page, admin.username, admin.password);
    await expect(page.getByRole('heading', { name: 'Administration' }).isVisible()).resolves.toBe(true);

    await page.getByRole('link', { name: 'Channels' }).click();
    await page.getByRole('button', { name: 'Create channel' }).click();
    const form = page.getByRole('form', { name: 'New channel' });
    await form.getByLabel('Name').fill(channelName);
    await form.getByLabel('Base URL').fill(stack.mock.url);
    await form.getByLabel('Channel key').fill(MOCK_CHANNEL_KEY);
    await form.getByLabel('Models').fill(MODEL);
    await form.getByRole('button', { name: 'Create channel' }).click();
    const row = page.getByRole('row').filter({ hasText: channelName });
    await row.waitFor();
    const [channel] = await stack.sql<{ id: number; base_url: string; models: string; status: number }[]>`SELECT id, base_url, models, status FROM channels WHERE name = ${channelName}`;
    expect(channel).toMatchObject({ base_url: stack.mock.url, models: MODEL, status: 1 });
    // The relay reloads its channels on the console's announcement.
    const deadline = Date.now() + 5000;
    while (!stack.relay.hasChannel(Number(channel!.id))) {
      if (Date.now() > deadline) throw new Error('the relay did not pick up the channel created in the console');
      await new Promise((r) => setTimeout(r, 20));
    }
    await row.getByRole('button', { name: `Test channel ${channelName}` }).click();
    await row.getByText(`OK: ${MODEL} answered`).waitFor();
    await shot(page, 'admin-channels');

    await page.getByRole('link', { name: 'Redemption codes' }).click();
    const create = page.getByRole('form', { name: 'Create codes' });
    await create.getByLabel('Name').fill('welcome');
    await create.getByLabel('Value per code (US dollars)').fill('5');
    await create.getByLabel('How many').fill('2');
    await create.getByRole('button', { name: 'Create codes' }).click();
    codes = ((await page.getByTestId('new-codes').textContent()) ?? '').split('\n').filter(Boolean);
    expect(codes).toHaveLength(2);
    for (const c of codes) expect(c).toMatch(/^[0-9a-f]{32}$/);
    // Stored masked (and hashed): the listing shows each new code's mask.
    const stored = await stack.sql<{ quota: number; key_mask: string }[]>`SELECT quota, key_mask FROM redemptions WHERE name = 'welcome' ORDER BY id`;
    expect(stored.map((r) => Number(r.quota))).toEqual([2_500_000, 2_500_000]);
    expect(stored.map((r) => r.key_mask)).toEqual(codes.map((c) => `${c.slice(0, 4)}********${c.slice(-4)}`));
    for (const r of stored) await page.getByRole('row').filter({ hasText: r.key_mask }).waitFor();
    await shot(page, 'admin-redemptions');

    await page.getByRole('link', { name: 'Accounts' }).click();
    await page.getByRole('row').filter({ hasText: admin.username }).waitFor();
    await shot(page, 'admin-accounts');
    await page.getByRole('link', { name: 'Options' }).click();
    await page.getByRole('heading', { name: 'Ratios and prices' }).waitFor();
    await shot(page, 'admin-options');
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByRole('button', { name: 'Log in' }).waitFor();
  }, 120_000);

  it('a new account registers and redeems a code: the balance rises', async () => {
    const page = await newPage();
    await page.goto(`${stack.consoleUrl}/login`);
    await shot(page, 'login');
    await page.getByRole('link', { name: 'Register' }).click();
    await page.getByRole('button', { name: 'Register' }).waitFor();
    // Invited by the administrator's link (/register?aff=CODE fills the field).
    await page.goto(`${stack.consoleUrl}/register?aff=${admin.affCode}`);
    await expect(page.getByLabel('Invitation code').inputValue()).resolves.toBe(admin.affCode);
    await page.getByLabel('Username').fill(user.username);
    await page.getByLabel('Password', { exact: true }).fill(user.password);
    await page.getByLabel('Repeat password').fill(user.password);
    await page.getByRole('button', { name: 'Register' }).click();
    await page.getByRole('button', { name: 'Log out' }).waitFor();
    // The session lives in an HttpOnly cookie the page cannot read.
    expect(await page.evaluate('document.cookie')).not.toContain('console_session');
    const [invited] = await stack.sql<{ inviter_id: number; inviter: string }[]>`
      SELECT u.inviter_id, i.username AS inviter FROM users u JOIN users i ON i.id = u.inviter_id WHERE u.username = ${user.username}`;
    expect(invited?.inviter).toBe(admin.username);
    const cookies = await page.context().cookies();
    expect(cookies.find((c) => c.name === 'console_session')).toMatchObject({ httpOnly: true, sameSite: 'Strict' });

    await page.getByRole('link', { name: 'Top up' }).click();
    await expect(page.getByTestId('balance').textContent()).resolves.toBe('$0.00');
    await page.getByLabel('Redemption code').fill(codes[0]!);
    await page.getByRole('button', { name: 'Redeem' }).click();
    await page.getByText('Added $5.00 (2,500,000 quota) to your balance.').waitFor();
    await page.getByTestId('balance').filter({ hasText: '$5.00' }).waitFor();
    const [row] = await stack.sql<{ quota: number }[]>`SELECT quota FROM users WHERE username = ${user.username}`;
    expect(Number(row!.quota)).toBe(2_500_000);

    // A used code is refused, and the message appears next to the field.
    await page.getByLabel('Redemption code').fill(codes[0]!);
    await page.getByRole('button', { name: 'Redeem' }).click();
    await page.getByRole('alert').filter({ hasText: /used/ }).waitFor();
    await shot(page, 'top-up');
  }, 120_000);

  it('creates an API key, reads it once, and calls the relay with it through the SDK', async () => {
    const page = await newPage();
    await logIn(page, user.username, user.password);
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('button', { name: 'Create key' }).click();
    const form = page.getByRole('form', { name: 'Create key' });
    await form.getByLabel('Name').fill('laptop');
    await form.getByRole('button', { name: 'Create key' }).click();
    apiKey = (await page.getByTestId('new-key').textContent()) ?? '';
    expect(apiKey).toMatch(/^sk-/);
    await page.getByRole('button', { name: 'I have copied it' }).click();
    const row = page.getByRole('row').filter({ hasText: 'laptop' });
    await row.waitFor();
    // From now on the key is masked: the page no longer holds its value.
    expect(await page.content()).not.toContain(apiKey);
    await shot(page, 'api-keys');

    const sdk = new Anthropic({ apiKey, baseURL: stack.relayUrl, maxRetries: 0 });
    const { data, response } = await sdk.messages
      .create({ model: MODEL, max_tokens: 20, messages: [{ role: 'user', content: 'Hello from the console test' }] })
      .withResponse();
    expect(data.type).toBe('message');
    requestId = response.headers.get('x-gateway-request-id')!;
    expect(requestId).toBeTruthy();
    await billingSettled(stack);
  }, 120_000);

  it('shows the request in Usage logs and in the dashboard totals', async () => {
    const page = await newPage();
    await logIn(page, user.username, user.password);
    const [ledger] = await stack.sql<{ quota: number }[]>`SELECT quota FROM ledger WHERE request_id = ${requestId}`;
    const cost = Number(ledger!.quota);
    expect(cost).toBeGreaterThan(0);

    await page.getByRole('link', { name: 'Usage logs' }).click();
    await page.getByLabel('Request ID', { exact: true }).fill(requestId);
    await page.getByRole('button', { name: 'Apply filters' }).click();
    const row = page.getByRole('row').filter({ hasText: requestId });
    await row.waitFor();
    await expect(row.textContent()).resolves.toContain(MODEL);
    await expect(row.textContent()).resolves.toContain('laptop');
    await page.getByText('Page 1 of 1 (1 in all)').waitFor();
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.getByRole('row').filter({ hasText: 'Top-up' }).first().waitFor();
    await shot(page, 'usage-logs');

    await page.getByRole('link', { name: 'Dashboard' }).click();
    await page.getByRole('group', { name: "Today's requests" }).locator('.tile-value', { hasText: '1' }).waitFor();
    expect(await tileValue(page, 'Requests')).toBe('1');
    const [account] = await stack.sql<{ quota: number; used_quota: number }[]>`SELECT quota, used_quota FROM users WHERE username = ${user.username}`;
    expect(Number(account!.used_quota)).toBe(cost);
    expect(Number(account!.quota)).toBe(2_500_000 - cost);
    // Shown to the last quota unit: the dollars read back as the very quota.
    const quotaOf = (text: string) => Math.round(Number(/^\$([\d.]+)$/.exec(text)![1]) * 500_000);
    expect(quotaOf(await tileValue(page, 'Used'))).toBe(cost);
    expect(quotaOf(await tileValue(page, 'Balance'))).toBe(2_500_000 - cost);
    await page.locator('.chart canvas').waitFor();
    await shot(page, 'dashboard');

    await page.getByRole('link', { name: 'Profile' }).click();
    await page.getByRole('button', { name: 'Issue access token' }).waitFor();
    await shot(page, 'profile');
  }, 120_000);

  it('pays online (QR-code provider and card): the amount and method from the top-up info, the provider\'s page, back with the order completed', async () => {
    const page = await newPage();
    await logIn(page, user.username, user.password);
    const before = Number((await stack.sql<{ quota: number }[]>`SELECT quota FROM users WHERE username = ${user.username}`)[0]!.quota);
    await page.getByRole('link', { name: 'Top up' }).click();
    await page.getByRole('group', { name: 'Amounts' }).getByRole('button', { name: '$20', exact: true }).click();
    await page.getByRole('button', { name: 'Show price' }).click();
    await page.getByText(/^To pay: /).waitFor();
    await page.getByRole('button', { name: /^Pay with / }).first().click();
    // The sandbox pays, notifies the console and sends the browser back to /console/topup.
    await page.waitForURL((u) => u.origin === stack.consoleUrl && u.pathname === '/console/topup');
    await page.getByRole('cell', { name: 'Completed', exact: true }).waitFor();
    const [order] = await stack.sql<{ trade_no: string; amount: number; status: string }[]>`
      SELECT t.trade_no, t.amount, t.status FROM topups t JOIN users u ON u.id = t.user_id WHERE u.username = ${user.username}`;
    expect(order).toMatchObject({ amount: 20, status: 'success' });
    const [credit] = await stack.sql<{ quota: number }[]>`SELECT quota FROM ledger WHERE request_id = ${`topup:${order!.trade_no}`}`;
    expect(Number(credit!.quota)).toBeGreaterThan(0);
    const after = Number((await stack.sql<{ quota: number }[]>`SELECT quota FROM users WHERE username = ${user.username}`)[0]!.quota);
    expect(after - before).toBe(Number(credit!.quota));
    await page.getByLabel('Order number contains').fill(order!.trade_no.slice(-6));
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('Page 1 of 1 (1 in all)').waitFor();

    // By card: the provider's checkout page, back to /console/topup?paid=1, the order credited once.
    await page.getByLabel('Amount (US dollars of credit)').fill('7');
    await page.getByRole('button', { name: 'Pay by card' }).click();
    await page.waitForURL((u) => u.origin === stack.consoleUrl && u.pathname === '/console/topup' && u.searchParams.has('paid'));
    await page.getByText('Back from the payment provider').waitFor();
    const [cardOrder] = await stack.sql<{ trade_no: string; amount: number; status: string }[]>`
      SELECT t.trade_no, t.amount, t.status FROM topups t JOIN users u ON u.id = t.user_id
      WHERE u.username = ${user.username} AND t.payment_provider = 'cardpay'`;
    expect(cardOrder).toMatchObject({ amount: 7, status: 'success' });
    await page.getByRole('row').filter({ hasText: cardOrder!.trade_no }).getByRole('cell', { name: 'Completed', exact: true }).waitFor();
    const cardCredit = await stack.sql<{ quota: number }[]>`SELECT quota FROM ledger WHERE request_id = ${`topup:${cardOrder!.trade_no}`}`;
    expect(cardCredit).toHaveLength(1);
  }, 120_000);

  it('works with the keyboard alone; keys are edited, disabled and deleted; the profile changes the display name', async () => {
    const page = await newPage();
    await page.goto(`${stack.consoleUrl}/`);
    await page.getByLabel('Username').focus();
    await page.keyboard.type(user.username);
    await page.keyboard.press('Tab');
    await page.keyboard.type(user.password);
    await page.keyboard.press('Enter');
    await page.getByRole('button', { name: 'Log out' }).waitFor();

    await page.getByRole('link', { name: 'API keys' }).click();
    const row = page.getByRole('row').filter({ hasText: 'laptop' });
    await row.getByRole('button', { name: 'Edit laptop' }).click();
    const form = page.getByRole('form', { name: 'Save key' });
    await form.getByLabel('Unlimited quota').uncheck();
    await form.getByLabel('Quota (US dollars)').fill('1.5');
    await form.getByLabel('Allowed IP addresses').fill('not-an-address');
    await form.getByRole('button', { name: 'Save key' }).click();
    // The API's refusal appears next to the field that caused it.
    await form.getByText('"not-an-address" is not an IP address or CIDR block').waitFor();
    await form.getByLabel('Allowed IP addresses').fill('127.0.0.1');
    await form.getByRole('button', { name: 'Save key' }).click();
    await row.getByText('$1.50').waitFor();
    const [key] = await stack.sql<{ remain_quota: number; allow_ips: string; status: number }[]>`SELECT remain_quota, allow_ips, status FROM tokens WHERE name = 'laptop'`;
    expect(key).toMatchObject({ remain_quota: 750_000, allow_ips: '127.0.0.1', status: 1 });
    await row.getByRole('button', { name: 'Disable laptop' }).click();
    await row.getByText('Disabled').waitFor();
    const sdk = new Anthropic({ apiKey, baseURL: stack.relayUrl, maxRetries: 0 });
    // The relay drops the key from its cache on the console's announcement (at the latest after KEY_CACHE_TTL_MS).
    const refused = async () => {
      for (const deadline = Date.now() + 5000; ;) {
        try {
          await sdk.messages.create({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
        } catch (err) {
          return (err as { status?: number }).status;
        }
        if (Date.now() > deadline) return 200;
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    expect(await refused()).toBe(401);
    await row.getByRole('button', { name: 'Delete laptop' }).click();
    await row.getByRole('button', { name: 'Confirm deleting laptop' }).click();
    await page.getByText('No keys yet.').waitFor();

    await page.getByRole('link', { name: 'Profile' }).click();
    const name = page.getByRole('form', { name: 'Display name' });
    await name.getByLabel('Display name').fill('Ada Lovelace');
    await name.getByRole('button', { name: 'Save name' }).click();
    await page.getByRole('banner').getByText('Ada Lovelace · User').waitFor();

    // A wrong current password is an error next to that field, not a sign-out; the right one changes it.
    const change = page.getByRole('form', { name: 'Change password' });
    const newPassword = `pw-${randomBytes(8).toString('hex')}`;
    await change.getByLabel('Current password').fill('not-the-password');
    await change.getByLabel('New password', { exact: true }).fill(newPassword);
    await change.getByLabel('New password again').fill(newPassword);
    await change.getByRole('button', { name: 'Change password' }).click();
    await change.getByText('the current password is incorrect').waitFor();
    expect(await page.getByRole('button', { name: 'Log out' }).count()).toBe(1);
    await change.getByLabel('Current password').fill(user.password);
    await change.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('Password changed;', { exact: false }).waitFor();
    user.password = newPassword;
  }, 120_000);

  it('an administrator (role 10) manages accounts (renames one, resets its password) and channels and sees no root-only action', async () => {
    const adminName = uniqueName('adm');
    const password = `pw-${randomBytes(8).toString('hex')}`;
    await stack.sql`INSERT INTO users (username, display_name, password_hash, role, aff_code)
                    VALUES (${adminName}, 'Admin', ${await hashPassword(password)}, 10, ${randomBytes(6).toString('hex')})`;
    const page = await newPage();
    await logIn(page, adminName, password);
    await page.getByRole('link', { name: 'Accounts' }).click();
    const row = page.getByRole('row').filter({ hasText: user.username });
    await row.waitFor();
    expect(await page.getByRole('button', { name: /Make .* an administrator/ }).count()).toBe(0);
    // A new account, made here rather than registered: it logs in with the password given.
    const made = { username: uniqueName('made'), password: `pw-${randomBytes(8).toString('hex')}` };
    await page.getByRole('button', { name: 'New account' }).click();
    const create = page.getByRole('form', { name: 'New account' });
    expect(await create.getByLabel('Role').count()).toBe(0);
    await create.getByLabel('Username').fill(made.username);
    await create.getByLabel('Password').fill(made.password);
    await create.getByRole('button', { name: 'Create account' }).click();
    await page.getByText(new RegExp(`^Created account ${made.username} \\(id \\d+\\)`)).waitFor();
    await create.waitFor({ state: 'detached' });
    const [madeRow] = await stack.sql<{ role: number; group: string; quota: number }[]>`SELECT role, "group", quota FROM users WHERE username = ${made.username}`;
    expect(madeRow).toMatchObject({ role: 1, group: 'default', quota: 0 });
    const madePage = await newPage();
    await logIn(madePage, made.username, made.password);
    // Search, then set the balance and the group; ban and unban.
    await page.getByLabel('Id, username, display name or e-mail').fill(user.username);
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('Page 1 of 1 (1 in all)').waitFor();
    await row.getByRole('button', { name: `Edit ${user.username}` }).click();
    const edit = page.getByRole('form', { name: `Edit account ${user.username}` });
    await edit.getByLabel('Balance (US dollars)').fill('10');
    await edit.getByLabel('Group').fill('vip');
    await edit.getByRole('button', { name: 'Save account' }).click();
    await row.getByText('$10.00').waitFor();
    const [edited] = await stack.sql<{ quota: number; group: string }[]>`SELECT quota, "group" FROM users WHERE username = ${user.username}`;
    expect(edited).toMatchObject({ quota: 5_000_000, group: 'vip' });
    await row.getByRole('button', { name: `Ban ${user.username}` }).click();
    await row.getByRole('button', { name: `Confirm banning ${user.username}` }).click();
    await row.getByRole('cell', { name: 'Banned' }).waitFor();
    expect((await stack.sql<{ status: number }[]>`SELECT status FROM users WHERE username = ${user.username}`)[0]!.status).toBe(2);
    await row.getByRole('button', { name: `Unban ${user.username}` }).click();
    await row.getByRole('cell', { name: 'Enabled' }).waitFor();
    // Rename and reset the password: a taken name and a password too short are refused in the form.
    const renamed = { username: uniqueName('ren'), password: `pw-${randomBytes(8).toString('hex')}` };
    await row.getByRole('button', { name: `Edit ${user.username}` }).click();
    await edit.getByLabel('Username').fill(adminName);
    await edit.getByRole('button', { name: 'Save account' }).click();
    // A taken name is shown under Username (USERNAME_TAKEN names its field in words).
    await edit.getByText('is already taken', { exact: true }).waitFor();
    expect(await edit.getByLabel('Username').getAttribute('aria-invalid')).toBe('true');
    await edit.getByLabel('Username').fill(renamed.username);
    await edit.getByLabel('New password').fill('pw-1');
    await edit.getByRole('button', { name: 'Save account' }).click();
    await edit.getByText('must be at least 8 characters').waitFor();
    await edit.getByLabel('New password').fill(renamed.password);
    await edit.getByRole('button', { name: 'Save account' }).click();
    await edit.waitFor({ state: 'detached' });
    await page.getByLabel('Id, username, display name or e-mail').fill(renamed.username);
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByRole('row').filter({ hasText: renamed.username }).getByRole('cell', { name: 'Enabled' }).waitFor();
    // The old password no longer logs in (under the new name or the old); the new name and password do.
    const owner = await newPage();
    await owner.goto(`${stack.consoleUrl}/`);
    for (const name of [renamed.username, user.username]) {
      await owner.getByLabel('Username').fill(name);
      await owner.getByLabel('Password').fill(user.password);
      // Each attempt's own answer: the message of the one before is still shown.
      const answer = owner.waitForResponse((r) => new URL(r.url()).pathname === '/api/user/login');
      await owner.getByRole('button', { name: 'Log in' }).click();
      expect((await answer).status()).toBe(401);
      await owner.getByText('username or password is incorrect').waitFor();
    }
    await logIn(owner, renamed.username, renamed.password);
    Object.assign(user, renamed);
    // Channels: priority, weight and the flex price ratio edited (the format kept), disabled and enabled again.
    await page.getByRole('link', { name: 'Channels' }).click();
    const channelRow = page.getByRole('row').filter({ hasText: channelName });
    await channelRow.getByRole('button', { name: `Edit channel ${channelName}` }).click();
    const channelForm = page.getByRole('form', { name: `Edit channel ${channelName}` });
    await channelForm.getByLabel('Priority').fill('5');
    await channelForm.getByLabel('Weight').fill('3');
    expect(await channelForm.getByLabel('Provider format').inputValue()).toBe('14');
    expect(await channelForm.getByLabel('Flex price ratio').inputValue()).toBe('1');
    await channelForm.getByLabel('Flex price ratio').fill('0.5');
    await channelForm.getByRole('button', { name: 'Save channel' }).click();
    await channelForm.waitFor({ state: 'detached' });
    const channelState = async () => (await stack.sql<{ priority: number; weight: number; status: number; type: number; flex_ratio: number }[]>`
      SELECT priority, weight, status, type, flex_ratio FROM channels WHERE name = ${channelName}`)[0];
    expect(await channelState()).toMatchObject({ priority: 5, weight: 3, status: 1, type: 14, flex_ratio: 0.5 });
    await channelRow.getByRole('cell', { name: 'Anthropic Messages' }).waitFor();
    await channelRow.getByRole('button', { name: `Disable channel ${channelName}` }).click();
    await channelRow.getByRole('button', { name: `Enable channel ${channelName}` }).waitFor();
    expect((await channelState())!.status).toBe(2);
    await channelRow.getByRole('button', { name: `Enable channel ${channelName}` }).click();
    await channelRow.getByRole('button', { name: `Disable channel ${channelName}` }).waitFor();
    expect((await channelState())!.status).toBe(1);

    await page.getByRole('link', { name: 'Top-up orders' }).click();
    await page.getByRole('row').filter({ hasText: 'epay' }).first().waitFor();
    expect(await page.getByRole('button', { name: /^Mark order/ }).count()).toBe(0);
    // Options are root's (as in new-api): the page is read-only for an administrator, pricing, groups
    // and the top-up link included, with a note saying so, and offers no Save or Clear at all.
    await page.getByRole('link', { name: 'Options' }).click();
    await page.getByRole('note').getByText('Options are changed by the super administrator only', { exact: false }).waitFor();
    await page.getByRole('heading', { name: 'Ratios and prices' }).waitFor();
    for (const key of ['ModelRatio', 'GroupRatio', 'TopUpLink', 'UserUsableGroups', 'RegisterEnabled']) {
      await expect(page.getByRole('textbox', { name: key, exact: true }).isDisabled(), key).resolves.toBe(true);
    }
    expect(await page.getByRole('button', { name: /^(Save|Clear) / }).count()).toBe(0);
    await page.getByLabel('Find an option').fill('EpayKey');
    await expect(page.getByRole('textbox', { name: 'EpayKey' }).isDisabled()).resolves.toBe(true);
    expect(await page.getByRole('button', { name: 'Save EpayKey' }).count()).toBe(0);
  }, 120_000);

  it('an ordinary account sees no administration, and the API refuses it', async () => {
    const page = await newPage();
    await logIn(page, user.username, user.password);
    expect(await page.getByRole('heading', { name: 'Administration' }).count()).toBe(0);
    expect(await page.getByRole('link', { name: 'Channels' }).count()).toBe(0);
    await page.goto(`${stack.consoleUrl}/admin/channels`);
    await page.getByText('This page is for administrators.').waitFor();
    // The page's own session (its cookie and CSRF token), calling the API directly.
    const csrf = (await page.context().cookies()).find((c) => c.name === 'console_csrf')!.value;
    const status = await page.evaluate(async (csrf) => {
      const list = await fetch('/api/channel/', { headers: { 'x-csrf-token': csrf } });
      const create = await fetch('/api/redemption/', {
        method: 'POST', headers: { 'x-csrf-token': csrf, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'x', quota: 1 }),
      });
      return [list.status, create.status];
    }, csrf);
    expect(status).toEqual([403, 403]);
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(pageProblems).toEqual([]);
  });
});
