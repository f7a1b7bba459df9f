import type postgres from 'postgres';

/** Either the pool or a transaction: what a function that only runs queries needs. */
export type Db = postgres.ISql<Record<string, never>>;
