// Which Postgres database a Redis's money belongs to. Redis holds, per account id, a mirror of the
// balance, open reservations and the usage stream not yet billed; ids restart at 1 in a database
// made again. A database dropped and re-made next to a Redis that kept the old one's keys (the
// README's reset, a restore, a second gateway pointed at the same Redis and prefix) had its new
// account 1 spend the old account 1's mirror: 12.5 M quota of credit the database never had, and
// the billing worker would settle the old database's usage into the new one's accounts.
//
// So the first service to start on a Redis records there the id of its database (database_instance,
// migration 026); every service compares at start, and again each time its connection comes back (a
// Redis swapped under it: a restore from another gateway's backup, an address now naming another
// server), through RedisBindingWatch. A mismatch is a configuration to fix, not a fault to retry.
import type { Redis } from 'ioredis';
import type { Sql } from '../../infra/postgres/client.js';
import type { RedisKeys } from '../../infra/redis/keys.js';
import { ConfigError } from '../../infra/config.js';

/** This database's id (made by migration 026; made here too, should its row be gone). */
export async function databaseInstanceId(sql: Sql): Promise<string> {
  try {
    // One statement that returns the row whoever made it: with DO NOTHING and a second SELECT, two
    // services starting at once on a database whose row was gone each saw none (review diffreview).
    const rows = await sql<{ id: string }[]>`
      INSERT INTO database_instance DEFAULT VALUES
      ON CONFLICT (singleton) DO UPDATE SET singleton = EXCLUDED.singleton
      RETURNING id::text`;
    return rows[0]!.id;
  } catch (err) {
    // A service started on a database its migrations have not reached yet (the supervisor starts it again).
    if ((err as { code?: string }).code === '42P01') throw new Error('table database_instance is missing: apply the Postgres migrations first (make migrate; the console-api applies them when it starts)');
    throw err;
  }
}

/**
 * Binds `redis` to database `databaseId` when it is bound to none (SET NX), and says whether it is
 * bound to it: false when it holds another database's keys.
 */
export async function redisBoundTo(redis: Redis, keys: RedisKeys, databaseId: string): Promise<boolean> {
  const key = keys.databaseInstance();
  // Read first: a bound Redis that refuses writes for a while (out of memory under noeviction, a
  // replica being promoted) still answers whose it is.
  const held = await redis.get(key);
  if (held !== null) return held === databaseId;
  try {
    if (await redis.set(key, databaseId, 'NX') === 'OK') return true;
  } catch {
    // Unwritable now (at maxmemory under noeviction, where a billing worker must start to drain the
    // backlog that fills it): a Redis bound to no database holds no other database's keys; a later
    // start binds it.
    return true;
  }
  return await redis.get(key) === databaseId;
}

/** How to delete a prefix's keys on a single Redis (on a cluster: on each master, with -c and -n 1). */
export function prefixDeletion(prefix: string): string {
  return `redis-cli -u "$REDIS_URL" --scan --pattern '${prefix}:*' | xargs -r -d '\\n' -n 100 redis-cli -u "$REDIS_URL" unlink`;
}

/** The refusal of a Redis that holds another database's money, with what to do about it. */
export function foreignRedisError(keys: RedisKeys, prefix: string): ConfigError {
  return new ConfigError([{
    name: 'REDIS_PREFIX',
    problem: `the Redis at REDIS_URL (or REDIS_CLUSTER_NODES) holds, under this prefix, the balances, reservations and usage of another gateway database (${keys.databaseInstance()} names another database_instance than DATABASE_URL's): its account ids are not this database's, and spending or billing them would move money this database never had. `
      + `Point REDIS_URL or REDIS_PREFIX at a Redis of this database, or, if the other database is gone for good (a reset), delete its keys: ${prefixDeletion(prefix)} (on a Redis Cluster: on each master, with -c and -n 1)`,
    value: prefix,
  }]);
}

/**
 * Fails the start with foreignRedisError when `redis` holds another database's keys; binds it to this
 * database when it holds none. Answers this database's id.
 */
export async function assertRedisOfDatabase(sql: Sql, redis: Redis, keys: RedisKeys, prefix: string): Promise<string> {
  const databaseId = await databaseInstanceId(sql);
  if (!await redisBoundTo(redis, keys, databaseId)) throw foreignRedisError(keys, prefix);
  return databaseId;
}

/**
 * Whose money the Redis behind one connection holds, known afresh after each reconnect: `owned()` is
 * true only once this connection's current server was found bound to this database (a Redis restarted
 * empty is bound again then). Between a reconnect and the check's answer (about a round trip) it is
 * false, so that nothing read from, or written to, a swapped server is taken for this database's.
 * `onForeign` is called once each time the answer turns to another database's.
 */
/** A check that failed with the connection up is asked again after this long. */
const RECHECK_AFTER_FAILURE_MS = 1_000;

export class RedisBindingWatch {
  readonly #redis: Redis;
  readonly #keys: RedisKeys;
  readonly #databaseId: string;
  readonly #onForeign: () => void;
  /** The current connection's answer: null until known (or since the connection dropped). */
  #bound: boolean | null = null;
  /** Each connection gets its own number; an answer counts only for the connection it was asked on. */
  #connection = 0;
  #checking: Promise<boolean | null> | null = null;
  /** The connection #checking asks on: a check of an earlier one is not reused (it answers nothing). */
  #checkingOn = -1;
  #stopped = false;
  readonly #onClose = (): void => {
    this.#connection++;
    this.#bound = this.#bound === false ? false : null;
  };
  readonly #onReady = (): void => void this.check();

  constructor(redis: Redis, keys: RedisKeys, databaseId: string, onForeign: () => void) {
    this.#redis = redis;
    this.#keys = keys;
    this.#databaseId = databaseId;
    this.#onForeign = onForeign;
    redis.on('close', this.#onClose);
    redis.on('ready', this.#onReady);
  }

  /** The current server holds this database's accounts (checked since the connection last came up). */
  owned(): boolean {
    return this.#bound === true && this.#redis.status === 'ready';
  }

  /** Known to hold another database's (the last answer, kept across reconnects until another comes). */
  foreign(): boolean {
    return this.#bound === false;
  }

  /**
   * The number of the current connection: a call that saw it change between its sending and its
   * answer may have run on the server more than once (ioredis sends again, after a reconnect, the
   * commands the old connection left unanswered) or on another server.
   */
  get connection(): number {
    return this.#connection;
  }

  /**
   * Asks the current server (one at a time); answers true / false, or null when it could not be read
   * (the connection down: asked again on its 'ready').
   */
  check(): Promise<boolean | null> {
    // A check asked on a connection that dropped since (its GET sent again after the reconnect, the
    // 'ready' first) answers nothing: this connection gets its own.
    if (this.#checking !== null && this.#checkingOn === this.#connection) return this.#checking;
    const checking = this.#ask().finally(() => {
      if (this.#checking === checking) this.#checking = null;
    });
    this.#checking = checking;
    this.#checkingOn = this.#connection;
    return checking;
  }

  /** owned(), asking the server first when the answer is not of the current connection. */
  async ensureOwned(): Promise<boolean> {
    // Twice at most: once more when the connection dropped during the first check.
    for (let i = 0; i < 2 && !this.owned(); i++) await this.check();
    return this.owned();
  }

  stop(): void {
    this.#stopped = true;
    this.#redis.off('close', this.#onClose);
    this.#redis.off('ready', this.#onReady);
  }

  async #ask(): Promise<boolean | null> {
    const connection = this.#connection;
    let bound: boolean;
    try {
      bound = await redisBoundTo(this.#redis, this.#keys, this.#databaseId);
    } catch {
      // Failed with the connection up (a timeout, a server busy loading): no 'ready' will come to ask
      // again, so a timer does; a connection that dropped asks on its 'ready'.
      if (!this.#stopped && this.#redis.status === 'ready' && connection === this.#connection) {
        setTimeout(() => {
          if (!this.#stopped && !this.owned()) void this.check();
        }, RECHECK_AFTER_FAILURE_MS).unref();
      }
      return connection === this.#connection ? this.#bound : null;
    }
    // The connection dropped while asking: the answer may be the old server's.
    if (connection !== this.#connection) return null;
    const was = this.#bound;
    this.#bound = bound;
    if (!bound && was !== false) this.#onForeign();
    return bound;
  }
}
