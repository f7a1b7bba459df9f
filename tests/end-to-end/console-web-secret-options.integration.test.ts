// The Options page and secret options (EpayKey, CardpayApiSecret, CardpayWebhookSecret, SMTPToken,
// oidc.client_secret): the API never returns their value, so their field starts empty. An empty field
// means "keep the stored secret": Save stays disabled and nothing is sent; replacing needs a new value,
// and erasing is a separate Clear action that asks for confirmation.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleCall } from '../harness/gateway-stack.js';
import { type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser } from './console-web-browser.js';

let b: ConsoleBrowser;

beforeAll(async () => {
  b = await startConsoleBrowser();
}, 120_000);

afterAll(async () => {
  await b?.close();
});

async function stored(key: string): Promise<string | undefined> {
  const [row] = await b.stack.sql<{ value: string }[]>`SELECT value FROM options WHERE key = ${key}`;
  return row?.value;
}

describe('secret options in the Options page', () => {
  it('an empty secret field keeps the stored secret; a new value replaces it; Clear erases it after a confirmation', async () => {
    const set = await consoleCall(b.stack, 'PUT', '/api/option/', b.stack.adminToken, { key: 'EpayKey', value: 'the-original-epay-key' });
    expect(set.json.success).toBe(true);
    const original = await stored('EpayKey');
    expect(original).toBeTruthy();
    const root = await insertAccount(b.stack, { role: 100, prefix: 'root' });
    const page = await b.newPage();
    const puts: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'PUT' && new URL(r.url()).pathname === '/api/option/') puts.push(r.postData() ?? '');
    });
    await logIn(page, b.stack, root, '/admin/options');
    await page.getByLabel('Find an option').fill('EpayKey');
    const form = page.getByRole('form', { name: 'EpayKey' });
    const field = form.getByLabel('EpayKey', { exact: true });
    await field.waitFor();
    expect(await field.inputValue()).toBe('');
    await form.getByText(/configured; leave empty to keep it/).waitFor();

    // Empty: Save is disabled, and Enter in the field sends nothing either.
    const save = form.getByRole('button', { name: 'Save EpayKey' });
    expect(await save.isDisabled()).toBe(true);
    await field.press('Enter');
    await page.waitForTimeout(300);
    expect(puts).toEqual([]);
    expect(await stored('EpayKey')).toBe(original);

    // A new value replaces it (and the field empties again: the secret is not kept on the page).
    await field.fill('a-new-epay-key');
    expect(await save.isDisabled()).toBe(false);
    await save.click();
    await form.getByRole('status').filter({ hasText: 'Saved' }).waitFor();
    expect(JSON.parse(puts[0]!)).toEqual({ key: 'EpayKey', value: 'a-new-epay-key' });
    const replaced = await stored('EpayKey');
    expect(replaced).toBeTruthy();
    expect(replaced).not.toBe(original);
    expect(await field.inputValue()).toBe('');
    expect(await save.isDisabled()).toBe(true);

    // Clear asks first; Keep leaves it; Confirm erases it.
    await form.getByRole('button', { name: 'Clear EpayKey' }).click();
    await form.getByRole('button', { name: 'Keep EpayKey' }).click();
    expect(puts).toHaveLength(1);
    expect(await stored('EpayKey')).toBe(replaced);
    await form.getByRole('button', { name: 'Clear EpayKey' }).click();
    await form.getByRole('button', { name: 'Confirm clearing EpayKey' }).click();
    await form.getByText('not configured').waitFor();
    expect(JSON.parse(puts[1]!)).toEqual({ key: 'EpayKey', value: '' });
    expect(await stored('EpayKey')).toBe('');
    // Nothing stored: nothing to clear.
    expect(await form.getByRole('button', { name: 'Clear EpayKey' }).count()).toBe(0);
  }, 120_000);

  it('every secret option behaves the same', async () => {
    const root = await insertAccount(b.stack, { role: 100, prefix: 'root' });
    const page = await b.newPage();
    await logIn(page, b.stack, root, '/admin/options');
    for (const key of ['CardpayApiSecret', 'CardpayWebhookSecret', 'SMTPToken', 'oidc.client_secret']) {
      await page.getByLabel('Find an option').fill(key);
      const form = page.getByRole('form', { name: key, exact: true });
      expect(await form.getByLabel(key, { exact: true }).inputValue(), key).toBe('');
      expect(await form.getByRole('button', { name: `Save ${key}` }).isDisabled(), key).toBe(true);
    }
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
