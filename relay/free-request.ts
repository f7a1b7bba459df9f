// One request to a free endpoint (GET /v1/models, POST /v1/messages/count_tokens): no quota moves, so
// its response side is a corked single-shot reply rather than an exchange. uWS lifecycle as in
// messages/messages-handler.ts: headers read synchronously (readHead), onAborted set before the first
// await (Reply's constructor), writes corked. The key checks are auth/key-check.ts's, as for
// /v1/messages.
import { randomUUID } from 'node:crypto';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { Logger } from '../infra/logger.js';
import type { Ratios } from '../core/pricing/ratios.js';
import { forwardedForOf, type ClientAddressResolver } from './auth/client-address.js';
import { extractApiKey, type KeyCheckContext, type KeyedRequest } from './auth/key-check.js';
import { RelayError, statusLine } from './errors.js';
import { closesConnection } from './connection-draining.js';
import { writeCorsHeaders } from './cors.js';
import type { ChannelRegistry } from './routing/channel-registry.js';

export interface FreeEndpointContext extends KeyCheckContext {
  log: Logger;
  channels: ChannelRegistry;
  /** The price ratios in force: a model without a price is not offered (Ratios.priced). */
  ratios(): Ratios;
  clientAddress: ClientAddressResolver;
  maxBodyBytes: number;
}

/**
 * One request's response side: aborted tracking and corked single-shot answers, also those of
 * GET /health, of a path that does not exist and of a request refused for its framing (server.ts).
 *
 * Every answer waits for the next turn of the event loop. These routes can answer inside uWS's parser
 * callback, before it reads the connection's next request: at once from the headers, or in the
 * microtasks uWS runs before it returns (a key the cache knows needs no lookup). Written there and
 * kept alive, an answer let a client pipelining requests without reading have uWS buffer every one
 * (+167 MB for 1,000,000 `GET /a`), the idle timeout never firing while it sent; closing the
 * connection is no bound on its own, as uWS keeps parsing what it has read while its own buffer is not
 * empty. Deferred, the answer is pending when uWS parses a request read behind it, and uWS closes the
 * connection then. A kept-alive client waits for its answer: it keeps its connection. An error closes
 * it all the same (the client reconnects), so a client cannot go on collecting errors on one.
 */
export class Reply {
  aborted = false;
  done = false;
  readonly res: HttpResponse;
  /** The answer, kept for sendReply. */
  status = 0;
  body = '';
  retryAfter: string | undefined = undefined;
  /** The request body's reader (readBody), while the body is wanted. */
  sink: ((ab: ArrayBuffer, isLast: boolean) => void) | null = null;
  readonly declaredLength: number;
  received = 0;
  ended = false;
  /** The answer, held for the end of the body (BodyLinger). */
  linger: BodyLinger<Reply> | null = null;
  /** `declaredLength`: the request's Content-Length (-1: none); a body is read through the reply (readBody). */
  constructor(res: HttpResponse, declaredLength = -1) {
    this.res = res;
    this.declaredLength = declaredLength;
    res.onAborted(() => {
      this.aborted = true;
    });
    // Registered now, in uWS's handler, as uWS requires: an answer given before the body is all in
    // is then sent at its end (BodyLinger), whoever reads it.
    if (declaredLength > 0) {
      res.onData((ab, isLast) => {
        this.received += ab.byteLength;
        if (isLast) this.ended = true;
        this.linger?.chunk(isLast);
        this.sink?.(ab, isLast);
      });
    }
  }
  json(status: number, body: string, retryAfter?: string): void {
    if (this.aborted || this.done) return;
    this.done = true;
    this.status = status;
    this.body = body;
    this.retryAfter = retryAfter;
    this.linger = BodyLinger.hold<Reply>(this.declaredLength, this.received, this.ended, sendReply, this);
    if (this.linger === null) setImmediate(sendReply, this);
  }
  /** Errors in OpenAI's JSON instead of Anthropic's: the client asked in OpenAI's manner. */
  openai = false;
  /** A HEAD request: the status and headers only, with the body's length. */
  headOnly = false;
  /** Headers of this answer beyond content-type and CORS's, as name, value, name, value… */
  headers: readonly string[] | null = null;
  /** An answer without a body (204), e.g. a CORS preflight's: no content-type, `headers` sent. */
  noContent(headers: readonly string[]): void {
    this.headers = headers;
    this.json(204, '');
  }
  error(err: RelayError, retryAfter?: string): void {
    this.json(err.status, this.openai ? err.openaiBody() : err.body(this.requestId()), retryAfter);
  }
  #requestId = '';
  /**
   * The id of a refusal, made when first asked: the same in Anthropic's body (`request_id`) and in the
   * headers, what a user quotes to support (both SDKs read it as the error's request id).
   */
  requestId(): string {
    if (this.#requestId === '') this.#requestId = randomUUID();
    return this.#requestId;
  }
}

/**
 * Ends an answer without a body (a 204, a HEAD's). This uWS build writes `Content-Length:
 * 9223372036854775808` for an undefined length, and after any length above 0 it waits for that many
 * body bytes of its own: kept alive, the next request on the connection (a browser's POST after its
 * preflight, a load balancer's second HEAD) was reset; closing, the connection stayed open to the idle
 * timeout. Without arguments it sends no length and keeps the connection, so a HEAD's length goes as
 * a header; closing, it is given as 0 (a HEAD's `Content-Length` is advisory, RFC 9110 §9.3.2).
 */
function endWithoutBody(res: HttpResponse, length: number, close: boolean): void {
  if (close) {
    res.endWithoutBody(0, true);
    return;
  }
  if (length > 0) res.writeHeader('content-length', String(length));
  res.endWithoutBody();
}

function sendReply(reply: Reply): void {
  if (reply.aborted) return;
  const res = reply.res;
  try {
    res.cork(() => {
      res.writeStatus(statusLine(reply.status));
      if (reply.status !== 204) res.writeHeader('content-type', 'application/json');
      writeCorsHeaders(res);
      if (reply.retryAfter) res.writeHeader('retry-after', reply.retryAfter);
      const headers = reply.headers;
      if (headers !== null) for (let i = 0; i < headers.length; i += 2) res.writeHeader(headers[i]!, headers[i + 1]!);
      if (reply.status >= 400) {
        // What a user quotes to support, as on every other answer: both SDKs read it as the error's
        // request id (Anthropic's `request-id`, OpenAI's `x-request-id`); no provider was asked.
        const id = reply.requestId();
        res.writeHeader(reply.openai ? 'x-request-id' : 'request-id', id);
        res.writeHeader('x-gateway-request-id', id);
      }
      const close = reply.status >= 400 || closesConnection();
      if (reply.status === 204 || reply.headOnly) endWithoutBody(res, reply.status === 204 ? 0 : Buffer.byteLength(reply.body), close);
      else res.end(reply.body, close);
    });
  } catch {
    // Answered meanwhile: a handler that threw after deferring this got guarded()'s 500 (server.ts).
    // Thrown out of an immediate, it would take the process down.
  }
}

/**
 * Most bytes of a refused request's body read and dropped so that its answer can be read: a 9 MiB
 * body refused 413 (or a 4 MiB one refused 401) was answered and its connection closed while the
 * client still sent it, and the client's kernel, handed a reset, gave the official SDKs a connection
 * error (EPIPE) instead of the answer, which they then retried by sending the body again. Past this
 * many bytes still to come the connection is closed at once, as before: nobody waits for a gigabyte.
 */
export const LINGER_MAX_BYTES = 16 * 1024 * 1024;

/**
 * How long a held answer waits for the next byte of the body: a client that promised a body and sends
 * none (or stalls) gets its answer then, its connection closed, rather than holding it to the idle
 * timeout.
 */
export const LINGER_STALL_MS = 500;

/**
 * An answer held for the end of the request's body (lingering close, as nginx does it): made only when
 * an answer is ready before a body of known length (Content-Length) is all in, and at most
 * LINGER_MAX_BYTES of it is still to come; the answer goes at the body's end, or once no byte has come
 * for LINGER_STALL_MS. Made only then, so that a request answered after its body allocates nothing.
 */
export class BodyLinger<T> {
  readonly #send: (target: T) => void;
  readonly #target: T;
  #timer: NodeJS.Timeout | null;

  /** The held answer, or null when it is to be sent now: `send(target)` writes it (in a later turn), once. */
  static hold<T>(declaredLength: number, received: number, ended: boolean, send: (target: T) => void, target: T): BodyLinger<T> | null {
    if (ended || declaredLength <= received || declaredLength - received > LINGER_MAX_BYTES) return null;
    return new BodyLinger(send, target);
  }

  private constructor(send: (target: T) => void, target: T) {
    this.#send = send;
    this.#target = target;
    this.#timer = setTimeout(() => this.#release(), LINGER_STALL_MS);
  }

  /** A body chunk arrived: the answer goes at the body's end, and waits on while bytes come. */
  chunk(isLast: boolean): void {
    if (this.#timer === null) return;
    if (isLast) this.#release();
    else this.#timer.refresh();
  }

  #release(): void {
    if (this.#timer === null) return;
    clearTimeout(this.#timer);
    this.#timer = null;
    setImmediate(this.#send, this.#target);
  }
}

/** The request's Content-Length, -1 without one: a body is read through the reply (readBody) only with one. */
export function declaredLengthOf(req: Pick<HttpRequest, 'getHeader'>): number {
  const cl = req.getHeader('content-length');
  return cl ? Number(cl) : -1;
}

export interface RequestHead extends KeyedRequest {
  declaredLength: number;
}

/** Everything needed from the uWS request, read before any await (req is invalid afterwards). */
export function readHead(ctx: FreeEndpointContext, res: HttpResponse, req: HttpRequest): RequestHead {
  const ip = ctx.clientAddress.resolve(Buffer.from(res.getRemoteAddressAsText()).toString(), forwardedForOf(req));
  return { apiKey: extractApiKey(req), ip, declaredLength: declaredLengthOf(req) };
}

/** Reads the whole body (copying each chunk: uWS reuses its buffers); null after a 413 or an abort. */
export function readBody(ctx: FreeEndpointContext, reply: Reply, head: RequestHead): Promise<Buffer | null> {
  return new Promise((resolve) => {
    if (head.declaredLength > ctx.maxBodyBytes) {
      reply.error(new RelayError('request_too_large'));
      return resolve(null);
    }
    // Without a Content-Length (chunked), the reply registered no reader: this one, now, in uWS's handler.
    if (head.declaredLength <= 0) reply.res.onData((ab, isLast) => reply.sink?.(ab, isLast));
    const chunks: Buffer[] = [];
    let size = 0;
    reply.sink = (ab, isLast) => {
      // Answered already (an unknown key): the rest of the body is dropped unread.
      if (reply.done) return resolve(null);
      size += ab.byteLength;
      if (size > ctx.maxBodyBytes) {
        reply.error(new RelayError('request_too_large'));
        return resolve(null);
      }
      chunks.push(Buffer.from(new Uint8Array(ab)));
      if (isLast) resolve(Buffer.concat(chunks, size));
    };
  });
}
