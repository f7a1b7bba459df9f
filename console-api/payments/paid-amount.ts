// What a provider says was paid, as an exact count of cents (hundredths of the major unit, the scale of
// topups.money, NUMERIC(14, 2)), or null when what it states is no such amount. Compared as integers:
// the check before was `Math.round(x * 100)` on both sides, so a signed notice of 7.295 or 7.3049999,
// ` 7.30`, `7.3e0` or `0x7`, or a card session's amount_total of 99.6 or "100", paid an order of 7.30
// or of 100 cents (found by a probe; the signature still had to be the provider's).

/** A plain decimal: digits, optionally a point and digits. No sign, exponent, spaces or hex. */
const DECIMAL = /^(\d{1,15})(?:\.(\d{1,20}))?$/;

/** `7.30` → 730n; `7.3` → 730n; `7.300` → 730n; `7.305`, `7.3e0`, ` 7.30`, `-1` → null. */
export function centsOfDecimal(text: unknown): bigint | null {
  if (typeof text !== 'string') return null;
  const m = DECIMAL.exec(text);
  if (!m) return null;
  const fraction = m[2] ?? '';
  // Digits past the cent must all be 0: 7.3049999 is not 7.30.
  if (!/^0*$/.test(fraction.slice(2))) return null;
  return BigInt(m[1]!) * 100n + BigInt(fraction.slice(0, 2).padEnd(2, '0'));
}

/**
 * A card provider's `amount_total` (minor units of the currency: `minorUnits` of them to the major
 * unit) in cents: a non-negative whole number, and one that is a whole number of cents (a
 * three-decimal currency's 7,305 is 7.305, which no order costs).
 */
export function centsOfMinorUnits(amount: unknown, minorUnits: number): bigint | null {
  if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount < 0) return null;
  const hundredths = BigInt(amount) * 100n;
  const units = BigInt(minorUnits);
  return hundredths % units === 0n ? hundredths / units : null;
}
