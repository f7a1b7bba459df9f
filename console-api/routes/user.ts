// /api/user/...: registration, login, access tokens, the own profile and the administrator's account
// edit. See README.md for each endpoint's contract.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { findUserByUsername, insertAccount } from '../accounts/account-store.js';
import { type UserRow, toAccount, toAccountSummary } from '../accounts/account-view.js';
import { ACCOUNT_STATUS, ROLE } from '../accounts/roles.js';
import { issueAccessToken, issueSessionToken } from '../auth/access-tokens.js';
import { burnPasswordCheck, hashPassword, verifyPassword } from '../auth/password.js';
import { currentUser, type RequireUser } from '../auth/require-user.js';
import type { ConsoleContext } from '../context.js';
import { ok } from '../http/envelope.js';
import { ConsoleError } from '../http/errors.js';
import { parseInput, safeInt } from '../http/validation.js';
import { accountGroups, AUTO_GROUP, loadRatios } from '../options/ratios.js';

const username = z
  .string({ error: 'must be a string' })
  .min(3, { error: 'must be at least 3 characters' })
  .max(20, { error: 'must be at most 20 characters' })
  .regex(/^[^\s\p{C}]+$/u, { error: 'must not contain spaces or control characters' });

export const registerBody = z.object({
  username,
  password: z
    .string({ error: 'must be a string' })
    .min(8, { error: 'must be at least 8 characters' })
    .max(64, { error: 'must be at most 64 characters' }),
  display_name: z.string({ error: 'must be a string' }).max(50, { error: 'must be at most 50 characters' }).optional(),
  email: z.union([z.literal(''), z.email({ error: 'must be an e-mail address' })]).optional(),
});

export const loginBody = z.object({
  username: z.string({ error: 'must be a string' }).min(1, { error: 'is required' }).max(64),
  password: z.string({ error: 'must be a string' }).min(1, { error: 'is required' }).max(128),
});

export const updateUserBody = z.object({
  id: z.number({ error: 'must be an integer' }).int({ error: 'must be an integer' }).positive(),
  quota: safeInt.min(0, { error: 'must be at least 0' }).optional(),
  group: z.string({ error: 'must be a string' }).min(1, { error: 'must not be empty' }).optional(),
  status: z.union([z.literal(ACCOUNT_STATUS.enabled), z.literal(ACCOUNT_STATUS.banned)], {
    error: 'must be 1 (enabled) or 2 (banned)',
  }).optional(),
  display_name: z.string({ error: 'must be a string' }).max(50, { error: 'must be at most 50 characters' }).optional(),
});

/** Label of the `auto` group's ratio: the contract says it is text, not a number. */
export const AUTO_GROUP_RATIO_LABEL = 'auto';

export function registerUserRoutes(app: FastifyInstance, ctx: ConsoleContext, requireUser: RequireUser): void {
  const { sql } = ctx;

  app.post('/api/user/register', async (request) => {
    const body = parseInput(registerBody, request.body);
    await insertAccount(sql, {
      username: body.username,
      passwordHash: await hashPassword(body.password),
      displayName: body.display_name || body.username,
      email: body.email ?? '',
      role: ROLE.user,
      group: 'default',
    });
    return ok();
  });

  app.post('/api/user/login', async (request) => {
    const body = parseInput(loginBody, request.body);
    const user = await findUserByUsername(sql, body.username);
    const valid = user ? await verifyPassword(body.password, user.password_hash) : await burnPasswordCheck(body.password);
    if (!user || !valid) throw new ConsoleError('INVALID_CREDENTIALS');
    if (user.status !== ACCOUNT_STATUS.enabled) throw new ConsoleError('ACCOUNT_BANNED');
    const token = await issueSessionToken(sql, user.id, ctx.config.SESSION_TTL_SEC, ctx.now());
    return ok({ ...toAccountSummary(user), token });
  });

  app.get('/api/user/token', { preHandler: requireUser() }, async (request) => {
    const user = currentUser(request);
    return ok(await issueAccessToken(sql, user.id, ctx.now()));
  });

  app.get('/api/user/self', { preHandler: requireUser() }, async (request) => ok(toAccount(currentUser(request))));

  app.get('/api/user/self/groups', { preHandler: requireUser() }, async () => {
    const groups = (await loadRatios(sql)).groups();
    const data: Record<string, { ratio: number | string; desc: string }> = {};
    for (const [name, ratio] of Object.entries(groups)) data[name] = { ratio, desc: name };
    data[AUTO_GROUP] = { ratio: AUTO_GROUP_RATIO_LABEL, desc: 'automatic selection of an available group' };
    return ok(data);
  });

  app.put('/api/user/', { preHandler: requireUser(ROLE.admin) }, async (request) => {
    const caller = currentUser(request);
    const body = parseInput(updateUserBody, request.body);
    if (body.group !== undefined && !(await accountGroups(sql)).includes(body.group)) {
      throw new ConsoleError('UNKNOWN_GROUP', `group: unknown group "${body.group}"`);
    }
    const { updated, delta } = await sql.begin(async (tx) => {
      const [before] = await tx<UserRow[]>`
        SELECT * FROM users WHERE id = ${body.id} AND deleted_at IS NULL FOR UPDATE`;
      if (!before) throw new ConsoleError('NOT_FOUND', 'account not found');
      // An administrator edits only accounts of a lower role; the super administrator edits any.
      if (caller.role < ROLE.root && before.role >= caller.role) throw new ConsoleError('INSUFFICIENT_ROLE');
      const [after] = await tx<UserRow[]>`
        UPDATE users SET
          quota = ${body.quota ?? before.quota},
          "group" = ${body.group ?? before.group},
          status = ${body.status ?? before.status},
          display_name = ${body.display_name ?? before.display_name}
        WHERE id = ${body.id}
        RETURNING *`;
      return { updated: after!, delta: after!.quota - before.quota };
    });
    // Committed: move the relay's balance mirror by the same delta (a no-op when it is not loaded,
    // since it will then be seeded from Postgres, which already holds the change).
    try {
      await ctx.quotaStore.adjustAccount(updated.id, delta);
    } catch (err) {
      ctx.logger.error({ err, userId: updated.id, delta }, 'quota changed in Postgres but the Redis mirror was not adjusted');
    }
    await ctx.invalidate({ kind: 'user', id: updated.id });
    return ok(toAccount(updated));
  });
}
