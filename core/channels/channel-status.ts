// A channel's status and its changes by the health machinery, written by the relay (automatic
// disabling, relay/routing/channel-health.ts) and by the console's prober (re-enabling,
// console-api/channels/channel-prober.ts): the same rows moved the same way by two peers.
import type { Sql } from '../../infra/postgres/client.js';

/** new-api's numbering: 1 enabled, 2 disabled by an administrator, 3 disabled automatically. */
export const CHANNEL_STATUS = { enabled: 1, manuallyDisabled: 2, autoDisabled: 3 } as const;

export interface StatusChange {
  id: number;
  name: string;
}

/**
 * Enabled → disabled automatically, with its reason; the first probe is due `firstProbeInSec` later.
 * Only from status 1: a channel an administrator disabled meanwhile stays as they left it, and of
 * several relays tripping at once exactly one gets the row back (the one that logs and announces).
 * The abilities follow in the same transaction, as whenever a channel's status changes.
 */
export async function disableAutomatically(sql: Sql, id: number, reason: string, nowSec: number, firstProbeInSec: number): Promise<StatusChange | null> {
  return sql.begin(async (tx) => {
    const [row] = await tx<StatusChange[]>`
      UPDATE channels SET status = ${CHANNEL_STATUS.autoDisabled}, status_reason = ${reason}, status_time = ${nowSec},
                          probe_failures = 0, next_probe_time = ${nowSec + firstProbeInSec}
      WHERE id = ${id} AND status = ${CHANNEL_STATUS.enabled} AND auto_ban
      RETURNING id, name`;
    if (!row) return null;
    await tx`UPDATE abilities SET enabled = false WHERE channel_id = ${id}`;
    return { id: Number(row.id), name: row.name };
  });
}

/** Disabled automatically → enabled, after a good probe. Never a channel an administrator disabled. */
export async function reenableAfterProbe(sql: Sql, id: number, reason: string, nowSec: number): Promise<StatusChange | null> {
  return sql.begin(async (tx) => {
    const [row] = await tx<StatusChange[]>`
      UPDATE channels SET status = ${CHANNEL_STATUS.enabled}, status_reason = ${reason}, status_time = ${nowSec},
                          probe_failures = 0, next_probe_time = 0
      WHERE id = ${id} AND status = ${CHANNEL_STATUS.autoDisabled}
      RETURNING id, name`;
    if (!row) return null;
    await tx`UPDATE abilities SET enabled = true WHERE channel_id = ${id}`;
    return { id: Number(row.id), name: row.name };
  });
}
