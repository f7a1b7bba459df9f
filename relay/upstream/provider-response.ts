// Reading a provider's answer: its headers as one string each, and an error body with a size bound
// (a misbehaving provider or proxy must not make the relay buffer without limit). An answer comes
// either streamed (undici's request(): a stream request, whose body stream-relay.ts pipes) or read
// whole (buffered-call.ts: every other request); ProviderAnswer is what the relay reads of either.
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { rawHeader, type BufferedAnswer } from './buffered-call.js';

/** Largest error or JSON body read from a provider before it is passed on. */
export const MAX_UPSTREAM_JSON = 32 * 1024 * 1024;

export function headerOf(v: string | string[] | undefined): string {
  return Array.isArray(v) ? (v[0] ?? '') : (v ?? '');
}

/**
 * The body, at most MAX_UPSTREAM_JSON bytes of it: past that the body is destroyed and what was read
 * is returned (`over` 'truncate': an error's text) or OVER_BOUND thrown (`over` 'throw': an answer).
 */
async function readBounded(body: Dispatcher.ResponseData['body'], over: 'truncate' | 'throw'): Promise<Buffer> {
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

export interface ProviderAnswer {
  readonly statusCode: number;
  /** performance.now() when its headers arrived. */
  readonly headersAt: number;
  /** A header's first value ('' when absent); `name` in lower case. */
  header(name: string): string;
  /** The body as text, at most MAX_UPSTREAM_JSON bytes of it: an error's. Rejects when the body failed. */
  text(): Promise<string>;
  /** The whole body; rejects when it could not be read, or is over MAX_UPSTREAM_JSON. */
  bytes(): Promise<Buffer>;
  /** The body as a stream: an SSE answer's. */
  stream(): Readable;
}

/** An answer of undici's request(): its body is read as it streams in. */
export class StreamedAnswer implements ProviderAnswer {
  readonly statusCode: number;
  readonly headersAt = performance.now();
  readonly #res: Dispatcher.ResponseData;

  constructor(res: Dispatcher.ResponseData) {
    this.#res = res;
    this.statusCode = res.statusCode;
  }

  header(name: string): string { return headerOf(this.#res.headers[name]); }
  async text(): Promise<string> { return (await readBounded(this.#res.body, 'truncate')).toString('utf8'); }
  /** Bounded like every other read (a stream request answered with JSON, by a provider that ignores `stream`). */
  bytes(): Promise<Buffer> { return readBounded(this.#res.body, 'throw'); }
  stream(): Readable { return this.#res.body; }
}

const OVER_BOUND = new Error(`provider answer over ${MAX_UPSTREAM_JSON} bytes`);

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
}
