import { describe, expect, it } from 'vitest';
import { isPayableMoney, MAX_DISCOUNT, MAX_ORDER_MONEY, MAX_TOPUP_AMOUNT, MAX_UNIT_PRICE, priceOf } from './pricing.js';

/** The exact price in hundredths, rounded half up, from the decimal texts (an independent reference). */
function exactCents(amount: number, price: string, coefficient: string): bigint {
  const scaled = (s: string) => {
    const [i, f = ''] = s.split('.');
    return { n: BigInt(i! + f), d: f.length };
  };
  const p = scaled(price);
  const c = scaled(coefficient);
  const num = BigInt(amount) * p.n * c.n * 100n; // hundredths × 10^(p.d + c.d)
  const den = 10n ** BigInt(p.d + c.d);
  return (num * 2n + den) / (2n * den);
}

describe('priceOf', () => {
  it('rounds a half cent up, whatever the binary value of the factors (7.3 × 0.95, 1.005, 2.675)', () => {
    // Rounded from floats before: 3 × 7.3 × 0.95 = 20.805 gave 20.80, 5 × … = 34.675 gave 34.67.
    expect(priceOf(3, 7.3, { 1: 0.95 })).toBe(20.81);
    expect(priceOf(5, 7.3, { 1: 0.95 })).toBe(34.68);
    expect(priceOf(1, 1.005, {})).toBe(1.01);
    expect(priceOf(1, 2.675, {})).toBe(2.68);
    expect(priceOf(1, 0.125, {})).toBe(0.13);
    expect(priceOf(1, 0.004, {})).toBe(0);
    expect(priceOf(1, 0.005, {})).toBe(0.01);
  });

  it('equals the exact decimal price rounded half up for every quantity 1..2000 of several prices and coefficients', () => {
    const wrong: unknown[] = [];
    for (const price of ['7.3', '7.35', '0.15', '1.005', '6.95', '0.125', '2.675', '1', '0.3075', '99999.99']) {
      for (const coefficient of ['1', '0.9', '0.95', '0.85', '0.75', '1.05', '0.333']) {
        const table: Record<string, number> = coefficient === '1' ? {} : { 1: Number(coefficient) };
        for (let amount = 1; amount <= 2000; amount++) {
          const got = priceOf(amount, Number(price), table);
          const want = exactCents(amount, price, coefficient);
          if (got.toFixed(2) !== (Number(want) / 100).toFixed(2) || Math.round(got * 100) !== Number(want)) wrong.push([amount, price, coefficient, got, want]);
        }
      }
    }
    expect(wrong.slice(0, 10)).toEqual([]);
  });

  it('rounds to whole units for a zero-decimal currency, half up', () => {
    expect(priceOf(5, 150.4, {}, 0)).toBe(752);
    expect(priceOf(5, 150.5, {}, 0)).toBe(753); // 752.5
    expect(priceOf(1, 0.5, {}, 0)).toBe(1);
    expect(priceOf(1, 0.49, {}, 0)).toBe(0);
  });

  it('takes the coefficient of the largest tier not above the quantity', () => {
    expect(priceOf(99, 7.3, { 100: 0.9, 500: 0.8 })).toBe(722.7);
    expect(priceOf(100, 7.3, { 100: 0.9, 500: 0.8 })).toBe(657);
    expect(priceOf(600, 7.3, { 100: 0.9, 500: 0.8 })).toBe(3504);
  });

  it('is exact at the bounds and for prices written with many decimals (read as 1e-7 and the like)', () => {
    expect(priceOf(MAX_TOPUP_AMOUNT, MAX_UNIT_PRICE, { 1: MAX_DISCOUNT })).toBe(999_999_900_000);
    expect(priceOf(MAX_TOPUP_AMOUNT, MAX_UNIT_PRICE, {})).toBe(99_999_990_000);
    expect(priceOf(999_999, 99_999.99, {}).toFixed(2)).toBe('99999890000.01');
    expect(priceOf(1, 0.0000001, {})).toBe(0);
    expect(priceOf(MAX_TOPUP_AMOUNT, 0.000005, {})).toBe(5);
    expect(priceOf(MAX_TOPUP_AMOUNT, 0.0000015, {})).toBe(1.5);
    expect(priceOf(3, 1, { 1: 1e-7 })).toBe(0);
  });

  it('answers a price that no order can hold (a unit price read as Infinity) as not payable, not a throw', () => {
    expect(isPayableMoney(priceOf(1, Infinity, {}))).toBe(false);
    expect(isPayableMoney(priceOf(1, Number.NaN, {}))).toBe(false);
    expect(isPayableMoney(priceOf(MAX_TOPUP_AMOUNT, 1e9, { 1: MAX_DISCOUNT }))).toBe(false);
    expect(isPayableMoney(MAX_ORDER_MONEY)).toBe(true);
  });
});
