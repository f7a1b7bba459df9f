// A settled usage event as a row of the ClickHouse `logs` table (infra/clickhouse/migrations). The
// billing worker writes these rows and the console reads them back, so the shape lives here.
import { LOG_TYPE, type UsageEvent } from './usage-event.js';

/** The contract's log entry (interface.md, "Log entry"), field for field, and `protocol` (additive). */
export interface LogEntry {
  id: number;
  user_id: number;
  created_at: number;
  type: number;
  content: string;
  username: string;
  token_name: string;
  model_name: string;
  quota: number;
  prompt_tokens: number;
  completion_tokens: number;
  use_time: number;
  is_stream: boolean;
  channel: number;
  token_id: number;
  group: string;
  request_id: string;
  upstream_request_id: string;
  /** The protocol the client spoke: `anthropic` (/v1/messages) or `openai` (/v1/chat/completions). */
  protocol: string;
}

/** A row of the `logs` table: the contract's entry plus what the table keeps besides. */
export interface LogRow extends LogEntry {
  cache_tokens: number;
  cache_read_tokens: number;
  cache_write_5m_tokens: number;
  cache_write_1h_tokens: number;
  web_search_requests: number;
  ip: string;
}

/**
 * The text as Postgres and ClickHouse can hold it: a lone UTF-16 surrogate (a client's JSON can carry
 * one, "\ud800") becomes U+FFFD, as postgres.js encodes it for the ledger. JSON.stringify writes a
 * lone surrogate as its escape, which ClickHouse's JSON input refuses: one such row would stop the
 * log outbox's drain for every row behind it.
 */
export function wellFormed(text: string): string {
  return text.isWellFormed() ? text : text.toWellFormed();
}

/** `id` is the log id billing assigned to the settled event. */
export function toLogRow({ id, event: e }: { id: number; event: UsageEvent }): LogRow {
  return {
    id,
    user_id: e.user_id,
    created_at: e.created_at,
    type: e.type,
    content: wellFormed(e.content),
    username: wellFormed(e.username),
    token_name: wellFormed(e.token_name),
    model_name: wellFormed(e.model_name),
    quota: e.quota,
    prompt_tokens: e.prompt_tokens,
    completion_tokens: e.completion_tokens,
    cache_tokens: e.cache_tokens ?? 0,
    cache_read_tokens: e.cache_read_tokens ?? 0,
    cache_write_5m_tokens: e.cache_write_5m_tokens ?? 0,
    cache_write_1h_tokens: e.cache_write_1h_tokens ?? 0,
    web_search_requests: e.web_search_requests ?? 0,
    // The contract gives use_time in whole seconds; a request under a second rounds up to 1 only if
    // it took any time at all, as new-api reports it.
    use_time: Math.ceil(e.use_time_ms / 1000),
    is_stream: e.is_stream,
    channel: e.channel,
    token_id: e.token_id,
    group: wellFormed(e.group),
    request_id: wellFormed(e.request_id),
    upstream_request_id: wellFormed(e.upstream_request_id),
    ip: wellFormed(e.ip ?? ''),
    // Only a request came in by a protocol; an event without one is a relay's from before protocols
    // were recorded (Anthropic's only), or a top-up, management or system row, which has none.
    protocol: wellFormed(e.protocol ?? (e.type === LOG_TYPE.consume || e.type === LOG_TYPE.error ? 'anthropic' : '')),
  };
}
