// Cache invalidations the console publishes on keys.invalidationChannel() after a committed change
// the relay caches. The payload is one JSON object; README.md ("Cache invalidation messages") is the
// reference for subscribers.
import type { Redis } from '../infra/redis/client.js';
import type { RedisKeys } from '../infra/redis/keys.js';

export type Invalidation =
  /** An account's quota, group, status or role changed. */
  | { kind: 'user'; id: number }
  /** An API key was created, changed or deleted; user_id is its owner. */
  | { kind: 'token'; id: number; user_id: number }
  /** A channel (and so the abilities table) changed. */
  | { kind: 'channel'; id: number }
  /** Rows of the options table changed (ratios, groups, ...); keys names them. */
  | { kind: 'options'; keys: string[] };

export async function publishInvalidation(redis: Redis, keys: RedisKeys, message: Invalidation): Promise<void> {
  await redis.publish(keys.invalidationChannel(), JSON.stringify(message));
}
