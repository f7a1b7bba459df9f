// The one schema of what the relay and the console append to the usage stream and the billing worker
// applies, with the one builder and the one append of an event. Version 1. New fields must be
// optional, so that an old relay and a new worker (or the reverse) can run side by side during a
// rolling deploy.
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { compileSchema, type CompiledSchema } from '../../infra/schema/compiled-schema.js';

export const LOG_TYPE = { topup: 1, consume: 2, manage: 3, system: 4, error: 5 } as const;

/** The log row keeps whole seconds in a UInt32 (infra/clickhouse/migrations/001_logs.sql). */
const MAX_USE_TIME_MS = 0xffff_ffff * 1000;

/**
 * The longest request id an event may carry. ledger.request_id is UNIQUE, a btree index whose entries
 * Postgres caps at 2704 bytes: a longer id was refused with 54000 (program_limit_exceeded) and, before
 * that was dead-lettered, failed its batch at every read (docs/billing.md, step 5). Every id a real
 * emitter makes fits many times over: the relay's are UUIDs (36 characters; the reaper's
 * `<uuid>:expired`, 44), the console's `topup:<trade_no of at most 64>`, `redeem:<id>`,
 * `manage:<uuid>`, `aff-transfer:<uuid>`, `aff-inviter:<id>`, at most 70. 256 characters are at most
 * 1 KiB of UTF-8. A longer one is refused at decode, and dead-lettered there.
 */
export const MAX_REQUEST_ID_LENGTH = 256;

export const usageEventSchema = z.object({
  v: z.literal(1),
  /**
   * 2 consumption and 5 error come from the relay and move money when billed. 1 top-up, 3 management
   * and 4 system come from the console, which already moved the money (and wrote the ledger row) in
   * its own transaction: billing only writes their log row.
   */
  type: z.union([z.literal(LOG_TYPE.topup), z.literal(LOG_TYPE.consume), z.literal(LOG_TYPE.manage), z.literal(LOG_TYPE.system), z.literal(LOG_TYPE.error)]),
  /** Unique per event (the ledger's idempotency key); at most MAX_REQUEST_ID_LENGTH characters. */
  request_id: z.string().min(1).max(MAX_REQUEST_ID_LENGTH),
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
  /**
   * Relay events: by how much the cost exceeded the reservation (absent when it did not). The
   * reservation is meant to bound every cost (docs/billing.md), so this marks a bound that failed: the
   * excess is still debited, as the provider charged it, and is what the balance may go below zero by.
   */
  over_reservation: z.number().int().positive().optional(),
  /**
   * Relay events: the cache tokens apart, as priced (core/pricing/quota-cost.ts). cache_tokens is
   * their sum; prompt_tokens counts them too. Absent from older emitters' events.
   */
  cache_read_tokens: z.number().int().nonnegative().optional(),
  cache_write_5m_tokens: z.number().int().nonnegative().optional(),
  cache_write_1h_tokens: z.number().int().nonnegative().optional(),
  /**
   * Relay events: the provider's usage.server_tool_use.web_search_requests, each billed at
   * WebSearchCallPrice × group ratio within `quota` (core/pricing/quota-cost.ts). Absent: none.
   */
  web_search_requests: z.number().int().positive().optional(),
  is_stream: z.boolean(),
  /**
   * Relay events: the protocol the client spoke, `anthropic` (POST /v1/messages) or `openai` (POST
   * /v1/chat/completions). Absent: anthropic (older emitters knew no other).
   */
  protocol: z.enum(['anthropic', 'openai']).optional(),
  /**
   * How long the request took. A decoder takes a number out of range (a relay's clock stepped back)
   * as 0 rather than refuse the event: the debit it carries is already made (decodeUsageEvent).
   */
  use_time_ms: z.number().int().nonnegative().max(MAX_USE_TIME_MS),
  /** Unix seconds at which the request was received. */
  created_at: z.number().int().positive(),
  content: z.string(),
  ip: z.string().optional(),
});

export type UsageEvent = z.infer<typeof usageEventSchema>;

/**
 * The stream entry field holding the encoded event. settleReservations-9n.lua appends the relay's events
 * itself and spells it out too (usage-event.unit.test.ts keeps the two the same).
 */
export const USAGE_EVENT_FIELD = 'e';

/** What an event says; every field left out means "not applicable" (no key, no channel, no tokens...). */
export type UsageEventFields =
  & Pick<UsageEvent, 'type' | 'request_id' | 'user_id' | 'created_at' | 'content'>
  & Partial<Omit<UsageEvent, 'v' | 'type' | 'request_id' | 'user_id' | 'created_at' | 'content'>>;

/** The one builder of usage events, whoever emits them (relay settlement, reaper, console credits). */
export function usageEvent(f: UsageEventFields): UsageEvent {
  const e: UsageEvent = {
    v: 1,
    type: f.type,
    request_id: f.request_id,
    upstream_request_id: f.upstream_request_id ?? '',
    user_id: f.user_id,
    username: f.username ?? '',
    token_id: f.token_id ?? 0,
    token_name: f.token_name ?? '',
    token_limited: f.token_limited ?? false,
    channel: f.channel ?? 0,
    model_name: f.model_name ?? '',
    group: f.group ?? '',
    quota: f.quota ?? 0,
    prompt_tokens: f.prompt_tokens ?? 0,
    completion_tokens: f.completion_tokens ?? 0,
    is_stream: f.is_stream ?? false,
    use_time_ms: f.use_time_ms ?? 0,
    created_at: f.created_at,
    content: f.content,
  };
  // Optional fields only when given: an event without them is what an older emitter wrote.
  if (f.quota_delta !== undefined) e.quota_delta = f.quota_delta;
  if (f.cache_tokens !== undefined) e.cache_tokens = f.cache_tokens;
  if (f.over_reservation !== undefined) e.over_reservation = f.over_reservation;
  if (f.cache_read_tokens !== undefined) e.cache_read_tokens = f.cache_read_tokens;
  if (f.cache_write_5m_tokens !== undefined) e.cache_write_5m_tokens = f.cache_write_5m_tokens;
  if (f.cache_write_1h_tokens !== undefined) e.cache_write_1h_tokens = f.cache_write_1h_tokens;
  if (f.web_search_requests !== undefined) e.web_search_requests = f.web_search_requests;
  if (f.ip !== undefined) e.ip = f.ip;
  if (f.protocol !== undefined) e.protocol = f.protocol;
  return e;
}

/**
 * Appends an encoded event to the usage stream (`keys.usageStream()`). The relay's settlement appends
 * inside settleReservations-9n.lua instead, atomically with its debit.
 */
export async function appendUsageEvent(redis: Redis, stream: string, encoded: string): Promise<void> {
  await redis.xadd(stream, '*', USAGE_EVENT_FIELD, encoded);
}

/** Where a stream entry's field list holds the event field's value, or -1 when it has none. */
function eventValueAt(fields: readonly string[]): number {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === USAGE_EVENT_FIELD) return i + 1;
  return -1;
}

/** The event field's text of a stream entry's field list, or undefined when the entry has none. */
export function encodedUsageEventOf(fields: readonly string[]): string | undefined {
  const at = eventValueAt(fields);
  return at < 0 ? undefined : fields[at];
}

/**
 * The encoded events of a stream entry's field list, or undefined when the entry has none. The relay's
 * settlement scripts append the events of one call as one entry, their texts joined by newlines
 * (settleSliceDraws-4n.lua says why; encodeUsageEvent never writes a raw newline); every other
 * emitter appends one event per entry, which reads as a list of one.
 */
export function encodedUsageEventsOf(fields: readonly string[]): string[] | undefined {
  return encodedUsageEventOf(fields)?.split('\n');
}

/** The field list with its event field holding `encoded` alone (one event of an entry, dead-lettered). */
export function withEncodedUsageEvent(fields: readonly string[], encoded: string): string[] {
  const out = fields.slice();
  const at = eventValueAt(out);
  if (at >= 0) out[at] = encoded;
  return out;
}

export function encodeUsageEvent(event: UsageEvent): string {
  return JSON.stringify(event);
}

/** Whether billing moves money for this event (relay events) or only logs it (console events). */
export function movesMoney(e: UsageEvent): boolean {
  return e.type === LOG_TYPE.consume || e.type === LOG_TYPE.error;
}

let checkUsageEvent: CompiledSchema | undefined;

/**
 * The event an encoded text holds; throws when it is not JSON or not an event. Checked where it lies
 * by the compiled schema, not copied by zod's parse (infra/schema/compiled-schema.ts): the billing
 * worker decodes every event it settles. Fields a newer emitter added are kept, not refused.
 */
export function decodeUsageEvent(raw: string): UsageEvent {
  const event: unknown = JSON.parse(raw);
  // Compiled on first use: the relay imports this module and never decodes.
  const check = (checkUsageEvent ??= compileSchema(usageEventSchema));
  let problem = check(event);
  // Only on a refusal, so a valid event costs nothing more: a debit Redis has made must not be held
  // back for good by its duration alone, so one that is numeric but no duration (a relay's clock
  // stepped back: negative) is read as 0, and the event checked again for anything else.
  if (problem !== null && repairUseTime(event)) problem = check(event);
  if (problem !== null) throw new Error(`not a usage event: ${problem}`);
  return event as UsageEvent;
}

/** Sets a numeric use_time_ms that is out of range to 0, a fraction to its nearest integer; whether it changed one. */
function repairUseTime(event: unknown): boolean {
  if (typeof event !== 'object' || event === null) return false;
  const e = event as { use_time_ms?: unknown };
  const t = e.use_time_ms;
  if (typeof t !== 'number' || (Number.isInteger(t) && t >= 0 && t <= MAX_USE_TIME_MS)) return false;
  const rounded = Math.round(t);
  e.use_time_ms = rounded > 0 && rounded <= MAX_USE_TIME_MS ? rounded : 0;
  return true;
}
