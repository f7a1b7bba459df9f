import { Redis } from 'ioredis';
import type { Config } from '../config.js';

/**
 * `blocking` connections carry XREADGROUP BLOCK and SUBSCRIBE: they must not share auto-pipelined
 * batches with ordinary commands.
 */
export function createRedis(config: Config, name: string, opts: { blocking?: boolean } = {}): Redis {
  return new Redis(config.REDIS_URL, {
    connectionName: name,
    maxRetriesPerRequest: opts.blocking ? null : 2,
    enableAutoPipelining: !opts.blocking,
  });
}
export type { Redis };
