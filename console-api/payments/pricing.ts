// Prices of a top-up quantity. A quantity is in units of one US dollar of quota (QUOTA_PER_DOLLAR,
// 500000 quota); the money charged is quantity x unit price x discount, rounded to the cent, where the
// discount is the coefficient of the largest AmountDiscount key not above the quantity (1 if none).
import { QUOTA_PER_DOLLAR } from '../../core/pricing/ratios.js';

/** Largest quantity of one order (units of 1 US dollar). */
export const MAX_TOPUP_AMOUNT = 1_000_000;
/** Largest AmountDiscount coefficient. */
export const MAX_DISCOUNT = 10;
/** Largest money of one order: topups.money is NUMERIC(14, 2). */
export const MAX_ORDER_MONEY = 999_999_999_999.99;
/**
 * Largest Price and CardpayUnitPrice: the largest quantity at the largest coefficient still fits
 * MAX_ORDER_MONEY (1,000,000 x 99,999.99 x 10 = 999,999,900,000). Above it such an order failed in
 * Postgres (numeric field overflow), and a price of hundreds of digits read as Infinity.
 */
export const MAX_UNIT_PRICE = 99_999.99;

/** Whether an order of this money can be stored (a price read as Infinity or too large cannot). */
export function isPayableMoney(money: number): boolean {
  return Number.isFinite(money) && money <= MAX_ORDER_MONEY;
}

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
