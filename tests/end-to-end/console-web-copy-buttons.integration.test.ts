// Copy buttons where the Clipboard API is missing or refuses: on a plain-HTTP address other than
// localhost the browser has no navigator.clipboard, and a write can be refused. The button then copies
// by selection (document.execCommand('copy')), and when that fails too it says so, with the text
// selected in a field for Ctrl+C.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser } from './console-web-browser.js';

let b: ConsoleBrowser;
// console.test resolves to the stack: an http origin that is not potentially trustworthy.
const HOST = 'console.test';

beforeAll(async () => {
  b = await startConsoleBrowser({ args: [`--host-resolver-rules=MAP ${HOST} 127.0.0.1`] });
}, 120_000);

afterAll(async () => {
  await b?.close();
});

describe('copy buttons', () => {
  it('copy on a non-secure origin, where navigator.clipboard does not exist', async () => {
    const user = await insertAccount(b.stack);
    const page = await b.newPage();
    const insecure = { ...b.stack, consoleUrl: b.stack.consoleUrl.replace('127.0.0.1', HOST) };
    await logIn(page, insecure, user, '/profile');
    expect(await page.evaluate('window.isSecureContext')).toBe(false);
    expect(await page.evaluate('typeof navigator.clipboard')).toBe('undefined');
    await page.getByRole('button', { name: 'Copy link' }).click();
    await page.getByRole('button', { name: 'Copied' }).waitFor();
    // What reached the clipboard, read on a secure origin of the same browser.
    const reader = await page.context().newPage();
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: b.stack.consoleUrl });
    await reader.goto(`${b.stack.consoleUrl}/login`);
    const copied = await reader.evaluate('navigator.clipboard.readText()');
    expect(copied).toMatch(new RegExp(`^http://${HOST.replace('.', '\\.')}:\\d+/register\\?aff=[0-9a-f]+$`));
  }, 120_000);

  it('says so when copying fails, and leaves the text selected for Ctrl+C', async () => {
    const user = await insertAccount(b.stack);
    const page = await b.newPage();
    // A refused write, and no copy by selection either.
    await page.addInitScript(`
      if (navigator.clipboard) navigator.clipboard.writeText = () => Promise.reject(new DOMException('Write permission denied.', 'NotAllowedError'));
      document.execCommand = () => false;
    `);
    await logIn(page, b.stack, user, '/profile');
    await page.getByRole('button', { name: 'Copy link' }).click();
    await page.getByRole('alert').filter({ hasText: 'Copying failed' }).waitFor();
    await page.getByText(/press Ctrl\+C/).waitFor();
    const field = page.getByRole('textbox', { name: 'Text to copy' });
    type Input = { value: string; selectionStart: number | null; selectionEnd: number | null; ownerDocument: { activeElement: unknown } };
    const selected = await field.evaluate((el: Input) => ({ focused: el.ownerDocument.activeElement === el, text: el.value.slice(el.selectionStart ?? 0, el.selectionEnd ?? 0) }));
    expect(selected.focused).toBe(true);
    expect(selected.text).toMatch(/\/register\?aff=[0-9a-f]+$/);
    expect(await page.getByRole('button', { name: 'Copied' }).count()).toBe(0);
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
