// The console API client: openapi-fetch typed by schema.gen.ts (generated from the OpenAPI document
// the console serves), so every path, parameter and body is checked against the API at build time.
// The session is the HttpOnly cookie console-api sets at login; every request carries the CSRF token
// of that session (the readable CSRF cookie: `__Host-console_csrf` when the console is served over
// HTTPS, `console_csrf` over plain HTTP) and asks login for the cookie mode.
import createClient, { type Middleware } from 'openapi-fetch';
import { readableMessage } from '../format';
import type { paths } from './schema.gen';

export type { paths };

export const CSRF_COOKIE = 'console_csrf';
/**
 * The CSRF cookie's names, preferred first: console-api names it `__Host-console_csrf` over HTTPS (a
 * name no other origin can set) and `console_csrf` over plain HTTP. Over HTTPS the server reads only
 * the `__Host-` session, so an unprefixed cookie beside it (a stale or planted one) must not win.
 */
export const CSRF_COOKIES = [`__Host-${CSRF_COOKIE}`, CSRF_COOKIE] as const;

export function readCookie(cookies: string, name: string): string | undefined {
  for (const part of cookies.split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return decodeURIComponent(v.join('='));
  }
  return undefined;
}

/** The session's CSRF token from the page's cookies: the `__Host-` cookie if there is one. */
export function csrfToken(cookies: string = document.cookie): string | undefined {
  for (const name of CSRF_COOKIES) {
    const value = readCookie(cookies, name);
    if (value) return value;
  }
  return undefined;
}

/**
 * Whether the browser may hold a session. The session cookie is HttpOnly, but console-api sets and
 * clears the readable CSRF cookie with it, and without that token a cookie read is anonymous anyway:
 * with none, asking who is signed in could only be refused (a 401 the browser logs as an error).
 */
export function maybeSignedIn(cookies: string = document.cookie): boolean {
  return !!csrfToken(cookies);
}

/** Raised by `call` for a failed answer: the API's own message, and its HTTP status. */
export class ApiError extends Error {
  readonly status: number;
  constructor(message: string, status: number) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
  }
}

/**
 * Why the session is gone: it ended (401: expired, revoked), the API says the account is banned, or
 * the browser's session is now another one (a log in in another tab: switched).
 */
export type SignOutReason = 'ended' | 'banned' | 'switched';

/** The API's refusal of a banned account's call (console-api's ACCOUNT_BANNED, HTTP 403). */
const BANNED_MESSAGE = 'this account is banned';

/**
 * The 401s that are about the session itself (console-api's UNAUTHENTICATED: no session cookie, as
 * after a logout in another tab; INVALID_ACCESS_TOKEN: the session expired or was revoked), whatever
 * the call. A 401 of a call that checks a password (INVALID_CREDENTIALS: "username or password is
 * incorrect", "original_password: ...") is that password's.
 */
export const SESSION_ENDED_MESSAGES: ReadonlySet<string> = new Set([
  'not logged in: send Authorization: Bearer <access token>',
  'access token is invalid, expired or revoked',
]);

/**
 * A write refused for want of the session's CSRF token (console-api's CSRF_TOKEN_INVALID, HTTP 403):
 * the page's CSRF cookie is gone or belongs to another session, so no write of this page can
 * succeed any more; the session is as good as ended.
 */
export const CSRF_MESSAGE = 'a write authenticated by the session cookie needs the X-CSRF-Token header of that session';

/**
 * Why an answer says the session is gone, or undefined when it does not: any 401, except that of a
 * call checking a password whose message is not the session's; a 403 of a banned account or of a
 * missing CSRF token.
 */
export function signOutReason(status: number, message: string | undefined, checksPassword: boolean): SignOutReason | undefined {
  if (status === 401) return !checksPassword || (message !== undefined && SESSION_ENDED_MESSAGES.has(message)) ? 'ended' : undefined;
  if (status === 403 && message === BANNED_MESSAGE) return 'banned';
  if (status === 403 && message === CSRF_MESSAGE) return 'ended';
  return undefined;
}

const listeners = new Set<(reason: SignOutReason) => void>();
/** Called when an answer says the session is gone: the application shows the login page, saying why. */
export function onSignedOut(fn: (reason: SignOutReason) => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

/** A 401 from these may mean a wrong password was typed, not that the session is gone (signOutReason). */
export function checksCredentials(request: Request): boolean {
  const path = new URL(request.url).pathname;
  return path === '/api/user/login' || (path === '/api/user/self' && request.method === 'PUT');
}

/**
 * The session the page shows an account of: its CSRF token, pinned when the account was read (App).
 * The session cookie is the browser's, shared by its tabs: after a log out and a log in as another
 * account in one tab, another tab still showing the first account sent its calls, writes included,
 * as the second (review web). A call made while the cookie is another session's is not sent.
 */
let pinnedSession: string | undefined;

/** Pins the session the page now shows (its CSRF token), or none (signed out). */
export function pinSession(token: string | undefined = csrfToken(document.cookie)): void {
  pinnedSession = token;
}

/** Whether the browser's session is no longer the one the page shows: another was signed in meanwhile. */
export function sessionSwitched(cookies: string = document.cookie): boolean {
  const current = csrfToken(cookies);
  // No cookie at all is a log out, which the API's 401 tells (SignOutReason 'ended').
  return pinnedSession !== undefined && current !== undefined && current !== pinnedSession;
}

/** Raised instead of sending a call made under another session than the page's (sessionSwitched). */
export const SESSION_SWITCHED_MESSAGE = 'The browser was signed in again in another tab; nothing was sent. The page now shows the account signed in: check it and try again.';

/** Who is signed in may always be asked: it is how the page learns the session it now has. */
const asksWhoIsSignedIn = (request: Request): boolean => request.method === 'GET' && new URL(request.url).pathname === '/api/user/self';

const session: Middleware = {
  onRequest({ request }) {
    if (sessionSwitched() && !asksWhoIsSignedIn(request)) {
      for (const fn of listeners) fn('switched');
      throw new ApiError(SESSION_SWITCHED_MESSAGE, 0);
    }
    const csrf = csrfToken(document.cookie);
    if (csrf) request.headers.set('x-csrf-token', csrf);
    request.headers.set('x-console-session', 'cookie');
    return request;
  },
  async onResponse({ response, request }) {
    if (response.status !== 401 && response.status !== 403) return response;
    const reason = signOutReason(response.status, await messageOf(response), checksCredentials(request));
    if (reason) for (const fn of listeners) fn(reason);
    return response;
  },
};

async function messageOf(response: Response): Promise<string | undefined> {
  try {
    return ((await response.clone().json()) as { message?: string }).message;
  } catch {
    return undefined;
  }
}

export const api = createClient<paths>({ baseUrl: location.origin, credentials: 'same-origin' });
api.use(session);

type Envelope = { success: boolean; message: string; data?: unknown };
// The success member of openapi-fetch's result union, and its envelope's data (absent: undefined).
type DataOf<R> = R extends { data: infer E; error?: never } ? (E extends { data?: infer D } ? Exclude<D, undefined> : undefined) : never;

/**
 * Awaits an openapi-fetch call and returns the envelope's `data`; a failure (HTTP error, or success
 * false) throws ApiError with the API's message, for the form that made the call to show.
 */
export async function call<R extends { data?: unknown; error?: unknown; response: Response }>(pending: Promise<R>): Promise<DataOf<R>> {
  let result: R;
  try {
    result = await pending;
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw new ApiError(`the console could not be reached (${err instanceof Error ? err.message : String(err)})`, 0);
  }
  const body = (result.data ?? result.error) as Envelope | undefined;
  if (!result.response.ok || !body || body.success === false) {
    throw new ApiError(body?.message ? readableMessage(body.message) : `HTTP ${result.response.status}`, result.response.status);
  }
  return body.data as DataOf<R>;
}
