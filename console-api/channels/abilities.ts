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

/** Replaces the channel's abilities with one row per (group, model). Run inside the channel's transaction. */
export async function rebuildAbilities(tx: Db, channel: AbilitySource): Promise<void> {
  await tx`DELETE FROM abilities WHERE channel_id = ${channel.id}`;
  const groups = channel.group.split(',').filter(Boolean);
  const models = channel.models.split(',').filter(Boolean);
  const rows = groups.flatMap((group) =>
    models.map((model) => ({
      group,
      model,
      channel_id: channel.id,
      enabled: channel.status === CHANNEL_STATUS.enabled,
      priority: channel.priority,
      weight: channel.weight,
    })),
  );
  if (rows.length > 0) {
    await tx`INSERT INTO abilities ${tx(rows, 'group', 'model', 'channel_id', 'enabled', 'priority', 'weight')}`;
  }
}
