// An account's users row held by another transaction, as a stuck transaction or a long maintenance
// statement would hold it: what the console's writes meet (credential races, lock timeouts).
import type { Queryable, Sql } from '../../infra/postgres/client.js';

/**
 * Runs `during` while the account's row is locked (`SELECT ... FOR UPDATE`) by a transaction on `sql`,
 * then releases it: `beforeRelease` runs in that transaction first (a ban committed with the release).
 * Returns what `during` returned; promises it started settle after the release.
 */
export async function withUserRowLocked<T>(
  sql: Sql, userId: number, during: () => Promise<T>, opts: { beforeRelease?: (tx: Queryable) => Promise<unknown> } = {},
): Promise<T> {
  let release!: () => void;
  const released = new Promise<void>((r) => { release = r; });
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => { locked = r; });
  const holder = sql.begin(async (tx) => {
    await tx`SELECT 1 FROM users WHERE id = ${userId} FOR UPDATE`;
    locked();
    await released;
    await opts.beforeRelease?.(tx);
  });
  await isLocked;
  try {
    return await during();
  } finally {
    release();
    await holder;
  }
}
