// @vitest-environment happy-dom
// The dashboard's 30 days across a daylight-saving change (New York, 8 March 2026): every day is read
// by its own UTC offset, so each one starts at its local midnight and holds what was consumed on that
// date, and the chart's table names 30 consecutive dates. With today's offset for all 30, the days
// before the change started at 23:00 of the day before: 8 March was missing from the table, and a
// request at 23:30 on 7 March counted on the 8th.
import { cleanup, render, screen, waitFor, within } from '@testing-library/preact';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import type { Account, DailyUsage } from '../api/types';

// The page reads the browser's time zone (Date): this process' is set, not the machine's.
vi.hoisted(() => { vi.stubEnv('TZ', 'America/New_York'); });

// uPlot needs a canvas; the chart's figures are read from its table for screen readers.
vi.mock('uplot', () => ({ default: class { setSize() {} destroy() {} } }));

/** Consumption entries, as the log store holds them: Unix seconds and quota. */
interface Used { at: number; quota: number }

/**
 * /api/log/self/daily as console-api computes it (console-api/logs/daily-usage.ts): `days` days
 * ending with today by the one fixed offset given, each named by its midnight by that offset.
 */
function dailyByFixedOffset(used: Used[], nowSec: number, days: number, utcOffset: number): DailyUsage[] {
  const offsetSec = utcOffset * 60;
  const today = Math.floor((nowSec + offsetSec) / 86_400);
  const out: DailyUsage[] = [];
  for (let d = today - days + 1; d <= today; d++) {
    const mine = used.filter((u) => Math.floor((u.at + offsetSec) / 86_400) === d);
    out.push({ day: d * 86_400 - offsetSec, requests: mine.length, quota: mine.reduce((n, u) => n + u.quota, 0), prompt_tokens: 0, completion_tokens: 0 });
  }
  return out;
}

const NOW = Date.parse('2026-03-20T16:00:00Z'); // noon, EDT
const at = (iso: string) => Date.parse(iso) / 1000;
const USED: Used[] = [
  { at: at('2026-03-01T05:30:00Z'), quota: 500_000 }, // 1 March, 00:30 EST
  { at: at('2026-03-08T04:30:00Z'), quota: 1_000_000 }, // 7 March, 23:30 EST
  { at: at('2026-03-09T04:30:00Z'), quota: 1_500_000 }, // 9 March, 00:30 EDT
  { at: at('2026-03-20T14:00:00Z'), quota: 2_000_000 }, // today, 10:00 EDT
];

const asked = vi.hoisted(() => [] as { days: number; utcOffset: number }[]);
/** The log store down: /api/log/self/* answer 503, as console-api does then. */
const logStore = vi.hoisted(() => ({ down: false }));
vi.hoisted(() => {
  vi.stubGlobal('fetch', async (r: Request) => {
    const url = new URL(r.url);
    if (logStore.down && url.pathname.startsWith('/api/log/self')) {
      return new Response(JSON.stringify({ success: false, message: 'the usage log store is unavailable; try again shortly' }), { status: 503, headers: { 'content-type': 'application/json' } });
    }
    const reply = (data: unknown) => new Response(JSON.stringify({ success: true, message: '', data }), { status: 200, headers: { 'content-type': 'application/json' } });
    if (url.pathname === '/api/log/self/daily') {
      const q = { days: Number(url.searchParams.get('days') ?? 30), utcOffset: Number(url.searchParams.get('utc_offset') ?? 0) };
      asked.push(q);
      return reply(dailyByFixedOffset(USED, Date.now() / 1000, q.days, q.utcOffset));
    }
    return reply({ quota: 0, rpm: 0, tpm: 0 });
  });
});

import { dailyUsage, DashboardPage } from './dashboard';

afterEach(() => { cleanup(); asked.length = 0; logStore.down = false; vi.useRealTimers(); });
afterAll(() => { vi.unstubAllEnvs(); });

const account = { id: 1, username: 'u', display_name: 'u', role: 1, status: 1, group: 'default', quota: 0, used_quota: 0, request_count: 0 } as unknown as Account;

/** The consecutive dates from `first` to `last`, "YYYY-MM-DD". */
function dates(first: string, last: string): string[] {
  const out: string[] = [];
  for (let t = Date.parse(`${first}T00:00Z`); t <= Date.parse(`${last}T00:00Z`); t += 86_400_000) out.push(new Date(t).toISOString().slice(0, 10));
  return out;
}

describe('Dashboard across a daylight-saving change', () => {
  it('the chart\'s table names 30 consecutive dates, each with what was consumed on it', async () => {
    expect(new Date(NOW).getTimezoneOffset()).toBe(240); // the zone took
    vi.useFakeTimers({ now: NOW, toFake: ['Date'] });
    render(<DashboardPage account={account} refreshAccount={() => {}} />);
    const table = await screen.findByRole('table');
    const rows = within(table).getAllByRole('row').slice(1);
    const byDate = Object.fromEntries(rows.map((r) => [within(r).getByRole('rowheader').textContent, r.querySelectorAll('td')[1]!.textContent]));
    expect(Object.keys(byDate)).toEqual(dates('2026-02-19', '2026-03-20'));
    expect(byDate).toMatchObject({ '2026-03-01': '1', '2026-03-07': '1', '2026-03-08': '0', '2026-03-09': '1', '2026-03-20': '1' });
    expect(Object.values(byDate).filter((n) => n !== '0')).toHaveLength(4);
    await waitFor(() => expect(screen.getByRole('group', { name: "Today's requests" }).textContent).toContain('$4.00 spent today'));
    // One read per offset among the days: EST for those up to 8 March, EDT after.
    expect(asked.map((q) => q.utcOffset).sort((a, b) => a - b)).toEqual([-300, -240]);
  });

  it('dailyUsage takes each day from the answer of its own offset', async () => {
    const ny = (ms: number) => -new Date(ms).getTimezoneOffset();
    const reads: number[] = [];
    const days = await dailyUsage(NOW, 30, async (utcOffset, n) => { reads.push(utcOffset); return dailyByFixedOffset(USED, NOW / 1000, n, utcOffset); }, ny);
    expect(reads.sort((a, b) => a - b)).toEqual([-300, -240]);
    expect(days).toHaveLength(30);
    expect(days.reduce((n, d) => n + d.quota, 0)).toBe(5_000_000);
    expect(days.find((d) => d.day === at('2026-03-07T05:00:00Z'))?.requests).toBe(1);
    expect(days.find((d) => d.day === at('2026-03-08T05:00:00Z'))?.requests).toBe(0);
  });

  it('the 23-hour day of the change counts its own hours only, not the next day\'s first hour too', async () => {
    // 9 March, 00:30 EDT is within 24 hours of 8 March's (EST) midnight.
    const days = await dailyUsage(NOW, 30, async (utcOffset, n) => dailyByFixedOffset(USED, NOW / 1000, n, utcOffset));
    expect(days.find((d) => d.day === at('2026-03-08T05:00:00Z'))).toMatchObject({ requests: 0, quota: 0 });
    expect(days.find((d) => d.day === at('2026-03-09T04:00:00Z'))).toMatchObject({ requests: 1, quota: 1_500_000 });
  });

  it('the 25-hour day the clocks go back keeps its last hour; late on it, today is still that day', async () => {
    // 23:30 EST on 1 November: 24 hours past its EDT midnight, and by that offset already 2 November.
    const used: Used[] = [{ at: at('2026-10-03T04:30:00Z'), quota: 7 }, { at: at('2026-11-02T04:30:00Z'), quota: 9 }];
    const late = Date.parse('2026-11-02T04:45:00Z');
    const days = await dailyUsage(late, 30, async (utcOffset, n) => dailyByFixedOffset(used, late / 1000, n, utcOffset));
    expect(days[0]).toMatchObject({ day: at('2026-10-03T04:00:00Z'), quota: 7 });
    expect(days[29]).toMatchObject({ day: at('2026-11-01T04:00:00Z'), requests: 1, quota: 9 });
    // Weeks later, the day of the change still holds it, and the day after does not.
    const later = Date.parse('2026-11-20T17:00:00Z');
    const after = await dailyUsage(later, 30, async (utcOffset, n) => dailyByFixedOffset(used, later / 1000, n, utcOffset));
    expect(after.find((d) => d.day === at('2026-11-01T04:00:00Z'))).toMatchObject({ requests: 1, quota: 9 });
    expect(after.find((d) => d.day === at('2026-11-02T05:00:00Z'))).toMatchObject({ requests: 0, quota: 0 });
    expect(after.reduce((n, d) => n + d.quota, 0)).toBe(9);
  });
});

describe('Dashboard with the log store down', () => {
  it('its tiles from the logs say they are unavailable, not "…" for good (review webconsole)', async () => {
    logStore.down = true;
    render(<DashboardPage account={account} refreshAccount={() => {}} />);
    await waitFor(() => expect(screen.getByRole('group', { name: "Today's requests" }).textContent).toContain('unavailable'));
    await waitFor(() => expect(screen.getByRole('group', { name: 'RPM / TPM' }).textContent).toContain('unavailable'));
    expect(screen.getByRole('group', { name: 'Balance' }).textContent).toContain('$0');
  });
});
