// The one schema of what the relay appends to the usage stream and the billing worker applies.
// Version 1. New fields must be optional, so that an old relay and a new worker (or the reverse)
// can run side by side during a rolling deploy.
import { z } from 'zod';

export const LOG_TYPE = { topup: 1, consume: 2, manage: 3, system: 4, error: 5 } as const;

export const usageEventSchema = z.object({
  v: z.literal(1),
  /**
   * 2 consumption and 5 error come from the relay and move money when billed. 1 top-up, 3 management
   * and 4 system come from the console, which already moved the money (and wrote the ledger row) in
   * its own transaction: billing only writes their log row.
   */
  type: z.union([z.literal(LOG_TYPE.topup), z.literal(LOG_TYPE.consume), z.literal(LOG_TYPE.manage), z.literal(LOG_TYPE.system), z.literal(LOG_TYPE.error)]),
  request_id: z.string().min(1),
  upstream_request_id: z.string(),
  user_id: z.number().int().positive(),
  /** For console events, the signed quota change (a top-up is positive); relay events leave it out. */
  quota_delta: z.number().int().optional(),
  username: z.string(),
  token_id: z.number().int().nonnegative(),
  token_name: z.string(),
  /** Whether the key has a quota of its own that this debit also reduces. */
  token_limited: z.boolean(),
  channel: z.number().int().nonnegative(),
  model_name: z.string(),
  group: z.string(),
  /** Relay events: quota debited, exactly what left the Redis balance. Console events: quota credited. */
  quota: z.number().int().nonnegative(),
  prompt_tokens: z.number().int().nonnegative(),
  completion_tokens: z.number().int().nonnegative(),
  cache_tokens: z.number().int().nonnegative().optional(),
  is_stream: z.boolean(),
  use_time_ms: z.number().int().nonnegative(),
  /** Unix seconds at which the request was received. */
  created_at: z.number().int().positive(),
  content: z.string(),
  ip: z.string().optional(),
});

export type UsageEvent = z.infer<typeof usageEventSchema>;

export function encodeUsageEvent(event: UsageEvent): string {
  return JSON.stringify(event);
}

/** Whether billing moves money for this event (relay events) or only logs it (console events). */
export function movesMoney(e: UsageEvent): boolean {
  return e.type === LOG_TYPE.consume || e.type === LOG_TYPE.error;
}

export function decodeUsageEvent(raw: string): UsageEvent {
  return usageEventSchema.parse(JSON.parse(raw));
}
