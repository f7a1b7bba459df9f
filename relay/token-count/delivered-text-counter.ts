// Counts the tokens of the text a stream delivered, for streams that end without usage (cut short),
// in bounded memory however long the stream, at almost no cost for the streams that end with usage.
//
// Fed with the raw `data:` payload of each content_block_delta event (SseUsageParser hands the bytes
// over in place: pushDelta), it finds the delta's text in the payload without parsing it
// (delta-text.ts: findDeltaText) and appends just those raw bytes, escapes and all, to a pending
// buffer, one piece per line. Nothing goes to a worker during a normal stream:
//   - total() (the stream was cut) sends what is pending to a worker, which decodes the pieces and
//     counts the text;
//   - when pending reaches `flushBytes` (a very long stream), it is sent as a batch. Each batch's text
//     is counted up to its last segment end (a word boundary; bpe-count.ts) and the rest is carried
//     into the next batch, so the sum of the batch counts is exactly the count of the whole text (with
//     the whitespace at its very end left out: it would begin the next, undelivered token; so K deltas
//     "tok " of the mock count exactly K). Batches are counted one after the other, in order.
//   - discard() (the stream ended with usage) drops everything at once.
//
// Memory: pending bytes stay below flushBytes + one piece. Batches sent and not yet counted are held
// too; when pending plus those reach `maxOutstandingBytes`, `congested` turns true and onCongestion(true)
// is called (pause the provider's body), and onCongestion(false) once they drop below it again.
// Nothing else is kept per stream: no promise chain while no batch is in flight, and a settled
// counter holds no buffer.
import { findDeltaText, type TextRange } from './delta-text.js';
import type { TokenCounter } from './token-counter.js';
import type { Encoding } from './bpe-count.js';

export interface DeliveredTextCounterOptions {
  /** Pending text bytes that make a batch. Default 256 KiB. */
  flushBytes?: number;
  /** Pending + counting bytes above which the counter reports congestion. Default 4 × flushBytes. */
  maxOutstandingBytes?: number;
  /** Called when congestion starts (true) and ends (false). */
  onCongestion?: (congested: boolean) => void;
  /** The model's encoding (encoding-of.ts); cl100k_base when absent. */
  encoding?: Encoding;
}

type Counter = Pick<TokenCounter, 'countDeltas'>;

const EMPTY = Buffer.alloc(0);
const NL = 0x0a;
/** First allocation of the pending buffer; it doubles up to flushBytes + one piece. */
const INITIAL_BYTES = 1024;

/** All counters share one: findDeltaText's answer, used at once. */
const range: TextRange = { start: 0, end: 0 };

export class DeliveredTextCounter {
  readonly flushBytes: number;
  readonly maxOutstandingBytes: number;
  readonly #counter: Counter;
  readonly #onCongestion: ((congested: boolean) => void) | undefined;
  readonly #encoding: Encoding | undefined;

  #pending: Buffer = EMPTY;
  #pendingBytes = 0;
  /** Bytes of batches sent to a worker and not yet counted. */
  #countingBytes = 0;
  #carry = '';
  #count = 0;
  /** The last batch in flight, or null when none is. */
  #chain: Promise<void> | null = null;
  #error: unknown = null;
  #done = false;
  #discarded = false;
  #congested = false;
  /** Payloads received, batches sent, and the most pending bytes seen (for tests and metrics). */
  payloads = 0;
  batches = 0;
  peakPendingBytes = 0;

  constructor(counter: Counter, options: DeliveredTextCounterOptions = {}) {
    this.#counter = counter;
    this.flushBytes = Math.max(1, options.flushBytes ?? 256 * 1024);
    this.maxOutstandingBytes = Math.max(this.flushBytes, options.maxOutstandingBytes ?? 4 * this.flushBytes);
    this.#onCongestion = options.onCongestion;
    this.#encoding = options.encoding;
  }

  /** Text bytes waiting (raw, escaped), not yet sent to a worker. */
  get pendingBytes(): number {
    return this.#pendingBytes;
  }

  /** Bytes sent to a worker and not yet counted. */
  get countingBytes(): number {
    return this.#countingBytes;
  }

  /** Bytes of buffer held (pending buffer capacity). */
  get retainedBytes(): number {
    return this.#pending.length;
  }

  get congested(): boolean {
    return this.#congested;
  }

  /** One content_block_delta payload (a copy is not needed: only the text bytes are copied). */
  push(data: Buffer): void {
    this.pushDelta(data, 0, data.length);
  }

  /** One content_block_delta payload, buf[start, end), valid only during the call. */
  pushDelta(buf: Buffer, start: number, end: number): void {
    if (this.#done) return;
    this.payloads++;
    if (!findDeltaText(buf, start, end, range) || range.end === range.start) return;
    this.#appendPiece(buf, range.start, range.end);
  }

  /**
   * A delta's text the caller already found: buf[start, end) are the raw bytes between a JSON
   * string's quotes, escapes and all (a Chat Completions chunk's `content`, relay/providers/openai/
   * chat-usage.ts), valid only during the call.
   */
  pushText(buf: Buffer, start: number, end: number): void {
    if (this.#done) return;
    this.payloads++;
    if (end > start) this.#appendPiece(buf, start, end);
  }

  #appendPiece(buf: Buffer, s: number, e: number): void {
    const n = e - s;
    const at = this.#pendingBytes;
    const need = at + n + 1;
    if (need > this.#pending.length) {
      // allocUnsafeSlow: never a slice of Node's shared pool, which posting to a worker would copy whole.
      const grown = Buffer.allocUnsafeSlow(Math.max(need, Math.min(this.flushBytes + 1024, Math.max(INITIAL_BYTES, this.#pending.length * 2))));
      if (at > 0) this.#pending.copy(grown, 0, 0, at);
      this.#pending = grown;
    }
    const p = this.#pending;
    if (n <= 16) for (let k = 0; k < n; k++) p[at + k] = buf[s + k]!;
    else buf.copy(p, at, s, s + n);
    p[at + n] = NL;
    this.#pendingBytes = need;
    if (need > this.peakPendingBytes) this.peakPendingBytes = need;
    if (need >= this.flushBytes) this.#flush(false);
  }

  /**
   * Tokens of all delivered text (trailing whitespace excluded): counts what is pending and waits for every batch. Ends the counter.
   * Rejects when a worker failed (the caller falls back to its own estimate).
   */
  async total(): Promise<number> {
    if (!this.#done) {
      this.#flush(true);
      this.#done = true;
    }
    while (this.#chain) await this.#chain;
    if (this.#error) throw this.#error;
    return this.#count;
  }

  /** The stream ended with usage: drop pending bytes without counting; batches in flight are ignored. */
  discard(): void {
    this.#done = true;
    this.#discarded = true;
    this.#pending = EMPTY;
    this.#pendingBytes = 0;
    this.#carry = '';
    if (this.#congested) {
      this.#congested = false;
      this.#onCongestion?.(false);
    }
  }

  #flush(final: boolean): void {
    const size = this.#pendingBytes;
    if (size === 0 && !final) return;
    if (size === 0 && !this.#chain && this.#carry === '') return; // nothing delivered, nothing carried: 0 tokens
    // The batch takes the pending buffer with it (and drops its last separator); the next piece starts a new one.
    const batch = size > 0 ? this.#pending.subarray(0, size - 1) : EMPTY;
    this.#pending = EMPTY;
    this.#pendingBytes = 0;
    this.#countingBytes += size;
    this.batches++;
    this.#checkCongestion();
    const previous = this.#chain;
    let current: Promise<void> | null = null;
    const run = async (): Promise<void> => {
      try {
        await previous; // always yields first: `current` is set before the finally block can run
        if (this.#error || this.#discarded) return;
        const r = await this.#counter.countDeltas(batch, this.#carry, final, this.#encoding);
        this.#count += r.count;
        this.#carry = r.carry;
      } catch (err) {
        this.#error = err;
      } finally {
        this.#countingBytes -= size;
        if (this.#chain === current) this.#chain = null;
        this.#checkCongestion();
      }
    };
    current = run();
    this.#chain = current;
  }

  #checkCongestion(): void {
    const congested = !this.#done && this.#pendingBytes + this.#countingBytes >= this.maxOutstandingBytes;
    if (congested === this.#congested) return;
    this.#congested = congested;
    this.#onCongestion?.(congested);
  }
}
