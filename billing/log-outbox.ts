// Moves log rows from the Postgres log_outbox (written with the ledger rows, billing/settle-batch.ts)
// to ClickHouse, each row counted once in ClickHouse's stats, under any fault:
//   1. claimLogBatch fixes a batch in Postgres and commits it, unless one is open already: the lowest
//      queued row ids and a random token (log_outbox_batches, Postgres migration 015);
//   2. sendLogBatch inserts those rows with the token as insert_deduplication_token, then deletes the
//      rows and the batch, in one Postgres transaction.
// If ClickHouse took the insert but the delete was lost (the worker, its connection or Postgres died
// between the two), the batch is still there and is sent again before any new one, with the same
// rows and token: ClickHouse drops the repeat whole, in `logs` and in the log_stats_15m its view
// feeds (both tables keep a deduplication window, ClickHouse migration 012). `logs` still collapses a
// repeated request in its ReplacingMergeTree, so a row is never shown twice either.
//
// Every step runs under one transaction-scoped advisory lock, so one worker drains at a time (the
// others' passes find it taken and return, or wait for it when asked to): a batch is claimed only
// when none is open, so batches never overlap and the window only ever needs to hold the one insert
// before the repeat. One insert at a time of up to the pass's limit is also what ClickHouse prefers
// to many small ones.
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { ClickHouseClient } from '@clickhouse/client';
import type { Queryable, Sql } from '../infra/postgres/client.js';

const DRAIN_LOCK_ID = 727_009;

// A drainer whose connection hangs inside its transaction would hold the lock, and so every worker's
// drain, until TCP noticed; Postgres ends such a session sooner. Longer than the ClickHouse client's
// request timeout (30 s, infra/clickhouse/client.ts), the longest a transaction legitimately idles.
const DRAIN_IDLE_TIMEOUT = '90s';

/**
 * ClickHouse refused or could not be reached for a batch's insert. A pass can also fail in Postgres
 * (a claim, a delete, a connection terminated); the worker tells the two apart, so that its health and
 * `gateway_billing_log_store_up` blame the log store only for the log store's failures.
 */
export class LogStoreError extends Error {
  constructor(cause: unknown) {
    super(`ClickHouse did not take the log rows: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'LogStoreError';
  }
}

/** What a pass returns when another worker holds the drain (and the pass was not asked to wait). */
export const DRAIN_BUSY = -1;

export interface DrainOptions {
  /** Wait for a drain another worker holds instead of returning DRAIN_BUSY (tools and tests). */
  wait?: boolean;
}

/**
 * One pass, two transactions: the batch an earlier pass left open or else a new one of up to `limit`
 * rows, then that batch sent. Returns how many rows ClickHouse took (0: nothing queued), or DRAIN_BUSY.
 */
export async function drainLogOutbox(sql: Sql, ch: ClickHouseClient, limit: number, options: DrainOptions = {}): Promise<number> {
  const open = await claimLogBatch(sql, limit, options);
  if (open !== true) return open === false ? 0 : DRAIN_BUSY;
  return sendLogBatch(sql, ch, options);
}

/**
 * Makes sure a batch is open: the one an earlier pass left (its rows are not chosen again), or else a
 * new one, committed. false: nothing queued; DRAIN_BUSY: another worker holds the drain.
 */
export async function claimLogBatch(sql: Sql, limit: number, options: DrainOptions = {}): Promise<boolean | typeof DRAIN_BUSY> {
  return sql.begin(async (tx) => {
    if (!(await lockDrain(tx, options))) return DRAIN_BUSY;
    const [left] = await tx`SELECT EXISTS (SELECT 1 FROM log_outbox_batches) AS open`;
    if (left!.open) return true;
    const claimed = await tx`
      INSERT INTO log_outbox_batches (row_ids)
      SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM log_outbox ORDER BY id LIMIT ${limit}) AS q
      HAVING count(*) > 0
      RETURNING id`;
    return claimed.length > 0;
  });
}

/**
 * Sends the open batch, if any: its rows to ClickHouse with its token, then deletes them. Returns the
 * rows sent, 0 if no batch is open, DRAIN_BUSY; throws a LogStoreError if ClickHouse fails (the batch
 * stays open and is sent again, with the same token, by the next pass of any worker).
 */
export async function sendLogBatch(sql: Sql, ch: ClickHouseClient, options: DrainOptions = {}): Promise<number> {
  return sql.begin(async (tx) => {
    if (!(await lockDrain(tx, options))) return DRAIN_BUSY;
    await tx.unsafe(`SET LOCAL idle_in_transaction_session_timeout = '${DRAIN_IDLE_TIMEOUT}'`);
    const [batch] = (await tx`SELECT id, token, row_ids FROM log_outbox_batches ORDER BY id LIMIT 1`) as unknown as
      { id: number; token: string; row_ids: number[] }[];
    if (!batch) return 0;
    // The rows as ClickHouse takes them (JSONEachRow): each row's JSON text as settle-batch.ts wrote
    // it, joined in Postgres, not parsed into objects here only to be serialized again.
    const [sent] = (await tx`
      SELECT count(*)::int AS n, string_agg(row, E'\n' ORDER BY id) AS body
      FROM log_outbox WHERE id = ANY(${batch.row_ids}::bigint[])`) as unknown as { n: number; body: string | null }[];
    if (sent!.n > 0) await insertLogRows(ch, `${sent!.body!}\n`, batch.token);
    await tx`DELETE FROM log_outbox WHERE id = ANY(${batch.row_ids}::bigint[])`;
    await tx`DELETE FROM log_outbox_batches WHERE id = ${batch.id}`;
    return sent!.n;
  });
}

/** One batch's rows into `logs`, under its deduplication token; a failure is a LogStoreError. */
async function insertLogRows(ch: ClickHouseClient, body: string, token: string): Promise<void> {
  try {
    const { stream } = await ch.exec({
      query: 'INSERT INTO logs FORMAT JSONEachRow',
      values: Readable.from([body]),
      clickhouse_settings: {
        insert_deduplication_token: `log-outbox-${token}`,
        // Both default to 1 on current servers; said here so that a server profile or an older
        // server (the second defaulted to 0 before) cannot count a repeat in the stats.
        insert_deduplicate: 1,
        deduplicate_blocks_in_dependent_materialized_views: 1,
      },
    });
    // An insert answers nothing worth reading; the stream is drained so that its socket is reused.
    stream.resume();
    await finished(stream);
  } catch (err) {
    throw new LogStoreError(err);
  }
}

async function lockDrain(tx: Queryable, { wait = false }: DrainOptions): Promise<boolean> {
  if (wait) {
    await tx`SELECT pg_advisory_xact_lock(${DRAIN_LOCK_ID})`;
    return true;
  }
  const [lock] = await tx`SELECT pg_try_advisory_xact_lock(${DRAIN_LOCK_ID}) AS held`;
  return lock!.held as boolean;
}

/**
 * Rows sent between two vacuums of the outbox by one worker: about 20 MB of dead rows, a fraction of
 * a second of VACUUM.
 */
export const OUTBOX_VACUUM_ROWS = 20_000;

/**
 * Vacuums the outbox's tables. They are a queue: every row is inserted, then deleted once ClickHouse
 * has it, so each leaves a dead row behind, and the claim's `ORDER BY id LIMIT` and the deletes wade
 * through them. Autovacuum would reclaim them, but it may be disabled (as on the development machine,
 * where after 930,000 rows the outbox held 928 MB of dead rows, and Postgres used 35% of a core in the
 * bench's small run against 11% once vacuumed, docs/performance.md). So the worker does not rely on
 * it. SKIP_LOCKED: a vacuum already running (another worker's, autovacuum's) is enough.
 */
export async function vacuumLogOutbox(sql: Sql): Promise<void> {
  // Outside any transaction (VACUUM refuses to run in one); not prepared: it runs now and then.
  await sql.unsafe('VACUUM (SKIP_LOCKED) log_outbox, log_outbox_batches');
}

/** Rows waiting for ClickHouse (the backlog gauge). */
export async function logOutboxBacklog(sql: Sql): Promise<number> {
  const [r] = await sql`SELECT COUNT(*)::bigint AS n FROM log_outbox`;
  return Number(r!.n);
}
