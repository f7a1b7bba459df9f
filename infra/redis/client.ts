import { Redis } from 'ioredis';
import type { Config } from '../config.js';

/**
 * `blocking` connections carry XREADGROUP BLOCK and SUBSCRIBE: they must not share auto-pipelined
 * batches with ordinary commands. `commandTimeoutMs`: a command unanswered this long fails (the relay's
 * hot path must not wait on a stalled Redis); unset, a command waits as long as its connection lives.
 */
export function createRedis(config: Config, name: string, opts: { blocking?: boolean; commandTimeoutMs?: number } = {}): Redis {
  return new Redis(config.REDIS_URL, {
    connectionName: name,
    maxRetriesPerRequest: opts.blocking ? null : 2,
    enableAutoPipelining: !opts.blocking,
    ...(opts.commandTimeoutMs !== undefined ? { commandTimeout: opts.commandTimeoutMs } : {}),
  });
}
export type { Redis };
