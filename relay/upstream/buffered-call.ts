// One call to a provider whose answer the relay reads whole (a request that did not ask to stream),
// made with undici's dispatch() and a handler of its own instead of request().
//
// Why: request() wraps every answer in a Readable stream inside an AsyncResource and parses all its
// headers into an object, and reading the body whole then goes through the stream's consume
// machinery. An answer read whole needs none of that: its chunks are kept as they come and joined
// once, and the 2-3 headers the relay reads are looked up in undici's raw list. Measured on its own
// (docs/performance.md, "A JSON answer read without a stream"): 37-49 µs of client CPU per call with
// request() + arrayBuffer(), 25-28 µs this way. Streams keep request(): their body is the Readable
// that stream-relay.ts pauses and resumes.
//
// Behaviour kept from request(): the same errors reach the caller (undici's, or the DOMException
// AbortError that an aborted AbortSignal gives), headersTimeout / bodyTimeout come from the options,
// 1xx answers are skipped. As with request(), a failure before the headers rejects the call, and one
// after them is the body's: the answer comes with its status, headers and `bodyError`, so the caller
// tells a provider that never answered from an answer whose body broke. A body over `maxBytes` stops
// the call (the provider's connection is closed) and is returned `truncated`: a misbehaving provider
// or proxy must not make the relay buffer without limit.
import type { Dispatcher } from 'undici';

export interface BufferedAnswer {
  readonly statusCode: number;
  /** As undici reads them: name, value, name, value… */
  readonly rawHeaders: readonly Buffer[];
  /** The body; only what came before the bound when `truncated`. */
  readonly body: Buffer;
  readonly truncated: boolean;
  /** The body failed after the headers (connection lost, body timeout, cancelled): `body` is incomplete. */
  readonly bodyError: Error | null;
  /** performance.now() when the answer's headers arrived. */
  readonly headersAt: number;
}

/** The first value of a header of a raw list (names compared without case), '' when absent. */
export function rawHeader(raw: readonly Buffer[], name: string): string {
  const len = name.length;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const n = raw[i]!;
    // Lengths first: most names are ruled out without decoding them.
    if (n.length === len && n.toString('latin1').toLowerCase() === name) return raw[i + 1]!.toString('latin1');
  }
  return '';
}

/**
 * Why a body read was cut (its bound passed): undici's body timeout restarts with every chunk, so a
 * provider trickling an error's text or a JSON answer a byte at a time held the exchange, its
 * reservation and a pooled connection for as long as it liked. A BufferedCall's default; the streamed
 * answer's reads (provider-response.ts) too.
 */
export const BODY_TOO_SLOW = new Error('the provider\'s body did not end in time');

/** Thrown while truncating: closes the provider's connection without surfacing as the call's error. */
const OVER_BOUND = new Error('provider answer over the size bound');

/**
 * The handler of one dispatched call (undici's legacy handler interface, which undici's own client
 * calls directly, without a wrapper). `answer` settles once: with the answer, or with the call's error.
 */
export class BufferedCall implements Dispatcher.DispatchHandler {
  readonly answer: Promise<BufferedAnswer>;
  /** The answer's status once its headers arrived; 0 before. */
  statusCode = 0;
  #resolve!: (a: BufferedAnswer) => void;
  #reject!: (err: unknown) => void;
  #settled = false;
  readonly #maxBytes: number;
  #abortCall: ((err: Error) => void) | null = null;
  /** abort() came before undici connected the call: it is aborted as soon as it does. */
  #abortReason: Error | null = null;
  #rawHeaders: Buffer[] = [];
  #headersAt = 0;
  #chunks: Buffer[] = [];
  #bytes = 0;
  readonly #bodyWithinMs: number;
  readonly #tooSlow: Error;

  /**
   * `bodyWithinMs`: the longest the body may take after the headers; a chunk that comes later cuts the
   * call with `tooSlow` (its `bodyError`). undici's body timeout restarts with every chunk, and the
   * reservation heartbeat, which cuts a body that went silent, beats only every third of the
   * reservation TTL: a provider trickling its answer was read to its end however long it took.
   */
  constructor(maxBytes: number, bodyWithinMs = Infinity, tooSlow: Error = BODY_TOO_SLOW) {
    this.#maxBytes = maxBytes;
    this.#bodyWithinMs = bodyWithinMs;
    this.#tooSlow = tooSlow;
    this.answer = new Promise<BufferedAnswer>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
  }

  /**
   * Cancels the call (the client left) with a DOMException AbortError: the answer rejects with it
   * before the headers, and comes with it as `bodyError` after them. Nothing once it has settled.
   */
  abort(): void {
    this.cut(new DOMException('This operation was aborted', 'AbortError') as unknown as Error);
  }

  /**
   * performance.now() when the answer's headers arrived while its body is still coming; 0 before the
   * headers and once the call has settled. What the reservation heartbeat bounds (a provider that
   * trickles a body restarts undici's body timeout with every byte).
   */
  get bodyPendingSince(): number {
    return this.#settled ? 0 : this.#headersAt;
  }

  /** Stops the call with `reason` (abort()'s, or a body that is taking too long): as abort() does, with that error. Nothing once settled. */
  cut(reason: Error): void {
    if (this.#settled || this.#abortReason) return;
    this.#abortReason = reason;
    this.#abortCall?.(reason);
  }

  onConnect(abort: (err?: Error) => void): void {
    if (this.#abortReason) return abort(this.#abortReason);
    this.#abortCall = abort;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    if (statusCode < 200) return true;
    this.statusCode = statusCode;
    this.#rawHeaders = rawHeaders;
    this.#headersAt = performance.now();
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.#bodyWithinMs !== Infinity && performance.now() - this.#headersAt > this.#bodyWithinMs) {
      this.cut(this.#tooSlow);
      return false;
    }
    const room = this.#maxBytes - this.#bytes;
    if (chunk.length > room) {
      if (room > 0) this.#chunks.push(chunk.subarray(0, room));
      this.#bytes = this.#maxBytes;
      this.#finish(true);
      this.#abortCall?.(OVER_BOUND);
      return false;
    }
    this.#chunks.push(chunk);
    this.#bytes += chunk.length;
    return true;
  }

  onComplete(): void {
    this.#finish(false);
  }

  onError(err: Error): void {
    if (this.#settled) return;
    if (this.statusCode !== 0) return this.#finish(false, err);
    this.#settled = true;
    this.#chunks = [];
    this.#reject(err);
  }

  onUpgrade(): void {
    this.onError(new Error('provider answered with a protocol upgrade'));
  }

  #finish(truncated: boolean, bodyError: Error | null = null): void {
    if (this.#settled) return;
    this.#settled = true;
    const chunks = this.#chunks;
    this.#chunks = [];
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.#bytes);
    this.#resolve({ statusCode: this.statusCode, rawHeaders: this.#rawHeaders, body, truncated, bodyError, headersAt: this.#headersAt });
  }
}
