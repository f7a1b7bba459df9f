// What an entry point says when its start fails. A service it needs not answering, or a configuration
// only a server refuses, is one line naming the variable and the server's host:port (never the URL's
// password); the supervisor starts the process again for the first (the service may answer soon).
// Anything else is a fault to look into, said with its stack.
import { CONFIG_ERROR_EXIT_CODE, ConfigError, type Config } from './config.js';
import { isDatabaseUnavailable } from './postgres/unavailable.js';
import { startFailureExitCode as redisStartFailureExitCode } from './redis/client.js';
import { isRedisUnavailable } from './redis/unavailable.js';
import { serverAddress } from './server-address.js';

export interface StartFailure {
  /** One line for an operator. */
  line: string;
  /** The failure is no bug (a service away, a configuration): its stack says nothing more. */
  known: boolean;
}

export function describeStartFailure(err: unknown, config: Config | undefined): StartFailure {
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof ConfigError) return { line: message.replace(/\n\s*/g, ' '), known: true };
  if (isDatabaseUnavailable(err)) {
    return { line: `cannot reach Postgres at ${serverAddress(config?.DATABASE_URL ?? '', 5432)} (DATABASE_URL): ${message}`, known: true };
  }
  if (isRedisUnavailable(err)) {
    return { line: `cannot reach Redis at ${serverAddress(config?.REDIS_URL ?? '', 6379)} (REDIS_URL): ${message}`, known: true };
  }
  return { line: err instanceof Error ? err.stack ?? message : message, known: false };
}

/** The exit code of a failed start: CONFIG_ERROR_EXIT_CODE (78, not started again) for a configuration, else 1. */
export function startFailureExitCode(err: unknown): number {
  return err instanceof ConfigError ? CONFIG_ERROR_EXIT_CODE : redisStartFailureExitCode();
}
