// The console API as a Fastify instance (no listen: main.ts listens, tests inject). One module per
// concern: routes/* register endpoints, auth/* credentials, http/* envelope, errors and validation.
import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import { parseTrustedProxies } from '../infra/config.js';
import { rawJsonProblem, SCAN_DEPTH_MAX } from '../infra/json/raw-json-scan.js';
import { createLogger } from '../infra/logger.js';
import { isDatabaseBusy, isDatabaseUnavailable } from '../infra/postgres/unavailable.js';
import { isRedisUnavailable } from '../infra/redis/unavailable.js';
import { registerBrowserSession } from './auth/browser-session.js';
import { makeRequireUser } from './auth/require-user.js';
import { type ConsoleDeps, createContext } from './context.js';
import { fail } from './http/envelope.js';
import { Api } from './http/api.js';
import { ConsoleError, type ErrorCode, isConsoleError } from './http/errors.js';
import { ConsoleLogController, requestLogFields } from './http/request-log.js';
import { registerWebConsole, serveWebConsole, webConsoleDir } from './http/web-console.js';
import { registerChannelRoutes } from './routes/channel.js';
import { registerLogRoutes } from './routes/log.js';
import { registerAdminLogRoutes } from './routes/log-admin.js';
import { registerMetaRoutes } from './routes/meta.js';
import { registerOptionRoutes } from './routes/option.js';
import { registerPricingRoutes } from './routes/pricing.js';
import { registerRedemptionRoutes } from './routes/redemption.js';
import { registerTokenRoutes } from './routes/token.js';
import { registerTopupRoutes } from './routes/topup.js';
import { registerUserRoutes } from './routes/user.js';

/** Console bodies are small JSON objects. */
const CONSOLE_BODY_LIMIT = 1024 * 1024;
/**
 * A body's nesting (the routes' input guard refuses past 32 levels, naming the field: this bounds
 * what it walks), its object keys and its values, all objects together: the largest the console
 * takes (a price table of a few thousand models) holds a few thousand of each. Unbounded, 20
 * anonymous login bodies of 1 MB of keys at once held every console request 2.2 s in JSON.parse, and
 * of nested arrays 7.6 s (infra/json/raw-json-scan.ts).
 */
const CONSOLE_JSON_DEPTH = SCAN_DEPTH_MAX;
const CONSOLE_JSON_KEYS = 20_000;
const CONSOLE_JSON_VALUES = 50_000;

/** A JSON body, or the 400 that refuses it: nested too deeply, too many keys, a key named twice, not JSON. */
function parseJsonBody(body: Buffer): unknown {
  const problem = rawJsonProblem(body, CONSOLE_JSON_DEPTH, CONSOLE_JSON_KEYS, CONSOLE_JSON_VALUES);
  if (problem?.kind === 'too_deep') return new ConsoleError('INVALID_JSON', `request body nests objects and arrays more than ${CONSOLE_JSON_DEPTH} levels deep`);
  if (problem?.kind === 'too_many_keys') return new ConsoleError('INVALID_JSON', `request body holds more than ${CONSOLE_JSON_KEYS.toLocaleString('en-US')} object keys`);
  if (problem?.kind === 'too_many_values') return new ConsoleError('INVALID_JSON', `request body holds more than ${CONSOLE_JSON_VALUES.toLocaleString('en-US')} JSON values`);
  // JSON.parse keeps the last of two equal keys; a console in front or a client's own checks may read the first.
  if (problem?.kind === 'repeated_key') return new ConsoleError('INVALID_JSON', `request body names the key ${JSON.stringify(problem.key.slice(0, 64))} twice in one object`);
  let text: string;
  try {
    text = STRICT_UTF8.decode(body);
  } catch {
    // Decoded leniently, the bytes became U+FFFD and were stored so (a key named "bad\uFFFD\uFFFD").
    return new ConsoleError('INVALID_JSON', 'request body is not valid UTF-8');
  }
  try {
    return JSON.parse(text);
  } catch {
    return new ConsoleError('INVALID_JSON');
  }
}

/** UTF-8 or a refusal; a byte order mark is kept, so JSON.parse refuses it as it always has. */
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** A Content-Encoding the body is not in: `identity` on every line (a proxy joins lines with commas). */
function isIdentityCoding(value: string | string[]): boolean {
  const codings = (Array.isArray(value) ? value.join(',') : value).split(',');
  return codings.every((c) => c.trim() === '' || c.trim().toLowerCase() === 'identity');
}

const FASTIFY_ERROR_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'INVALID_JSON',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'INVALID_JSON',
  FST_ERR_CTP_BODY_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'VALIDATION_FAILED',
};

export type { ConsoleDeps } from './context.js';

/**
 * TRUSTED_PROXIES (addresses and CIDR blocks separated by commas or spaces) as Fastify's trustProxy;
 * false when empty. A malformed entry stops the start: a silently ignored proxy would make every
 * client behind it share the proxy's address, and so its login limits.
 */
export function trustedProxies(spec: string): string[] | false {
  const entries = parseTrustedProxies(spec).map((p) => p.entry);
  return entries.length > 0 ? entries : false;
}

/**
 * Node's HTTP parser refused the request (bad header bytes, headers over 16 KiB, a timeout): there is
 * no request object, only the socket. The envelope is written on it by hand, then the socket closed,
 * as Node itself does.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const code: ErrorCode = err.code === 'HPE_HEADER_OVERFLOW' ? 'HEADERS_TOO_LARGE'
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'REQUEST_TIMEOUT' : 'MALFORMED_REQUEST';
  answerOnSocket(socket, new ConsoleError(code));
}

/**
 * A CONNECT request: Node hands it to the server's 'connect' listeners, not to Fastify, and destroys
 * the socket unanswered when there is none. Answered as any other method on no route is.
 */
function answerConnect(_request: unknown, socket: Duplex): void {
  if (!socket.destroyed) answerOnSocket(socket, new ConsoleError('ROUTE_NOT_FOUND'));
}

const MALFORMED_ESCAPE = /%(?![0-9A-Fa-f]{2})/;

function differingAuthorizations(raw: readonly string[]): boolean {
  let first: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length !== 13 || raw[i]!.toLowerCase() !== 'authorization') continue;
    if (first === undefined) first = raw[i + 1];
    else if (raw[i + 1] !== first) return true;
  }
  return false;
}

function answerOnSocket(socket: Duplex, e: ConsoleError): void {
  const body = JSON.stringify(fail(e.message));
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${e.status} ${STATUS_CODES[e.status]}\r\nContent-Type: application/json; charset=utf-8\r\n`
      + `Cache-Control: no-store\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy();
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The declared endpoints (http/api.ts), from which the OpenAPI document is built. */
    consoleApi: Api;
    /** Every registered route (method, url), HEAD excluded. */
    routeTable: { method: string; url: string }[];
  }
}

export function buildConsoleApp(deps: ConsoleDeps): FastifyInstance {
  const logger = deps.logger ?? createLogger(deps.config, 'console-api');
  const ctx = createContext(deps, logger);
  const app = Fastify({
    // Request lines without query strings: http/request-log.ts.
    loggerInstance: logger.child({}, { serializers: { req: requestLogFields } }),
    logController: new ConsoleLogController(),
    bodyLimit: CONSOLE_BODY_LIMIT,
    // Fastify waits for a body forever by default: a login with 7 of its 100 bytes sent was still
    // holding its connection after 400 s. Given to Node's server at its creation (Node 20 ignores
    // the property set afterwards, which is how Fastify's own requestTimeout is applied), with the
    // clock Node checks it on (30 s by default) shorter for a short timeout.
    requestTimeout: deps.config.CONSOLE_REQUEST_TIMEOUT_MS,
    http: {
      // A request without Host is refused below in the envelope; Node's own refusal is a bare 400.
      requireHostHeader: false,
      requestTimeout: deps.config.CONSOLE_REQUEST_TIMEOUT_MS,
      connectionsCheckingInterval: Math.min(30_000, Math.max(250, Math.floor(deps.config.CONSOLE_REQUEST_TIMEOUT_MS / 4))),
    },
    routerOptions: { ignoreTrailingSlash: true },
    // request.ip (login and registration throttling) is the client's, not a proxy's: the same
    // TRUSTED_PROXIES as the relay; the right-most X-Forwarded-For entry not itself trusted.
    trustProxy: trustedProxies(deps.config.TRUSTED_PROXIES),
    // What Fastify's router and Node's HTTP parser refuse is still answered in the envelope, so a
    // client reads the same `{success:false, message}` whatever layer turned its request down.
    frameworkErrors: (err, _request, reply) => {
      const code: ErrorCode = err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'URI_TOO_LONG' : err.code === 'FST_ERR_BAD_URL' ? 'MALFORMED_URL' : 'MALFORMED_REQUEST';
      const e = new ConsoleError(code);
      void (reply as FastifyReply).status(e.status).send(fail(e.message));
    },
    clientErrorHandler: answerClientError,
    // A `__proto__` key (or `constructor.prototype`) is valid JSON: parsed as JSON.parse does (an own
    // property, no prototype set) and refused by Api.route's input guard with a 400 naming the
    // property (http/validation.ts reservedPropertyProblem), where Fastify's own refusal answered
    // "request body is not valid JSON".
    onProtoPoisoning: 'ignore',
    onConstructorPoisoning: 'ignore',
  }) as unknown as FastifyInstance;

  app.server.on('connect', answerConnect);

  // Every console answer is for one caller and many carry a credential (login's session token, the
  // access token, an API key reveal, ...): no cache, shared or private, may keep any of them. Set on
  // every response rather than on a list of endpoints that would have to be kept complete by hand.
  app.addHook('onSend', async (_request, reply, payload) => {
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    return payload;
  });

  // JSON is the only body the API reads: Fastify's default text/plain parser handed a string to the
  // routes' schemas, answered 400 "expected object, received string" where every other type gets 415.
  app.removeContentTypeParser('text/plain');
  // JSON read through the raw scan first (parseJsonBody). A `__proto__` key is parsed as JSON.parse
  // does, an own property, as onProtoPoisoning 'ignore' had Fastify's own parser do.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
    const parsed = parseJsonBody(body as Buffer);
    if (parsed instanceof ConsoleError) done(parsed, undefined);
    else done(null, parsed);
  });

  // An empty body labelled JSON (clients that set the header on every request, a DELETE or a
  // POST /api/token/:id/key included) is no body, not "request body is not valid JSON": without the
  // label Fastify parses nothing, and a route that needs a body says which field is missing.
  // So is a request with neither Content-Length nor Transfer-Encoding: it has no body (RFC 9112 §6.3),
  // but Fastify still ran the JSON parser on nothing and answered "not valid JSON".
  app.addHook('onRequest', async (request) => {
    const h = request.headers;
    if (h['content-type'] !== undefined && (h['content-length'] === '0' || (h['content-length'] === undefined && h['transfer-encoding'] === undefined))) {
      delete h['content-type'];
    }
    // The API reads bodies as JSON bytes and no client compresses them: a gzip body was "not valid
    // JSON", a plain one labelled gzip was read as if it were not (RFC 9110 §15.5.16: 415).
    const coding = h['content-encoding'];
    if (coding !== undefined && !isIdentityCoding(coding)) {
      throw new ConsoleError('UNSUPPORTED_MEDIA_TYPE', 'send the body uncompressed: Content-Encoding is not supported (send identity)');
    }
  });

  // HTTP/1.1 requires Host (RFC 9112 §3.2), refused as Node would, in the envelope.
  app.addHook('onRequest', async (request) => {
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) throw new ConsoleError('MALFORMED_REQUEST');
    // Node keeps the first of several Authorization headers and drops the rest: a request carrying two
    // credentials was served as the first's account. Refused, as the relay refuses two API keys.
    if (differingAuthorizations(request.raw.rawHeaders)) {
      throw new ConsoleError('UNAUTHENTICATED', 'the request carries two different Authorization headers: send one');
    }
    // The query parser keeps a malformed escape as text (`keyword=%E0%A4%A` searched for it), where
    // the same escape in the path is refused: refused here too. Its syntax only (a `%` without two hex
    // digits): a well-formed escape of bytes that are not UTF-8 (a payment provider's GBK) stays the
    // route's to read.
    const url = request.raw.url ?? '';
    const q = url.indexOf('?');
    if (q >= 0 && url.includes('%', q) && MALFORMED_ESCAPE.test(url.slice(q + 1))) {
      throw new ConsoleError('MALFORMED_URL', 'the query string is not valid (a malformed percent-escape?)');
    }
  });
  // An Expect other than 100-continue: Node answered a bare 417 itself.
  app.server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const e = new ConsoleError('EXPECTATION_FAILED');
    const body = JSON.stringify(fail(e.message));
    res.writeHead(e.status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'content-length': Buffer.byteLength(body), connection: 'close' });
    res.end(body);
    req.resume();
  });

  app.decorateRequest('account', null);
  // Every route Fastify registers, whatever registered it (the OpenAPI test compares it with the document).
  const routeTable: { method: string; url: string }[] = [];
  app.decorate('routeTable', routeTable);
  app.addHook('onRoute', (r) => {
    for (const method of [r.method].flat()) if (method !== 'HEAD') routeTable.push({ method, url: r.url });
  });

  app.setErrorHandler((err: FastifyError | ConsoleError, request, reply) => {
    const answer = (e: ConsoleError) => {
      if (e.retryAfterSec !== undefined) reply.header('retry-after', String(e.retryAfterSec));
      return reply.status(e.status).send(fail(e.message));
    };
    if (isConsoleError(err)) return answer(err);
    const mapped = FASTIFY_ERROR_CODES[err.code];
    if (mapped) return answer(new ConsoleError(mapped));
    const status = err.statusCode ?? 500;
    if (status === 429) return reply.status(429).send(fail(new ConsoleError('RATE_LIMITED').message));
    if (status >= 400 && status < 500) return reply.status(status).send(fail(err.message));
    if (isDatabaseUnavailable(err)) {
      // A connection lost (pg_terminate_backend, a restart, a failover) or none to be had: the request
      // can be sent again, and the web console must not read a 500 as a bug (or a 401 as signed out).
      request.log.warn({ err }, 'the database could not be reached for a console request');
      return answer(new ConsoleError('DATABASE_UNAVAILABLE', undefined, { retryAfterSec: 1 }));
    }
    if (isDatabaseBusy(err)) {
      // A row held past CONSOLE_DB_LOCK_TIMEOUT_MS, a statement past its time limit, a deadlock: the
      // transaction was rolled back whole, and the same request may pass a moment later.
      request.log.warn({ err }, 'a console request gave up waiting for the database');
      return answer(new ConsoleError('DATABASE_BUSY', undefined, { retryAfterSec: 1 }));
    }
    if (isRedisUnavailable(err)) {
      // Redis down or restarting: logins (their attempt counters), key writes (their rate slot) and
      // debits (their hold) need it, and may pass a moment later. A step after a commit never gets
      // here: those are logged and left to the billing follow-up.
      request.log.warn({ err }, 'Redis could not be reached for a console request');
      return answer(new ConsoleError('QUOTA_STORE_UNAVAILABLE', undefined, { retryAfterSec: 1 }));
    }
    request.log.error({ err }, 'unhandled console error');
    return answer(new ConsoleError('INTERNAL'));
  });

  // The web console (static files, CSP) and its cookie sign-in (with CSRF): auth/browser-session.ts.
  const webDir = webConsoleDir(deps.config.CONSOLE_WEB_DIR);
  registerWebConsole(app, webDir);
  registerBrowserSession(app, deps.config.SESSION_TTL_SEC);

  app.setNotFoundHandler((request, reply) => {
    if (serveWebConsole(webDir, request, reply)) return reply;
    const e = new ConsoleError('ROUTE_NOT_FOUND');
    return reply.status(e.status).send(fail(e.message));
  });

  // Every endpoint is declared through `api` (http/api.ts): validated at the edge and listed in the
  // OpenAPI document served at GET /api/openapi.json.
  const api = new Api(app, makeRequireUser(ctx));
  registerUserRoutes(api, ctx);
  registerTokenRoutes(api, ctx);
  registerTopupRoutes(api, ctx);
  registerRedemptionRoutes(api, ctx);
  registerChannelRoutes(api, ctx);
  registerOptionRoutes(api, ctx);
  registerLogRoutes(api, ctx);
  registerAdminLogRoutes(api, ctx);
  registerPricingRoutes(api, ctx);
  registerMetaRoutes(api, ctx);
  app.decorate('consoleApi', api);
  return app;
}
