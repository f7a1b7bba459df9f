// A live relay keeps the deadlines of the reservations it holds ahead of the reaper: one interval for
// the whole process (never a timer per request) pushes every open reservation's deadline a TTL ahead,
// in one ZADD XX per beat. The reaper (billing/reservation-reaper.ts) then releases only what no live
// relay renews: a reservation whose relay died, or whose settlement failed for good.
import type { Logger } from '../../infra/logger.js';
import type { QuotaStore } from '../../core/quota/quota-store.js';
import { WALL_CLOCK, type ReferenceClock } from '../../core/quota/redis-clock.js';

/** What the heartbeat reads of an exchange: messages-handler.ts's Exchange is one, held as it is. */
export interface HeldReservation {
  readonly requestId: string;
  readonly record: { readonly userId: number } | null;
  /** performance.now() when its provider stream last made progress (an event, not a ping); 0 while it streams nothing. */
  readonly streamLineAt?: number;
  /**
   * performance.now() when the headers of a provider answer read whole (a request without stream)
   * arrived while its body is still coming; 0 otherwise.
   */
  readonly wholeAnswerPendingSince?: number;
  /** Cuts its provider stream, which then settles for what it delivered. */
  cutStalledStream?(): void;
  /** Cuts the body of an answer read whole that took too long: the exchange then fails as one whose provider stopped answering. */
  cutWholeAnswer?(): void;
}

export class ReservationHeartbeat {
  readonly #open = new Set<HeldReservation>();
  readonly #quota: Pick<QuotaStore, 'renewDeadlines'>;
  /** The quota store's clock (Redis's on a relay): the reaper compares the deadlines with the same one. */
  readonly #clock: ReferenceClock;
  readonly #ttlMs: number;
  readonly #log: Logger;
  readonly #timer: NodeJS.Timeout;
  #beating = false;

  /**
   * A provider stream that sends no event for this long is cut at the next beat. undici's body
   * timeout restarts with every chunk, so a provider trickling a byte now and then, or sending only
   * pings (which are no event: stream-relay.ts), held the stream, its reservation (renewed here) and
   * a pooled connection for ever.
   */
  readonly #stallMs: number;
  /**
   * The longest the body of an answer read whole may take after its headers: a provider trickling a
   * JSON answer (or pinging in a stream folded for a JSON request) restarted undici's body timeout
   * with every byte and held the exchange, its reservation and a pooled connection for ever, the
   * client gone or not.
   */
  readonly #wholeAnswerMs: number;

  constructor(quota: Pick<QuotaStore, 'renewDeadlines'> & Partial<Pick<QuotaStore, 'clock'>>, ttlMs: number, log: Logger, stallMs = Infinity, wholeAnswerMs = Infinity) {
    this.#quota = quota;
    this.#clock = quota.clock ?? WALL_CLOCK;
    this.#ttlMs = ttlMs;
    this.#log = log;
    this.#stallMs = stallMs;
    this.#wholeAnswerMs = wholeAnswerMs;
    // A third of the TTL: two beats may fail (Redis restarting, a long GC pause) before the reaper
    // could see the deadline pass.
    this.#timer = setInterval(() => this.beat(), Math.max(1, Math.floor(ttlMs / 3)));
    this.#timer.unref();
  }

  get size(): number {
    return this.#open.size;
  }

  hold(r: HeldReservation): void {
    this.#open.add(r);
  }

  release(r: HeldReservation): void {
    this.#open.delete(r);
  }

  /** Renews every held deadline now; the interval calls it, tests may too. */
  async beat(): Promise<void> {
    if (this.#beating || this.#open.size === 0) return;
    this.#beating = true;
    const held: { userId: number; requestId: string }[] = [];
    const now = performance.now();
    for (const r of this.#open) {
      if (r.record !== null) held.push({ userId: r.record.userId, requestId: r.requestId });
      const lineAt = r.streamLineAt ?? 0;
      if (lineAt > 0 && now - lineAt > this.#stallMs) {
        this.#log.warn({ requestId: r.requestId, silentMs: Math.round(now - lineAt) }, 'provider stream sent no event for too long; cut');
        r.cutStalledStream?.();
      }
      const since = r.wholeAnswerPendingSince ?? 0;
      if (since > 0 && now - since > this.#wholeAnswerMs) {
        this.#log.warn({ requestId: r.requestId, bodyMs: Math.round(now - since) }, 'provider answer read whole did not end in time; cut');
        r.cutWholeAnswer?.();
      }
    }
    try {
      await this.#quota.renewDeadlines(held, this.#clock.now() + this.#ttlMs);
    } catch (err) {
      this.#log.warn({ err: (err as Error).message, open: held.length }, 'reservation heartbeat failed; the next beat tries again');
    } finally {
      this.#beating = false;
    }
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
