// The web console's sign-in: the session token of POST /api/user/login held in an HttpOnly,
// SameSite=Strict cookie instead of in page script, so a script injected into the page cannot read it.
//
// - A login that sends `X-Console-Session: cookie` gets the session as the `console_session` cookie
//   (HttpOnly) and its CSRF token as the `console_csrf` cookie (readable by the page); the token field
//   of the answer is emptied. A cross-site form cannot send that header, so it cannot log a victim in.
// - A request without an Authorization header but with the session cookie is authenticated by the
//   cookie: the cookie becomes its `Authorization: Bearer` here, at the edge, so every route, the role
//   checks and logout see one kind of credential. The cookie counts only when the request also carries
//   `X-CSRF-Token` equal to the session's CSRF token (an HMAC of the session, so it cannot be planted
//   without knowing the session): a write without it answers 403 CSRF_TOKEN_INVALID (a public route,
//   such as login, ignores the cookie instead), a read without it is anonymous. A request with an Authorization header (API clients) is never affected.
// - Logout, or a session cookie whose session expired or was revoked, clears both cookies.
// - Over HTTPS (request.protocol, which behind a proxy listed in TRUSTED_PROXIES is its
//   X-Forwarded-Proto) the two cookies are `__Host-console_session` and `__Host-console_csrf`: Secure,
//   Path=/, no Domain, so a browser accepts them only from this very origin over HTTPS, never from a
//   sibling subdomain (Domain=<parent>) or a plain-http page of the host. Such a request reads only the
//   `__Host-` names: an unprefixed pair planted beside them (a login CSRF: the attacker's own session
//   and its CSRF token, which anyone can compute for their own session) is ignored. Over plain HTTP
//   (local runs, tests) the names stay unprefixed, as a browser refuses a `__Host-` cookie there.
//   Cookies do not isolate ports: another HTTPS service on the same hostname can still set them.
import { createHmac, timingSafeEqual } from 'node:crypto';
import fastifyCookie from '@fastify/cookie';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ConsoleError, isConsoleError } from '../http/errors.js';

/** The cookies' names over plain HTTP; over HTTPS they carry the `__Host-` prefix (cookieNames). */
export const SESSION_COOKIE = 'console_session';
export const CSRF_COOKIE = 'console_csrf';
export const HOST_PREFIX = '__Host-';
export const CSRF_HEADER = 'x-csrf-token';
/** The header by which the web console asks login for the cookie instead of a token in the body. */
export const SESSION_MODE_HEADER = 'x-console-session';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The CSRF token of a session: bound to it, so a cookie planted by another site cannot match. */
export function csrfTokenOf(session: string): string {
  return createHmac('sha256', session).update('console-csrf-v1').digest('base64url');
}

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Whether the request came over HTTPS: directly, or from a proxy listed in TRUSTED_PROXIES that sent
 * `X-Forwarded-Proto: https` (Fastify's request.protocol; @fastify/cookie's `secure: 'auto'` reads the
 * same). Decides both the cookies' Secure flag and their `__Host-` names (the sign-on's
 * `console_oidc` cookie too, console-api/oidc/).
 */
export function overHttps(request: FastifyRequest): boolean {
  return request.protocol === 'https';
}

/** The names of the session and CSRF cookies for this request: `__Host-` prefixed over HTTPS. */
export function cookieNames(request: FastifyRequest): { session: string; csrf: string } {
  const prefix = overHttps(request) ? HOST_PREFIX : '';
  return { session: prefix + SESSION_COOKIE, csrf: prefix + CSRF_COOKIE };
}

function cookieOptions(request: FastifyRequest, httpOnly: boolean, maxAgeSec?: number) {
  return {
    // Path=/, no Domain and Secure: what a `__Host-` cookie must have, or the browser drops it.
    path: '/',
    httpOnly,
    sameSite: 'strict' as const,
    // Secure whenever the request came over HTTPS (behind a trusted proxy too): a local stack on
    // http://127.0.0.1 still works.
    secure: overHttps(request),
    ...(maxAgeSec !== undefined ? { maxAge: maxAgeSec } : {}),
  };
}

function clearCookies(request: FastifyRequest, reply: FastifyReply): void {
  const names = cookieNames(request);
  reply.clearCookie(names.session, cookieOptions(request, true));
  reply.clearCookie(names.csrf, cookieOptions(request, false));
}

function wantsCookieSession(request: FastifyRequest): boolean {
  return request.headers[SESSION_MODE_HEADER] === 'cookie';
}

/**
 * Opens the web console's cookie session for a session token issued by another sign-in than POST
 * /api/user/login (the OpenID Connect redirect, console-api/oidc/): the same two cookies.
 */
export function setSessionCookies(reply: FastifyReply, token: string, sessionTtlSec: number): void {
  const request = reply.request;
  const names = cookieNames(request);
  reply.setCookie(names.session, token, cookieOptions(request, true, sessionTtlSec));
  reply.setCookie(names.csrf, csrfTokenOf(token), cookieOptions(request, false, sessionTtlSec));
  if (overHttps(request)) {
    // An unprefixed pair left by a sign-in before the `__Host-` names (or planted): no longer read over
    // HTTPS, and a stale readable CSRF cookie would only make the page believe it may be signed in.
    reply.clearCookie(SESSION_COOKIE, cookieOptions(request, true));
    reply.clearCookie(CSRF_COOKIE, cookieOptions(request, false));
  }
}

export function registerBrowserSession(app: FastifyInstance, sessionTtlSec: number): void {
  void app.register(fastifyCookie);

  // Requests this hook authenticated by their cookie, and those of them whose session was refused (expired
  // or revoked): only then are the cookies of no use. Another 401 (a wrong current password) keeps them.
  const byCookie = new WeakSet<FastifyRequest>();
  const deadSession = new WeakSet<FastifyRequest>();

  app.addHook('onError', async (request, _reply, error) => {
    if (byCookie.has(request) && isConsoleError(error) && error.code === 'INVALID_ACCESS_TOKEN') deadSession.add(request);
  });

  // Public and provider routes (login, registration, payment callbacks) never use the cookie: a stale
  // one must not stand in their way. Read from the declared endpoints once they are all registered.
  let openRoutes: Set<string> | undefined;
  const isOpenRoute = (request: FastifyRequest): boolean => {
    openRoutes ??= new Set(app.consoleApi.endpoints.filter((e) => typeof e.access !== 'number').flatMap((e) => e.methods.map((m) => `${m} ${e.path}`)));
    return openRoutes.has(`${request.method} ${request.routeOptions.url}`);
  };

  app.addHook('onRequest', async (request) => {
    if (request.headers.authorization !== undefined) return;
    // Over HTTPS only the `__Host-` cookie counts: an unprefixed one may have been planted.
    const session = request.cookies[cookieNames(request).session];
    if (!session) return;
    const presented = request.headers[CSRF_HEADER];
    const valid = typeof presented === 'string' && sameToken(presented, csrfTokenOf(session));
    if (valid) {
      request.headers.authorization = `Bearer ${session}`;
      byCookie.add(request);
      return;
    }
    if (!SAFE_METHODS.has(request.method) && !isOpenRoute(request)) {
      throw new ConsoleError('CSRF_TOKEN_INVALID');
    }
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const url = request.routeOptions.url;
    if (url === '/api/user/login' && reply.statusCode === 200 && wantsCookieSession(request) && typeof payload === 'string') {
      const body = JSON.parse(payload) as { success: boolean; data?: { token?: string } };
      const token = body.data?.token;
      if (!body.success || !token) return payload;
      setSessionCookies(reply, token, sessionTtlSec);
      // The page never holds the session itself.
      body.data!.token = '';
      return JSON.stringify(body);
    }
    if (byCookie.has(request)) {
      const loggedOut = url === '/api/user/logout' && reply.statusCode === 200;
      if (loggedOut || deadSession.has(request)) clearCookies(request, reply);
    }
    return payload;
  });
}
