// Prices of a top-up quantity. A quantity is in units of one US dollar of quota (QUOTA_PER_DOLLAR,
// 500000 quota); the money charged is quantity x unit price x discount, rounded to the cent, where the
// discount is the coefficient of the largest AmountDiscount key not above the quantity (1 if none).
import { QUOTA_PER_DOLLAR } from '../../core/pricing/ratios.js';

export function discountFor(amount: number, table: Readonly<Record<string, number>>): number {
  let best: number | undefined;
  let coefficient = 1;
  for (const [k, v] of Object.entries(table)) {
    const threshold = Number(k);
    if (threshold <= amount && (best === undefined || threshold > best)) {
      best = threshold;
      coefficient = v;
    }
  }
  return coefficient;
}

/** Money in the currency's major unit, rounded to `decimals` (two unless the currency has none). */
export function priceOf(amount: number, unitPrice: number, table: Readonly<Record<string, number>>, decimals = 2): number {
  const scale = 10 ** decimals;
  return Math.round(amount * unitPrice * discountFor(amount, table) * scale) / scale;
}

export function quotaOf(amount: number): number {
  return amount * QUOTA_PER_DOLLAR;
}
