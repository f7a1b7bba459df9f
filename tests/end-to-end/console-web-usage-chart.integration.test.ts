// The Dashboard's 30-day chart (a canvas) comes with its figures as a table for screen readers:
// visually hidden, but in the accessibility tree, one row per day.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { billingSettled, createApiKey, mockChannel } from '../harness/gateway-stack.js';
import { type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser } from './console-web-browser.js';

const MODEL = 'claude-haiku-4-5';
let b: ConsoleBrowser;

beforeAll(async () => {
  b = await startConsoleBrowser();
  await mockChannel(b.stack, [MODEL]);
}, 120_000);

afterAll(async () => {
  await b?.close();
});

describe('usage chart', () => {
  it('describes the chart in a table that screen readers read and the screen does not show', async () => {
    const user = await insertAccount(b.stack, { quota: 5_000_000 });
    const key = await createApiKey(b.stack, user);
    const sdk = new Anthropic({ apiKey: key.key, baseURL: b.stack.relayUrl, maxRetries: 0 });
    await sdk.messages.create({ model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'hello' }] });
    await billingSettled(b.stack);
    const [spent] = await b.stack.sql<{ used_quota: number }[]>`SELECT used_quota FROM users WHERE id = ${user.id}`;

    const page = await b.newPage();
    await logIn(page, b.stack, user);
    await page.locator('.chart canvas').waitFor();
    const table = page.getByRole('table', { name: 'Spend and requests per day, last 30 days' });
    await table.waitFor({ state: 'attached' });
    expect(await table.getByRole('columnheader').allTextContents()).toEqual(['Day', 'Spend', 'Requests']);
    const rows = table.locator('tbody tr');
    expect(await rows.count()).toBe(30);
    const today = (await rows.nth(29).locator('th, td').allTextContents()).map((c) => c.trim());
    expect(today[0]).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    const dollars = Number(spent!.used_quota) / 500_000;
    expect(today[1]).toMatch(/^\$0\.\d{2,6}$/);
    expect(Math.abs(Number(today[1]!.slice(1)) - dollars)).toBeLessThan(0.000001);
    expect(today[2]).toBe('1');
    // Not shown: its box is clipped to a pixel.
    const box = await table.locator('xpath=..').boundingBox();
    expect(box!.width * box!.height).toBeLessThanOrEqual(1);
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
