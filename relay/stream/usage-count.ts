// A count a provider reports in its usage (tokens of each kind, web searches), as the relay bills it.

/**
 * The most of any one count a provider is believed: 100 million, fifty times the largest context
 * window offered today. More is the provider's fault, not a request's size (or a number JSON cannot
 * even hold: `1e400` parses as Infinity). Billed at this bound, every figure derived from the counts
 * stays a whole number the books can hold: the event's prompt_tokens (three counts summed) within the
 * ledger's `integer` columns, the cost within exact integers. A count of 1e300 made a cost that Redis
 * stored as a float in a credit slice and Postgres refused, so that request was never billed.
 */
export const MAX_USAGE_COUNT = 100_000_000;

/**
 * Whether a provider's usage field states a count: a number of at least 0. Anything else (absent,
 * null, a string, -5) states nothing, and the relay counts that side itself rather than bill it as 0
 * (docs/billing.md).
 */
export function isUsageCount(v: unknown): v is number {
  return typeof v === 'number' && v >= 0;
}

/** A usage count from a provider's JSON: a whole number from 0 to MAX_USAGE_COUNT; 0 for anything but a positive number. */
export function usageCount(v: unknown): number {
  return typeof v === 'number' && v > 0 ? Math.min(Math.floor(v), MAX_USAGE_COUNT) : 0;
}
