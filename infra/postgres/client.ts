import postgres from 'postgres';
import type { Config } from '../config.js';

export type Sql = postgres.Sql<Record<string, never>>;

/** Either the pool or a transaction: what a function that only runs queries needs. */
export type Queryable = postgres.ISql<Record<string, never>>;

// BIGINT columns come back as JS numbers: every quota fits well inside 2^53 (18 billion US dollars).
//
// fetchTypes false skips postgres.js's array-type query on each new connection. That query's failure
// (a connection cut while it starts, as in a Postgres outage) escapes as an unhandled rejection no
// caller can catch (porsager/postgres #1192, #1223, open for 3.4.9). A process that passes no array
// parameter (`= ANY(${ids}::bigint[])` needs the fetched types) turns it off: the relay does.
export function createSql(config: Config, overrides: { max?: number; fetchTypes?: boolean } = {}): Sql {
  return postgres(config.DATABASE_URL, {
    max: overrides.max ?? config.PG_POOL_MAX,
    fetch_types: overrides.fetchTypes ?? true,
    idle_timeout: 30,
    // Reconnect attempts after a failed one wait 3^n / 100 s (halved at random), at most 2 s: postgres.js's
    // own cap of 20 s kept billing and key lookups down 10-20 s after a 30 s Postgres outage had ended
    // (tests/chaos, "Postgres unreachable").
    backoff: (retries: number) => (0.5 + Math.random() / 2) * Math.min(3 ** retries / 100, 2),
    onnotice: () => {},
    types: {
      bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
    },
  }) as unknown as Sql;
}
