import type { Config } from '../infra/config.js';
import { createSql, type Queryable, type Sql } from '../infra/postgres/client.js';

/** Either the pool or a transaction: what a function that only runs queries needs. */
export type Db = Queryable;

/**
 * The console's Postgres pool. Its statements wait at most CONSOLE_DB_LOCK_TIMEOUT_MS for a row another
 * transaction holds and run at most CONSOLE_DB_STATEMENT_TIMEOUT_MS: a user row held for a long time
 * (a stuck transaction, a long maintenance statement) made every console write to that account wait as
 * long, ~44 s for a lock held 45 s, each waiting request holding one of the pool's connections. Past
 * either limit the transaction is rolled back whole and the request answered 503 DATABASE_BUSY
 * (app.ts), which the client may send again. The billing worker has no such limit: a settlement waits
 * for its rows rather than fail.
 */
export function createConsoleSql(config: Config, overrides: { max?: number } = {}): Sql {
  return createSql(config, {
    ...overrides,
    sessionSettings: {
      lock_timeout: config.CONSOLE_DB_LOCK_TIMEOUT_MS,
      statement_timeout: config.CONSOLE_DB_STATEMENT_TIMEOUT_MS,
    },
  });
}
