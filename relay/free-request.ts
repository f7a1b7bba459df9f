// One request to a free endpoint (GET /v1/models, POST /v1/messages/count_tokens): no quota moves, so
// its response side is a corked single-shot reply rather than an exchange. uWS lifecycle as in
// messages/messages-handler.ts: headers read synchronously (readHead), onAborted set before the first
// await (Reply's constructor), writes corked. The key checks are auth/key-check.ts's, as for
// /v1/messages.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { Logger } from '../infra/logger.js';
import type { Ratios } from '../core/pricing/ratios.js';
import { forwardedForOf, type ClientAddressResolver } from './auth/client-address.js';
import { extractApiKey, type KeyCheckContext, type KeyedRequest } from './auth/key-check.js';
import { RelayError, statusLine } from './errors.js';
import { closesConnection } from './connection-draining.js';
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
  constructor(res: HttpResponse) {
    this.res = res;
    res.onAborted(() => {
      this.aborted = true;
    });
  }
  json(status: number, body: string, retryAfter?: string): void {
    if (this.aborted || this.done) return;
    this.done = true;
    this.status = status;
    this.body = body;
    this.retryAfter = retryAfter;
    setImmediate(sendReply, this);
  }
  error(err: RelayError, retryAfter?: string): void {
    this.json(err.status, err.body(), retryAfter);
  }
}

function sendReply(reply: Reply): void {
  if (reply.aborted) return;
  const res = reply.res;
  try {
    res.cork(() => {
      res.writeStatus(statusLine(reply.status)).writeHeader('content-type', 'application/json');
      if (reply.retryAfter) res.writeHeader('retry-after', reply.retryAfter);
      res.end(reply.body, reply.status >= 400 || closesConnection());
    });
  } catch {
    // Answered meanwhile: a handler that threw after deferring this got guarded()'s 500 (server.ts).
    // Thrown out of an immediate, it would take the process down.
  }
}

export interface RequestHead extends KeyedRequest {
  declaredLength: number;
}

/** Everything needed from the uWS request, read before any await (req is invalid afterwards). */
export function readHead(ctx: FreeEndpointContext, res: HttpResponse, req: HttpRequest): RequestHead {
  const cl = req.getHeader('content-length');
  const ip = ctx.clientAddress.resolve(Buffer.from(res.getRemoteAddressAsText()).toString(), forwardedForOf(req));
  return { apiKey: extractApiKey(req), ip, declaredLength: cl ? Number(cl) : -1 };
}

/** Reads the whole body (copying each chunk: uWS reuses its buffers); null after a 413 or an abort. */
export function readBody(ctx: FreeEndpointContext, reply: Reply, head: RequestHead): Promise<Buffer | null> {
  return new Promise((resolve) => {
    if (head.declaredLength > ctx.maxBodyBytes) {
      reply.error(new RelayError('request_too_large'));
      return resolve(null);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    reply.res.onData((ab, isLast) => {
      // Answered already (an unknown key): the rest of the body is dropped unread.
      if (reply.done) return resolve(null);
      size += ab.byteLength;
      if (size > ctx.maxBodyBytes) {
        reply.error(new RelayError('request_too_large'));
        return resolve(null);
      }
      chunks.push(Buffer.from(new Uint8Array(ab)));
      if (isLast) resolve(Buffer.concat(chunks, size));
    });
  });
}
