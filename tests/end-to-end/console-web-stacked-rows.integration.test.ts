// On a phone a list's rows are stacks of "label value" lines (table.stack in styles.css). A value too
// long for one line (a key's model list, a channel's models, the Actions' buttons) wraps within its own
// column, beside the label, not back under it; at desktop width the table is a table as before.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleCall, unpricedMockChannel } from '../harness/gateway-stack.js';
import { type ConsoleAccount, type ConsoleBrowser, insertAccount, logIn, startConsoleBrowser } from './console-web-browser.js';

let b: ConsoleBrowser;
let root: ConsoleAccount;

beforeAll(async () => {
  b = await startConsoleBrowser();
  root = await insertAccount(b.stack, { role: 100, prefix: 'stack' });
  const key = await consoleCall(b.stack, 'POST', '/api/token/', root.token, {
    name: 'phone-layout', expired_time: -1, remain_quota: 0, unlimited_quota: true, model_limits_enabled: true, model_limits: 'claude-haiku-4-5,gpt-4o-mini',
  });
  expect(key.json.success).toBe(true);
  await unpricedMockChannel(b.stack, ['claude-haiku-4-5', 'claude-sonnet-4-5', 'gpt-4o-mini', 'gpt-4o', 'gpt-4.1-mini']);
}, 120_000);

afterAll(async () => {
  await b?.close();
});

interface CellLines { label: string; cellLeft: number; lineLefts: number[] }

/**
 * The left edge of every line of each cell's value in the table's first row: the value's rects (a
 * range over the cell's contents, which leaves out the ::before label) grouped into lines.
 */
async function firstRowLines(page: Page): Promise<CellLines[]> {
  return page.locator('table.stack tbody tr').first().evaluate((row) => {
    return [...row.querySelectorAll('td')].map((td) => {
      const range = row.ownerDocument.createRange();
      range.selectNodeContents(td);
      const rects = [...range.getClientRects()].filter((r) => r.width > 0 && r.height > 0).sort((a, c) => a.top - c.top || a.left - c.left);
      const lines: { top: number; bottom: number; left: number }[] = [];
      for (const r of rects) {
        const middle = (r.top + r.bottom) / 2;
        const line = lines.find((l) => middle > l.top && middle < l.bottom);
        if (line) line.left = Math.min(line.left, r.left);
        else lines.push({ top: r.top, bottom: r.bottom, left: r.left });
      }
      return { label: td.getAttribute('data-label') ?? '', cellLeft: td.getBoundingClientRect().left, lineLefts: lines.map((l) => Math.round(l.left)) };
    });
  });
}

async function checkPhone(page: Page, wrapped: string[]): Promise<void> {
  const cells = await firstRowLines(page);
  for (const label of wrapped) expect(cells.find((c) => c.label === label)?.lineLefts.length, `${label} wraps at 390 px`).toBeGreaterThan(1);
  for (const c of cells) {
    // Every line starts where the first does, right of the label's column.
    expect(new Set(c.lineLefts).size, `${c.label}: ${c.lineLefts.join(', ')}`).toBe(1);
    expect(c.lineLefts[0]! - c.cellLeft, c.label).toBeGreaterThan(90);
  }
  expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
}

async function checkDesktop(page: Page): Promise<void> {
  const shown = await page.locator('table.stack').first().evaluate((table) => {
    const td = table.querySelector('tbody td')!;
    const th = table.querySelector('thead th')!;
    const style = (el: typeof td, pseudo?: string) => table.ownerDocument.defaultView!.getComputedStyle(el, pseudo);
    return { display: style(td).display, label: style(td, '::before').content, header: th.getBoundingClientRect().height > 1 };
  });
  expect(shown).toEqual({ display: 'table-cell', label: 'none', header: true });
}

const PHONE = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 3 };

describe('stacked rows on a phone', () => {
  it('/keys: the model list and the actions wrap beside their label', async () => {
    const page = await b.newPage(PHONE);
    await logIn(page, b.stack, root, '/keys');
    await page.getByRole('row').filter({ hasText: 'phone-layout' }).waitFor();
    await checkPhone(page, ['Group', 'Actions']);
    const desktop = await b.newPage();
    await logIn(desktop, b.stack, root, '/keys');
    await desktop.getByRole('row').filter({ hasText: 'phone-layout' }).waitFor();
    await checkDesktop(desktop);
  }, 120_000);

  it('/admin/channels: the models and the actions wrap beside their label', async () => {
    const page = await b.newPage(PHONE);
    await logIn(page, b.stack, root, '/admin/channels');
    await page.getByRole('row').filter({ hasText: 'gpt-4.1-mini' }).waitFor();
    await checkPhone(page, ['Models', 'Actions']);
    const desktop = await b.newPage();
    await logIn(desktop, b.stack, root, '/admin/channels');
    await desktop.getByRole('row').filter({ hasText: 'gpt-4.1-mini' }).waitFor();
    await checkDesktop(desktop);
    expect(b.problems).toEqual([]);
  }, 120_000);
});
