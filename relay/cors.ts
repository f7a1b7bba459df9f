// Cross-origin requests (CORS): web apps that call the API from the browser — chat front ends in
// their client-side mode, OpenAI's and Anthropic's SDKs with dangerouslyAllowBrowser — need the
// browser's permission, which it asks with a preflight OPTIONS and checks on every answer. The relay's
// credential is an API key sent in a header, never a cookie, so a page of any origin may call it
// with a key it holds and learns nothing without one: every origin is allowed (`*`, no credentials),
// as OpenAI's API and new-api allow. Everything is allowed to be read of the answer (the request ids
// that the SDKs show, retry-after, the rate-limit headers).
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';

const ALLOWED_METHODS = 'GET, POST, HEAD, OPTIONS';
/** What a preflight allows when it names no headers, or names them in a form that is no header list. */
const DEFAULT_ALLOWED_HEADERS = 'authorization, content-type, x-api-key, anthropic-version, anthropic-beta, anthropic-dangerous-direct-browser-access';
/** A header list as browsers send it in Access-Control-Request-Headers: tokens separated by commas. */
const HEADER_LIST = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:[ \t]*,[ \t]*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*$/;
const MAX_HEADER_LIST = 2048;
/** Chrome holds a preflight 2 hours at most, Firefox 24. */
const PREFLIGHT_MAX_AGE = '86400';

/** The headers every answer carries for a browser to hand it to the page. Called inside the answer's cork. */
export function writeCorsHeaders(res: HttpResponse): void {
  res.writeHeader('access-control-allow-origin', '*').writeHeader('access-control-expose-headers', '*');
}

/**
 * OPTIONS on any path: the preflight's answer is a 204 with these headers (server.ts sends it as a
 * Reply, deferred like every answer given from the request alone: a client pipelining preflights
 * without reading them gets its connection closed rather than every answer buffered). The headers the
 * browser asks for are allowed as it names them (Authorization is never covered by a `*`).
 */
export function preflightHeaders(req: HttpRequest): string[] {
  const asked = req.getHeader('access-control-request-headers').trim();
  const allowedHeaders = asked.length > 0 && asked.length <= MAX_HEADER_LIST && HEADER_LIST.test(asked) ? asked : DEFAULT_ALLOWED_HEADERS;
  return [
    'access-control-allow-methods', ALLOWED_METHODS,
    'access-control-allow-headers', allowedHeaders,
    'access-control-max-age', PREFLIGHT_MAX_AGE,
    // The allowed headers echo the request's: a shared cache must not answer one preflight with another's.
    'vary', 'Access-Control-Request-Headers',
  ];
}
