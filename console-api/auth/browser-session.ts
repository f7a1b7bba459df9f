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
import { createHmac, timingSafeEqual } from 'node:crypto';
import fastifyCookie from '@fastify/cookie';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ConsoleError, isConsoleError } from '../http/errors.js';

export const SESSION_COOKIE = 'console_session';
export const CSRF_COOKIE = 'console_csrf';
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

function cookieOptions(httpOnly: boolean, maxAgeSec?: number) {
  return {
    path: '/',
    httpOnly,
    sameSite: 'strict' as const,
    // Secure whenever the request came over HTTPS (behind a trusted proxy too): a local stack on
    // http://127.0.0.1 still works.
    secure: 'auto' as const,
    ...(maxAgeSec !== undefined ? { maxAge: maxAgeSec } : {}),
  };
}

function clearCookies(reply: FastifyReply): void {
  reply.clearCookie(SESSION_COOKIE, cookieOptions(true));
  reply.clearCookie(CSRF_COOKIE, cookieOptions(false));
}

function wantsCookieSession(request: FastifyRequest): boolean {
  return request.headers[SESSION_MODE_HEADER] === 'cookie';
}

/**
 * Opens the web console's cookie session for a session token issued by another sign-in than POST
 * /api/user/login (the OpenID Connect redirect, console-api/oidc/): the same two cookies.
 */
export function setSessionCookies(reply: FastifyReply, token: string, sessionTtlSec: number): void {
  reply.setCookie(SESSION_COOKIE, token, cookieOptions(true, sessionTtlSec));
  reply.setCookie(CSRF_COOKIE, csrfTokenOf(token), cookieOptions(false, sessionTtlSec));
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
    const session = request.cookies[SESSION_COOKIE];
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
      if (loggedOut || deadSession.has(request)) clearCookies(reply);
    }
    return payload;
  });
}
