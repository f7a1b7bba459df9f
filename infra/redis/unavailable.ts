// Whether a Redis command failed for want of a Redis, not for anything in the command: no connection
// to be had (ioredis gives up after maxRetriesPerRequest, or fails what it queued when a connection
// closes), an answer that never came (commandTimeout), or a server that cannot serve for the moment
// (loading its data, a cluster without a master for the slot, a slot moving, a replica taking
// over). The console answers those 503 with Retry-After, as it answers a Postgres outage
// (infra/postgres/unavailable.ts), not a 500 its web console reads as a bug.

/** ioredis' own errors of a connection that is not there. */
const UNREACHABLE_NAMES = new Set(['MaxRetriesPerRequestError', 'ClusterAllFailedError']);
const UNREACHABLE_MESSAGES = ['Connection is closed', 'Stream isn\'t writeable', 'Command timed out', 'None of startup nodes is available', 'Failed to refresh slots cache'];
/** Redis' replies of a server that cannot serve now, whatever the command (their first word). */
const SERVER_UNAVAILABLE = /^(?:LOADING|CLUSTERDOWN|TRYAGAIN|MASTERDOWN|BUSY|NOREPLICAS) /;

export function isRedisUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (UNREACHABLE_NAMES.has(err.name)) return true;
  const message = err.message;
  if (err.name === 'ReplyError') return SERVER_UNAVAILABLE.test(message);
  return UNREACHABLE_MESSAGES.some((m) => message.startsWith(m));
}
