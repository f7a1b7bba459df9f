// The one catalogue of console failures: a stable code, the HTTP status and the message of each.
// Handlers throw `new ConsoleError('CODE')` (optionally with a more specific message); the error
// handler in app.ts turns it into `{success: false, message}` with the status. README.md documents
// every code, and errors.unit.test.ts checks that it does.

export const ERROR_CATALOGUE = {
  VALIDATION_FAILED: { status: 400, message: 'invalid request' },
  MALFORMED_URL: { status: 400, message: 'the request path is not a valid URL (a malformed percent-escape?)' },
  MALFORMED_REQUEST: { status: 400, message: 'the request is not valid HTTP' },
  INVALID_JSON: { status: 400, message: 'request body is not valid JSON' },
  UNKNOWN_GROUP: { status: 400, message: 'unknown group' },
  INVALID_CODE: { status: 400, message: 'the code is wrong, expired or already used' },
  AMOUNT_BELOW_MINIMUM: { status: 400, message: 'amount: below the minimum top-up' },
  INVALID_SIGNATURE: { status: 400, message: 'signature verification failed' },
  PAYMENT_MISMATCH: { status: 400, message: 'the payment does not match the order' },
  UNAUTHENTICATED: { status: 401, message: 'not logged in: send Authorization: Bearer <access token>' },
  INVALID_ACCESS_TOKEN: { status: 401, message: 'access token is invalid, expired or revoked' },
  API_KEY_NOT_ACCEPTED: {
    status: 401,
    message: 'an sk- API key is not accepted by the console API; use a console access token',
  },
  INVALID_CREDENTIALS: { status: 401, message: 'username or password is incorrect' },
  ACCOUNT_BANNED: { status: 403, message: 'this account is banned' },
  INSUFFICIENT_ROLE: { status: 403, message: 'insufficient permission for this operation' },
  CSRF_TOKEN_INVALID: { status: 403, message: 'a write authenticated by the session cookie needs the X-CSRF-Token header of that session' },
  FEATURE_DISABLED: { status: 403, message: 'this feature is not enabled' },
  NOT_FOUND: { status: 404, message: 'not found' },
  ROUTE_NOT_FOUND: { status: 404, message: 'no such endpoint' },
  USERNAME_TAKEN: { status: 409, message: 'username is already taken' },
  EMAIL_TAKEN: { status: 409, message: 'this e-mail address already belongs to an account' },
  REDEMPTION_UNAVAILABLE: { status: 409, message: 'redemption code is used, disabled or expired' },
  STATE_CONFLICT: { status: 409, message: 'the resource is not in a state that allows this change' },
  REQUEST_TIMEOUT: { status: 408, message: 'the request took too long to arrive' },
  EXPECTATION_FAILED: { status: 417, message: 'only "Expect: 100-continue" is understood' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'request body is too large' },
  URI_TOO_LONG: { status: 414, message: 'a path parameter is too long' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'send the body as Content-Type: application/json' },
  RATE_LIMITED: { status: 429, message: 'too many requests, slow down' },
  HEADERS_TOO_LARGE: { status: 431, message: 'the request headers are too large' },
  INTERNAL: { status: 500, message: 'internal server error' },
  UPSTREAM_FAILED: { status: 502, message: 'the upstream service failed' },
  LOG_STORE_UNAVAILABLE: { status: 503, message: 'the request log cannot be read right now; retry shortly' },
  DATABASE_UNAVAILABLE: { status: 503, message: 'the console cannot reach its database right now; retry shortly' },
  COMMIT_OUTCOME_UNKNOWN: { status: 503, message: 'the database connection was lost as the change was committed, and whether it was made cannot be read yet: read the balance or the log before sending it again' },
  DATABASE_BUSY: { status: 503, message: 'the database is busy with a conflicting change; nothing was changed, retry shortly' },
  QUOTA_STORE_UNAVAILABLE: { status: 503, message: 'the console cannot reach its quota store (Redis) right now; retry shortly' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

export class ConsoleError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Sent as Retry-After (seconds) by the error handler: a throttled client learns when to come back. */
  readonly retryAfterSec: number | undefined;

  /** `message` replaces the catalogue's text when a more specific one helps (e.g. the bad field). */
  constructor(code: ErrorCode, message?: string, opts: { retryAfterSec?: number } = {}) {
    const entry = ERROR_CATALOGUE[code];
    super(message ?? entry.message);
    this.name = 'ConsoleError';
    this.code = code;
    this.status = entry.status;
    this.retryAfterSec = opts.retryAfterSec;
  }
}

export function isConsoleError(err: unknown): err is ConsoleError {
  return err instanceof ConsoleError;
}
