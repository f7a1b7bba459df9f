// Moves log rows from the Postgres log_outbox (written with the ledger rows, billing/settle-batch.ts)
// to ClickHouse: insert, then delete what was inserted, in one Postgres transaction whose row locks
// (SKIP LOCKED) keep two workers from sending the same rows. If ClickHouse fails, the rows stay and
// the next pass retries them; if the delete is lost after ClickHouse took them, the replayed insert
// collapses in the ReplacingMergeTree (same ordering key), so nothing is counted twice.
import type { ClickHouseClient } from '@clickhouse/client';
import type { Sql } from '../infra/postgres/client.js';

/** Sends up to `limit` queued log rows; returns how many were sent (0: nothing queued). */
export async function drainLogOutbox(sql: Sql, ch: ClickHouseClient, limit: number): Promise<number> {
  return sql.begin(async (tx) => {
    const rows = (await tx`SELECT id, row FROM log_outbox ORDER BY id LIMIT ${limit} FOR UPDATE SKIP LOCKED`) as unknown as { id: string | number; row: Record<string, unknown> }[];
    if (rows.length === 0) return 0;
    await ch.insert({ table: 'logs', values: rows.map((r) => r.row), format: 'JSONEachRow' });
    await tx`DELETE FROM log_outbox WHERE id = ANY(${rows.map((r) => r.id)}::bigint[])`;
    return rows.length;
  });
}

/** Rows waiting for ClickHouse (the backlog gauge). */
export async function logOutboxBacklog(sql: Sql): Promise<number> {
  const [r] = await sql`SELECT COUNT(*)::bigint AS n FROM log_outbox`;
  return Number(r!.n);
}
