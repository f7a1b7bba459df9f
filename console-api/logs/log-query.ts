// Queries of the request log in ClickHouse (infra/clickhouse/migrations/001_logs.sql). Every query:
//   - reads `logs FINAL`, so a replayed request (same user_id, created_at, request_id) counts once even
//     before ReplacingMergeTree merges the parts;
//   - is scoped to one user_id;
//   - binds every value as a server-side parameter ({name:Type} + query_params); the SQL text is
//     assembled only from the constant fragments below.
import type { ClickHouseClient } from '../../infra/clickhouse/client.js';
import type { LogEntry } from '../../core/usage/log-rows.js';
import { LOG_TYPE } from '../../core/usage/usage-event.js';

export type { LogEntry };

export interface LogFilters {
  userId: number;
  /** 0 or undefined: every type. */
  type?: number;
  tokenName?: string;
  modelName?: string;
  group?: string;
  channel?: number;
  /** Unix seconds, inclusive. */
  startTimestamp?: number;
  /** Unix seconds, inclusive. */
  endTimestamp?: number;
  requestId?: string;
  upstreamRequestId?: string;
}

export interface LogStat {
  quota: number;
  rpm: number;
  tpm: number;
}

type Params = Record<string, string | number>;

const MAX_UINT32 = 0xffff_ffff;
const clampTs = (ts: number) => Math.min(Math.max(Math.trunc(ts), 0), MAX_UINT32);

/** WHERE fragments for every filter except the time range. */
function attributeFilters(f: LogFilters): { clauses: string[]; params: Params } {
  const clauses = ['user_id = {user_id:UInt64}'];
  const params: Params = { user_id: f.userId };
  if (f.type) {
    clauses.push('type = {type:UInt8}');
    params.type = f.type;
  }
  if (f.tokenName !== undefined) {
    clauses.push('token_name = {token_name:String}');
    params.token_name = f.tokenName;
  }
  if (f.modelName !== undefined) {
    clauses.push('model_name = {model_name:String}');
    params.model_name = f.modelName;
  }
  if (f.group !== undefined) {
    clauses.push('`group` = {group:String}');
    params.group = f.group;
  }
  if (f.channel) {
    clauses.push('channel = {channel:UInt32}');
    params.channel = f.channel;
  }
  if (f.requestId !== undefined) {
    clauses.push('request_id = {request_id:String}');
    params.request_id = f.requestId;
  }
  if (f.upstreamRequestId !== undefined) {
    clauses.push('upstream_request_id = {upstream_request_id:String}');
    params.upstream_request_id = f.upstreamRequestId;
  }
  return { clauses, params };
}

function timeRange(f: LogFilters, params: Params): string[] {
  const clauses: string[] = [];
  if (f.startTimestamp) {
    clauses.push('created_at >= toDateTime({start_ts:UInt32})');
    params.start_ts = clampTs(f.startTimestamp);
  }
  if (f.endTimestamp) {
    clauses.push('created_at <= toDateTime({end_ts:UInt32})');
    params.end_ts = clampTs(f.endTimestamp);
  }
  return clauses;
}

interface RawLogRow {
  id: string | number;
  user_id: string | number;
  created_at_unix: string | number;
  type: number;
  content: string;
  username: string;
  token_name: string;
  model_name: string;
  quota: string | number;
  prompt_tokens: number;
  completion_tokens: number;
  use_time: number;
  is_stream: boolean | number | string;
  channel: number;
  token_id: string | number;
  group: string;
  request_id: string;
  upstream_request_id: string;
}

/** ClickHouse's JSON formats quote (U)Int64 as strings: every integer is converted here. */
export function toLogEntry(r: RawLogRow): LogEntry {
  return {
    id: Number(r.id),
    user_id: Number(r.user_id),
    created_at: Number(r.created_at_unix),
    type: Number(r.type),
    content: r.content,
    username: r.username,
    token_name: r.token_name,
    model_name: r.model_name,
    quota: Number(r.quota),
    prompt_tokens: Number(r.prompt_tokens),
    completion_tokens: Number(r.completion_tokens),
    use_time: Number(r.use_time),
    is_stream: r.is_stream === true || r.is_stream === 1 || r.is_stream === 'true',
    channel: Number(r.channel),
    token_id: Number(r.token_id),
    group: r.group,
    request_id: r.request_id,
    upstream_request_id: r.upstream_request_id,
  };
}

export async function queryLogs(
  ch: ClickHouseClient,
  filters: LogFilters,
  page: { page: number; pageSize: number },
): Promise<{ items: LogEntry[]; total: number }> {
  const { clauses, params } = attributeFilters(filters);
  clauses.push(...timeRange(filters, params));
  const where = clauses.join(' AND ');
  const listParams: Params = { ...params, limit: page.pageSize, offset: (page.page - 1) * page.pageSize };
  const [rows, count] = await Promise.all([
    ch
      .query({
        query: `
          SELECT id, user_id, toUnixTimestamp(created_at) AS created_at_unix, type, content, username,
                 token_name, model_name, quota, prompt_tokens, completion_tokens, use_time, is_stream,
                 channel, token_id, \`group\`, request_id, upstream_request_id
          FROM logs FINAL
          WHERE ${where}
          ORDER BY created_at DESC, id DESC
          LIMIT {limit:UInt32} OFFSET {offset:UInt64}`,
        query_params: listParams,
        format: 'JSONEachRow',
      })
      .then((rs) => rs.json<RawLogRow>()),
    ch
      .query({ query: `SELECT count() AS total FROM logs FINAL WHERE ${where}`, query_params: params, format: 'JSONEachRow' })
      .then((rs) => rs.json<{ total: string | number }>()),
  ]);
  return { items: rows.map(toLogEntry), total: Number(count[0]?.total ?? 0) };
}

/** The window of rpm and tpm. */
export const RATE_WINDOW_SEC = 60;

/**
 * quota: sum over the time range and filters; rpm / tpm: requests and prompt+completion tokens in the
 * RATE_WINDOW_SEC before `nowSec`, with the same filters except the time range. Without a type filter
 * only consumption entries (type 2) count, so a top-up never shows as consumed quota.
 */
export async function queryLogStat(ch: ClickHouseClient, filters: LogFilters, nowSec: number): Promise<LogStat> {
  const { clauses, params } = attributeFilters({ ...filters, type: filters.type || LOG_TYPE.consume });
  const range = timeRange(filters, params);
  params.recent_from = clampTs(nowSec - RATE_WINDOW_SEC);
  const inRange = range.length ? range.join(' AND ') : '1';
  const recent = 'created_at >= toDateTime({recent_from:UInt32})';
  const rs = await ch.query({
    query: `
      SELECT sumIf(quota, ${inRange}) AS quota,
             countIf(${recent}) AS rpm,
             sumIf(toUInt64(prompt_tokens) + toUInt64(completion_tokens), ${recent}) AS tpm
      FROM logs FINAL
      WHERE ${clauses.join(' AND ')} AND ((${inRange}) OR ${recent})`,
    query_params: params,
    format: 'JSONEachRow',
  });
  const [row] = await rs.json<{ quota: string | number; rpm: string | number; tpm: string | number }>();
  return { quota: Number(row?.quota ?? 0), rpm: Number(row?.rpm ?? 0), tpm: Number(row?.tpm ?? 0) };
}
