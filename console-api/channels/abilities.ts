// A channel's abilities rows (group x model) are what the relay routes on. Whoever writes a channel
// (the channel routes, the demo seed, the bench's fixtures) rebuilds them in the same transaction, so
// routing never sees a channel without its abilities or the reverse.
import type { Db } from '../db.js';
import { CHANNEL_STATUS } from '../../core/channels/channel-status.js';

// new-api's numbering, shared with the relay, which disables channels automatically.
export { CHANNEL_STATUS };

/** The columns of a channel row that its abilities are made from. */
export interface AbilitySource {
  id: number;
  status: number;
  /** Comma-separated group names. */
  group: string;
  /** Comma-separated model names. */
  models: string;
  priority: number;
  weight: number;
}

/**
 * Replaces the channel's abilities with one row per (group, model). Run inside the channel's transaction.
 * The rows are made by Postgres from the two lists (a cross join), so the statement has the same six
 * parameters whatever the channel's size: a VALUES list of six per row exceeded the protocol's 65,535
 * parameters at 10,923 rows.
 */
export async function rebuildAbilities(tx: Db, channel: AbilitySource): Promise<void> {
  await tx`DELETE FROM abilities WHERE channel_id = ${channel.id}`;
  const groups = distinctNames(channel.group);
  const models = distinctNames(channel.models);
  if (groups.length === 0 || models.length === 0) return;
  // Passed as comma-joined text rather than array parameters, which need postgres.js's array types
  // (fetch_types, off in some processes); the names were split on commas, so none holds one.
  await tx`
    INSERT INTO abilities ("group", model, channel_id, enabled, priority, weight)
    SELECT g, m, ${channel.id}, ${channel.status === CHANNEL_STATUS.enabled}, ${channel.priority}, ${channel.weight}
    FROM unnest(string_to_array(${groups.join(',')}, ',')) AS g
    CROSS JOIN unnest(string_to_array(${models.join(',')}, ',')) AS m`;
}

/**
 * The names of a comma-separated list, trimmed, once each (a repeated one would break the primary
 * key). Trimmed as the channel routes trim what they store: a row written before they split array
 * items (" b" from ["a, b"]) gets abilities a request can match when it is next written.
 */
function distinctNames(list: string): string[] {
  return [...new Set(list.split(',').map((s) => s.trim()).filter(Boolean))];
}
