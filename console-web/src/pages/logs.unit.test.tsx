// @vitest-environment happy-dom
// The log pages' rules: the time range sent (To covers its whole minute, an inverted range is an
// error), and the Amount of each entry signed by what it did to the balance.
import { describe, expect, it } from 'vitest';
import { EMPTY_LOG_FILTERS, logAmount, logDirection, logFilterError, logQuery } from './logs';

const at = (v: string) => Math.floor(new Date(v).getTime() / 1000);

describe('log time range', () => {
  it('"To" covers the minute it names', () => {
    const q = logQuery({ ...EMPTY_LOG_FILTERS, from: '2026-01-02T03:04', to: '2026-01-02T03:05' }, 1, 20);
    expect(q.start_timestamp).toBe(at('2026-01-02T03:04'));
    expect(q.end_timestamp).toBe(at('2026-01-02T03:05') + 59);
    // A value with seconds means that second.
    expect(logQuery({ ...EMPTY_LOG_FILTERS, to: '2026-01-02T03:05:30' }, 1, 20).end_timestamp).toBe(at('2026-01-02T03:05:30'));
  });

  it('a range that ends before it starts is an error for "To"', () => {
    expect(logFilterError({ from: '2026-01-02T03:05', to: '2026-01-02T03:04' })).toEqual({ field: 'to', error: 'must not be before "From"' });
    expect(logFilterError({ from: '2026-01-02T03:05', to: '2026-01-02T03:05' })).toBeNull();
    expect(logFilterError({ from: '2026-01-02T03:05', to: '' })).toBeNull();
    expect(logFilterError({ from: '', to: '2026-01-02T03:05' })).toBeNull();
  });

  it('a time the log API cannot take is an error for its field, before any call', () => {
    // Before 1970 (the API would answer "start_timestamp: must be at least 0"), whatever the time zone.
    expect(logFilterError({ from: '1969-06-01T00:00', to: '' })).toEqual({ field: 'from', error: 'must be 1970-01-01 00:00 UTC or later' });
    expect(logFilterError({ from: '0001-01-01T00:00', to: '2026-01-02T03:05' })).toEqual({ field: 'from', error: 'must be 1970-01-01 00:00 UTC or later' });
    expect(logFilterError({ from: '', to: '1969-06-01T00:00' })).toEqual({ field: 'to', error: 'must be 1970-01-01 00:00 UTC or later' });
    // After the last time the log holds (2^32 - 1 seconds).
    expect(logFilterError({ from: '2200-01-01T00:00', to: '' })).toEqual({ field: 'from', error: 'must be 2106-02-07 06:28 UTC or earlier' });
    expect(logFilterError({ from: 'not a date', to: '' })).toEqual({ field: 'from', error: 'is not a date and time' });
    expect(logFilterError({ from: '1970-06-01T00:00', to: '2026-01-02T03:05' })).toBeNull();
  });

  it('a "To" past the last time the log holds reads as no end', () => {
    expect(logFilterError({ from: '2026-01-02T03:04', to: '9999-12-31T23:59' })).toBeNull();
    expect(logQuery({ ...EMPTY_LOG_FILTERS, to: '9999-12-31T23:59' }, 1, 20).end_timestamp).toBe(0xffff_ffff);
  });
});

describe('log amounts', () => {
  const entry = (type: number, quota: number, content = '') => ({ type, quota, content });

  it('a top-up credits, a request debits', () => {
    expect(logAmount(entry(1, 2_500_000, 'redeemed code 5'))).toBe('+$5.00');
    expect(logAmount(entry(2, 1_000))).toBe('-$0.002');
    expect(logAmount(entry(5, 1_000))).toBe('-$0.002');
    expect(logAmount(entry(2, 0))).toBe('$0.00');
    expect(logAmount(entry(2, 39))).toBe('-$0.000078'); // was "-$0.0001", 28% more than charged
  });

  it('a management entry as its text records it', () => {
    expect(logDirection(entry(3, 500_000, 'An administrator added 500000 quota: bonus'))).toBe(1);
    expect(logDirection(entry(3, 250_000, 'An administrator removed 250000 quota'))).toBe(-1);
    expect(logDirection(entry(3, 1_000_000, 'An administrator set the balance from 3000000 to 2000000 (-1000000 quota)'))).toBe(-1);
    expect(logDirection(entry(3, 1_000_000, 'An administrator set the balance from 2000000 to 3000000 (+1000000 quota)'))).toBe(1);
    expect(logDirection(entry(3, 1_000_000, 'An administrator set the balance from 2000000 to 3000000'))).toBe(1);
    expect(logDirection(entry(3, 100, 'referral reward: an account registered with your invitation code; +100 referral quota (aff_quota, not the balance)'))).toBe(1);
    expect(logAmount(entry(3, 250_000, 'An administrator removed 250000 quota'))).toBe('-$0.50');
    // The administrator's free-text reason is no part of the direction: only console-api's fixed
    // opening says it (console-api/routes/user.ts, add_quota and PUT /api/user/).
    expect(logDirection(entry(3, 500_000, 'An administrator added 500000 quota: refund: the outage removed 500000 quota from you'))).toBe(1);
    expect(logAmount(entry(3, 500_000, 'An administrator added 500000 quota: refund: the outage removed 500000 quota from you'))).toBe('+$1.00');
    expect(logDirection(entry(3, 500_000, 'An administrator removed 500000 quota: correction; we added 500000 quota by mistake (+500000 quota)'))).toBe(-1);
    expect(logDirection(entry(3, 500_000, 'An administrator removed 500000 quota: set the balance from 0 to 9'))).toBe(-1);
    expect(logDirection(entry(3, 500_000, 'An administrator added 500000 quota: +5 referral quota (-500000 quota)'))).toBe(1);
    // Such words anywhere but at the opening console-api writes do not tell the direction.
    expect(logDirection(entry(3, 500_000, 'note: An administrator removed 500000 quota'))).toBe(0);
    expect(logDirection(entry(3, 500_000, 'imported: removed 500000 quota (+500000 quota)'))).toBe(0);
    // Nothing to tell the direction by: unsigned.
    expect(logDirection(entry(3, 500_000, 'imported'))).toBe(0);
    expect(logAmount(entry(3, 500_000, 'imported'))).toBe('$1.00');
    expect(logAmount(entry(4, 500_000, 'system'))).toBe('$1.00');
  });
});
