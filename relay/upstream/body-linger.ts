// A provider body whose stream has ended (message_stop, [DONE]) before its HTTP response did. Why:
// the answer is settled and its client ended at its last event (stream-relay.ts), but destroying
// the body there would close a pooled keep-alive connection whose response end (the chunked
// encoding's last chunk) usually arrives a moment later. So the body is drained, unread, for a
// short grace and destroyed only if its response has not ended by then: a provider that pings on
// after its last event no longer holds the connection (and a relay's close) for as long as it pings.
// One sweep timer serves every lingering body, and runs only while there is one.
import type { Readable } from 'node:stream';

/** How long a body is drained after its stream's end before it is destroyed. */
export const BODY_LINGER_MS = 1_000;

export class LingeringBodies {
  readonly #graceMs: number;
  /** Each body lingering, and when it is destroyed (performance.now()). */
  readonly #deadlines = new Map<Readable, number>();
  #timer: NodeJS.Timeout | null = null;

  constructor(graceMs = BODY_LINGER_MS) {
    this.#graceMs = graceMs;
  }

  /** Drains `body` until its response ends (then call release()), for the grace at most. */
  hold(body: Readable): void {
    if (body.destroyed || body.readableEnded) return;
    this.#deadlines.set(body, performance.now() + this.#graceMs);
    // Paused for a full client socket or lagging counting, it would never reach its end.
    body.resume();
    if (this.#timer === null) {
      this.#timer = setInterval(() => this.#sweep(), Math.max(1, this.#graceMs >> 1));
      this.#timer.unref();
    }
  }

  /** The body's response ended or it closed: nothing to destroy. */
  release(body: Readable): void {
    if (this.#deadlines.delete(body) && this.#deadlines.size === 0) this.#stop();
  }

  get size(): number {
    return this.#deadlines.size;
  }

  #sweep(): void {
    const now = performance.now();
    for (const [body, deadline] of this.#deadlines) {
      if (deadline > now) continue;
      this.#deadlines.delete(body);
      body.destroy();
    }
    if (this.#deadlines.size === 0) this.#stop();
  }

  #stop(): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }
}

/** The relay process's lingering bodies. */
export const lingeringBodies = new LingeringBodies();
