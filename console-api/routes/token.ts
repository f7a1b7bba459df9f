// /api/token/...: the caller's own API keys. Creation never returns the key; the owner reveals it
// with POST /api/token/:id/key. Another account gets 404 for a key it does not own (its existence
// is not disclosed).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { generateApiKey, maskApiKey } from '../../infra/secrets/api-key-crypto.js';
import { currentUser, type RequireUser } from '../auth/require-user.js';
import type { ConsoleContext } from '../context.js';
import { ok, type Page } from '../http/envelope.js';
import { ConsoleError } from '../http/errors.js';
import { parseInput, queryInt, safeInt } from '../http/validation.js';
import { tokenGroups } from '../options/ratios.js';
import { firstInvalidIp, normaliseIpList } from '../tokens/ip-list.js';
import { type TokenListItem, type TokenRow, toTokenListItem } from '../tokens/token-view.js';


/** The contract's "API key creation input". */
export const createTokenBody = z.object({
  name: z.string({ error: 'must be a string' }).max(50, { error: 'must be at most 50 characters' }),
  expired_time: z
    .number({ error: 'must be an integer' })
    .int({ error: 'must be an integer' })
    .min(-1, { error: 'must be -1 (never expires) or a future Unix time' })
    .max(Number.MAX_SAFE_INTEGER),
  remain_quota: safeInt.min(0, { error: 'must be at least 0' }),
  unlimited_quota: z.boolean({ error: 'must be a boolean' }),
  model_limits_enabled: z.boolean({ error: 'must be a boolean' }).optional(),
  model_limits: z.string({ error: 'must be a string' }).max(10_000, { error: 'is too long' }).optional(),
  allow_ips: z
    .string({ error: 'must be a string or null' })
    .max(10_000, { error: 'is too long' })
    .refine((s) => firstInvalidIp(s) === undefined, {
      error: (issue) => `"${firstInvalidIp(String(issue.input))}" is not an IP address or CIDR block`,
    })
    .nullable()
    .optional(),
  group: z.string({ error: 'must be a string' }).max(64, { error: 'is too long' }).optional(),
  cross_group_retry: z.boolean({ error: 'must be a boolean' }).optional(),
});

export const listTokensQuery = z.object({
  p: queryInt({ min: 1 }),
  page: queryInt({ min: 1 }),
  page_size: queryInt({ min: 1 }),
});

const tokenIdParams = z.object({ id: z.coerce.number({ error: 'must be an integer' }).int().positive() });

export const MAX_PAGE_SIZE = 100;
export const DEFAULT_PAGE_SIZE = 10;

/** Comma list, trimmed, without empties or repeats. */
export function normaliseModelList(raw: string): string {
  return [...new Set(raw.split(',').map((s) => s.trim()).filter(Boolean))].join(',');
}

export function registerTokenRoutes(app: FastifyInstance, ctx: ConsoleContext, requireUser: RequireUser): void {
  const { sql } = ctx;

  app.post('/api/token/', { preHandler: requireUser() }, async (request) => {
    const user = currentUser(request);
    const body = parseInput(createTokenBody, request.body);
    if (body.expired_time !== -1 && body.expired_time <= ctx.now()) {
      throw new ConsoleError('VALIDATION_FAILED', 'expired_time: must be -1 (never expires) or a future Unix time');
    }
    const group = body.group ?? '';
    if (group !== '' && !(await tokenGroups(sql)).includes(group)) {
      throw new ConsoleError('UNKNOWN_GROUP', `group: unknown group "${group}"`);
    }
    const key = generateApiKey();
    const [row] = await sql<{ id: number }[]>`
      INSERT INTO tokens (user_id, name, key_hash, key_ciphertext, key_mask, created_time, expired_time,
                          remain_quota, unlimited_quota, model_limits_enabled, model_limits, allow_ips,
                          "group", cross_group_retry)
      VALUES (${user.id}, ${body.name}, ${ctx.apiKeyCrypto.hash(key)}, ${ctx.apiKeyCrypto.seal(key)},
              ${maskApiKey(key)}, ${ctx.now()}, ${body.expired_time}, ${body.remain_quota},
              ${body.unlimited_quota}, ${body.model_limits_enabled ?? false},
              ${normaliseModelList(body.model_limits ?? '')}, ${normaliseIpList(body.allow_ips)},
              ${group}, ${body.cross_group_retry ?? false})
      RETURNING id`;
    await ctx.invalidate({ kind: 'token', id: row!.id, user_id: user.id });
    return ok();
  });

  app.get('/api/token/', { preHandler: requireUser() }, async (request) => {
    const user = currentUser(request);
    const q = parseInput(listTokensQuery, request.query, 'query');
    const page = q.p ?? q.page ?? 1;
    const pageSize = Math.min(q.page_size ?? DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
    const [rows, [count]] = await Promise.all([
      sql<Omit<TokenRow, 'key_hash' | 'key_ciphertext' | 'deleted_at'>[]>`
        SELECT id, user_id, name, key_mask, status, created_time, accessed_time, expired_time, remain_quota,
               unlimited_quota, used_quota, model_limits_enabled, model_limits, allow_ips, "group",
               cross_group_retry
        FROM tokens WHERE user_id = ${user.id} AND deleted_at IS NULL
        ORDER BY id DESC LIMIT ${pageSize} OFFSET ${(page - 1) * pageSize}`,
      sql<{ total: number }[]>`
        SELECT count(*)::bigint AS total FROM tokens WHERE user_id = ${user.id} AND deleted_at IS NULL`,
    ]);
    const data: Page<TokenListItem> = {
      items: rows.map(toTokenListItem),
      total: Number(count!.total),
      page,
      page_size: pageSize,
    };
    return ok(data);
  });

  app.post('/api/token/:id/key', { preHandler: requireUser() }, async (request, reply) => {
    const user = currentUser(request);
    const { id } = parseInput(tokenIdParams, request.params, 'path');
    const [row] = await sql<{ key_ciphertext: Buffer }[]>`
      SELECT key_ciphertext FROM tokens WHERE id = ${id} AND user_id = ${user.id} AND deleted_at IS NULL`;
    if (!row) throw new ConsoleError('NOT_FOUND', 'API key not found');
    reply.header('cache-control', 'no-store');
    return ok({ key: ctx.apiKeyCrypto.open(row.key_ciphertext) });
  });
}
