// /api/redemption/: administrators create redemption codes in batches, list, edit (disable) and
// delete them. A code is redeemed by POST /api/user/topup (routes/topup.ts).
// Status: 1 enabled, 2 disabled, 3 used (new-api's numbering).
// A code is stored as API keys are (infra/secrets/redemption-code-crypto.ts): creation answers the
// codes, listings mask them, and POST /api/redemption/:id/key reveals one to an administrator who may
// change it.
import { z } from 'zod';
import { createRedemptionCodeCrypto, generateRedemptionCode, maskRedemptionCode } from '../../infra/secrets/redemption-code-crypto.js';
import { ROLE } from '../accounts/roles.js';
import type { ConsoleContext } from '../context.js';
import type { Api } from '../http/api.js';
import type { UserRow } from '../accounts/account-view.js';
import { ok } from '../http/envelope.js';
import { ConsoleError } from '../http/errors.js';
import { pageOf, redemptionSchema } from '../http/schemas.js';
import { containsPattern, expiryTime, idParams, pageQuery, paging, queryString, requiredName, safeInt } from '../http/validation.js';

export const REDEMPTION_STATUS = { enabled: 1, disabled: 2, used: 3 } as const;
export const MAX_REDEMPTION_BATCH = 100;

/** At most 9999-12-31 (MAX_UNIX_TIME): a date the web console can show. */
const expiry = expiryTime('must be -1 or 0 (never expires) or a future Unix time');

export const createRedemptionBody = z.object({
  name: requiredName(50),
  quota: safeInt.positive({ error: 'must be a positive integer' }),
  count: z.number({ error: 'must be an integer' }).int({ error: 'must be an integer' }).min(1, { error: 'must be at least 1' })
    .max(MAX_REDEMPTION_BATCH, { error: `must be at most ${MAX_REDEMPTION_BATCH}` }).optional(),
  expired_time: expiry.optional(),
});

export const updateRedemptionBody = z.object({
  id: z.number({ error: 'must be an integer' }).int({ error: 'must be an integer' }).positive({ error: 'must be a positive integer' }),
  status: z.union([z.literal(REDEMPTION_STATUS.enabled), z.literal(REDEMPTION_STATUS.disabled)], { error: 'must be 1 (enabled) or 2 (disabled)' }).optional(),
  name: createRedemptionBody.shape.name.optional(),
  quota: createRedemptionBody.shape.quota.optional(),
  expired_time: expiry.optional(),
});

export const updateRedemptionQuery = z.object({
  status_only: z.preprocess((v) => (v === '' ? undefined : v), z.enum(['true', 'false'], { error: 'must be true or false' }).optional()),
});

export const listRedemptionsQuery = pageQuery.extend({ keyword: queryString(50) });

interface RedemptionRow {
  id: number; created_by: number; name: string; key_mask: string; status: number; quota: number; created_time: number;
  redeemed_time: number; used_user_id: number; expired_time: number;
}

/** What reads return: never key_hash or key_ciphertext. */
const COLUMNS = ['id', 'created_by', 'name', 'key_mask', 'status', 'quota', 'created_time', 'redeemed_time', 'used_user_id', 'expired_time'];

function toRedemption(r: RedemptionRow) {
  return {
    id: Number(r.id), user_id: Number(r.created_by), name: r.name, key: r.key_mask, status: Number(r.status),
    quota: Number(r.quota), created_time: Number(r.created_time), redeemed_time: Number(r.redeemed_time),
    used_user_id: Number(r.used_user_id), expired_time: Number(r.expired_time),
  };
}

export function registerRedemptionRoutes(api: Api, ctx: ConsoleContext): void {
  const { sql } = ctx;
  const codes = createRedemptionCodeCrypto(ctx.config.KEY_SECRET);
  const columns = sql(COLUMNS);
  /**
   * A code is its creator's credit (routes/topup.ts, assertCreatorMayCredit), so an administrator
   * changes or deletes only its own codes and those of accounts of a lower role, as it edits only
   * lower roles' accounts. Else it could raise (or enable) root's code and redeem it itself, a quota
   * edit on itself. The creator never changes, so checking before the write is enough.
   */
  const assertMayChangeCode = async (caller: UserRow, id: number): Promise<void> => {
    if (caller.role >= ROLE.root) return;
    const [code] = await sql<{ created_by: number; creator_role: number | null }[]>`
      SELECT r.created_by, u.role AS creator_role FROM redemptions r LEFT JOIN users u ON u.id = r.created_by WHERE r.id = ${id}`;
    if (!code) throw new ConsoleError('NOT_FOUND', 'redemption code not found');
    if (Number(code.created_by) === Number(caller.id) || code.creator_role === null || code.creator_role < caller.role) return;
    throw new ConsoleError('INSUFFICIENT_ROLE', 'an administrator may change only its own codes and those of accounts of a lower role');
  };
  const checkExpiry = (t: number | undefined) => {
    if (t !== undefined && t > 0 && t <= ctx.now()) {
      throw new ConsoleError('VALIDATION_FAILED', 'expired_time: must be -1 or 0 (never expires) or a future Unix time');
    }
  };

  api.route({
    method: 'POST', path: '/api/redemption/', tag: 'admin: redemption codes', access: ROLE.admin, body: createRedemptionBody,
    data: z.array(z.string()), summary: `Create count (1–${MAX_REDEMPTION_BATCH}, default 1) codes of quota each; data is the codes (listings mask them)`,
    errors: ['INVALID_JSON'],
  }, async ({ body, user }) => {
    checkExpiry(body.expired_time);
    const count = body.count ?? 1;
    const now = ctx.now();
    const made = Array.from({ length: count }, generateRedemptionCode);
    const rows = made.map((code) => ({
      created_by: Number(user.id), name: body.name, key_hash: codes.hash(code), key_ciphertext: codes.seal(code),
      key_mask: maskRedemptionCode(code), status: REDEMPTION_STATUS.enabled, quota: body.quota, created_time: now,
      expired_time: body.expired_time ?? -1,
    }));
    await sql`INSERT INTO redemptions ${sql(rows, 'created_by', 'name', 'key_hash', 'key_ciphertext', 'key_mask', 'status', 'quota', 'created_time', 'expired_time')}`;
    return ok(made);
  });

  api.route({
    method: 'GET', path: '/api/redemption/', tag: 'admin: redemption codes', access: ROLE.admin, query: listRedemptionsQuery,
    data: pageOf(redemptionSchema), summary: 'List codes, masked (paged, newest first); keyword matches the name in part or the code exactly',
  }, async ({ query }) => {
    const { page, pageSize, offset } = paging(query);
    const where = query.keyword !== undefined
      ? sql`WHERE name ILIKE ${containsPattern(query.keyword)} OR key_hash = ${codes.hash(query.keyword)}`
      : sql``;
    const [rows, [count]] = await Promise.all([
      sql<RedemptionRow[]>`SELECT ${columns} FROM redemptions ${where} ORDER BY id DESC LIMIT ${pageSize} OFFSET ${offset}`,
      sql<{ total: number }[]>`SELECT count(*)::bigint AS total FROM redemptions ${where}`,
    ]);
    return ok({ items: rows.map(toRedemption), total: Number(count!.total), page, page_size: pageSize });
  });

  api.route({
    method: 'GET', path: '/api/redemption/:id', tag: 'admin: redemption codes', access: ROLE.admin, params: idParams,
    data: redemptionSchema, summary: 'One code, masked', errors: ['NOT_FOUND'],
  }, async ({ params }) => {
    const [row] = await sql<RedemptionRow[]>`SELECT ${columns} FROM redemptions WHERE id = ${params.id}`;
    if (!row) throw new ConsoleError('NOT_FOUND', 'redemption code not found');
    return ok(toRedemption(row));
  });

  api.route({
    method: 'POST', path: '/api/redemption/:id/key', tag: 'admin: redemption codes', access: ROLE.admin, params: idParams,
    data: z.object({ key: z.string() }), errors: ['NOT_FOUND', 'INSUFFICIENT_ROLE'],
    summary: 'Reveal a code to an administrator who may change it (Cache-Control: no-store)',
  }, async ({ params, user, reply }) => {
    // Whoever reads a code can hand its creator's credit to anyone: the same rule as changing it.
    await assertMayChangeCode(user, params.id);
    const [row] = await sql<{ key_ciphertext: Buffer }[]>`SELECT key_ciphertext FROM redemptions WHERE id = ${params.id}`;
    if (!row) throw new ConsoleError('NOT_FOUND', 'redemption code not found');
    reply.header('cache-control', 'no-store');
    return ok({ key: codes.open(row.key_ciphertext) });
  });

  api.route({
    method: 'PUT', path: '/api/redemption/', tag: 'admin: redemption codes', access: ROLE.admin, body: updateRedemptionBody,
    query: updateRedemptionQuery, data: redemptionSchema,
    summary: 'Edit an unused code: status (1 enable, 2 disable), name, quota, expiry; ?status_only=true changes only the status',
    errors: ['INVALID_JSON', 'NOT_FOUND', 'STATE_CONFLICT', 'INSUFFICIENT_ROLE'],
  }, async ({ body, query, user }) => {
    const statusOnly = query.status_only === 'true';
    if (statusOnly && body.status === undefined) throw new ConsoleError('VALIDATION_FAILED', 'status: is required with status_only=true');
    const b = statusOnly ? { id: body.id, status: body.status } as typeof body : body;
    checkExpiry(b.expired_time);
    await assertMayChangeCode(user, b.id);
    const [row] = await sql<RedemptionRow[]>`
      UPDATE redemptions SET
        status = COALESCE(${b.status ?? null}::int, status),
        name = COALESCE(${b.name ?? null}::text, name),
        quota = COALESCE(${b.quota ?? null}::bigint, quota),
        expired_time = COALESCE(${b.expired_time ?? null}::bigint, expired_time)
      WHERE id = ${b.id} AND status <> ${REDEMPTION_STATUS.used}
      RETURNING ${columns}`;
    if (!row) {
      const [exists] = await sql`SELECT status FROM redemptions WHERE id = ${b.id}`;
      if (!exists) throw new ConsoleError('NOT_FOUND', 'redemption code not found');
      throw new ConsoleError('STATE_CONFLICT', 'a used redemption code cannot be changed');
    }
    return ok(toRedemption(row));
  });

  api.route({
    method: 'DELETE', path: '/api/redemption/:id', tag: 'admin: redemption codes', access: ROLE.admin, params: idParams,
    summary: 'Delete a code (a used one too: its credit stays in the ledger and the log)', errors: ['NOT_FOUND', 'INSUFFICIENT_ROLE'],
  }, async ({ params, user }) => {
    await assertMayChangeCode(user, params.id);
    const rows = await sql`DELETE FROM redemptions WHERE id = ${params.id} RETURNING id`;
    if (rows.length === 0) throw new ConsoleError('NOT_FOUND', 'redemption code not found');
    return ok();
  });
}
