// /api/log/ and /api/log/stat: every account's request log and usage statistics, for administrators
// (new-api's and one-api's administrators see every account's log the same way). With `username` the
// read is one account's, by the per-account queries of /api/log/self; without, it spans every account
// within a time window (logs/all-accounts-log-query.ts, docs/log-query-plans.md).
import { z } from 'zod';
import { ROLE } from '../accounts/roles.js';
import type { ConsoleContext } from '../context.js';
import type { Db } from '../db.js';
import type { Api } from '../http/api.js';
import { ok, type Page } from '../http/envelope.js';
import { logEntrySchema, pageOf, statSchema } from '../http/schemas.js';
import { paging, queryString } from '../http/validation.js';
import { queryAllAccountsLogs, queryAllAccountsLogStat } from '../logs/all-accounts-log-query.js';
import { BUCKET_SEC, type LogEntry, type LogStat, queryLogStat, queryLogs } from '../logs/log-query.js';
import { fromLogStore, logFilters, logFiltersOfAnyAccount, logSelfQuery, logStatQuery } from './log.js';

/** Without start_timestamp, the all-accounts read covers this much before end_timestamp (or now). */
export const ALL_ACCOUNTS_DEFAULT_WINDOW_SEC = 86_400;

/** Login names are at most 20 characters when created; 64 is what login accepts. */
const username = queryString(64);

export const logAdminQuery = logSelfQuery.extend({
  username,
  channel: logStatQuery.shape.channel,
});

export const logAdminStatQuery = logStatQuery.extend({ username });

const WINDOW_NOTE = 'Without `username`, every account within a time window: `start_timestamp` absent (or 0) means ' +
  `${ALL_ACCOUNTS_DEFAULT_WINDOW_SEC / 3600} hours before \`end_timestamp\` (or now), from the start of that quarter hour. ` +
  'An explicit `start_timestamp` (1 for all time) widens it; the page is read from the newest quarter hours holding it, ' +
  'the total from the quarter-hour table. With `username` (an account\'s login name, deleted accounts included; unknown: empty), ' +
  'that account alone and no default window, as /api/log/self.';

export function registerAdminLogRoutes(api: Api, ctx: ConsoleContext): void {
  api.route({
    method: 'GET', path: '/api/log/', tag: 'admin: logs', access: ROLE.admin, query: logAdminQuery, data: pageOf(logEntrySchema),
    errors: ['LOG_STORE_UNAVAILABLE'],
    summary: "Every account's request log, newest first, paged from 1: /api/log/self's filters plus `username` and `channel`",
    description: WINDOW_NOTE,
  }, async ({ query: q }) => {
    // Larger requests are served at the maximum; data.page_size says what was applied.
    const { page, pageSize } = paging(q);
    let found: { items: LogEntry[]; total: number };
    if (q.username !== undefined) {
      const userId = await accountIdByUsername(ctx.sql, q.username);
      found = userId === undefined
        ? { items: [], total: 0 }
        : await fromLogStore(ctx, () => queryLogs(ctx.logReader, logFilters(userId, q), { page, pageSize }));
    } else {
      const filters = { ...logFiltersOfAnyAccount(q), ...allAccountsWindow(q, ctx.now()) };
      found = await fromLogStore(ctx, () => queryAllAccountsLogs(ctx.logReader, filters, { page, pageSize }));
    }
    const data: Page<LogEntry> = { items: found.items, page, page_size: pageSize, total: found.total };
    return ok(data);
  });

  api.route({
    method: 'GET', path: '/api/log/stat', tag: 'admin: logs', access: ROLE.admin, query: logAdminStatQuery, data: statSchema,
    errors: ['LOG_STORE_UNAVAILABLE'],
    summary: 'Quota in the window and filters, rpm and tpm over the last 60 seconds: every account, or `username`\'s',
    description: `The window as GET /api/log/ (the same filters give the same rows). ${WINDOW_NOTE}`,
  }, async ({ query: q }) => {
    let stat: LogStat;
    if (q.username !== undefined) {
      const userId = await accountIdByUsername(ctx.sql, q.username);
      stat = userId === undefined
        ? { quota: 0, rpm: 0, tpm: 0 }
        : await fromLogStore(ctx, () => queryLogStat(ctx.logReader, logFilters(userId, q), ctx.now()));
    } else {
      const filters = { ...logFiltersOfAnyAccount(q), ...allAccountsWindow(q, ctx.now()) };
      stat = await fromLogStore(ctx, () => queryAllAccountsLogStat(ctx.logReader, filters, ctx.now()));
    }
    return ok(stat);
  });
}

/**
 * The id of the account that holds the name now, deleted accounts included (their log rows stay;
 * users.username is unique over deleted rows too). The filter is by account: its rows under whatever
 * name each was logged with. A rename frees the old name for another account to take, and then the
 * name filters that account's rows, not those the first logged under it (review logs; new-api filters
 * by the name each row recorded, which after a rename misses the account's own older rows).
 */
async function accountIdByUsername(sql: Db, name: string): Promise<number | undefined> {
  const [row] = await sql<{ id: string | number }[]>`SELECT id FROM users WHERE username = ${name}`;
  return row === undefined ? undefined : Number(row.id);
}

/**
 * The all-accounts window. The default starts on a quarter hour so that it is whole buckets of
 * log_stats_15m with no partial edge to count from `logs` (an edge read is the costly part).
 */
export function allAccountsWindow(q: { start_timestamp?: number; end_timestamp?: number }, nowSec: number):
  { startTimestamp: number; endTimestamp: number | undefined } {
  if (q.start_timestamp) return { startTimestamp: q.start_timestamp, endTimestamp: q.end_timestamp };
  const from = (q.end_timestamp || nowSec) - ALL_ACCOUNTS_DEFAULT_WINDOW_SEC;
  return { startTimestamp: Math.max(1, Math.floor(from / BUCKET_SEC) * BUCKET_SEC), endTimestamp: q.end_timestamp };
}
