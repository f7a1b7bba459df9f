// The console's request lines ("incoming request", "request completed", errors): Fastify's, with the
// path alone. A query string may carry a secret (a redemption code searched for, an OIDC callback's
// code, an epay notice's signature) and the logger's redaction goes by field names, never into a URL.
// The lines get plain values, not Fastify's request and reply: the redaction's walk would copy those
// (their url, ip and statusCode are getters the copy loses) and walk through sockets and servers.
import { LogController } from 'fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';

interface RequestLike {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
  raw?: { method?: string; url?: string };
  remoteAddress?: string;
  remotePort?: number;
}

export interface RequestLogFields {
  method: string | undefined;
  url: string;
  host: string | undefined;
  remoteAddress: string | undefined;
  remotePort: number | undefined;
}

/**
 * `req` of a log line. Also the logger's `req` serializer, so it takes what it returns (a line already
 * built here) as well as a request anything else logs.
 */
export function requestLogFields(req: RequestLike): RequestLogFields {
  const url = req.url ?? req.raw?.url ?? '';
  const query = url.indexOf('?');
  return {
    method: req.method ?? req.raw?.method,
    url: query === -1 ? url : url.slice(0, query),
    host: req.host,
    remoteAddress: req.ip ?? req.remoteAddress,
    remotePort: req.socket?.remotePort ?? req.remotePort,
  };
}

export class ConsoleLogController extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    if (this.isLogDisabled(request)) return;
    request.log.info({ req: requestLogFields(request) }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return;
    const res = { statusCode: reply.statusCode };
    if (error) reply.log.error({ res, err: error, responseTime: reply.elapsedTime }, 'request errored');
    else reply.log.info({ res, responseTime: reply.elapsedTime }, 'request completed');
  }

  override defaultErrorLog(error: Error, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return;
    const res = { statusCode: reply.statusCode };
    if (reply.statusCode >= 500) reply.log.error({ req: requestLogFields(request), res, err: error }, error?.message);
    else reply.log.info({ res, err: error }, error?.message);
  }

  override routeNotFound(request: FastifyRequest): void {
    if (this.isLogDisabled(request)) return;
    const { method, url } = requestLogFields(request);
    request.log.info(`Route ${method}:${url} not found`);
  }

  override writeHeadError(error: Error, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return;
    reply.log.warn({ req: requestLogFields(request), res: { statusCode: reply.statusCode }, err: error }, error?.message);
  }
}
