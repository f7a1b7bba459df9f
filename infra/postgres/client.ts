import postgres from 'postgres';
import type { Config } from '../config.js';
import { arrayTypes } from './array-types.js';

export type Sql = postgres.Sql<Record<string, never>>;

/** Either the pool or a transaction: what a function that only runs queries needs. */
export type Queryable = postgres.ISql<Record<string, never>>;

// BIGINT columns come back as JS numbers: every quota fits well inside 2^53 (18 billion US dollars).
//
// fetch_types is off for every process. With it on, postgres.js runs an array-type query on each new
// connection (and idle_timeout reopens them all the time) with a promise nothing awaits: an error
// answer to it (FATAL 57P01 when pg_terminate_backend or a restart ends the connection as it opens,
// 57014 a statement timeout, a connection cut in an outage) escaped as an unhandled rejection no caller
// could catch (porsager/postgres #1192, #1223, open for 3.4.9), and Node 20 exits on one: the billing
// worker and the console-api died of it (infra/postgres/client.integration.test.ts,
// tests/processes/postgres-connection-faults.integration.test.ts). What that query taught postgres.js,
// how to write array parameters (`= ANY(${ids}::bigint[])`, `unnest(${xs}::text[])`) and read array
// columns (log_outbox_batches.row_ids), is registered up front instead: array-types.ts, the built-in
// types' fixed OIDs. `fetchTypes: true` brings the query back; nothing should pass it.
/**
 * How long Postgres keeps a session of ours idle inside a transaction before it ends it. A backstop:
 * should the client lose track of a transaction's answer (connections reset under load could leave
 * postgres.js waiting for a reply the server had already sent: patches/postgres+3.4.9.patch), the
 * server ends the session, and the transaction fails as CONNECTION_CLOSED instead of waiting for
 * ever, its caller (a billing pass) retrying. No transaction of ours idles this long between two
 * statements; the log drain, which waits for ClickHouse inside one, raises its own (log-outbox.ts).
 */
export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 30_000;

export interface SqlOverrides {
  max?: number;
  fetchTypes?: boolean;
  /**
   * Session settings sent with every connection's startup (Postgres GUCs such as `lock_timeout`), on
   * top of the idle-in-transaction backstop: a process sets its own limits this way.
   */
  sessionSettings?: Record<string, number>;
}

export function createSql(config: Config, overrides: SqlOverrides = {}): Sql {
  return postgres(config.DATABASE_URL, {
    max: overrides.max ?? config.PG_POOL_MAX,
    fetch_types: overrides.fetchTypes ?? false,
    connection: { idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_TIMEOUT_MS, ...overrides.sessionSettings },
    idle_timeout: 30,
    // Reconnect attempts after a failed one wait 3^n / 100 s (halved at random), at most 2 s: postgres.js's
    // own cap of 20 s kept billing and key lookups down 10-20 s after a 30 s Postgres outage had ended
    // (tests/chaos, "Postgres unreachable").
    backoff: (retries: number) => (0.5 + Math.random() / 2) * Math.min(3 ** retries / 100, 2),
    onnotice: () => {},
    types: {
      bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
      ...arrayTypes(),
    },
  }) as unknown as Sql;
}
