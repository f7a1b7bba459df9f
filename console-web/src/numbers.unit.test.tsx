// @vitest-environment happy-dom
// Numbers are grouped by thousands wherever the console shows them: the pager's counts, a log entry's
// quota figures and tokens, the all-logs summary, the dashboard's RPM / TPM. The chart's legend shows
// "--" for a missing Spend value, as for a missing Requests value.
import { cleanup, render, screen } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { LogEntry } from './api/types';

// The chart's options, as given to uPlot.
const chart = vi.hoisted(() => ({ options: undefined as undefined | { series: { value?: (u: unknown, v: number | null) => string }[] } }));
vi.mock('uplot', () => ({
  default: class {
    constructor(options: typeof chart.options) { chart.options = options; }
    setSize() {}
    destroy() {}
  },
}));

import { Pager } from './components/ui';
import { UsageChart } from './components/usage-chart';
import { count, logDetails } from './format';
import { LogTable } from './pages/logs';

afterEach(cleanup);

const entry = (over: Partial<LogEntry>): LogEntry => ({
  id: 1, user_id: 7, username: 'ada', created_at: 1_800_000_000, type: 3, content: '', token_name: '', model_name: '', quota: 0,
  prompt_tokens: 0, completion_tokens: 0, use_time: 0, is_stream: false, channel: 0, group: 'default', request_id: 'r1', ...over,
} as unknown as LogEntry);

describe('thousands grouped', () => {
  it('count()', () => {
    expect(count(58662)).toBe('58,662');
    expect(count(999)).toBe('999');
    expect(count(-1234567)).toBe('-1,234,567');
    expect(count(0)).toBe('0');
  });

  it('the pager: "Page 1 of 546 (10,919 in all)"', () => {
    render(<Pager page={1} pageSize={20} total={10919} onPage={() => {}} />);
    expect(screen.getByText('Page 1 of 546 (10,919 in all)')).toBeTruthy();
    cleanup();
    render(<Pager page={1234} pageSize={1} total={5000} onPage={() => {}} />);
    expect(screen.getByText('Page 1,234 of 5,000 (5,000 in all)')).toBeTruthy();
  });

  it('a log entry\'s quota figures, not its names, dates or order numbers', () => {
    expect(logDetails('An administrator added 2500000 quota: ticket 20240101')).toBe('An administrator added 2,500,000 quota: ticket 20240101');
    expect(logDetails('An administrator set the balance from 1000000 to 3500000 (+2500000 quota)'))
      .toBe('An administrator set the balance from 1,000,000 to 3,500,000 (+2,500,000 quota)');
    expect(logDetails('referral quota transferred to the balance: +5000000 quota (aff_quota −5000000)'))
      .toBe('referral quota transferred to the balance: +5,000,000 quota (aff_quota −5,000,000)');
    expect(logDetails('referral reward: an account registered with your invitation code; +250000 referral quota (aff_quota, not the balance)'))
      .toBe('referral reward: an account registered with your invitation code; +250,000 referral quota (aff_quota, not the balance)');
    expect(logDetails('online top-up of 2000 (1000000000 quota), paid 14000.00 via alipay (epay), order T20251129123456'))
      .toBe('online top-up of 2000 (1,000,000,000 quota), paid 14000.00 via alipay (epay), order T20251129123456');
    expect(logDetails('redeemed code #12345 "gift 2025": 500 quota')).toBe('redeemed code #12345 "gift 2025": 500 quota');
  });

  it('the log table shows them grouped, and the tokens', () => {
    render(<LogTable items={[entry({ content: 'An administrator added 2500000 quota', quota: 2_500_000 }),
      entry({ id: 2, type: 2, model_name: 'claude-3-5-sonnet-20241022', prompt_tokens: 123456, completion_tokens: 7890, quota: 10 })]} />);
    expect(screen.getByText('An administrator added 2,500,000 quota')).toBeTruthy();
    // Prompt → completion, in one column.
    expect(screen.getByText('123,456 → 7,890')).toBeTruthy();
    expect(screen.getByText('claude-3-5-sonnet-20241022')).toBeTruthy();
    // The management entry counts no tokens: a dash, as in its Duration and Stream cells, not "0 → 0".
    expect(screen.queryByText('0 → 0')).toBeNull();
    const firstRow = document.querySelector('tbody.entry tr')!;
    expect(firstRow.querySelector('td.tokens')!.textContent).toBe('–');
  });
});

describe('the chart\'s legend', () => {
  it('shows "--" for a missing Spend value, not a blank', () => {
    vi.stubGlobal('matchMedia', () => ({ matches: false, addEventListener() {}, removeEventListener() {}, addListener() {}, removeListener() {} }));
    render(<UsageChart days={[{ day: 1_800_000_000, requests: 1, quota: 500_000, prompt_tokens: 1, completion_tokens: 1 }]} />);
    const spend = chart.options!.series[1]!;
    expect(spend.value!(undefined, null)).toBe('--');
    expect(spend.value!(undefined, 1.5)).toBe('$1.5000');
  });
});
