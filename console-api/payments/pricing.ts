// Prices of a top-up quantity. A quantity is in units of one US dollar of quota (QUOTA_PER_DOLLAR,
// 500000 quota); the money charged is quantity x unit price x discount, rounded half up to the cent,
// where the discount is the coefficient of the largest AmountDiscount key not above the quantity (1 if
// none). The product is computed exactly, in integers, from the decimals the operator wrote (see
// priceOf): rounding a float product made a half cent go either way (3 x 7.3 x 0.95 = 20.805 → 20.80,
// 2.675 → 2.68, 1.005 → 1.00).
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

/**
 * A finite non-negative number as the exact decimal `digits × 10^-scale` of its shortest text
 * (String(n), the text that reads back as n: `7.3`, `0.95`, `1e-7`). A Price, CardpayUnitPrice or
 * AmountDiscount coefficient is written by the operator as a decimal and read into a number; its
 * shortest text is that decimal again (up to 15 significant digits). Null for NaN, ±Infinity and
 * negatives.
 */
function exactDecimal(n: number): { digits: bigint; scale: number } | null {
  const m = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(n));
  if (!m) return null;
  const fraction = m[2] ?? '';
  const scale = fraction.length - Number(m[3] ?? 0);
  const digits = BigInt(m[1]! + fraction);
  return scale >= 0 ? { digits, scale } : { digits: digits * 10n ** BigInt(-scale), scale: 0 };
}

/**
 * Money in the currency's major unit: amount × unitPrice × discount, exactly, rounded half up to
 * `decimals` (two unless the currency has none). Not a number (NaN or Infinity, which
 * isPayableMoney refuses) when a factor is not a finite non-negative number.
 */
export function priceOf(amount: number, unitPrice: number, table: Readonly<Record<string, number>>, decimals = 2): number {
  const price = exactDecimal(unitPrice);
  const coefficient = exactDecimal(discountFor(amount, table));
  if (!Number.isSafeInteger(amount) || amount < 0 || !price || !coefficient) return Number.isFinite(unitPrice) ? Number.NaN : Infinity;
  // The exact product is product / 10^scale; in units of 10^-decimals, half up: ⌊(2x + 1) / 2⌋.
  const product = BigInt(amount) * price.digits * coefficient.digits * 10n ** BigInt(decimals);
  const divisor = 10n ** BigInt(price.scale + coefficient.scale);
  const units = (product * 2n + divisor) / (2n * divisor);
  // units is at most 17 digits for a payable order; the division gives the double nearest the decimal.
  return Number(units) / 10 ** decimals;
}

export function quotaOf(amount: number): number {
  return amount * QUOTA_PER_DOLLAR;
}
