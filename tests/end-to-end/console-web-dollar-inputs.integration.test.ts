// Dollar amounts typed in the administrators' forms are read strictly (digits and a decimal point),
// checked before anything is sent, and refused in dollars next to their field: "abc" is not sent as
// quota null, "0x10" is not $16. Redemption codes and the account editor are checked here (the API key
// form's quota in console-web-key-edit.integration.test.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleAccount, type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser } from './console-web-browser.js';

let b: ConsoleBrowser;
let root: ConsoleAccount;

beforeAll(async () => {
  b = await startConsoleBrowser();
  root = await insertAccount(b.stack, { role: 100, prefix: 'root' });
}, 120_000);

afterAll(async () => {
  await b?.close();
});

describe('dollar inputs', () => {
  it('Redemption codes: the value per code', async () => {
    const page = await b.newPage();
    const posts: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && new URL(r.url()).pathname === '/api/redemption/') posts.push(r.postData() ?? '');
    });
    await logIn(page, b.stack, root, '/admin/redemptions');
    const form = page.getByRole('form', { name: 'Create codes' });
    await form.getByLabel('Name').fill('strict');
    const value = form.getByLabel('Value per code (US dollars)');
    for (const typed of ['abc', '0x10', '1e2', '0', '-5', ' ']) {
      await value.fill(typed);
      await form.getByRole('button', { name: 'Create codes' }).click();
      await form.getByRole('alert').filter({ hasText: 'a dollar amount above $0, such as 10 or 2.50' }).waitFor();
      expect(await value.getAttribute('aria-invalid'), typed).toBe('true');
    }
    await page.waitForTimeout(200);
    expect(posts).toEqual([]);
    await value.fill('2.50');
    await form.getByRole('button', { name: 'Create codes' }).click();
    await page.getByTestId('new-codes').waitFor();
    expect(JSON.parse(posts[0]!)).toMatchObject({ name: 'strict', quota: 1_250_000, count: 1 });
    expect(await value.getAttribute('aria-invalid')).toBeNull();
  }, 120_000);

  it('Accounts: the balance and the amount to add', async () => {
    const user = await insertAccount(b.stack, { quota: 500_000 });
    const page = await b.newPage();
    const writes: string[] = [];
    page.on('request', (r) => {
      const path = new URL(r.url()).pathname;
      if ((r.method() === 'PUT' && path === '/api/user/') || (r.method() === 'POST' && path === '/api/user/manage')) writes.push(r.postData() ?? '');
    });
    await logIn(page, b.stack, root, '/admin/users');
    await page.getByLabel('Id, username, display name or e-mail').fill(user.username);
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('Page 1 of 1 (1 in all)').waitFor();
    await page.getByRole('button', { name: `Edit ${user.username}` }).click();
    const edit = page.getByRole('form', { name: `Edit account ${user.username}` });
    const balance = edit.getByLabel('Balance (US dollars)');
    await balance.fill('0x10');
    await edit.getByRole('button', { name: 'Save account' }).click();
    await edit.getByRole('alert').filter({ hasText: 'a dollar amount of $0 or more, such as 10 or 2.50' }).waitFor();
    expect(await balance.getAttribute('aria-invalid')).toBe('true');

    const credit = page.getByRole('form', { name: 'Add or remove quota' });
    const add = credit.getByLabel('Add to balance (US dollars)');
    for (const typed of ['abc', '0x10', '0']) {
      await add.fill(typed);
      await credit.getByRole('button', { name: 'Add quota' }).click();
      await credit.getByRole('alert').filter({ hasText: 'a non-zero dollar amount, such as 10 or -2.50 (negative removes)' }).waitFor();
      expect(await add.getAttribute('aria-invalid'), typed).toBe('true');
    }
    await page.waitForTimeout(200);
    expect(writes).toEqual([]);
    await add.fill('-0.5');
    await credit.getByRole('button', { name: 'Add quota' }).click();
    await credit.waitFor({ state: 'detached' });
    expect(JSON.parse(writes[0]!)).toMatchObject({ id: user.id, action: 'add_quota', value: -250_000 });
    const [row] = await b.stack.sql<{ quota: number }[]>`SELECT quota FROM users WHERE id = ${user.id}`;
    expect(Number(row!.quota)).toBe(250_000);
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
