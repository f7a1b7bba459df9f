// /api/token/... is the API-key resource: "token" is the contract's (and new-api's) name for an API
// key, kept on the wire; in the code an API key is called one, and a console login is a session
// (auth/sessions.ts). The caller's own API keys: creation never returns the key; the owner reveals
// it with POST /api/token/:id/key. Another account gets 404 for a key it does not own (its existence
// is not disclosed). Every change publishes {kind: 'token', id, user_id}.
import { z } from 'zod';
import { generateApiKey, maskApiKey } from '../../infra/secrets/api-key-crypto.js';
import { finishKeyQuotaEdit, type PendingKeyQuotaEdit } from '../../core/ledger/console-credit-follow-up.js';
import { ROLE } from '../accounts/roles.js';
import type { ConsoleContext } from '../context.js';
import type { Db } from '../db.js';
import type { Api } from '../http/api.js';
import { ok, type Page } from '../http/envelope.js';
import { ConsoleError } from '../http/errors.js';
import { pageOf, tokenItemSchema } from '../http/schemas.js';
import { containsPattern, expiryTime, idParams, pageQuery, paging, queryString, requiredName, safeInt } from '../http/validation.js';
import { tokenGroups } from '../options/groups.js';
import { firstInvalidIp, normaliseIpList } from '../api-keys/ip-list.js';
import { type ApiKeyListItem, type ApiKeyRow, toApiKeyListItem } from '../api-keys/api-key-view.js';

export { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../http/validation.js';

/** new-api's key statuses: 1 enabled, 2 disabled (3 expired and 4 exhausted are derived by the relay). */
export const TOKEN_STATUS = { enabled: 1, disabled: 2 } as const;

/**
 * API-key writes (create, update, delete) one account may make per minute of the console's clock;
 * more answer 429. Each write makes every relay walk its key cache, a remain_quota change leaves a
 * key_quota_edits row and a Redis marker, a create / use / delete loop leaves mirrors behind: without
 * a bound one account could fill Redis (100 PUT/s: 8.6 M markers a day). Far above a person's pace.
 */
export const KEY_WRITES_PER_MINUTE = 60;

/** Counts this API-key write; throws RATE_LIMITED (with Retry-After: the rest of the minute) past the limit. */
async function countKeyWrite(ctx: ConsoleContext, userId: number): Promise<void> {
  const now = ctx.now();
  let taken: boolean;
  try {
    taken = await ctx.quotaStore.takeApiKeyWriteSlot(userId, KEY_WRITES_PER_MINUTE, Math.floor(now / 60));
  } catch (err) {
    // Redis unreachable: the write goes ahead, as a key edit's mirror step is left to the billing
    // follow-up then; refusing would take key management down with Redis for no bound gained (no
    // markers are written meanwhile).
    ctx.logger.error({ err, userId }, 'API-key write limit not checked');
    return;
  }
  if (!taken) {
    const retryAfterSec = 60 - (now % 60);
    throw new ConsoleError('RATE_LIMITED', `too many API key changes from this account; retry in ${retryAfterSec} s`, { retryAfterSec });
  }
}

const tokenFields = {
  // Required by the contract: neither empty nor only spaces, as a redemption code's name.
  name: requiredName(50),
  // At most 9999-12-31 (MAX_UNIX_TIME): a date the web console can show.
  expired_time: expiryTime('must be -1 (never expires) or a future Unix time'),
  remain_quota: safeInt.min(0, { error: 'must be at least 0' }),
  unlimited_quota: z.boolean({ error: 'must be a boolean' }),
  model_limits_enabled: z.boolean({ error: 'must be a boolean' }),
  model_limits: z.string({ error: 'must be a string' }).max(10_000, { error: 'is too long' }),
  allow_ips: z
    .string({ error: 'must be a string or null' })
    .max(10_000, { error: 'is too long' })
    .refine((s) => firstInvalidIp(s) === undefined, {
      error: (issue) => `"${firstInvalidIp(String(issue.input))}" is not an IP address or CIDR block`,
    })
    .nullable(),
  group: z.string({ error: 'must be a string' }).max(64, { error: 'is too long' }),
  cross_group_retry: z.boolean({ error: 'must be a boolean' }),
  // Beyond the contract's creation input: the key's own rate limits (0: the group's limit applies).
  rate_limit_rpm: safeInt.min(0, { error: 'must be at least 0' }).max(1_000_000_000, { error: 'must be at most 1,000,000,000' }),
  rate_limit_tpm: safeInt.min(0, { error: 'must be at least 0' }).max(1_000_000_000, { error: 'must be at most 1,000,000,000' }),
};

/** The contract's "API key creation input". */
export const createTokenBody = z.object({
  name: tokenFields.name,
  expired_time: tokenFields.expired_time,
  remain_quota: tokenFields.remain_quota,
  unlimited_quota: tokenFields.unlimited_quota,
  model_limits_enabled: tokenFields.model_limits_enabled.optional(),
  model_limits: tokenFields.model_limits.optional(),
  allow_ips: tokenFields.allow_ips.optional(),
  group: tokenFields.group.optional(),
  cross_group_retry: tokenFields.cross_group_retry.optional(),
  rate_limit_rpm: tokenFields.rate_limit_rpm.optional(),
  rate_limit_tpm: tokenFields.rate_limit_tpm.optional(),
});

/** PUT /api/token/: the id and any creation field to change, plus status (1 enable, 2 disable). */
export const updateTokenBody = z.object({
  id: z.number({ error: 'must be an integer' }).int({ error: 'must be an integer' }).positive({ error: 'must be a positive integer' }),
  status: z.union([z.literal(TOKEN_STATUS.enabled), z.literal(TOKEN_STATUS.disabled)], { error: 'must be 1 (enabled) or 2 (disabled)' }).optional(),
  ...Object.fromEntries(Object.entries(tokenFields).map(([k, s]) => [k, s.optional()])) as {
    [K in keyof typeof tokenFields]: z.ZodOptional<(typeof tokenFields)[K]>;
  },
  /**
   * The remain_quota the caller read before setting it: refused (409) when it changed since, so that
   * a form loaded before the key spent does not hand the spending back. new-api has no such field:
   * without it remain_quota is set as sent.
   */
  expected_remain_quota: safeInt.min(0, { error: 'must be at least 0' }).optional(),
});

export const updateTokenQuery = z.object({
  status_only: z.preprocess((v) => (v === '' ? undefined : v), z.enum(['true', 'false'], { error: 'must be true or false' }).optional()),
});

export const listTokensQuery = pageQuery.extend({ keyword: queryString(50) });

/** Comma list, trimmed, without empties or repeats. */
export function normaliseModelList(raw: string): string {
  return [...new Set(raw.split(',').map((s) => s.trim()).filter(Boolean))].join(',');
}

const LIST_COLUMNS = ['id', 'user_id', 'name', 'key_mask', 'status', 'created_time', 'accessed_time', 'expired_time',
  'remain_quota', 'unlimited_quota', 'used_quota', 'model_limits_enabled', 'model_limits', 'allow_ips', 'group',
  'cross_group_retry', 'rate_limit_rpm', 'rate_limit_tpm'] as const;
type ListRow = Omit<ApiKeyRow, 'key_hash' | 'key_ciphertext' | 'deleted_at'>;

async function findOwnToken(db: Db, userId: number, id: number, lock = false): Promise<ListRow> {
  const [row] = await db<ListRow[]>`
    SELECT ${db(LIST_COLUMNS as unknown as string[])} FROM tokens
    WHERE id = ${id} AND user_id = ${userId} AND deleted_at IS NULL ${lock ? db`FOR UPDATE` : db``}`;
  if (!row) throw new ConsoleError('NOT_FOUND', 'API key not found');
  return row;
}

async function assertTokenGroup(db: Db, group: string, userGroup: string): Promise<void> {
  if (group !== '' && !(await tokenGroups(db, userGroup)).includes(group)) {
    throw new ConsoleError('UNKNOWN_GROUP', `group: unknown group "${group}"`);
  }
}

export function registerTokenRoutes(api: Api, ctx: ConsoleContext): void {
  const { sql } = ctx;

  api.route({
    method: 'POST', path: '/api/token/', tag: 'keys', access: ROLE.user, body: createTokenBody,
    summary: 'Create an API key (the key is not in the response)', errors: ['INVALID_JSON', 'UNKNOWN_GROUP', 'RATE_LIMITED'],
    description: `At most ${KEY_WRITES_PER_MINUTE} API-key writes (create, update, delete) per account per minute; then 429 with Retry-After.`,
  }, async ({ body, user }) => {
    await countKeyWrite(ctx, Number(user.id));
    if (body.expired_time !== -1 && body.expired_time <= ctx.now()) {
      throw new ConsoleError('VALIDATION_FAILED', 'expired_time: must be -1 (never expires) or a future Unix time');
    }
    const group = body.group ?? '';
    await assertTokenGroup(sql, group, user.group);
    const key = generateApiKey();
    const [row] = await sql<{ id: number }[]>`
      INSERT INTO tokens (user_id, name, key_hash, key_ciphertext, key_mask, created_time, expired_time,
                          remain_quota, unlimited_quota, model_limits_enabled, model_limits, allow_ips,
                          "group", cross_group_retry, rate_limit_rpm, rate_limit_tpm)
      VALUES (${user.id}, ${body.name}, ${ctx.apiKeyCrypto.hash(key)}, ${ctx.apiKeyCrypto.seal(key)},
              ${maskApiKey(key)}, ${ctx.now()}, ${body.expired_time}, ${body.remain_quota},
              ${body.unlimited_quota}, ${body.model_limits_enabled ?? false},
              ${normaliseModelList(body.model_limits ?? '')}, ${normaliseIpList(body.allow_ips)},
              ${group}, ${body.cross_group_retry ?? false}, ${body.rate_limit_rpm ?? 0}, ${body.rate_limit_tpm ?? 0})
      RETURNING id`;
    await ctx.invalidate({ kind: 'token', id: Number(row!.id), user_id: Number(user.id) });
    return ok();
  });

  const list = async (userId: number, q: z.output<typeof listTokensQuery>) => {
    const { page, pageSize, offset } = paging(q);
    const where = sql`user_id = ${userId} AND deleted_at IS NULL
      ${q.keyword !== undefined ? sql`AND name ILIKE ${containsPattern(q.keyword)}` : sql``}`;
    const [rows, [count]] = await Promise.all([
      sql<ListRow[]>`
        SELECT ${sql(LIST_COLUMNS as unknown as string[])} FROM tokens WHERE ${where}
        ORDER BY id DESC LIMIT ${pageSize} OFFSET ${offset}`,
      sql<{ total: number }[]>`SELECT count(*)::bigint AS total FROM tokens WHERE ${where}`,
    ]);
    const now = ctx.now();
    const data: Page<ApiKeyListItem> = { items: rows.map((r) => toApiKeyListItem(r, now)), total: Number(count!.total), page, page_size: pageSize };
    return data;
  };

  api.route({
    method: 'GET', path: '/api/token/', tag: 'keys', access: ROLE.user, query: listTokensQuery, data: pageOf(tokenItemSchema),
    summary: "The caller's keys, masked, newest first; keyword matches the name in part",
  }, async ({ query, user }) => ok(await list(Number(user.id), query)));

  api.route({
    method: 'GET', path: '/api/token/search', tag: 'keys', access: ROLE.user, query: listTokensQuery, data: pageOf(tokenItemSchema),
    summary: 'Same as GET /api/token/ (new-api path)',
  }, async ({ query, user }) => ok(await list(Number(user.id), query)));

  api.route({
    method: 'GET', path: '/api/token/:id', tag: 'keys', access: ROLE.user, params: idParams, data: tokenItemSchema,
    summary: 'One own key, masked', errors: ['NOT_FOUND'],
  }, async ({ params, user }) => ok(toApiKeyListItem(await findOwnToken(sql, Number(user.id), params.id), ctx.now())));

  api.route({
    method: 'PUT', path: '/api/token/', tag: 'keys', access: ROLE.user, body: updateTokenBody, query: updateTokenQuery,
    data: tokenItemSchema, errors: ['INVALID_JSON', 'UNKNOWN_GROUP', 'NOT_FOUND', 'STATE_CONFLICT', 'RATE_LIMITED'],
    summary: 'Update an own key (any creation field, status; with expected_remain_quota, remain_quota only if it is still that); with ?status_only=true only the status changes',
    description: 'A changed remain_quota moves the relay\'s Redis mirror of the key by the same delta after the commit, once (retried by the billing worker if that step fails). ' +
      `Counts against the ${KEY_WRITES_PER_MINUTE} API-key writes per account per minute (429 with Retry-After beyond).`,
  }, async ({ body, query, user }) => {
    await countKeyWrite(ctx, Number(user.id));
    const statusOnly = query.status_only === 'true';
    if (statusOnly && body.status === undefined) throw new ConsoleError('VALIDATION_FAILED', 'status: is required with status_only=true');
    const b = statusOnly ? { id: body.id, status: body.status } as typeof body : body;
    const { after, quotaEdit } = await sql.begin(async (tx) => {
      const before = await findOwnToken(tx, Number(user.id), b.id, true);
      // Compared under the row lock, so a settlement cannot land between the check and the update.
      if (b.remain_quota !== undefined && b.expected_remain_quota !== undefined && b.expected_remain_quota !== Number(before.remain_quota)) {
        throw new ConsoleError('STATE_CONFLICT', `remain_quota: the key's quota changed since it was read (now ${before.remain_quota} quota); read it again`);
      }
      // Only what changes is checked: new-api's edit form sends the whole key back, its past expiry
      // and a group no longer offered included, when only the name was edited.
      if (b.expired_time !== undefined && b.expired_time !== Number(before.expired_time) && b.expired_time !== -1 && b.expired_time <= ctx.now()) {
        throw new ConsoleError('VALIDATION_FAILED', 'expired_time: must be -1 (never expires) or a future Unix time');
      }
      if (b.group !== undefined && b.group !== before.group) await assertTokenGroup(tx, b.group, user.group);
      const expiry = b.expired_time ?? Number(before.expired_time);
      if (b.status === TOKEN_STATUS.enabled && expiry !== -1 && expiry <= ctx.now()) {
        throw new ConsoleError('VALIDATION_FAILED', 'status: the key has expired; set a later expired_time to enable it');
      }
      // Emptying a limited key with requests in flight (review lifecycle: refused 400 for as long as
      // it had traffic): everything spendable is removed, and what its requests in flight or not yet
      // billed hold stays until they settle (their unspent part comes back to it). Any other value
      // below that is refused (assertKeyDebitCovered), saying why.
      let remainQuota = b.remain_quota ?? Number(before.remain_quota);
      const limited = !(b.unlimited_quota ?? before.unlimited_quota);
      // The key's check takes no hold: what this read found is what the edit takes, not read again.
      let emptied = false;
      if (limited && remainQuota === 0 && Number(before.remain_quota) > 0) {
        const spendable = await keySpendable(ctx, tx, Number(user.id), b.id, Number(before.remain_quota));
        if (spendable > 0) {
          remainQuota = Number(before.remain_quota) - spendable;
          emptied = true;
        }
      }
      const [row] = await tx<ListRow[]>`
        UPDATE tokens SET
          name = ${b.name ?? before.name},
          status = ${b.status ?? before.status},
          expired_time = ${expiry},
          remain_quota = ${remainQuota},
          unlimited_quota = ${b.unlimited_quota ?? before.unlimited_quota},
          model_limits_enabled = ${b.model_limits_enabled ?? before.model_limits_enabled},
          model_limits = ${b.model_limits === undefined ? before.model_limits : normaliseModelList(b.model_limits)},
          allow_ips = ${b.allow_ips === undefined ? before.allow_ips : normaliseIpList(b.allow_ips)},
          "group" = ${b.group ?? before.group},
          cross_group_retry = ${b.cross_group_retry ?? before.cross_group_retry},
          rate_limit_rpm = ${b.rate_limit_rpm ?? before.rate_limit_rpm},
          rate_limit_tpm = ${b.rate_limit_tpm ?? before.rate_limit_tpm}
        WHERE id = ${b.id}
        RETURNING ${tx(LIST_COLUMNS as unknown as string[])}`;
      const delta = Number(row!.remain_quota) - Number(before.remain_quota);
      if (delta === 0) return { after: row!, quotaEdit: undefined };
      if (delta < 0 && !row!.unlimited_quota && !emptied) await assertKeyDebitCovered(ctx, tx, Number(user.id), b.id, Number(before.remain_quota), delta);
      // Kept pending until the mirror step is done, so that the billing worker can retry it.
      const [seq] = await tx<{ quota_seq: string }[]>`UPDATE tokens SET quota_seq = quota_seq + 1 WHERE id = ${b.id} RETURNING quota_seq`;
      const [e] = await tx<{ id: string }[]>`
        INSERT INTO key_quota_edits (user_id, token_id, delta, quota_seq)
        VALUES (${user.id}, ${b.id}, ${delta}, ${seq!.quota_seq}) RETURNING id`;
      const quotaEdit: PendingKeyQuotaEdit = {
        editId: Number(e!.id), userId: Number(user.id), tokenId: Number(row!.id), delta, quotaSeq: Number(seq!.quota_seq),
      };
      return { after: row!, quotaEdit };
    });
    if (quotaEdit !== undefined) {
      try {
        await finishKeyQuotaEdit({ sql: ctx.sql, quota: ctx.quotaStore }, quotaEdit);
      } catch (err) {
        ctx.logger.error({ err, ...quotaEdit }, 'key quota edit committed; its mirror update is left to the billing follow-up');
      }
    }
    await ctx.invalidate({ kind: 'token', id: Number(after.id), user_id: Number(user.id) });
    return ok(toApiKeyListItem(after, ctx.now()));
  });

  api.route({
    method: 'DELETE', path: '/api/token/:id', tag: 'keys', access: ROLE.user, params: idParams,
    summary: 'Delete an own key (soft: deleted_at is set; the relay refuses it at once)', errors: ['NOT_FOUND', 'RATE_LIMITED'],
    description: `The key's Redis mirror expires a day later. Counts against the ${KEY_WRITES_PER_MINUTE} API-key writes per account per minute (429 with Retry-After beyond).`,
  }, async ({ params, user }) => {
    await countKeyWrite(ctx, Number(user.id));
    const rows = await sql`
      UPDATE tokens SET deleted_at = ${ctx.now()}
      WHERE id = ${params.id} AND user_id = ${user.id} AND deleted_at IS NULL RETURNING id`;
    if (rows.length === 0) throw new ConsoleError('NOT_FOUND', 'API key not found');
    await ctx.invalidate({ kind: 'token', id: params.id, user_id: Number(user.id) });
    // Its mirror would otherwise stay in Redis for good; a request still running settles within the TTL.
    try {
      await ctx.quotaStore.expireDeletedToken(Number(user.id), params.id);
    } catch (err) {
      ctx.logger.error({ err, userId: Number(user.id), tokenId: params.id }, 'API key deleted; its Redis mirror was not given a TTL');
    }
    return ok();
  });

  api.route({
    method: 'POST', path: '/api/token/:id/key', tag: 'keys', access: ROLE.user, params: idParams,
    data: z.object({ key: z.string() }), summary: 'Reveal the full key to its owner (Cache-Control: no-store)', errors: ['NOT_FOUND'],
  }, async ({ params, user, reply }) => {
    const [row] = await sql<{ key_ciphertext: Buffer }[]>`
      SELECT key_ciphertext FROM tokens WHERE id = ${params.id} AND user_id = ${user.id} AND deleted_at IS NULL`;
    if (!row) throw new ConsoleError('NOT_FOUND', 'API key not found');
    reply.header('cache-control', 'no-store');
    return ok({ key: ctx.apiKeyCrypto.open(row.key_ciphertext) });
  });
}

/**
 * Inside the transaction, under the key's row lock: refuses lowering a limited key's remain_quota
 * below what its requests in flight hold, as assertDebitCovered does for an account's balance. The
 * spendable remainder is the relay's mirror of the key (its open reservations taken off) less the
 * committed edits that have not reached it; the lower of that and Postgres, Postgres alone when the
 * mirror is not loaded. Before, an edit to 0 during the key's own traffic was accepted against
 * Postgres, which holds no reservation, and the requests in flight then settled the key below zero.
 *
 * Unlike an account debit (console-ledger.ts DebitHolds), this check takes no hold: it reads, and the
 * edit reaches the mirror only after the COMMIT. Every request the key reserves between this read and
 * that mirror step still passes against the old remainder, so the key can end below zero by what
 * those requests cost: the key's request rate times the window (a few SQL statements, the COMMIT and
 * a Redis round trip; 30 s more when the console dies and the billing follow-up applies the edit), not
 * by one reservation. No operator money is lost by it: a key's quota is a limit inside the account's
 * balance, and each of those requests was reserved from, and billed to, the account (docs/billing.md,
 * "Changes made in the console").
 */
async function assertKeyDebitCovered(ctx: ConsoleContext, tx: Db, userId: number, tokenId: number, pgRemain: number, delta: number): Promise<void> {
  const spendable = await keySpendable(ctx, tx, userId, tokenId, pgRemain);
  if (spendable + delta < 0) {
    throw new ConsoleError('VALIDATION_FAILED',
      `remain_quota: would make the key's remaining quota negative: its requests in flight or not yet billed hold ${pgRemain - spendable} of it (spendable ${spendable}, Postgres ${pgRemain}); lower it by at most ${spendable}, or disable the key`);
  }
}

/** What a debit of the key's remaining quota may take now (inside the transaction, after the row lock). */
async function keySpendable(ctx: ConsoleContext, tx: Db, userId: number, tokenId: number, pgRemain: number): Promise<number> {
  const pending = await tx<{ id: string; quota_seq: string; delta: string }[]>`
    SELECT id, quota_seq, delta FROM key_quota_edits WHERE token_id = ${tokenId} AND follow_up_pending AND delta < 0`;
  const mirror = await ctx.quotaStore.tokenSpendable(userId, tokenId, pending.map((r) => ({
    editId: Number(r.id), quotaSeq: Number(r.quota_seq), delta: Number(r.delta),
  })));
  return mirror === null ? pgRemain : Math.min(mirror, pgRemain);
}
