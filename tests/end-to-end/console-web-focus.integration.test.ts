// Where the keyboard's focus goes when the button that had it goes or is disabled: the browser drops
// it to <body>, and a keyboard user starts again from the top of the page. A key's Disable / Enable
// keeps it (the button is disabled while the change runs); a confirmed delete leaves it on the next
// row's Delete, or on the list's heading when no row is left; dismissing the new key's panel puts it on
// Create key. A redemption code's Disable / Enable and a ban keep it on the button in their place.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleCall } from '../harness/gateway-stack.js';
import { type ConsoleAccount, type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser } from './console-web-browser.js';

let b: ConsoleBrowser;

beforeAll(async () => {
  b = await startConsoleBrowser();
}, 120_000);

afterAll(async () => {
  await b?.close();
});

/** The focused element: its tag, and its accessible name as the tests name it (aria-label, else its text). */
async function focused(page: Page): Promise<string> {
  // A string, run in the page: the tests' TypeScript has no DOM types.
  return String(await page.evaluate(`(() => {
    const el = document.activeElement;
    if (!el || el === document.body) return 'BODY';
    return el.tagName + ' ' + (el.getAttribute('aria-label') ?? el.textContent?.trim() ?? '');
  })()`));
}

async function waitForFocus(page: Page, expected: string): Promise<void> {
  // The focus moves once the page has drawn the list read again: poll for it, then report what it is.
  const deadline = Date.now() + 5_000;
  while (Date.now() < deadline && (await focused(page)) !== expected) await page.waitForTimeout(50);
  expect(await focused(page)).toBe(expected);
}

async function key(user: ConsoleAccount, name: string): Promise<void> {
  const r = await consoleCall(b.stack, 'POST', '/api/token/', user.token, { name, expired_time: -1, remain_quota: 0, unlimited_quota: true });
  expect(r.json.success).toBe(true);
}

describe('focus on the keys page', () => {
  it('Disable and Enable keep the focus on the button', async () => {
    const user = await insertAccount(b.stack);
    await key(user, 'laptop');
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/keys');
    await page.getByRole('button', { name: 'Disable laptop' }).click();
    await page.getByRole('row').filter({ hasText: 'laptop' }).getByRole('cell', { name: 'Disabled' }).waitFor();
    await waitForFocus(page, 'BUTTON Enable laptop');
    // And from the keyboard: Enter on the focused button, the focus still there after.
    await page.keyboard.press('Enter');
    await page.getByRole('row').filter({ hasText: 'laptop' }).getByRole('cell', { name: 'Enabled' }).waitFor();
    await waitForFocus(page, 'BUTTON Disable laptop');
  }, 120_000);

  it('a confirmed delete leaves the focus on the next row\'s Delete, then on the list\'s heading', async () => {
    const user = await insertAccount(b.stack);
    for (const name of ['alpha', 'bravo', 'charlie']) await key(user, name);
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/keys');
    await page.getByRole('button', { name: 'Delete bravo' }).waitFor();
    const names = async () => page.locator('tbody tr td.name').allTextContents();
    const before = await names();
    expect(before).toHaveLength(3);
    expect(before[1]).toBe('bravo');
    await page.getByRole('button', { name: 'Delete bravo' }).click();
    await page.getByRole('button', { name: 'Confirm deleting bravo' }).click();
    await page.getByRole('button', { name: 'Delete bravo' }).waitFor({ state: 'detached' });
    await waitForFocus(page, `BUTTON Delete ${before[2]}`);

    // The last row deleted: the next row is gone, so the previous one's Delete.
    await page.getByRole('button', { name: `Delete ${before[2]}` }).click();
    await page.getByRole('button', { name: `Confirm deleting ${before[2]}` }).click();
    await page.getByRole('button', { name: `Delete ${before[2]}` }).waitFor({ state: 'detached' });
    await waitForFocus(page, `BUTTON Delete ${before[0]}`);

    // No row left: the list's heading.
    await page.getByRole('button', { name: `Delete ${before[0]}` }).click();
    await page.getByRole('button', { name: `Confirm deleting ${before[0]}` }).click();
    await page.getByText('No keys yet.').waitFor();
    await waitForFocus(page, 'H2 Your keys');
  }, 120_000);

  it('dismissing the new key\'s panel puts the focus on Create key', async () => {
    const user = await insertAccount(b.stack);
    const page = await b.newPage();
    await logIn(page, b.stack, user, '/keys');
    await page.getByRole('button', { name: 'Create key' }).click();
    const form = page.getByRole('form', { name: 'Create key' });
    await form.getByLabel('Name').fill('laptop');
    await form.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('button', { name: 'I have copied it' }).click();
    await page.getByRole('region', { name: 'New API key' }).waitFor({ state: 'detached' });
    await waitForFocus(page, 'BUTTON Create key');
  }, 120_000);
});

describe('focus on the administrators\' lists', () => {
  it('a code\'s Disable / Enable keeps the focus; a confirmed delete leaves it on the list\'s heading', async () => {
    const admin = await insertAccount(b.stack, { role: 10 });
    const r = await consoleCall<string[]>(b.stack, 'POST', '/api/redemption/', admin.token, { name: 'gift', quota: 500_000, count: 1, expired_time: -1 });
    expect(r.json.success).toBe(true);
    const [row] = await b.stack.sql<{ id: number }[]>`SELECT id FROM redemptions WHERE name = 'gift' ORDER BY id DESC LIMIT 1`;
    const id = row!.id;
    const page = await b.newPage();
    await logIn(page, b.stack, admin, '/admin/redemptions');
    await page.getByRole('button', { name: `Disable code ${id}` }).click();
    await page.getByRole('button', { name: `Enable code ${id}` }).waitFor();
    await waitForFocus(page, `BUTTON Enable code ${id}`);
    await page.keyboard.press('Enter');
    await page.getByRole('button', { name: `Disable code ${id}` }).waitFor();
    await waitForFocus(page, `BUTTON Disable code ${id}`);

    await page.getByRole('button', { name: `Delete code ${id}` }).click();
    await page.getByRole('button', { name: `Confirm deleting code ${id}` }).click();
    await page.getByText('No codes.').waitFor();
    await waitForFocus(page, 'H2 Codes');
  }, 120_000);

  it('a confirmed role change keeps the focus on its button; a confirmed ban leaves it on Unban, drawn in its place', async () => {
    const admin = await insertAccount(b.stack, { role: 100 });
    const other = await insertAccount(b.stack, { prefix: 'banme' });
    const page = await b.newPage();
    await logIn(page, b.stack, admin, '/admin/users');
    await page.getByLabel('Id, username, display name or e-mail').fill(other.username);
    await page.getByRole('button', { name: 'Search' }).click();
    // Root's role change is asked first, and keeps the focus on the button, whose words change.
    await page.getByRole('button', { name: `Make ${other.username} an administrator` }).click();
    await page.getByRole('button', { name: `Confirm making ${other.username} an administrator` }).click();
    await page.getByRole('button', { name: `Make ${other.username} an ordinary user` }).waitFor();
    await waitForFocus(page, `BUTTON Make ${other.username} an ordinary user`);
    await page.getByRole('button', { name: `Ban ${other.username}` }).click();
    await page.getByRole('button', { name: `Confirm banning ${other.username}` }).click();
    await page.getByRole('button', { name: `Unban ${other.username}` }).waitFor();
    await waitForFocus(page, `BUTTON Unban ${other.username}`);
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
