import type { Queryable } from '../infra/postgres/client.js';

/** Either the pool or a transaction: what a function that only runs queries needs. */
export type Db = Queryable;
