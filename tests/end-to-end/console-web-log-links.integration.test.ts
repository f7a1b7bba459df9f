// Usage logs keep their view in the address: with an account's 100 log rows (inserted into ClickHouse
// as the billing worker writes them), page 3 of a model's rows survives a reload, Back returns to the
// page before (within the page, without loading it again), a pasted address opens its page and
// filters (the time filter the same instant in another time zone, shown in that zone's local time),
// the page field goes to a page by its number (Enter or Go), and unusable values are corrected.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleAccount, type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser } from './console-web-browser.js';

let b: ConsoleBrowser;
let user: ConsoleAccount;
const NOW = Math.floor(Date.now() / 1000);

beforeAll(async () => {
  b = await startConsoleBrowser();
  user = await insertAccount(b.stack);
  // Row n (1..100) a minute older than row n-1; odd rows model-a, even rows model-b.
  await b.stack.ch.command({
    query: `
      INSERT INTO logs (id, user_id, created_at, type, content, username, token_name, model_name, quota, prompt_tokens,
                        completion_tokens, use_time, is_stream, channel, token_id, \`group\`, request_id, upstream_request_id)
      SELECT number + 1, {user:UInt64}, toDateTime({now:UInt32} - number * 60), 2, '', {name:String}, 'key',
             if(number % 2 = 0, 'model-a', 'model-b'), 100, 10, 5, 1, false, 1, 1, 'default', concat('req-', toString(number + 1)), ''
      FROM numbers(100)`,
    query_params: { user: user.id, now: NOW, name: user.username },
  });
}, 120_000);

afterAll(async () => {
  await b?.close();
});

const search = (page: Page) => page.evaluate('location.search') as Promise<string>;
const row = (page: Page, requestId: string) => page.getByRole('row').filter({ hasText: requestId });

/** The log reads the page made, as their query strings. */
function logReads(page: Page): string[] {
  const reads: string[] = [];
  page.on('request', (r) => {
    const url = new URL(r.url());
    if (url.pathname === '/api/log/self') reads.push(url.search);
  });
  return reads;
}

describe('usage log addresses', () => {
  it('page 3 of a filter survives a reload; Back returns to the page before; the page field jumps', async () => {
    const page = await b.newPage({ timezoneId: 'UTC' });
    await logIn(page, b.stack, user, '/logs');
    await page.getByText('Page 1 of 5 (100 in all)').waitFor();
    await page.getByLabel('Model').fill('model-a');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('Page 1 of 3 (50 in all)').waitFor();
    await page.getByLabel('Rows per page').selectOption('10');
    await page.getByText('Page 1 of 5 (50 in all)').waitFor();
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByText('Page 2 of 5 (50 in all)').waitFor();
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByText('Page 3 of 5 (50 in all)').waitFor();
    expect(await search(page)).toBe('?model_name=model-a&p=3&page_size=10');
    // Model-a's 21st to 30th rows: rows 41 to 59.
    await row(page, 'req-41').waitFor();
    await row(page, 'req-59').waitFor();

    await page.reload();
    await page.getByText('Page 3 of 5 (50 in all)').waitFor();
    await row(page, 'req-41').waitFor();
    expect(await page.getByLabel('Model').inputValue()).toBe('model-a');
    expect(await page.getByLabel('Rows per page').inputValue()).toBe('10');
    expect(await search(page)).toBe('?model_name=model-a&p=3&page_size=10');

    // Back to the entry made before the reload: page 2.
    await page.goBack();
    await page.getByText('Page 2 of 5 (50 in all)').waitFor();
    await row(page, 'req-21').waitFor();
    expect(await search(page)).toBe('?model_name=model-a&p=2&page_size=10');
    expect(await page.getByLabel('Model').inputValue()).toBe('model-a');

    // The page field, submitted with Enter; then Back within the page (no new document: the mark stays).
    await page.evaluate('window.sameDocument = true');
    await page.getByLabel('Go to page').fill('5');
    await page.getByLabel('Go to page').press('Enter');
    await page.getByText('Page 5 of 5 (50 in all)').waitFor();
    await row(page, 'req-99').waitFor();
    expect(await search(page)).toBe('?model_name=model-a&p=5&page_size=10');
    await page.goBack();
    await page.getByText('Page 2 of 5 (50 in all)').waitFor();
    await row(page, 'req-21').waitFor();
    expect(await page.evaluate('window.sameDocument')).toBe(true);
    // Back again, past the filter: the form shows what was applied then.
    await page.goBack();
    await page.goBack();
    await page.getByText('Page 1 of 3 (50 in all)').waitFor();
    await page.goBack();
    await page.getByText('Page 1 of 5 (100 in all)').waitFor();
    expect(await page.getByLabel('Model').inputValue()).toBe('');
    expect(await search(page)).toBe('');
  }, 120_000);

  it('a pasted address opens its page and filters, its time the same instant in another time zone', async () => {
    // The newest 60 rows: model-a's rows 1, 3 .. 59, three pages of 10.
    const from = NOW - 59 * 60;
    const page = await b.newPage({ timezoneId: 'Asia/Kolkata' });
    const reads = logReads(page);
    await logIn(page, b.stack, user, `/logs?model_name=model-a&start_timestamp=${from}&p=2&page_size=10`);
    await page.getByText('Page 2 of 3 (30 in all)').waitFor();
    await row(page, 'req-21').waitFor();
    await row(page, 'req-39').waitFor();
    expect(reads).toContain(`?p=2&page_size=10&model_name=model-a&start_timestamp=${from}`);
    // India is UTC+5:30 all year.
    expect(await page.getByLabel('From').inputValue()).toBe(new Date((from + 5.5 * 3600) * 1000).toISOString().slice(0, 16));
    expect(await page.getByLabel('Model').inputValue()).toBe('model-a');

    await page.getByLabel('Go to page').fill('3');
    await page.getByRole('button', { name: 'Go', exact: true }).click();
    await page.getByText('Page 3 of 3 (30 in all)').waitFor();
    await row(page, 'req-59').waitFor();
    expect(await search(page)).toBe(`?model_name=model-a&start_timestamp=${from}&p=3&page_size=10`);
    // Beyond the last page: refused next to the field.
    await page.getByLabel('Go to page').fill('4');
    await page.getByLabel('Go to page').press('Enter');
    await page.getByRole('alert').filter({ hasText: 'a page from 1 to 3' }).waitFor();
    expect(await search(page)).toBe(`?model_name=model-a&start_timestamp=${from}&p=3&page_size=10`);

    // Clear leaves the page size only.
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.getByText('Page 1 of 10 (100 in all)').waitFor();
    expect(await search(page)).toBe('?page_size=10');
    expect(await page.getByLabel('From').inputValue()).toBe('');
  }, 120_000);

  it('an address with unusable values opens the default view and is corrected in place', async () => {
    const page = await b.newPage({ timezoneId: 'UTC' });
    const reads = logReads(page);
    await logIn(page, b.stack, user, '/logs?p=-1&page_size=7&type=99&start_timestamp=notanumber&model_name=%00');
    await page.getByText('Page 1 of 5 (100 in all)').waitFor();
    await expect.poll(() => search(page)).toBe('');
    expect(reads).toEqual(['?p=1&page_size=20']);
    // Past the last page: the last one, the address rewritten rather than added to.
    await page.goto(`${b.stack.consoleUrl}/logs?p=40&page_size=50`);
    await page.getByText('Page 2 of 2 (100 in all)').waitFor();
    await expect.poll(() => search(page)).toBe('?p=2&page_size=50');
    await page.goBack();
    await expect.poll(() => search(page)).toBe('');
  }, 120_000);

  it('no page broke the Content-Security-Policy or threw', () => {
    expect(b.problems).toEqual([]);
  });
});
