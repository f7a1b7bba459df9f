// The dashboard's 30 local days, each with its own UTC offset: a daylight-saving change inside the
// window moves the offset of the days on one side of it. The time zone is given to localDays() as a
// function (here from Intl, for named zones), so nothing depends on the machine's own.
import { describe, expect, it } from 'vitest';
import { type LocalDay, localDays } from './format';

/** Minutes east of UTC of an IANA time zone at an instant. */
function zone(timeZone: string): (ms: number) => number {
  const fmt = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' });
  return (ms) => {
    const p = Object.fromEntries(fmt.formatToParts(new Date(ms)).map((x) => [x.type, Number(x.value)]));
    return Math.round((Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!, p.second!) - Math.floor(ms / 1000) * 1000) / 60_000);
  };
}

/** "2026-03-08 00:00": an instant (Unix seconds) on the clock of a time zone. */
function clock(timeZone: string, sec: number): string {
  const p = Object.fromEntries(new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit' })
    .formatToParts(new Date(sec * 1000)).map((x) => [x.type, x.value]));
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}`;
}

/** The consecutive dates from `first` to `last`, "YYYY-MM-DD". */
function dates(first: string, last: string): string[] {
  const out: string[] = [];
  for (let t = Date.parse(`${first}T00:00Z`); t <= Date.parse(`${last}T00:00Z`); t += 86_400_000) out.push(new Date(t).toISOString().slice(0, 10));
  return out;
}

/** What /api/log/self/daily names a day read with `utcOffset`: its midnight by that fixed offset. */
function apiDay(date: string, utcOffset: number): number {
  return Date.parse(`${date}T00:00Z`) / 1000 - utcOffset * 60;
}

function expectDays(days: LocalDay[], timeZone: string, first: string, last: string, offsetOf: (date: string) => number) {
  const want = dates(first, last);
  expect(days.map((d) => clock(timeZone, d.start).slice(0, 10))).toEqual(want);
  days.forEach((d, i) => {
    expect(d.utcOffset, want[i]).toBe(offsetOf(want[i]!));
    // The API's day of that offset is this day's own start.
    expect(d.start, want[i]).toBe(apiDay(want[i]!, d.utcOffset));
  });
}

describe('localDays', () => {
  it('New York, clocks forward on 8 March: each day starts at its own midnight', () => {
    const ny = 'America/New_York';
    // 20 March 2026, noon in New York (EDT, UTC-4); the window opens on 19 February (EST, UTC-5).
    const days = localDays(Date.parse('2026-03-20T16:00:00Z'), 30, zone(ny));
    expect(days).toHaveLength(30);
    for (const d of days) expect(clock(ny, d.start).slice(11)).toBe('00:00');
    // 8 March's midnight is still EST: the change is at 02:00.
    expectDays(days, ny, '2026-02-19', '2026-03-20', (date) => (date <= '2026-03-08' ? -300 : -240));
  });

  it('New York, clocks back on 1 November, late on that day: today is still 1 November', () => {
    const ny = 'America/New_York';
    // 23:30 EST on 1 November: by the offset of that day's midnight (EDT) it would be 2 November.
    const days = localDays(Date.parse('2026-11-02T04:30:00Z'), 30, zone(ny));
    for (const d of days) expect(clock(ny, d.start).slice(11)).toBe('00:00');
    expectDays(days, ny, '2026-10-03', '2026-11-01', () => -240);
    const later = localDays(Date.parse('2026-11-20T17:00:00Z'), 30, zone(ny));
    expectDays(later, ny, '2026-10-22', '2026-11-20', (date) => (date <= '2026-11-01' ? -240 : -300));
  });

  it('Santiago, whose clocks skip midnight on 6 September: that day starts at 01:00', () => {
    const cl = 'America/Santiago';
    const days = localDays(Date.parse('2026-09-20T15:00:00Z'), 30, zone(cl));
    const skipped = days.find((d) => clock(cl, d.start).startsWith('2026-09-06'))!;
    expect(clock(cl, skipped.start)).toBe('2026-09-06 01:00');
    expectDays(days, cl, '2026-08-22', '2026-09-20', (date) => (date <= '2026-09-06' ? -240 : -180));
  });

  it('zones without a change, and the machine-independent UTC', () => {
    expectDays(localDays(Date.parse('2026-03-20T16:00:00Z'), 30, zone('Asia/Kathmandu')), 'Asia/Kathmandu', '2026-02-19', '2026-03-20', () => 345);
    expectDays(localDays(Date.parse('2026-03-20T23:59:59Z'), 7, () => 0), 'UTC', '2026-03-14', '2026-03-20', () => 0);
    // Lord Howe Island moves its clocks by half an hour (5 April 2026, 02:00 → 01:30).
    expectDays(localDays(Date.parse('2026-04-20T01:00:00Z'), 30, zone('Australia/Lord_Howe')), 'Australia/Lord_Howe', '2026-03-22', '2026-04-20',
      (date) => (date <= '2026-04-05' ? 660 : 630));
  });
});
