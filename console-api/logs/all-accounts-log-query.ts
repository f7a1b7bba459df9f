// The administrators' read of every account's request log (GET /api/log/ and /api/log/stat without a
// username; with one, the route resolves it to a user_id and the per-account queries of log-query.ts
// answer). Plan and costs: docs/log-query-plans.md, "Every account's log".
//
// `logs` is sorted by (user_id, created_at, request_id): nothing in it lists every account's rows by
// time, so `ORDER BY created_at DESC LIMIT n` reads the created_at of every granule the time range does
// not exclude (the range excludes a granule only when it holds one account's rows), and an exact count
// (`LIMIT 1 BY` the key) of a day's rows costs 50-450 ms. So the read is always bounded below (the route
// supplies a default window), and within it:
//   - the total and the page's place come from log_stats_15m's per-quarter-hour counts (every
//     account, each request once): the newest quarter hours holding the page's rows give a narrow
//     [lo, hi] to read from `logs`, so a deep page costs what a first page does;
//   - the page is read in two steps, as a deep per-account page: the keys (user, time, request id) of
//     [lo, hi] newest first, then the page's full rows by key; a quarter hour of a busy gateway holds
//     many rows, and only the page's are read whole.
// Measured: docs/log-query-plans.md (a `user_id IN (accounts active in those quarter hours)` filter was
// tried: it cost more than it saved).
// Replays are dropped as in log-query.ts: stats count each request once (log-outbox token), raw reads
// go through `LIMIT 1 BY` the sorting key, and key reads drop adjacent repeats in JavaScript.
import type { ClickHouseReader } from '../../infra/clickhouse/read-client.js';
import { LOG_TYPE } from '../../core/usage/usage-event.js';
import {
  attributeFiltersOfAnyAccount, bucketClause, BUCKET_SEC, clampTs, fitsStats, LIST_COLUMNS, LIST_SLACK, LOG_READ_SETTINGS,
  type LogEntry, type LogFilters, type LogStat, type Params, RATE_WINDOW_SEC, rawClause, type RawLogRow,
  splitRange, statSources, timeRange, toLogEntry, withoutReplays,
} from './log-query.js';

export interface AllAccountsLogFilters extends Omit<LogFilters, 'userId' | 'startTimestamp'> {
  /** Unix seconds, inclusive, and required: an unbounded read would span every account's whole history. */
  startTimestamp: number;
}

/** What two rows of the same request share across accounts: the sorting key. */
const DEDUP_ALL = 'LIMIT 1 BY user_id, created_at, request_id';
const NEWEST_FIRST = 'ORDER BY created_at DESC, request_id DESC, user_id DESC';

function attributes(f: Omit<LogFilters, 'userId'>): { attr: string; params: Params } {
  const { clauses, params } = attributeFiltersOfAnyAccount(f);
  return { attr: clauses.length ? clauses.join(' AND ') : '1', params };
}

/** A stretch of the window, [from, to] inclusive, and its requests. */
interface Slice { from: number; to: number; requests: number }

/**
 * The window's requests per quarter hour (its partial quarter hours at the edges counted from `logs`),
 * newest first.
 */
async function windowSlices(ch: ClickHouseReader, f: AllAccountsLogFilters, attr: string, baseParams: Params): Promise<Slice[]> {
  const split = splitRange(f.startTimestamp, f.endTimestamp);
  const params: Params = { ...baseParams };
  const parts: string[] = [];
  if (split.buckets) {
    parts.push(`SELECT toUInt32(toUnixTimestamp(bucket)) AS from_ts, sum(requests) AS n FROM log_stats_15m
                WHERE ${attr} AND ${bucketClause(split.buckets, params)} GROUP BY bucket`);
  }
  split.raw.forEach((edge, i) => {
    params[`edge${i}_from`] = edge[0];
    parts.push(`SELECT toUInt32({edge${i}_from:UInt32}) AS from_ts, count() AS n
                FROM (SELECT user_id, created_at, request_id FROM logs
                      WHERE ${attr} AND (${rawClause([edge], params, `edge${i}_`)})
                      ${DEDUP_ALL})`);
  });
  if (!parts.length) return [];
  const rows = await ch.rows<{ from_ts: number | string; n: number | string }>({
    query: parts.join(' UNION ALL '), query_params: params, format: 'JSONEachRow', clickhouse_settings: LOG_READ_SETTINGS,
  });
  // No whole bucket starts where an edge does (the head edge ends before the first bucket, the tail
  // starts after the last), so a slice's start tells which it is.
  return rows
    .map((r) => {
      const from = Number(r.from_ts);
      const edge = split.raw.find(([start]) => start === from);
      return { from, to: edge ? edge[1] : from + BUCKET_SEC - 1, requests: Number(r.n) };
    })
    .filter((s) => s.requests > 0)
    .sort((x, y) => y.from - x.from);
}

/**
 * Where the page lies: the newest slice holding its first row (`hi`, with the requests newer than
 * that slice: `skipped`) and the oldest slice holding its last (`lo`).
 */
function pagePlace(slices: Slice[], offset: number, limit: number, windowStart: number):
  { lo: number; hi: number; skipped: number } | null {
  let newer = 0;
  let place: { hi: number; skipped: number } | null = null;
  for (const s of slices) {
    if (!place && newer + s.requests > offset) place = { hi: s.to, skipped: newer };
    newer += s.requests;
    if (place && newer >= offset + limit) return { ...place, lo: s.from };
  }
  return place && { ...place, lo: windowStart };
}

export async function queryAllAccountsLogs(
  ch: ClickHouseReader, filters: AllAccountsLogFilters, page: { page: number; pageSize: number },
): Promise<{ items: LogEntry[]; total: number }> {
  const offset = (page.page - 1) * page.pageSize;
  if (!fitsStats(filters)) return scanPage(ch, filters, offset, page.pageSize);
  const { attr, params } = attributes(filters);
  const slices = await windowSlices(ch, filters, attr, params);
  const total = slices.reduce((sum, s) => sum + s.requests, 0);
  const windowStart = clampTs(filters.startTimestamp);
  const place = pagePlace(slices, offset, page.pageSize, windowStart);
  if (!place) return { items: [], total };
  const skip = offset - place.skipped;
  let { lo } = place;
  let want = skip + page.pageSize + LIST_SLACK;
  let keys: Key[];
  for (;;) {
    const keyParams: Params = { ...params, lo, hi: place.hi, want };
    const rows = await ch.rows<[number | string, number | string, string]>({
      query: `
        SELECT user_id, toUnixTimestamp(created_at), request_id FROM logs
        WHERE ${attr} AND created_at >= toDateTime({lo:UInt32}) AND created_at <= toDateTime({hi:UInt32})
        ${NEWEST_FIRST}
        LIMIT {want:UInt64}`,
      query_params: keyParams,
      format: 'JSONCompactEachRow',
      clickhouse_settings: LOG_READ_SETTINGS,
    });
    const distinct = withoutReplays(rows.map(([u, t, r]) => ({ user: Number(u), t: Number(t), r })), sameKey);
    if (distinct.length >= skip + page.pageSize || (rows.length < want && lo === windowStart)) {
      keys = distinct.slice(skip, skip + page.pageSize);
      break;
    }
    // Replays ate the slack: read more. Or [lo, hi] held fewer rows than counted (a row inserted twice
    // by hand is counted twice in the stats, docs/log-query-plans.md): read down to the window's start.
    if (rows.length === want) want *= 2;
    else lo = windowStart;
  }
  return { items: await rowsByKey(ch, keys), total };
}

interface Key { user: number; t: number; r: string }

function sameKey(a: Key, b: Key): boolean {
  return a.r === b.r && a.t === b.t && a.user === b.user;
}

function keyOfRow(r: RawLogRow): Key {
  return { user: Number(r.user_id), t: Number(r.created_at_unix), r: r.request_id };
}

/** The page's full rows: each key's account, second and request id, a few granules per account. */
async function rowsByKey(ch: ClickHouseReader, keys: Key[]): Promise<LogEntry[]> {
  if (!keys.length) return [];
  const times = keys.map((k) => k.t);
  const rows = await ch.rows<RawLogRow>({
    query: `
      SELECT ${LIST_COLUMNS} FROM logs
      WHERE user_id IN {k_users:Array(UInt64)} AND created_at >= toDateTime({k_min:UInt32}) AND created_at <= toDateTime({k_max:UInt32})
        AND request_id IN {k_ids:Array(String)}`,
    query_params: {
      k_users: [...new Set(keys.map((k) => k.user))], k_min: Math.min(...times), k_max: Math.max(...times), k_ids: keys.map((k) => k.r),
    },
    format: 'JSONEachRow',
    clickhouse_settings: LOG_READ_SETTINGS,
  });
  const byKey = new Map<string, RawLogRow>();
  for (const r of rows) byKey.set(`${Number(r.user_id)}:${Number(r.created_at_unix)}:${r.request_id}`, r);
  return keys.flatMap((k) => {
    const row = byKey.get(`${k.user}:${k.t}:${k.r}`);
    return row ? [toLogEntry(row)] : [];
  });
}

/**
 * A request-id filter (not kept in log_stats_15m): the window's rows of that id, found through the
 * `idx_request_id` bloom filter (upstream_request_id has no index: the window's rows are scanned).
 * Few rows, so one read of whole rows and one count.
 */
async function scanPage(
  ch: ClickHouseReader, f: AllAccountsLogFilters, offset: number, limit: number,
): Promise<{ items: LogEntry[]; total: number }> {
  const { attr, params } = attributes(f);
  const where = [attr, ...timeRange(f, params)].join(' AND ');
  const count = async () => {
    const [row] = await ch.rows<{ n: number | string }>({
      query: `SELECT count() AS n FROM (SELECT user_id, created_at, request_id FROM logs WHERE ${where} ${DEDUP_ALL})`,
      query_params: params, format: 'JSONEachRow', clickhouse_settings: LOG_READ_SETTINGS,
    });
    return Number(row?.n ?? 0);
  };
  const items = async () => {
    for (let want = offset + limit + LIST_SLACK; ; want *= 2) {
      const rows = await ch.rows<RawLogRow>({
        query: `SELECT ${LIST_COLUMNS} FROM logs WHERE ${where} ${NEWEST_FIRST} LIMIT {want:UInt64}`,
        query_params: { ...params, want }, format: 'JSONEachRow', clickhouse_settings: LOG_READ_SETTINGS,
      });
      const distinct = withoutReplays(rows, (a, b) => sameKey(keyOfRow(a), keyOfRow(b)));
      if (distinct.length >= offset + limit || rows.length < want) return distinct.slice(offset, offset + limit).map(toLogEntry);
    }
  };
  const [page, total] = await Promise.all([items(), count()]);
  return { items: page, total };
}

/**
 * quota: sum over the window and filters; rpm / tpm: requests and prompt+completion tokens in the
 * RATE_WINDOW_SEC before `nowSec`, every account, with the same filters except the window. Without a
 * type filter only consumption entries (type 2) count, as GET /api/log/self/stat. One statement: the
 * window's whole quarter hours from log_stats_15m, its edges and the last minute from one read of
 * `logs`, by time range alone (the range excludes the granules holding one account's older rows). A request
 * id filter, which the stats do not hold, reads the whole window from `logs`.
 */
export async function queryAllAccountsLogStat(ch: ClickHouseReader, filters: AllAccountsLogFilters, nowSec: number): Promise<LogStat> {
  const f = { ...filters, type: filters.type || LOG_TYPE.consume };
  const { attr, params } = attributes(f);
  const recentFrom = clampTs(nowSec - RATE_WINDOW_SEC);
  params.recent_from = recentFrom;
  const recent = 'created_at >= toDateTime({recent_from:UInt32})';
  const { bucketSql, rawWhere } = statSources(f, attr, params);
  const [row] = await ch.rows<{ quota: string | number | null; rpm: string | number; tpm: string | number }>({
    query: `
      SELECT ${bucketSql}sumIf(quota, ${rawWhere}) AS quota, countIf(${recent}) AS rpm,
             sumIf(toUInt64(prompt_tokens) + toUInt64(completion_tokens), ${recent}) AS tpm
      FROM (SELECT quota, prompt_tokens, completion_tokens, user_id, created_at, request_id FROM logs
            WHERE ${attr} AND ((${rawWhere}) OR ${recent}) ${DEDUP_ALL})`,
    query_params: params,
    format: 'JSONEachRow',
    clickhouse_settings: LOG_READ_SETTINGS,
  });
  return { quota: Number(row?.quota ?? 0), rpm: Number(row?.rpm ?? 0), tpm: Number(row?.tpm ?? 0) };
}
