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

/** Money in the currency's major unit, rounded to two decimals. */
export function priceOf(amount: number, unitPrice: number, table: Readonly<Record<string, number>>): number {
  return Math.round(amount * unitPrice * discountFor(amount, table) * 100) / 100;
}

export function quotaOf(amount: number): number {
  return amount * QUOTA_PER_DOLLAR;
}
