// The cache invalidation message: the console publishes it on keys.invalidationChannel() after a
// committed change the relay caches, and the relay parses it with the same schema. The payload is one
// JSON object; this schema is the reference for other subscribers (unknown members are ignored, so a
// relay of an earlier version reads a message that carries more).
import { z } from 'zod';
import type { Redis } from '../../infra/redis/client.js';
import type { RedisKeys } from '../../infra/redis/keys.js';

// What a subscriber acts on is required; what only describes the change is optional, so a message
// published by hand (a test, the bench, redis-cli) with just the kind and id still reaches the caches.
export const invalidationSchema = z.discriminatedUnion('kind', [
  /** An account's quota, group, status or role changed. */
  z.object({ kind: z.literal('user'), id: z.number() }),
  /** An API key was created, changed or deleted; user_id is its owner. */
  z.object({ kind: z.literal('token'), id: z.number(), user_id: z.number().optional() }),
  /** A channel (and so the abilities table) changed. */
  z.object({ kind: z.literal('channel'), id: z.number().optional() }),
  /** Rows of the options table changed (ratios, groups, ...); keys names them. */
  z.object({ kind: z.literal('options'), keys: z.array(z.string()).optional() }),
  /**
   * A relay set a channel aside for `ms` (its provider keeps failing to serve: relay/routing/
   * channel-cooldown.ts): the other relays do the same rather than each meeting the failures itself.
   * `from` names the announcing relay (a random id per process), which ignores its own announcement
   * when it comes back: a success in between would otherwise be undone by it.
   */
  z.object({
    kind: z.literal('channel_aside'), id: z.number().int().positive(), ms: z.number().int().positive().max(86_400_000),
    from: z.string().max(64).optional(),
  }),
]);

export type Invalidation = z.infer<typeof invalidationSchema>;

export async function publishInvalidation(redis: Redis, keys: RedisKeys, message: Invalidation): Promise<void> {
  await redis.publish(keys.invalidationChannel(), JSON.stringify(message));
}

/** The message of a raw payload, or undefined when it is not JSON or not a message of the schema. */
export function parseInvalidation(raw: string): Invalidation | undefined {
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    return undefined;
  }
  const parsed = invalidationSchema.safeParse(json);
  return parsed.success ? parsed.data : undefined;
}
