// Lines that a provider's fault can repeat for every request (a provider stating impossible usage,
// failing, or refusing a channel) are logged at most once per kind and channel in an interval, the
// next line that goes out saying how many were held back. At thousands of requests a second, a line
// per request cost the relay ~18 µs of CPU each (pino and its redaction: 7% of its event loop in the
// bench, docs/performance.md) exactly when a provider misbehaves, and buried every other line. Each
// request's own record is kept anyway: the log row's content and the relay's metrics count them all.

/** Held back: the line is not to be written. */
export const HELD_BACK = -1;

export class LogThrottle {
  readonly #intervalMs: number;
  readonly #maxKeys: number;
  readonly #windows = new Map<string, { until: number; heldBack: number }>();

  /** intervalMs 0: every line goes out. Past maxKeys kinds the record starts over (a line too many, never one too few). */
  constructor(intervalMs: number, maxKeys = 10_000) {
    this.#intervalMs = intervalMs;
    this.#maxKeys = maxKeys;
  }

  /**
   * Whether the line of `key` goes out now: HELD_BACK if not, else how many of its lines were held
   * back since the last that went out (0 for the first). `now` on a monotonic clock: a wall clock
   * stepped back an hour held every line back for that hour.
   */
  take(key: string, now = performance.now()): number {
    if (this.#intervalMs <= 0) return 0;
    const window = this.#windows.get(key);
    if (window !== undefined && now < window.until) {
      window.heldBack++;
      return HELD_BACK;
    }
    const heldBack = window?.heldBack ?? 0;
    if (window === undefined) {
      if (this.#windows.size >= this.#maxKeys) this.#windows.clear();
      this.#windows.set(key, { until: now + this.#intervalMs, heldBack: 0 });
    } else {
      window.until = now + this.#intervalMs;
      window.heldBack = 0;
    }
    return heldBack;
  }
}
