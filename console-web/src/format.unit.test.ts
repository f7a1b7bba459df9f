// The display rules of money and the parsing of dollar amounts typed in forms.
import { describe, expect, it } from 'vitest';
import { creditDollars, dateTime, discountText, dollars, dollarsError, dollarsInput, dollarsToQuota, inputNumber, money, quotaText, readableMessage, toLocalInput } from './format';

describe('dollars', () => {
  it('shows every quota unit, never rounding a balance up or a charge away', () => {
    expect(dollars(49_999_803)).toBe('$99.999606'); // not "$100.00": the account cannot spend $100
    expect(dollars(2_499_842)).toBe('$4.999684'); // a $5 key that spent 316 quota
    expect(dollars(39)).toBe('$0.000078'); // not "$0.0001"
    expect(dollars(499_999)).toBe('$0.999998');
    expect(dollars(1)).toBe('$0.000002');
    expect(dollars(-1)).toBe('-$0.000002');
  });

  it('trims trailing zeros down to two decimals', () => {
    expect(dollars(500_000)).toBe('$1.00');
    expect(dollars(3_500_000)).toBe('$7.00');
    expect(dollars(250_000)).toBe('$0.50');
    expect(dollars(1_250)).toBe('$0.0025');
    expect(dollars(37_500)).toBe('$0.075');
    expect(dollars(0)).toBe('$0.00');
  });

  it('groups thousands, exact beyond what a float holds to six decimals', () => {
    expect(dollars(500_000_000)).toBe('$1,000.00');
    expect(dollars(617_283_950)).toBe('$1,234.5679');
    expect(dollars(499_999_999_999)).toBe('$999,999.999998');
    expect(dollars(9_007_199_254_500_000)).toBe('$18,014,398,509.00');
    expect(dollars(Number.MAX_SAFE_INTEGER)).toBe('$18,014,398,509.481982');
  });

  it('puts the sign before the $', () => {
    expect(dollars(-1_000)).toBe('-$0.002');
    expect(dollars(-617_283_950)).toBe('-$1,234.5679');
    expect(dollars(1_000, { sign: true })).toBe('+$0.002');
    expect(dollars(-1_000, { sign: true })).toBe('-$0.002');
    expect(dollars(0, { sign: true })).toBe('$0.00');
  });

  it('quota with its dollars', () => {
    expect(quotaText(1_234_567)).toBe('$2.469134 (1,234,567 quota)');
  });
});

describe('payment figures', () => {
  it('money with two decimals, credit in dollars, discounts as people read them', () => {
    expect(money(146)).toBe('146.00');
    expect(money(7.3)).toBe('7.30');
    expect(money(1234.5)).toBe('1,234.50');
    expect(creditDollars(20)).toBe('$20.00');
    expect(discountText(0.95)).toBe('5% off');
    expect(discountText(0.875)).toBe('12.5% off');
    expect(discountText(0.9)).toBe('10% off');
    expect(discountText(1)).toBe('');
    expect(discountText(1.1)).toBe('10% more');
  });
});

describe('dollar amounts past $9e9, exactly (review webconsole: a float saved them 1 quota off)', () => {
  it('reads every digit, and writes a form\'s amount back as it reads', () => {
    expect(dollarsToQuota('17465489038.543814')).toBe(8_732_744_519_271_907);
    expect(dollarsToQuota('18014398509.481982')).toBe(Number.MAX_SAFE_INTEGER);
    expect(dollarsToQuota('18014398509.481983')).toBeUndefined();
    expect(dollarsError('18014398509.481982', 'usual')).toBe('usual');
    expect(dollarsError('18014398509.481983', 'usual')).toBe('must be at most $18,014,398,509.481982');
    expect(dollarsInput(Number.MAX_SAFE_INTEGER)).toBe('18014398509.481982');
    expect(dollarsInput(8_732_744_519_271_907)).toBe('17465489038.543814');
    for (const q of [0, 1, 250_000, 1_250_000, 5_000_000, 123_456_789, -500_001, Number.MAX_SAFE_INTEGER - 1]) {
      expect(dollarsToQuota(dollarsInput(q), { negative: true }), String(q)).toBe(q);
    }
    expect([dollarsInput(1_250_000), dollarsInput(5_000_000), dollarsInput(1), dollarsInput(-1)]).toEqual(['2.5', '10', '0.000002', '-0.000002']);
    // Seven and more decimals: a half unit rounds up, as before.
    expect(dollarsToQuota('0.0000010')).toBe(1);
    expect(dollarsToQuota('0.00000099999')).toBeUndefined();
  });
});

describe('dollarsToQuota', () => {
  it('reads decimal dollar amounts', () => {
    expect(dollarsToQuota('10')).toBe(5_000_000);
    expect(dollarsToQuota(' 2.5 ')).toBe(1_250_000);
    expect(dollarsToQuota('.5')).toBe(250_000);
    expect(dollarsToQuota('3.')).toBe(1_500_000);
    expect(dollarsToQuota('$1.15')).toBe(575_000);
    expect(dollarsToQuota('0')).toBe(0);
    expect(dollarsToQuota('0.000002')).toBe(1);
  });

  it('refuses what is not a decimal dollar amount', () => {
    for (const t of ['', ' ', 'abc', '0x10', '1e3', '1,000', 'Infinity', 'NaN', '1.2.3', '--1', '+', '.', '10 $', '١٠']) {
      expect(dollarsToQuota(t), t).toBeUndefined();
    }
    expect(dollarsToQuota('9'.repeat(30)), 'beyond a safe integer').toBeUndefined();
  });

  it('takes a minus sign only when allowed', () => {
    expect(dollarsToQuota('-1')).toBeUndefined();
    expect(dollarsToQuota('-1', { negative: true })).toBe(-500_000);
    expect(dollarsToQuota('+1', { negative: true })).toBe(500_000);
    expect(dollarsToQuota('-0', { negative: true })).toBe(0);
  });

  it('refuses a non-zero amount below half a quota unit, which would be saved as $0', () => {
    for (const t of ['0.0000001', '0.000000999', '$.0000009']) expect(dollarsToQuota(t), t).toBeUndefined();
    expect(dollarsToQuota('-0.0000001', { negative: true })).toBeUndefined();
    expect(dollarsToQuota('0.000001')).toBe(1); // half a unit rounds up
    expect(dollarsToQuota('0.0000000')).toBe(0);
    expect(dollarsError('0.0000001', 'usual')).toBe('below $0.000002 (1 quota), the smallest amount: it would be saved as $0');
    expect(dollarsError('-0.0000001', 'usual')).toMatch(/^below \$0\.000002/);
    for (const t of ['abc', '1e-7', '0', '']) expect(dollarsError(t, 'usual'), t).toBe('usual');
  });

  it('names the largest amount the API stores when more is typed', () => {
    expect(dollarsToQuota('18014398509')).toBe(9_007_199_254_500_000);
    for (const t of ['18014398509.481984', '1000000000000', '$1' + '0'.repeat(30)]) {
      expect(dollarsToQuota(t), t).toBeUndefined();
      expect(dollarsError(t, 'usual'), t).toBe('must be at most $18,014,398,509.481982');
    }
    expect(dollarsError('-1000000000000', 'usual')).toBe('must be at most $18,014,398,509.481982');
    expect(dollarsError('1e15', 'usual')).toBe('usual');
  });
});

describe('inputNumber', () => {
  it('writes a number without exponent notation', () => {
    expect(inputNumber(0.0000001)).toBe('0.0000001');
    expect(inputNumber(1.25e-7)).toBe('0.000000125');
    expect(inputNumber(-3e-8)).toBe('-0.00000003');
    expect(inputNumber(1e21)).toBe('1000000000000000000000');
    expect(inputNumber(0.5)).toBe('0.5');
    expect(inputNumber(42)).toBe('42');
    expect(Number(inputNumber(1.234567e-9))).toBe(1.234567e-9);
  });
});

describe('dateTime', () => {
  it('shows a time beyond what Date holds as its number, never "NaN-NaN-NaN"', () => {
    expect(dateTime(Number.MAX_SAFE_INTEGER)).toBe('9007199254740991');
    expect(toLocalInput(Number.MAX_SAFE_INTEGER)).toBe('');
    expect(dateTime(253_402_300_799)).toMatch(/^(9999-12-31|10000-01-01) \d{2}:\d{2}:\d{2}$/);
    expect(dateTime(0)).toBe('—');
  });
});

describe('readableMessage', () => {
  it('shows the negative-balance refusal in dollars, without the API\'s inner words', () => {
    expect(readableMessage('value: would make the balance negative (spendable 50229816, Postgres 50229816)'))
      .toBe('value: would make the balance negative: $100.459632 can be spent now, so at most that much can be removed');
    expect(readableMessage('quota: would make the balance negative (spendable -5, Postgres 1000)'))
      .toBe('quota: would make the balance negative: $0.00 can be spent now, so at most that much can be removed');
    expect(readableMessage('name: is required')).toBe('name: is required');
  });

  it('gives amounts in quota units as dollars, as the fields they are about are typed', () => {
    expect(readableMessage('quota: the smallest transfer is 500000 quota')).toBe('quota: the smallest transfer is $1.00');
    expect(readableMessage('quota: exceeds the referral quota available (600000 quota)')).toBe('quota: exceeds the referral quota available ($1.20)');
    expect(readableMessage('quota: the balance changed since it was read (now 1234568 quota); read it again'))
      .toBe('quota: the balance changed since it was read (now $2.469136); read it again');
    expect(readableMessage('the balance would exceed 9007199254740991 quota, the most an account holds'))
      .toBe('the balance would exceed $18,014,398,509.481982, the most an account holds');
    // Words that merely contain "quota" stay.
    expect(readableMessage('remain_quota: must be at least 0')).toBe('remain_quota: must be at least 0');
  });
});
