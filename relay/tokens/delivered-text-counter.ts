// Counts the tokens of the text a stream delivered, for streams that end without usage (cut short),
// in bounded memory however long the stream.
//
// Fed with the raw `data:` payload of each content_block_delta event (SseUsageParser.onContentDelta),
// it copies the payload into a pending batch; once the batch reaches `flushBytes` it goes to a worker,
// which parses the payloads, takes their text (relay/tokens/delta-text.ts) and counts it. Each batch's
// text is counted up to its last segment end (a word boundary; bpe-count.ts) and the rest is carried
// into the next batch, so the sum of the batch counts is exactly the count of the whole text (with the
// whitespace at its very end left out: it would begin the next, undelivered token; so K deltas "tok "
// of the mock count exactly K).
// Batches are counted one after the other, in order.
//
// Memory: pending bytes stay below flushBytes + one payload. Batches sent and not yet counted are held
// too; when pending plus those reach `maxOutstandingBytes`, `congested` turns true and onCongestion(true)
// is called (pause the provider's body), and onCongestion(false) once they drop below it again.
import type { TokenCounter } from './token-counter.js';

export interface DeliveredTextCounterOptions {
  /** Pending bytes that make a batch. Default 16 KiB. */
  flushBytes?: number;
  /** Pending + counting bytes above which the counter reports congestion. Default 4 × flushBytes. */
  maxOutstandingBytes?: number;
  /** Called when congestion starts (true) and ends (false). */
  onCongestion?: (congested: boolean) => void;
}

type Counter = Pick<TokenCounter, 'countDeltas'>;

export class DeliveredTextCounter {
  readonly flushBytes: number;
  readonly maxOutstandingBytes: number;
  readonly #counter: Counter;
  readonly #onCongestion: ((congested: boolean) => void) | undefined;

  #pending: Buffer;
  #pendingBytes = 0;
  /** Bytes of batches sent to a worker and not yet counted. */
  #countingBytes = 0;
  #carry = '';
  #count = 0;
  #chain: Promise<void> = Promise.resolve();
  #error: unknown = null;
  #done = false;
  #discarded = false;
  #congested = false;
  /** Payloads received, and the most pending bytes seen (for tests and metrics). */
  payloads = 0;
  peakPendingBytes = 0;

  constructor(counter: Counter, options: DeliveredTextCounterOptions = {}) {
    this.#counter = counter;
    this.flushBytes = Math.max(1, options.flushBytes ?? 16 * 1024);
    this.maxOutstandingBytes = Math.max(this.flushBytes, options.maxOutstandingBytes ?? 4 * this.flushBytes);
    this.#onCongestion = options.onCongestion;
    this.#pending = Buffer.allocUnsafe(0);
  }

  get pendingBytes(): number {
    return this.#pendingBytes;
  }

  get congested(): boolean {
    return this.#congested;
  }

  /** One content_block_delta payload; the bytes are copied (the caller's buffer may be reused). */
  push(data: Buffer): void {
    if (this.#done) return;
    this.payloads++;
    const need = this.#pendingBytes + data.length + 1;
    if (need > this.#pending.length) {
      // Grows to at most flushBytes + one payload; the buffer is handed over at each flush.
      // allocUnsafeSlow: never a slice of Node's shared pool, which posting to a worker would copy whole.
      const grown = Buffer.allocUnsafeSlow(Math.max(need, Math.min(this.flushBytes + 1024, Math.max(1024, this.#pending.length * 2))));
      this.#pending.copy(grown, 0, 0, this.#pendingBytes);
      this.#pending = grown;
    }
    this.#pendingBytes += data.copy(this.#pending, this.#pendingBytes);
    this.#pending[this.#pendingBytes++] = 0x0a;
    if (this.#pendingBytes > this.peakPendingBytes) this.peakPendingBytes = this.#pendingBytes;
    if (this.#pendingBytes >= this.flushBytes) this.#flush(false);
    else this.#checkCongestion();
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
    await this.#chain;
    if (this.#error) throw this.#error;
    return this.#count;
  }

  /** The stream ended with usage: drop pending bytes without counting; batches in flight are ignored. */
  discard(): void {
    this.#done = true;
    this.#discarded = true;
    this.#pending = Buffer.allocUnsafe(0);
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
    // The batch takes the pending buffer with it: the next payload starts a new one.
    const batch = this.#pending.subarray(0, size);
    this.#pending = Buffer.allocUnsafe(0);
    this.#pendingBytes = 0;
    this.#countingBytes += size;
    this.#checkCongestion();
    this.#chain = this.#chain.then(async () => {
      try {
        if (this.#error) return;
        if (this.#discarded) return;
        const r = await this.#counter.countDeltas(batch, this.#carry, final);
        this.#count += r.count;
        this.#carry = r.carry;
      } catch (err) {
        this.#error = err;
      } finally {
        this.#countingBytes -= size;
        this.#checkCongestion();
      }
    });
  }

  #checkCongestion(): void {
    const congested = !this.#done && this.#pendingBytes + this.#countingBytes >= this.maxOutstandingBytes;
    if (congested === this.#congested) return;
    this.#congested = congested;
    this.#onCongestion?.(congested);
  }
}
