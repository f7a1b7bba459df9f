// /api/log/self and /api/log/self/stat: the caller's own request log and usage statistics, always
// scoped to the caller's user_id. Filters are exact matches.
import { z } from 'zod';
import { ROLE } from '../accounts/roles.js';
import type { ConsoleContext } from '../context.js';
import type { Api } from '../http/api.js';
import { ok, type Page } from '../http/envelope.js';
import { logEntrySchema, pageOf, statSchema } from '../http/schemas.js';
import { pageQuery, paging, queryInt, queryString } from '../http/validation.js';
import { type LogEntry, type LogFilters, queryLogStat, queryLogs } from '../logs/log-query.js';
import { queryDailyUsage } from '../logs/daily-usage.js';
import { ClickHouseUnavailableError } from '../../infra/clickhouse/read-client.js';
import { ConsoleError } from '../http/errors.js';

const logType = queryInt({ min: 0, max: 5 });
const timestamp = queryInt({ min: 0, max: 0xffff_ffff });

export const logSelfQuery = z.object({
  // `p`, or its alias `page` (the contract's paging, as pageQuery's): without the alias a client
  // paging by `page` was served page 1 for ever.
  ...pageQuery.shape,
  type: logType,
  token_name: queryString(),
  model_name: queryString(),
  group: queryString(),
  start_timestamp: timestamp,
  end_timestamp: timestamp,
  request_id: queryString(),
  upstream_request_id: queryString(),
  // Not in the contract's list of this route, but its stat (below) filters by it: without it the
  // same query string listed every channel's rows while the stat summed one channel's.
  channel: queryInt({ min: 0, max: 0xffff_ffff }),
});

export const logStatQuery = z.object({
  start_timestamp: timestamp,
  end_timestamp: timestamp,
  type: logType,
  token_name: queryString(),
  model_name: queryString(),
  channel: queryInt({ min: 0, max: 0xffff_ffff }),
  group: queryString(),
  // Not in the contract's list of this route, but its list (above) filters by them: without them the
  // same query string listed one request's row while the stat summed every request's (review logs).
  request_id: queryString(),
  upstream_request_id: queryString(),
});

export const logDailyQuery = z.object({
  days: queryInt({ min: 1, max: 90 }),
  utc_offset: queryInt({ min: -720, max: 840 }),
});

const int = z.number().int();
const dailyUsageSchema = z.array(z.object({ day: int, requests: int, quota: int, prompt_tokens: int, completion_tokens: int }));

/** How long a client is asked to wait when the log store could not answer. */
const LOG_STORE_RETRY_AFTER_SEC = 5;

/**
 * A read of the log store, with "ClickHouse cannot answer now" told to the user as a 503 to retry
 * (the cause goes to the service log); a fault of the statement stays a 500.
 */
export async function fromLogStore<T>(ctx: ConsoleContext, read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    if (!(err instanceof ClickHouseUnavailableError)) throw err;
    ctx.logger.warn({ err }, 'the log store (ClickHouse) could not answer');
    throw new ConsoleError('LOG_STORE_UNAVAILABLE', undefined, { retryAfterSec: LOG_STORE_RETRY_AFTER_SEC });
  }
}

export function registerLogRoutes(api: Api, ctx: ConsoleContext): void {
  api.route({
    method: 'GET', path: '/api/log/self/daily', tag: 'logs', access: ROLE.user, query: logDailyQuery, data: dailyUsageSchema, errors: ['LOG_STORE_UNAVAILABLE'],
    summary: "The caller's consumption per day: requests, quota and tokens for each of the last `days` (default 30, at most 90) days, oldest first",
    description: 'Days are local to `utc_offset` (minutes east of UTC, default 0); `day` is the Unix time of that local midnight. ' +
      'Every day is present (zeros when nothing was consumed); only consumption entries (type 2) count.',
  }, async ({ query: q, user }) => ok(await fromLogStore(ctx, () => queryDailyUsage(ctx.logReader, Number(user.id), q.days ?? 30, q.utc_offset ?? 0, ctx.now()))));

  api.route({
    method: 'GET', path: '/api/log/self', tag: 'logs', access: ROLE.user, query: logSelfQuery, data: pageOf(logEntrySchema), errors: ['LOG_STORE_UNAVAILABLE'],
    summary: "The caller's request log, newest first, paged from 1; every filter of the contract",
  }, async ({ query: q, user }) => {
    // Larger requests are served at the maximum; data.page_size says what was applied.
    const { page, pageSize } = paging(q);
    const { items, total } = await fromLogStore(ctx, () => queryLogs(ctx.logReader, logFilters(Number(user.id), q), { page, pageSize }));
    const data: Page<LogEntry> = { items, page, page_size: pageSize, total };
    return ok(data);
  });

  api.route({
    method: 'GET', path: '/api/log/self/stat', tag: 'logs', access: ROLE.user, query: logStatQuery, data: statSchema, errors: ['LOG_STORE_UNAVAILABLE'],
    summary: 'Quota in the range and filters; rpm and tpm over the last 60 seconds',
  }, async ({ query: q, user }) => {
    const stat = await fromLogStore(ctx, () => queryLogStat(ctx.logReader, logFilters(Number(user.id), q), ctx.now()));
    return ok(stat);
  });
}

type LogQueryParams = {
  type?: number; token_name?: string; model_name?: string; group?: string; channel?: number;
  start_timestamp?: number; end_timestamp?: number; request_id?: string; upstream_request_id?: string;
};

/** The query parameters of the contract (snake_case) as the log query's filters, for one account. */
export function logFilters(userId: number, q: LogQueryParams): LogFilters {
  return { userId, ...logFiltersOfAnyAccount(q) };
}

/** The same filters without the account: the administrators' read of every account (routes/log-admin.ts). */
export function logFiltersOfAnyAccount(q: LogQueryParams): Omit<LogFilters, 'userId'> {
  return {
    type: q.type,
    tokenName: q.token_name,
    modelName: q.model_name,
    group: q.group,
    channel: q.channel,
    startTimestamp: q.start_timestamp,
    endTimestamp: q.end_timestamp,
    requestId: q.request_id,
    upstreamRequestId: q.upstream_request_id,
  };
}
