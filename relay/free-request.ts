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

/** One request's response side: aborted tracking and corked single-shot answers. */
export class Reply {
  aborted = false;
  done = false;
  readonly res: HttpResponse;
  constructor(res: HttpResponse) {
    this.res = res;
    res.onAborted(() => {
      this.aborted = true;
    });
  }
  json(status: number, body: string, retryAfter?: string): void {
    if (this.aborted || this.done) return;
    this.done = true;
    this.res.cork(() => {
      this.res.writeStatus(statusLine(status)).writeHeader('content-type', 'application/json');
      if (retryAfter) this.res.writeHeader('retry-after', retryAfter);
      this.res.end(body, closesConnection());
    });
  }
  error(err: RelayError, retryAfter?: string): void {
    this.json(err.status, err.body(), retryAfter);
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
