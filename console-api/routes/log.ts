// /api/log/self and /api/log/self/stat: the caller's own request log and usage statistics, always
// scoped to the caller's user_id. Filters are exact matches.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { currentUser, type RequireUser } from '../auth/require-user.js';
import type { ConsoleContext } from '../context.js';
import { ok, type Page } from '../http/envelope.js';
import { parseInput, queryInt, queryString } from '../http/validation.js';
import { type LogEntry, queryLogStat, queryLogs } from '../logs/log-query.js';

export const LOG_DEFAULT_PAGE_SIZE = 10;
export const LOG_MAX_PAGE_SIZE = 100;

const logType = queryInt({ min: 0, max: 5 });
const timestamp = queryInt({ min: 0, max: 0xffff_ffff });

export const logSelfQuery = z.object({
  p: queryInt({ min: 1, max: 1_000_000 }),
  page_size: queryInt({ min: 1 }),
  type: logType,
  token_name: queryString(),
  model_name: queryString(),
  group: queryString(),
  start_timestamp: timestamp,
  end_timestamp: timestamp,
  request_id: queryString(),
  upstream_request_id: queryString(),
});

export const logStatQuery = z.object({
  start_timestamp: timestamp,
  end_timestamp: timestamp,
  type: logType,
  token_name: queryString(),
  model_name: queryString(),
  channel: queryInt({ min: 0, max: 0xffff_ffff }),
  group: queryString(),
});

export function registerLogRoutes(app: FastifyInstance, ctx: ConsoleContext, requireUser: RequireUser): void {
  app.get('/api/log/self', { preHandler: requireUser() }, async (request) => {
    const user = currentUser(request);
    const q = parseInput(logSelfQuery, request.query, 'query');
    const page = q.p ?? 1;
    // Larger requests are served at the maximum; data.page_size says what was applied.
    const pageSize = Math.min(q.page_size ?? LOG_DEFAULT_PAGE_SIZE, LOG_MAX_PAGE_SIZE);
    const { items, total } = await queryLogs(
      ctx.clickhouse,
      {
        userId: user.id,
        type: q.type,
        tokenName: q.token_name,
        modelName: q.model_name,
        group: q.group,
        startTimestamp: q.start_timestamp,
        endTimestamp: q.end_timestamp,
        requestId: q.request_id,
        upstreamRequestId: q.upstream_request_id,
      },
      { page, pageSize },
    );
    const data: Page<LogEntry> = { items, page, page_size: pageSize, total };
    return ok(data);
  });

  app.get('/api/log/self/stat', { preHandler: requireUser() }, async (request) => {
    const user = currentUser(request);
    const q = parseInput(logStatQuery, request.query, 'query');
    const stat = await queryLogStat(
      ctx.clickhouse,
      {
        userId: user.id,
        type: q.type,
        tokenName: q.token_name,
        modelName: q.model_name,
        group: q.group,
        channel: q.channel,
        startTimestamp: q.start_timestamp,
        endTimestamp: q.end_timestamp,
      },
      ctx.now(),
    );
    return ok(stat);
  });
}
