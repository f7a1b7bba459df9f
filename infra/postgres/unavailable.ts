// Whether a failed query failed because Postgres could not be reached or the session was lost, not
// because of the query: a caller answers "retry shortly" (the console's 503) instead of a 500 that
// reads as a bug, and may try again.

/** Codes postgres.js and Node give a query whose connection was lost or could not be made. */
const CONNECTION_CODES = new Set([
  'CONNECTION_CLOSED', 'CONNECTION_DESTROYED', 'CONNECTION_ENDED', 'CONNECT_TIMEOUT',
  'ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN',
]);

/**
 * SQLSTATEs of a server that ended the session or will not take one: 57P01 admin shutdown
 * (pg_terminate_backend, a fast shutdown), 57P02 crash shutdown, 57P03 cannot connect now (starting
 * up, in recovery), 53300 too many connections; class 08 is the connection exceptions.
 */
const SERVER_UNAVAILABLE = new Set(['57P01', '57P02', '57P03', '53300']);

export function isDatabaseUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  return CONNECTION_CODES.has(code) || SERVER_UNAVAILABLE.has(code) || (code.length === 5 && code.startsWith('08'));
}

/**
 * `read` again, once, when it failed for want of a connection: for a read whose repeat changes
 * nothing. A connection terminated under it (a failover, pg_terminate_backend, an idle connection the
 * server ended) is then a new connection's first query, not the caller's error.
 */
export async function readRetryingOnce<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    if (!isDatabaseUnavailable(err)) throw err;
    return read();
  }
}

/**
 * SQLSTATEs of a statement the server gave up on for reasons of the moment, not of the statement:
 * 55P03 lock_not_available (a `lock_timeout` ran out: a row held by another transaction), 57014
 * query_canceled (a `statement_timeout`, or a cancel), 40P01 deadlock_detected, 40001
 * serialization_failure. The transaction was rolled back whole; the same request may succeed later.
 */
const SERVER_BUSY = new Set(['55P03', '57014', '40P01', '40001']);

export function isDatabaseBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && SERVER_BUSY.has(code);
}
