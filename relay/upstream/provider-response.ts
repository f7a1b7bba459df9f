// Reading a provider's answer: its headers as one string each, and an error body with a size bound
// (a misbehaving provider or proxy must not make the relay buffer without limit). An answer comes
// either streamed (undici's request(): a stream request, whose body stream-relay.ts pipes) or read
// whole (buffered-call.ts: every other request); ProviderAnswer is what the relay reads of either.
import { pipeline, Readable } from 'node:stream';
import { promisify } from 'node:util';
import { brotliDecompress, constants as zlib, createBrotliDecompress, createUnzip, unzip } from 'node:zlib';
import type { Dispatcher } from 'undici';
import { BODY_TOO_SLOW, rawHeader, type BufferedAnswer } from './buffered-call.js';

/** Largest error or JSON body read from a provider before it is passed on. */
export const MAX_UPSTREAM_JSON = 32 * 1024 * 1024;

export function headerOf(v: string | string[] | undefined): string {
  return Array.isArray(v) ? (v[0] ?? '') : (v ?? '');
}

/**
 * The body, at most MAX_UPSTREAM_JSON bytes of it: past that the body is destroyed and what was read
 * is returned (`over` 'truncate': an error's text) or OVER_BOUND thrown (`over` 'throw': an answer).
 */
async function readBounded(body: Readable, over: 'truncate' | 'throw'): Promise<Buffer> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of body) {
    if (size + (chunk as Buffer).length > MAX_UPSTREAM_JSON) {
      body.destroy();
      if (over === 'throw') throw OVER_BOUND;
      break;
    }
    size += (chunk as Buffer).length;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks, size);
}

/**
 * `read` of the body, the body destroyed (the read rejecting with BODY_TOO_SLOW, or a first-chunk wait
 * answering null) when it has not ended within `withinMs` of `since` (the answer's headers): a read
 * begun later (after the wait for a decoded body's first byte) does not get the whole bound again.
 */
async function withinBound<T>(body: Readable, withinMs: number, since: number, read: () => Promise<T>): Promise<T> {
  if (!(withinMs > 0 && Number.isFinite(withinMs))) return read();
  const timer = setTimeout(() => body.destroy(BODY_TOO_SLOW), Math.max(0, since + withinMs - performance.now()));
  try {
    return await read();
  } finally {
    clearTimeout(timer);
  }
}

export interface ProviderAnswer {
  readonly statusCode: number;
  /** performance.now() when its headers arrived. */
  readonly headersAt: number;
  /** A header's first value ('' when absent); `name` in lower case. */
  header(name: string): string;
  /**
   * The body as text, at most MAX_UPSTREAM_JSON bytes of it: an error's. Rejects when the body failed,
   * or (a streamed answer) did not end within `withinMs`.
   */
  text(withinMs?: number): Promise<string>;
  /** The whole body; rejects when it could not be read, is over MAX_UPSTREAM_JSON, or (a streamed answer) did not end within `withinMs`. */
  bytes(withinMs?: number): Promise<Buffer>;
  /** The body as a stream: an SSE answer's. */
  stream(): Readable;
}

/** An answer of undici's request(): its body is read as it streams in. */
export class StreamedAnswer implements ProviderAnswer {
  readonly statusCode: number;
  readonly headersAt: number;
  readonly #res: Dispatcher.ResponseData;
  /** The body read: undici's, or a decoder piped from it (decoded()). */
  readonly #body: Readable;

  constructor(res: Dispatcher.ResponseData, body: Readable = res.body, headersAt = performance.now()) {
    this.#res = res;
    this.#body = body;
    this.statusCode = res.statusCode;
    this.headersAt = headersAt;
  }

  header(name: string): string { return headerOf(this.#res.headers[name]); }
  async text(withinMs = Infinity): Promise<string> { return (await withinBound(this.#body, withinMs, this.headersAt, () => readBounded(this.#body, 'truncate'))).toString('utf8'); }
  /** Bounded like every other read (a stream request answered with JSON, by a provider that ignores `stream`). */
  bytes(withinMs = Infinity): Promise<Buffer> { return withinBound(this.#body, withinMs, this.headersAt, () => readBounded(this.#body, 'throw')); }
  stream(): Readable { return this.#body; }

  /**
   * firstChunk() of the body, the body destroyed with BODY_TOO_SLOW (and null returned) when none came
   * within `withinMs` of the headers. A decoder gives its first byte only once it has read a block's
   * code tables (some 50 bytes of gzip): a provider trickling those held the wait unbounded, undici's
   * body timeout restarting with every byte, and the body's own bound began only after it.
   */
  firstChunk(withinMs = Infinity): Promise<Buffer | null> {
    return withinBound(this.#body, withinMs, this.headersAt, () => firstChunk(this.#body));
  }

  /**
   * The same answer, its body decoded as it streams in. Destroying the decoder destroys undici's body
   * (the provider is cancelled), and a failure of undici's body is the decoder's.
   */
  decoded(coding: Exclude<ContentCoding, 'identity'>): StreamedAnswer {
    const decoder = coding === 'br' ? createBrotliDecompress() : createUnzip({ finishFlush: zlib.Z_SYNC_FLUSH });
    pipeline(this.#body, decoder, ignore);
    return new StreamedAnswer(this.#res, decoder, this.headersAt);
  }
}

/** pipeline's callback: its error reaches the decoder's own 'error', which the exchange listens to. */
function ignore(): void {}

export const OVER_BOUND = new Error(`provider answer over ${MAX_UPSTREAM_JSON} bytes`);

/** An answer read whole (buffered-call.ts). */
export class WholeAnswer implements ProviderAnswer {
  readonly statusCode: number;
  readonly headersAt: number;
  readonly #a: BufferedAnswer;

  constructor(a: BufferedAnswer) {
    this.#a = a;
    this.statusCode = a.statusCode;
    this.headersAt = a.headersAt;
  }

  header(name: string): string { return rawHeader(this.#a.rawHeaders, name); }
  text(): Promise<string> { return this.#a.bodyError ? Promise.reject(this.#a.bodyError) : Promise.resolve(this.#a.body.toString('utf8')); }
  bytes(): Promise<Buffer> {
    if (this.#a.bodyError) return Promise.reject(this.#a.bodyError);
    return this.#a.truncated ? Promise.reject(OVER_BOUND) : Promise.resolve(this.#a.body);
  }
  stream(): Readable { return Readable.from([this.#a.body]); }

  /** The whole body, read as bytes() would give it; null when that would reject. */
  body(): Buffer | null {
    return this.#a.bodyError || this.#a.truncated ? null : this.#a.body;
  }

  /** The same answer, its whole body decoded (in the thread pool), at most MAX_UPSTREAM_JSON bytes of it. Rejects when it cannot be. */
  async decoded(coding: Exclude<ContentCoding, 'identity'>): Promise<WholeAnswer> {
    const a = this.#a;
    if (a.bodyError || a.truncated) return this;
    const options = { maxOutputLength: MAX_UPSTREAM_JSON };
    const body = coding === 'br' ? await brotliAsync(a.body, options) : await unzipAsync(a.body, { ...options, finishFlush: zlib.Z_SYNC_FLUSH });
    return new WholeAnswer({ ...a, body });
  }
}

const unzipAsync = promisify(unzip);
const brotliAsync = promisify(brotliDecompress);

/**
 * The content-codings the relay decodes. It asks for none (`accept-encoding: identity`, the
 * providers' headers), but a proxy in front of a provider may compress all the same: passed on, the
 * client could not read the bytes, and the meters read nothing in them to bill. `gzip` and `deflate`
 * are both read by zlib's unzip, which tells the gzip and zlib wrappers apart (a proxy may mislabel one
 * as the other); a raw deflate stream fails like a corrupt one.
 */
export type ContentCoding = 'identity' | 'gzip' | 'deflate' | 'br';

/** The coding a content-encoding header names; null for one the relay cannot decode (zstd, a list of several). */
export function contentCodingOf(header: string): ContentCoding | null {
  if (header === '') return 'identity';
  switch (header.trim().toLowerCase()) {
    case '': case 'identity': return 'identity';
    case 'gzip': case 'x-gzip': return 'gzip';
    case 'deflate': return 'deflate';
    case 'br': return 'br';
    default: return null;
  }
}

const EVENT_STREAM = 'text/event-stream';

/**
 * Whether a content-type names text/event-stream, media types being case-insensitive
 * (`Text/Event-Stream; charset=UTF-8`), without building a lower-cased copy: it is read for every
 * streamed answer.
 */
export function isEventStream(contentType: string): boolean {
  let i = 0;
  while (i < contentType.length && (contentType.charCodeAt(i) === 0x20 || contentType.charCodeAt(i) === 0x09)) i++;
  if (contentType.length - i < EVENT_STREAM.length) return false;
  for (let k = 0; k < EVENT_STREAM.length; k++) {
    // ASCII letters only differ by 0x20 between cases; '/' and '-' compare as they are.
    const c = contentType.charCodeAt(i + k);
    if ((c >= 0x41 && c <= 0x5a ? c | 0x20 : c) !== EVENT_STREAM.charCodeAt(k)) return false;
  }
  const next = contentType.charCodeAt(i + EVENT_STREAM.length);
  return Number.isNaN(next) || next === 0x3b /* ; */ || next === 0x20 || next === 0x09;
}

/** What an SSE stream's first line can begin with: a field name, or `:` for a comment. */
const SSE_FIELDS = ['event:', 'data:', 'id:', 'retry:', ':'].map((f) => Buffer.from(f));

/**
 * Whether a body begins as an SSE stream does (after a BOM and blank lines: a field name or a comment),
 * for an answer whose media type does not say (none, `application/octet-stream`): `undecided` when
 * the bytes end before it can tell (blanks only, or the start of a field name).
 */
export function looksLikeSse(buf: Buffer, undecided: boolean): boolean {
  let i = buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf ? 3 : 0;
  while (i < buf.length && (buf[i] === 0x20 || buf[i] === 0x09 || buf[i] === 0x0a || buf[i] === 0x0d)) i++;
  if (i === buf.length) return undecided;
  const rest = buf.length - i;
  for (const field of SSE_FIELDS) {
    const n = Math.min(rest, field.length);
    if (buf.compare(field, 0, n, i, i + n) === 0) return n === field.length || undecided;
  }
  return false;
}

/**
 * The first chunk of a body (for looksLikeSse), left in it to be read again: the body is paused with
 * the chunk put back. null when the body ended or failed first.
 */
export function firstChunk(body: Readable): Promise<Buffer | null> {
  if (body.destroyed || body.readableEnded) return Promise.resolve(null);
  return new Promise((resolve) => {
    const done = (chunk: Buffer | null): void => {
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', onEnd);
      body.off('close', onEnd);
      resolve(chunk);
    };
    const onData = (chunk: Buffer): void => {
      body.pause();
      body.unshift(chunk);
      done(chunk);
    };
    const onEnd = (): void => done(null);
    body.on('data', onData);
    body.once('end', onEnd);
    body.once('error', onEnd);
    body.once('close', onEnd);
  });
}
