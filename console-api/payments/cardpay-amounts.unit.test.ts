// What a card order's price becomes in the provider's minor units. The Icelandic króna is two-decimal
// in Stripe's API but every amount must be a multiple of 100 (no aurar since 2023, Stripe's
// "deprecation of fractional ISK charges"): a price with a fraction was refused at checkout (review pay).
import { describe, expect, it } from 'vitest';
import { minorUnitsOf, priceDecimalsOf } from './cardpay.js';
import { priceOf } from './pricing.js';

const unitAmount = (amount: number, unitPrice: number, discount: Record<string, number>, currency: string): number =>
  Math.round(priceOf(amount, unitPrice, discount, priceDecimalsOf(currency)) * minorUnitsOf(currency));

describe('card amounts in minor units', () => {
  it('ISK: whole krónur, sent as a multiple of 100', () => {
    for (const [amount, unit, table] of [[1, 139.57, {}], [10, 140, { 10: 0.95 }], [3, 138.5, {}]] as const) {
      const sent = unitAmount(amount, unit, table, 'isk');
      expect(sent % 100, `${amount} × ${unit}`).toBe(0);
      expect(sent / 100).toBe(priceOf(amount, unit, table, 0));
    }
  });

  it('other currencies keep their decimals: cents for the dollar, whole yen, fils to the cent for the dinar', () => {
    expect(unitAmount(3, 1.99, {}, 'usd')).toBe(597);
    expect(unitAmount(3, 149.5, {}, 'jpy')).toBe(priceOf(3, 149.5, {}, 0));
    expect(minorUnitsOf('kwd')).toBe(1000);
    expect(priceDecimalsOf('kwd')).toBe(2);
  });
});
