// Consumption per day for the web console's dashboard chart: one ClickHouse query, scoped to one
// user_id, grouped by the caller's local day. Read from log_stats_15m (migration 009: each request
// counted once, a few thousand rows per account-month instead of every request) whenever local
// midnight falls on a quarter hour, i.e. for every UTC offset in use; any other offset reads `logs`,
// each replay once (LIMIT 1 BY its key). Plans: docs/log-query-plans.md.
import type { ClickHouseReader } from '../../infra/clickhouse/read-client.js';
import { LOG_TYPE } from '../../core/usage/usage-event.js';
import { BOUNDED_READ_SETTINGS, BUCKET_SEC, LOG_READ_SETTINGS } from './log-query.js';

export interface DailyUsage {
  /** Unix seconds of the day's local midnight (by the requested UTC offset). */
  day: number;
  requests: number;
  quota: number;
  prompt_tokens: number;
  completion_tokens: number;
}

const DAY_SEC = 86_400;

/**
 * The `days` days ending with today (by `utcOffsetMin`, minutes east of UTC), oldest first, every day
 * present (zero when nothing was consumed). Consumption entries (type 2) only, as /api/log/self/stat.
 */
export async function queryDailyUsage(ch: ClickHouseReader, userId: number, days: number, utcOffsetMin: number, nowSec: number): Promise<DailyUsage[]> {
  const offsetSec = utcOffsetMin * 60;
  const today = Math.floor((nowSec + offsetSec) / DAY_SEC);
  const firstDay = today - days + 1;
  const fromTs = Math.max(0, firstDay * DAY_SEC - offsetSec);
  const fromStats = offsetSec % BUCKET_SEC === 0;
  const rows = await ch.rows<Record<'day_index' | 'requests' | 'quota' | 'prompt_tokens' | 'completion_tokens', string | number>>({
    query: fromStats
      ? `
      SELECT intDiv(toInt64(toUnixTimestamp(bucket)) + {offset:Int32}, 86400) AS day_index,
             sum(requests) AS requests, sum(quota) AS quota,
             sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens
      FROM log_stats_15m
      WHERE user_id = {user_id:UInt64} AND type = {type:UInt8} AND bucket >= toDateTime({from_ts:UInt32})
      GROUP BY day_index`
      : `
      SELECT intDiv(toInt64(toUnixTimestamp(created_at)) + {offset:Int32}, 86400) AS day_index,
             count() AS requests,
             sum(quota) AS quota,
             sum(toUInt64(prompt_tokens)) AS prompt_tokens,
             sum(toUInt64(completion_tokens)) AS completion_tokens
      FROM (SELECT created_at, request_id, quota, prompt_tokens, completion_tokens FROM logs
            WHERE user_id = {user_id:UInt64} AND type = {type:UInt8} AND created_at >= toDateTime({from_ts:UInt32})
            LIMIT 1 BY created_at, request_id)
      GROUP BY day_index`,
    query_params: { user_id: userId, type: LOG_TYPE.consume, offset: offsetSec, from_ts: fromTs },
    format: 'JSONEachRow',
    clickhouse_settings: fromStats ? BOUNDED_READ_SETTINGS : LOG_READ_SETTINGS,
  });
  const byDay = new Map(rows.map((r) => [Number(r.day_index), r]));
  const out: DailyUsage[] = [];
  for (let d = firstDay; d <= today; d++) {
    const r = byDay.get(d);
    out.push({
      day: d * DAY_SEC - offsetSec,
      requests: Number(r?.requests ?? 0),
      quota: Number(r?.quota ?? 0),
      prompt_tokens: Number(r?.prompt_tokens ?? 0),
      completion_tokens: Number(r?.completion_tokens ?? 0),
    });
  }
  return out;
}
