// Queries of the request log in ClickHouse (infra/clickhouse/migrations/001_logs.sql, 009_log_stats.sql,
// 012_log_stats_from_logs.sql).
// Plans and measurements: docs/log-query-plans.md. Every query:
//   - is scoped to one user_id, the first column of every sorting key read here;
//   - reads no FINAL: sums and counts come from log_stats_15m, which counts each request once because
//     each reaches `logs` once (a repeated outbox batch is dropped on insert: billing/log-outbox.ts,
//     migration 012), and raw rows are read through `LIMIT 1 BY created_at, request_id` in the table's
//     own order, so a row inserted twice some other way is still listed once;
//   - reads whole quarter hours from log_stats_15m and only the partial quarter hours at the edges of
//     the range from `logs`;
//   - binds every value as a server-side parameter ({name:Type} + query_params); the SQL text is
//     assembled only from the constant fragments below.
import type { ClickHouseReader } from '../../infra/clickhouse/read-client.js';
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

export type Params = Record<string, string | number>;

/**
 * Settings of every console read:
 *   - the account's newest blocks, which most of these short reads touch, from ClickHouse's cache of
 *     decompressed blocks (a server's `uncompressed_cache_size`; the embedded server sets it,
 *     CLICKHOUSE_LOCAL_UNCOMPRESSED_CACHE_MB) instead of decompressed again;
 *   - no JIT compilation: ClickHouse compiles an expression the third time it sees it, on the query's
 *     own thread, and these expressions carry the request's time bounds, so they keep changing. The
 *     compile cost a request 40-65 ms (measured: a stat request 79 ms against 13 ms for the ones
 *     around it), for reads of a few thousand rows that gain nothing from it.
 */
export const LOG_READ_SETTINGS = {
  use_uncompressed_cache: 1,
  compile_expressions: 0,
  compile_aggregate_expressions: 0,
  compile_sort_description: 0,
} as const;

/**
 * A read bounded by the quarter-hour table or by a LIMIT in key order runs on one thread: for a few
 * thousand rows, starting a second costs more than it saves (measured on the embedded server: 7.3
 * against 9.3 ms of CPU for a first page, docs/performance.md). A read that scans an account's raw
 * rows (a request-id filter) keeps the server's threads.
 */
export const BOUNDED_READ_SETTINGS = { ...LOG_READ_SETTINGS, max_threads: 1 } as const;

export type ReadSettings = typeof LOG_READ_SETTINGS | typeof BOUNDED_READ_SETTINGS;

function readSettings(f: LogFilters): ReadSettings {
  return fitsStats(f) ? BOUNDED_READ_SETTINGS : LOG_READ_SETTINGS;
}

export const MAX_UINT32 = 0xffff_ffff;
export const clampTs = (ts: number) => Math.min(Math.max(Math.trunc(ts), 0), MAX_UINT32);

/** WHERE fragments for every filter except the time range. */
function attributeFilters(f: LogFilters): { clauses: string[]; params: Params } {
  const { clauses, params } = attributeFiltersOfAnyAccount(f);
  return { clauses: ['user_id = {user_id:UInt64}', ...clauses], params: { user_id: f.userId, ...params } };
}

/**
 * WHERE fragments for every filter except the account and the time range: columns both `logs` and
 * log_stats_15m have (but the request ids, see fitsStats). The all-accounts read
 * (all-accounts-log-query.ts) uses them as they are.
 */
export function attributeFiltersOfAnyAccount(f: Omit<LogFilters, 'userId'>): { clauses: string[]; params: Params } {
  const clauses: string[] = [];
  const params: Params = {};
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

export function timeRange(f: Pick<LogFilters, 'startTimestamp' | 'endTimestamp'>, params: Params): string[] {
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

export interface RawLogRow {
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
  protocol: string;
}

/** Log types that are a request through the relay: consumption and error rows. */
function isRequestType(type: number): boolean {
  return type === LOG_TYPE.consume || type === LOG_TYPE.error;
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
    // Only a request came in by a protocol. Billing writes every row's column, top-ups and
    // management rows too, with 'anthropic' (core/usage/log-rows.ts, the column's default), so a
    // row of another type answers '' whatever it holds.
    protocol: isRequestType(Number(r.type)) ? r.protocol : '',
  };
}

/** log_stats_15m's buckets (toStartOfFifteenMinutes): every UTC offset in use is a multiple. */
export const BUCKET_SEC = 900;
/** Below this offset a page is read straight from `logs` (the read in key order stops after offset + limit rows). */
export const SKIP_BY_BUCKETS_FROM_OFFSET = 2000;
export const DEDUP = 'LIMIT 1 BY created_at, request_id';

/** log_stats_15m keeps every filter's column but the request ids: those read `logs` alone. */
export function fitsStats(f: Pick<LogFilters, 'requestId' | 'upstreamRequestId'>): boolean {
  return f.requestId === undefined && f.upstreamRequestId === undefined;
}

export interface RangeSplit {
  /** Whole quarter hours [from, to) inside the range, read from log_stats_15m; null when none fits. */
  buckets: { from: number; to: number } | null;
  /** Inclusive ranges of seconds read from `logs`: the partial quarter hours at the range's edges. */
  raw: Array<[number, number]>;
}

/** The range [start, end] (seconds, inclusive; undefined or 0: open) as whole buckets and raw edges. */
export function splitRange(start: number | undefined, end: number | undefined): RangeSplit {
  const s = start ? clampTs(start) : 0;
  const e = end ? clampTs(end) : MAX_UINT32;
  if (s > e) return { buckets: null, raw: [] };
  const from = Math.ceil(s / BUCKET_SEC) * BUCKET_SEC;
  const to = Math.floor((e + 1) / BUCKET_SEC) * BUCKET_SEC;
  if (from >= to) return { buckets: null, raw: [[s, e]] };
  const raw: Array<[number, number]> = [];
  if (s < from) raw.push([s, from - 1]);
  if (end && to <= e) raw.push([to, e]);
  return { buckets: { from, to }, raw };
}

export function bucketClause(b: { from: number; to: number }, params: Params): string {
  params.b_from = b.from;
  params.b_to = b.to;
  return 'bucket >= toDateTime({b_from:UInt32}) AND bucket < toDateTime({b_to:UInt32})';
}

export function rawClause(raw: Array<[number, number]>, params: Params, prefix = 'r'): string {
  if (!raw.length) return '0';
  return raw.map(([a, b], i) => {
    params[`${prefix}${i}_from`] = a;
    params[`${prefix}${i}_to`] = b;
    return `(created_at >= toDateTime({${prefix}${i}_from:UInt32}) AND created_at <= toDateTime({${prefix}${i}_to:UInt32}))`;
  }).join(' OR ');
}

/**
 * SQL of one row per aggregate: requests and quota in the range, from whole buckets plus the raw
 * edges (each request once). `attr` is the filters' WHERE; params receive the range's bounds.
 */
function rangeSumsSql(f: LogFilters, attr: string, params: Params): string {
  if (!fitsStats(f)) {
    const range = timeRange(f, params);
    return `SELECT count() AS requests, sum(quota) AS quota
            FROM (SELECT quota, created_at, request_id FROM logs WHERE ${[attr, ...range].join(' AND ')} ${DEDUP})`;
  }
  const split = splitRange(f.startTimestamp, f.endTimestamp);
  const parts: string[] = [];
  if (split.buckets) {
    parts.push(`SELECT sum(requests) AS requests, sum(quota) AS quota FROM log_stats_15m WHERE ${attr} AND ${bucketClause(split.buckets, params)}`);
  }
  if (split.raw.length) {
    parts.push(`SELECT count() AS requests, sum(quota) AS quota
                FROM (SELECT quota, created_at, request_id FROM logs WHERE ${attr} AND (${rawClause(split.raw, params)}) ${DEDUP})`);
  }
  if (!parts.length) return 'SELECT toUInt64(0) AS requests, toInt64(0) AS quota';
  return `SELECT sum(requests) AS requests, sum(quota) AS quota FROM (${parts.join(' UNION ALL ')})`;
}

export const LIST_COLUMNS = `id, user_id, toUnixTimestamp(created_at) AS created_at_unix, type, content, username,
                 token_name, model_name, quota, prompt_tokens, completion_tokens, use_time, is_stream,
                 channel, token_id, \`group\`, request_id, upstream_request_id, protocol`;

/**
 * Where a deep page starts: the newest bucket boundary T with at most `offset` requests at or after
 * it (from the bucket counts, each request once), so the page is read below T with what remains of
 * the offset (less than one bucket's rows) instead of skipping `offset` rows of `logs`. The same
 * counts, with the range's raw edges, are the range's total: the page's statement need not sum the
 * buckets a second time.
 */
async function skipByBuckets(
  ch: ClickHouseReader, f: LogFilters, attr: string, baseParams: Params, offset: number,
): Promise<{ total: number; skip: { before: number; skipped: number } | null } | null> {
  const split = splitRange(f.startTimestamp, f.endTimestamp);
  if (!split.buckets) return null;
  const params: Params = { ...baseParams };
  // The raw tail (the partial quarter hour at the end of the range) is newer than every bucket, the
  // raw head (at its start) older: they sort first and last.
  const rawRow = (edges: Array<[number, number]>, b: string, prefix: string) => edges.length
    ? ` UNION ALL SELECT toInt64(${b}) AS b, count() AS n
        FROM (SELECT created_at, request_id FROM logs WHERE ${attr} AND (${rawClause(edges, params, prefix)}) ${DEDUP})`
    : '';
  const tail = rawRow(split.raw.filter(([a]) => a >= split.buckets!.to), String(MAX_UINT32), 'tail');
  const head = rawRow(split.raw.filter(([a]) => a < split.buckets!.from), '-1', 'head');
  // The walk from the newest count down happens in ClickHouse (a running sum over the counts, newest
  // first), which answers one row instead of the range's few thousand quarter hours.
  params.skip_offset = offset;
  const [row] = await ch.rows<Record<'total' | 'bucketed' | 'hits' | 'hit_b' | 'hit_newer', number | string>>({
    query: `
      SELECT any(total) AS total, any(bucketed) AS bucketed, countIf(hit) AS hits,
             argMaxIf(b, b, hit) AS hit_b, argMaxIf(newer, b, hit) AS hit_newer
      FROM (
        SELECT b, sum(n) OVER () AS total, sumIf(n, b >= 0) OVER () AS bucketed,
               sum(n) OVER (ORDER BY b DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - n AS newer,
               b >= 0 AND newer + n > {skip_offset:UInt64} AS hit
        FROM (
          SELECT toInt64(toUnixTimestamp(bucket)) AS b, sum(requests) AS n FROM log_stats_15m
          WHERE ${attr} AND ${bucketClause(split.buckets, params)} GROUP BY bucket${tail}${head}))`,
    query_params: params,
    format: 'JSONEachRow',
    clickhouse_settings: BOUNDED_READ_SETTINGS,
  });
  const total = Number(row?.total ?? 0);
  if (!row || Number(row.hits) === 0) return { total, skip: { before: split.buckets.from, skipped: Number(row?.bucketed ?? 0) } };
  const b = Number(row.hit_b);
  return { total, skip: b === MAX_UINT32 ? null : { before: b + BUCKET_SEC, skipped: Number(row.hit_newer) } };
}

export async function queryLogs(
  ch: ClickHouseReader,
  filters: LogFilters,
  page: { page: number; pageSize: number },
): Promise<{ items: LogEntry[]; total: number }> {
  const { clauses, params } = attributeFilters(filters);
  const attr = clauses.join(' AND ');
  const listParams: Params = { ...params };
  const where = [attr, ...timeRange(filters, listParams)];
  let offset = (page.page - 1) * page.pageSize;
  let totalSql: string | undefined;
  if (offset >= SKIP_BY_BUCKETS_FROM_OFFSET && fitsStats(filters)) {
    const counted = await skipByBuckets(ch, filters, attr, params, offset);
    if (counted) {
      totalSql = '{total:UInt64}';
      listParams.total = counted.total;
    }
    if (counted?.skip && counted.skip.skipped > 0) {
      where.push('created_at < toDateTime({before:UInt32})');
      listParams.before = counted.skip.before;
      offset -= counted.skip.skipped;
    }
  }
  // Otherwise the total rides on the keys' statement as a scalar subquery: one statement less. Its
  // parameters are the same values under the same names, plus the range's own.
  totalSql ??= `(SELECT requests FROM (${rangeSumsSql(filters, attr, listParams)}))`;
  const settings = readSettings(filters);
  const { items, total } = await pageRows(ch, where.join(' AND '), listParams, filters.userId, offset, page.pageSize, totalSql, settings);
  if (total !== null) return { items, total };
  // No key on this page (past the end): the total alone.
  const [count] = await ch.rows<{ requests: string | number }>({ query: `SELECT ${totalSql} AS requests`, query_params: listParams, format: 'JSONEachRow', clickhouse_settings: settings });
  return { items, total: Number(count?.requests ?? 0) };
}

/**
 * Keys read beyond the page: replays not merged away yet (rare: an outbox insert replayed after its
 * delete was lost) would otherwise shorten it. When they eat the slack the read is repeated, larger.
 */
export const LIST_SLACK = 8;

/**
 * Up to this many rows (skipped + shown), a page is read whole in one read: one MergeTree read fewer
 * (3-6 ms on the embedded server whatever it reads) for a few hundred rows more on the wire.
 */
export const WHOLE_ROWS_UP_TO = 500;

/** A page read with every column in key order, replays dropped; null when replays ate the slack. */
async function wholeRowsPage(
  ch: ClickHouseReader, where: string, params: Params, skip: number, limit: number, totalSql: string,
  settings: ReadSettings,
): Promise<{ items: LogEntry[]; total: number | null } | null> {
  const want = skip + limit + LIST_SLACK;
  const rows = await ch.rows<RawLogRow & { total: string | number }>({
    query: `
      SELECT ${LIST_COLUMNS}, ${totalSql} AS total FROM logs
      WHERE ${where}
      ORDER BY created_at DESC, request_id DESC
      LIMIT {want:UInt64}`,
    query_params: { ...params, want },
    format: 'JSONEachRow',
    clickhouse_settings: settings,
  });
  const distinct = withoutReplays(rows, (a, b) => a.request_id === b.request_id && a.created_at_unix === b.created_at_unix);
  if (distinct.length < skip + limit && rows.length === want) return null;
  return { items: distinct.slice(skip, skip + limit).map(toLogEntry), total: rows.length ? Number(rows[0]!.total) : null };
}

/**
 * A page in two reads. First the keys (created_at, request_id) in the table's own order, skipping
 * `skip` distinct keys: two narrow columns, and ClickHouse stops reading at the limit (a LIMIT 1 BY
 * here would make it read every row of the account). Replays sit next to their original in this
 * order and are dropped in between, so the page is exact however many there are. Then the page's
 * rows by their keys, a range of the sorting key.
 */
async function pageRows(
  ch: ClickHouseReader, where: string, params: Params, userId: number, skip: number, limit: number, totalSql: string,
  settings: ReadSettings,
): Promise<{ items: LogEntry[]; total: number | null }> {
  if (skip + limit <= WHOLE_ROWS_UP_TO) {
    const page = await wholeRowsPage(ch, where, params, skip, limit, totalSql, settings);
    if (page) return page;
  }
  let want = skip + limit + LIST_SLACK;
  let keys: Array<[number, string]>;
  let total: number | null = null;
  for (;;) {
    const rows = await ch.rows<[number | string, string, number | string]>({
      query: `
        SELECT toUnixTimestamp(created_at) AS t, request_id AS r, ${totalSql} AS total FROM logs
        WHERE ${where}
        ORDER BY created_at DESC, request_id DESC
        LIMIT {want:UInt64}`,
      query_params: { ...params, want },
      format: 'JSONCompactEachRow',
      clickhouse_settings: settings,
    });
    if (rows.length) total = Number(rows[0]![2]);
    const distinct = withoutReplays(rows.map(([t, r]): [number, string] => [Number(t), r]), (a, b) => a[0] === b[0] && a[1] === b[1]);
    if (distinct.length >= skip + limit || rows.length < want) {
      keys = distinct.slice(skip, skip + limit);
      break;
    }
    want *= 2;
  }
  if (!keys.length) return { items: [], total };
  const rows = await ch.rows<RawLogRow>({
    query: `
      SELECT ${LIST_COLUMNS}
      FROM logs
      WHERE user_id = {user_id:UInt64} AND created_at >= toDateTime({k_min:UInt32}) AND created_at <= toDateTime({k_max:UInt32})
        AND request_id IN {k_ids:Array(String)}
      ORDER BY created_at DESC, request_id DESC`,
    query_params: { user_id: userId, k_min: keys[keys.length - 1]![0], k_max: keys[0]![0], k_ids: keys.map(([, r]) => r) },
    format: 'JSONEachRow',
    clickhouse_settings: BOUNDED_READ_SETTINGS,
  });
  const byKey = new Map<string, RawLogRow>();
  for (const r of rows) byKey.set(`${Number(r.created_at_unix)}:${r.request_id}`, r);
  const items = keys.flatMap(([t, r]) => {
    const row = byKey.get(`${t}:${r}`);
    return row ? [toLogEntry(row)] : [];
  });
  return { items, total };
}

/** The window of rpm and tpm. */
export const RATE_WINDOW_SEC = 60;

/**
 * Where a stat's quota is read from: the range's whole quarter hours from log_stats_15m (`bucketSql`,
 * a sum and a `+`, or ''), and the condition on `logs` rows for the rest (`rawWhere`): the range's
 * partial edges, or the whole range when a request id filters (the stats do not hold it).
 */
export function statSources(
  f: Pick<LogFilters, 'startTimestamp' | 'endTimestamp' | 'requestId' | 'upstreamRequestId'>, attr: string, params: Params,
): { bucketSql: string; rawWhere: string } {
  if (!fitsStats(f)) {
    const range = timeRange(f, params);
    return { bucketSql: '', rawWhere: range.length ? range.join(' AND ') : '1' };
  }
  const split = splitRange(f.startTimestamp, f.endTimestamp);
  const bucketSql = split.buckets ? `(SELECT sum(quota) FROM log_stats_15m WHERE ${attr} AND ${bucketClause(split.buckets, params)}) + ` : '';
  return { bucketSql, rawWhere: rawClause(split.raw, params) };
}

/**
 * quota: sum over the time range and filters; rpm / tpm: requests and prompt+completion tokens in the
 * RATE_WINDOW_SEC before `nowSec`, with the same filters except the time range. Without a type filter
 * only consumption entries (type 2) count, so a top-up never shows as consumed quota. One statement:
 * the range's whole buckets from log_stats_15m, its edges and the last minute from one read of logs.
 */
export async function queryLogStat(ch: ClickHouseReader, filters: LogFilters, nowSec: number): Promise<LogStat> {
  const f = { ...filters, type: filters.type || LOG_TYPE.consume };
  const { clauses, params } = attributeFilters(f);
  const attr = clauses.join(' AND ');
  params.recent_from = clampTs(nowSec - RATE_WINDOW_SEC);
  const recent = 'created_at >= toDateTime({recent_from:UInt32})';
  // One read of `logs` for both the range's raw rows (its partial edges, or all of it when a request
  // id filters) and the last minute: the two usually overlap (a range ending now), and each read of a
  // MergeTree costs the embedded server a few milliseconds whatever it reads.
  const { bucketSql, rawWhere } = statSources(f, attr, params);
  const [row] = await ch.rows<{ quota: string | number | null; rpm: string | number; tpm: string | number }>({
    query: `
      SELECT ${bucketSql}sumIf(quota, ${rawWhere}) AS quota, countIf(${recent}) AS rpm,
             sumIf(toUInt64(prompt_tokens) + toUInt64(completion_tokens), ${recent}) AS tpm
      FROM (SELECT quota, prompt_tokens, completion_tokens, created_at, request_id FROM logs
            WHERE ${attr} AND ((${rawWhere}) OR ${recent}) ${DEDUP})`,
    query_params: params,
    format: 'JSONEachRow',
    clickhouse_settings: readSettings(f),
  });
  return { quota: Number(row?.quota ?? 0), rpm: Number(row?.rpm ?? 0), tpm: Number(row?.tpm ?? 0) };
}

/**
 * Rows in the read's order with a replay's repeats dropped: the log table keeps a replayed row until
 * its merge, and in key order the repeats are adjacent.
 */
export function withoutReplays<T>(rows: readonly T[], sameKey: (a: T, b: T) => boolean): T[] {
  return rows.filter((row, i) => i === 0 || !sameKey(row, rows[i - 1]!));
}
