// /api/user/...: registration, login (rate-limited), logout, access tokens, the own profile and
// groups, and the administrators' account management (list, search, view, edit, manage). See
// README.md for each endpoint's contract.
import { z } from 'zod';
import { LOG_TYPE } from '../../core/usage/usage-event.js';
import { findUserById, findUserByUsername, insertAccount } from '../accounts/account-store.js';
import { type UserRow, toAccount, toAccountSummary } from '../accounts/account-view.js';
import { ACCOUNT_STATUS, ROLE } from '../accounts/roles.js';
import { endResetCodes, hashCredential, issueAccessToken, issueSession, lockIssuer, revokeAccessTokens, revokeAllCredentials, revokeSession, unbindSignOn } from '../auth/sessions.js';
import { ACCESS_TOKEN_ISSUE_LIMIT, ACCESS_TOKEN_ISSUE_WINDOW_SEC, clearLoginAttempts, countAccessTokenIssue, countLoginAttempt, countRegistration, verifyCurrentPassword } from '../auth/login-limiter.js';
import { bearerToken } from '../auth/require-user.js';
import type { ConsoleContext } from '../context.js';
import type { Db } from '../db.js';
import type { Api } from '../http/api.js';
import { ok, type Page } from '../http/envelope.js';
import { ConsoleError } from '../http/errors.js';
import { accountSchema, groupsSchema, loginDataSchema, pageOf } from '../http/schemas.js';
import { containsPattern, displayText, emailAddress, idParams, nonBlankText, pageQuery, paging, queryString, safeInt, usernameSchema } from '../http/validation.js';
import { afterConsoleCredit, assertDebitCovered, debitRefused, debitTransaction, isDebitRefusal, manageRequestId, type RecordedCredit, recordConsoleCredit, spendableBalance } from '../ledger/console-ledger.js';
import { accountGroups, AUTO_GROUP, lockGroupsShared, usableGroups } from '../options/groups.js';
import { acceptInvitation, AFF_CODE_MAX_LENGTH, creditNewAccount, transferAffQuota } from '../referrals/referrals.js';
import { assertPasswordRules, loadRegistrationPolicy } from '../registration/registration-policy.js';
import { claimEmailCode, findUserByEmail, lockEmailAddress, useEmailCode } from '../email/email-codes.js';
import { registerEmailRoutes } from '../email/email-routes.js';
import { registerSettingRoutes } from '../notices/setting-routes.js';
import { registerOidcRoutes } from '../oidc/oidc-routes.js';
import { resolveSession } from '../auth/sessions.js';

// Registration's rules (http/validation.ts), shared with the accounts sign-on creates.
const username = usernameSchema;

export const registerBody = z.object({
  username,
  password: z
    .string({ error: 'must be a string' })
    .min(8, { error: 'must be at least 8 characters' })
    .max(64, { error: 'must be at most 64 characters' }),
  /** '' or only white space: the username (insertAccount), new-api's default. */
  display_name: displayText(50).optional(),
  email: z.union([z.literal(''), emailAddress]).optional(),
  /** The inviter's invitation code (referrals/referrals.ts). */
  aff_code: z.string({ error: 'must be a string' }).max(AFF_CODE_MAX_LENGTH, { error: `must be at most ${AFF_CODE_MAX_LENGTH} characters` }).optional(),
  /** The code mailed by GET /api/verification, when EmailVerificationEnabled. */
  verification_code: z.string({ error: 'must be a string' }).max(64, { error: 'must be at most 64 characters' }).optional(),
});

export const affTransferBody = z.object({
  quota: safeInt.positive({ error: 'must be a positive integer' }),
});

export const loginBody = z.object({
  username: z.string({ error: 'must be a string' }).min(1, { error: 'is required' }).max(64, { error: 'must be at most 64 characters' }),
  password: z.string({ error: 'must be a string' }).min(1, { error: 'is required' }).max(128, { error: 'must be at most 128 characters' }),
});

export const updateSelfBody = z.object({
  // Not blank: a name of spaces would list as an empty cell (registration takes the username instead).
  display_name: nonBlankText(50, 'must not be empty').optional(),
  password: registerBody.shape.password.optional(),
  original_password: z.string({ error: 'must be a string' }).max(128, { error: 'must be at most 128 characters' }).optional(),
});

const accountId = z.number({ error: 'must be an integer' }).int({ error: 'must be an integer' }).positive({ error: 'must be a positive integer' });

export const updateUserBody = z.object({
  id: accountId,
  quota: safeInt.min(0, { error: 'must be at least 0' }).optional(),
  /**
   * The balance the caller read before setting quota: refused (409) when it changed since, so that a
   * form loaded before a top-up or a settlement does not undo it. new-api has no such field: without
   * it quota is set as sent. Below 0 too: a balance goes under zero by a cost above its reservation
   * (docs/billing.md), and such an account's balance could not be set from the form that read it.
   */
  expected_quota: safeInt.optional(),
  group: z.string({ error: 'must be a string' }).min(1, { error: 'must not be empty' }).optional(),
  status: z.union([z.literal(ACCOUNT_STATUS.enabled), z.literal(ACCOUNT_STATUS.banned)], {
    error: 'must be 1 (enabled) or 2 (banned)',
  }).optional(),
  // As the account's own edit: an administrator cannot blank a name the account could not.
  display_name: nonBlankText(50, 'must not be empty').optional(),
  // A password reset by the administrator. new-api's edit form sends '' when the field was left
  // empty: that is no reset, so '' is read as absent rather than refused as too short.
  password: z.union([z.literal(''), registerBody.shape.password]).optional()
    .transform((v) => (v === '' ? undefined : v)),
  // Registration's rules (length, no spaces or control characters); taken names as there (409).
  username: username.optional(),
  /**
   * Account fields this endpoint does not change. new-api's edit form sends the whole account, so
   * one equal to the stored value is accepted (nothing to change); a different one is refused
   * naming the field (ACCOUNT_FIELDS_ELSEWHERE), where dropping it would report a change not made.
   */
  email: z.string({ error: 'must be a string' }).max(254, { error: 'must be at most 254 characters' }).optional(),
  role: z.number({ error: 'must be an integer' }).int({ error: 'must be an integer' }).optional(),
});

/** The Account fields PUT /api/user/ does not change, and where they are changed instead. */
const ACCOUNT_FIELDS_ELSEWHERE = {
  email: 'an administrator cannot change an account\'s e-mail address; the account binds its own (POST /api/oauth/email/bind)',
  role: 'is changed with POST /api/user/manage (promote, demote; super administrator only)',
} as const;

/**
 * An account an administrator creates (new-api's POST /api/user/): registration's name and password
 * rules, without its switches, limits and e-mail code. The role must be below the caller's, as for
 * every account it manages: an administrator creates ordinary accounts, the super administrator
 * administrators too.
 */
export const createUserBody = z.object({
  username,
  password: registerBody.shape.password,
  display_name: displayText(50).optional(),
  role: z.union([z.literal(ROLE.user), z.literal(ROLE.admin)], { error: `must be ${ROLE.user} (ordinary) or ${ROLE.admin} (administrator)` }).optional(),
  group: z.string({ error: 'must be a string' }).min(1, { error: 'must not be empty' }).max(64, { error: 'must be at most 64 characters' }).optional(),
});

export const MANAGE_ACTIONS = ['disable', 'enable', 'promote', 'demote', 'delete', 'add_quota', 'set_group'] as const;

export const manageUserBody = z.discriminatedUnion('action', [
  z.object({ id: accountId, action: z.enum(['disable', 'enable', 'promote', 'demote', 'delete']) }),
  z.object({
    id: accountId,
    action: z.literal('add_quota'),
    value: safeInt.refine((v) => v !== 0, { error: 'must not be 0' }),
    reason: displayText(200).optional(),
  }),
  z.object({ id: accountId, action: z.literal('set_group'), group: z.string({ error: 'must be a string' }).min(1, { error: 'must not be empty' }) }),
], { error: `must be one of ${MANAGE_ACTIONS.join(', ')}` });

export const listUsersQuery = pageQuery.extend({
  keyword: queryString(100),
  group: queryString(64),
});

/** Label of the `auto` group's ratio: the contract says it is text, not a number. */
export const AUTO_GROUP_RATIO_LABEL = 'auto';

/**
 * An administrator acts only on accounts of a lower role; the super administrator on any account but
 * cannot disable, demote or delete itself.
 */
function assertCanManage(caller: UserRow, target: UserRow, selfDestructive = false): void {
  if (caller.role >= ROLE.root) {
    if (selfDestructive && Number(caller.id) === Number(target.id)) {
      throw new ConsoleError('INSUFFICIENT_ROLE', 'you cannot disable, demote or delete your own account');
    }
    return;
  }
  if (target.role >= caller.role) throw new ConsoleError('INSUFFICIENT_ROLE');
}

async function assertAccountGroup(db: Db, group: string): Promise<void> {
  if (!(await accountGroups(db)).includes(group)) throw new ConsoleError('UNKNOWN_GROUP', `group: unknown group "${group}"`);
}

/**
 * After an account's deletion committed: the Redis mirrors of the account and of its keys expire
 * (core/quota/quota-store.ts DELETED_MIRROR_TTL_SEC), else they stayed for good. A failure is logged:
 * the deletion stands.
 */
async function expireDeletedAccountMirrors(ctx: ConsoleContext, userId: number): Promise<void> {
  try {
    const keys = await ctx.sql<{ id: string }[]>`SELECT id FROM tokens WHERE user_id = ${userId} AND deleted_at IS NULL`;
    await ctx.quotaStore.expireDeletedAccount(userId, keys.map((k) => Number(k.id)));
  } catch (err) {
    ctx.logger.error({ err, userId }, 'account deleted; its Redis mirrors were not given a TTL');
  }
}

async function lockAccount(tx: Db, id: number): Promise<UserRow> {
  const [row] = await tx<UserRow[]>`SELECT * FROM users WHERE id = ${id} AND deleted_at IS NULL FOR UPDATE`;
  if (!row) throw new ConsoleError('NOT_FOUND', 'account not found');
  return row;
}

export function registerUserRoutes(api: Api, ctx: ConsoleContext): void {
  const { sql } = ctx;

  api.route({
    method: 'POST', path: '/api/user/register', tag: 'account', access: 'public', body: registerBody,
    summary: 'Register an ordinary account (optionally with an inviter\'s aff_code)',
    description: 'At most REGISTER_RATE_LIMIT (10) registrations per client address per REGISTER_RATE_WINDOW_SEC (3600 s); then 429 with Retry-After. ' +
      'Options: RegisterEnabled and PasswordRegisterEnabled (403 when off), EmailVerificationEnabled (email and verification_code required), ' +
      'PasswordMinLength, PasswordRequireLetterAndDigit; an aff_code counts in the inviter\'s aff_count and pays QuotaForInviter (to its aff_quota) and QuotaForInvitee (to the new balance).',
    errors: ['INVALID_JSON', 'USERNAME_TAKEN', 'RATE_LIMITED', 'FEATURE_DISABLED', 'INVALID_CODE', 'EMAIL_TAKEN'],
  }, async ({ body, request }) => {
    const policy = await loadRegistrationPolicy(sql);
    if (!policy.registerEnabled || !policy.passwordRegisterEnabled) throw new ConsoleError('FEATURE_DISABLED', 'registration is closed');
    assertPasswordRules(policy, body.password);
    // An address is kept only when verified, as new-api does: an unverified one could be anyone's,
    // and taken by a stranger it would block its owner's binding and sign-on and receive the
    // stranger's notices. Without verification an account binds its address later (POST /api/oauth/email/bind).
    const email = policy.emailVerificationRequired ? body.email ?? '' : '';
    if (policy.emailVerificationRequired && (email === '' || !body.verification_code)) {
      throw new ConsoleError('VALIDATION_FAILED', 'verification_code: registration needs an e-mail address and the code sent to it (GET /api/verification)');
    }
    await countRegistration(ctx, request.ip);
    const passwordHash = await ctx.passwords.hash(body.password);
    // A logged-in caller registering with its own code is a self-invitation too.
    const bearer = bearerToken(request.headers.authorization);
    const caller = body.aff_code && bearer ? await resolveSession(sql, bearer, ctx.now()) : undefined;
    const claim = policy.emailVerificationRequired ? await claimEmailCode(ctx, 'register', email, body.verification_code!) : undefined;
    const credits = await sql.begin(async (tx) => {
      if (claim) {
        // Before the check, as every writer of an address: a binding of the same address at the same
        // time checks after this commits, or this after it (one address, one account).
        await lockEmailAddress(tx, email);
        await useEmailCode(ctx, tx, claim);
        // The code was mailed while the address was free; another account may have bound it since.
        if (await findUserByEmail(tx, email)) throw new ConsoleError('EMAIL_TAKEN');
      }
      const account = await insertAccount(tx, {
        username: body.username,
        passwordHash,
        displayName: body.display_name,
        email,
        role: ROLE.user,
        group: 'default',
      });
      const welcome = await creditNewAccount(tx, account, policy.quotaForNewUser, ctx.now());
      if (!body.aff_code) return welcome;
      return [...welcome, ...await acceptInvitation(tx, account, body.aff_code, { inviter: policy.quotaForInviter, invitee: policy.quotaForInvitee }, ctx.now(),
        caller ? Number(caller.id) : undefined, body.email ?? '')];
    });
    // Committed: each referral credit moves its mirror once and appends its log event.
    for (const c of credits) await afterConsoleCredit(ctx, c);
    return ok();
  });

  api.route({
    method: 'POST', path: '/api/user/login', tag: 'account', access: 'public', body: loginBody, data: loginDataSchema,
    summary: 'Log in: a session token and the account summary',
    description: 'At most LOGIN_RATE_LIMIT (5) attempts per username and client address and LOGIN_IP_RATE_LIMIT (30) per client ' +
      'address per LOGIN_RATE_WINDOW_SEC (60 s); then 429 with Retry-After. 429 too when too many password checks are waiting.',
    errors: ['INVALID_JSON', 'INVALID_CREDENTIALS', 'ACCOUNT_BANNED', 'RATE_LIMITED'],
  }, async ({ body, request }) => {
    await countLoginAttempt(ctx, body.username, request.ip);
    const user = await findUserByUsername(sql, body.username);
    const valid = await ctx.passwords.verify(body.password, user?.password_hash);
    if (!user || !valid) throw new ConsoleError('INVALID_CREDENTIALS');
    if (user.status !== ACCOUNT_STATUS.enabled) throw new ConsoleError('ACCOUNT_BANNED');
    await clearLoginAttempts(ctx, body.username, request.ip);
    // Issued only if the password verified is still the account's (a change may have committed meanwhile).
    const token = await issueSession(sql, user.id, ctx.config.SESSION_TTL_SEC, ctx.now(), { passwordHash: user.password_hash });
    if (token === null) throw await refusalOfStaleIssue(sql, user.id, 'INVALID_CREDENTIALS');
    return ok({ ...toAccountSummary(user), token });
  });

  api.route({
    method: ['POST', 'GET'], path: '/api/user/logout', tag: 'account', access: ROLE.user,
    summary: 'Revoke the token this request presents (log out)',
  }, async ({ request }) => {
    await revokeSession(sql, bearerToken(request.headers.authorization)!, ctx.now());
    return ok();
  });

  api.route({
    method: 'GET', path: '/api/user/token', tag: 'account', access: ROLE.user, data: z.string(),
    summary: 'Issue a long-lived access token, replacing the previous one',
    description: `At most ${ACCESS_TOKEN_ISSUE_LIMIT} per account per ${ACCESS_TOKEN_ISSUE_WINDOW_SEC} s; then 429 with Retry-After.`,
    errors: ['RATE_LIMITED'],
  }, async ({ user, request }) => {
    await countAccessTokenIssue(ctx, Number(user.id));
    // Issued only if the presenting session is still live: a password change or a ban may have revoked it meanwhile.
    const token = await issueAccessToken(sql, user.id, ctx.now(), { credential: bearerToken(request.headers.authorization)! });
    if (token === null) throw await refusalOfStaleIssue(sql, user.id, 'INVALID_ACCESS_TOKEN');
    return ok(token);
  });

  api.route({
    method: 'DELETE', path: '/api/user/token', tag: 'account', access: ROLE.user, data: z.object({ revoked: z.number().int() }),
    summary: "Revoke the caller's access token(s); sessions stay valid",
  }, async ({ user }) => ok({ revoked: await revokeAccessTokens(sql, user.id, ctx.now()) }));

  api.route({
    method: 'GET', path: '/api/user/self', tag: 'account', access: ROLE.user, data: accountSchema,
    summary: 'The own account (the contract\'s Account)',
  }, async ({ user }) => ok(toAccount(user, 'owner')));

  api.route({
    method: 'PUT', path: '/api/user/self', tag: 'account', access: ROLE.user, body: updateSelfBody, data: accountSchema,
    summary: 'Edit the own account: display name; password (with original_password; revokes the other sessions)',
    errors: ['INVALID_JSON', 'INVALID_CREDENTIALS'],
  }, async ({ body, user, request }) => {
    if (body.password !== undefined) {
      // The operator's password rules (PasswordMinLength, PasswordRequireLetterAndDigit) hold here too.
      assertPasswordRules(await loadRegistrationPolicy(sql), body.password);
      // No current password is no guess: a 400 naming the field, not counted as a login attempt.
      if (!body.original_password) {
        throw new ConsoleError('VALIDATION_FAILED', 'original_password: is required to change the password');
      }
      // A guess of the current password is a login attempt: a stolen session must not guess it at
      // full speed, then change it and lock the owner out.
      await verifyCurrentPassword(ctx, user, body.original_password, request.ip);
    }
    const hash = body.password === undefined ? undefined : await ctx.passwords.hash(body.password!);
    const presented = bearerToken(request.headers.authorization)!;
    const [updated] = await sql.begin(async (tx) => {
      if (hash !== undefined) {
        // Under the account's row lock, as credentials are issued: the password verified must still be
        // the account's and the presenting session still live (a concurrent change or ban revoked it),
        // and a credential issued meanwhile is revoked below.
        if (!(await lockIssuer(tx, user.id, { passwordHash: user.password_hash, credential: presented }, ctx.now()))) {
          throw new ConsoleError('INVALID_CREDENTIALS', 'original_password: the password was changed meanwhile; log in again');
        }
        // Whoever knew the old password may hold a session: every other session and access token ends.
        await tx`UPDATE access_tokens SET revoked_at = ${ctx.now()}
                 WHERE user_id = ${user.id} AND revoked_at IS NULL AND token_hash <> ${hashCredential(presented)}`;
        // And the sign-on identity bound to the account, which may be a taker's (auth/sessions.ts unbindSignOn),
        // and the open password reset codes, which may be in a taker's hands too (auth/sessions.ts endResetCodes).
        await unbindSignOn(tx, user.id);
        await endResetCodes(tx, user.id, ctx.now());
      }
      // The hash is written only when it changes: the one read at authentication may be stale by now,
      // and writing it back would undo a password change that committed meanwhile.
      return tx<UserRow[]>`
        UPDATE users SET ${hash !== undefined ? tx`password_hash = ${hash},` : tx``}
          display_name = ${body.display_name ?? user.display_name}
        WHERE id = ${user.id} RETURNING *`;
    });
    return ok(toAccount(updated!, 'owner'));
  });

  api.route({
    method: 'GET', path: '/api/user/self/groups', tag: 'account', access: ROLE.user, data: groupsSchema,
    summary: 'The groups the account may use and their ratios; `auto` has a text ratio',
  }, async ({ user }) => {
    const data: Record<string, { ratio: number | string; desc: string }> = { ...(await usableGroups(sql, user.group)) };
    data[AUTO_GROUP] = { ratio: AUTO_GROUP_RATIO_LABEL, desc: 'automatic selection of an available group' };
    return ok(data);
  });

  api.route({
    method: 'GET', path: '/api/user/aff', tag: 'account', access: ROLE.user, data: z.string(),
    summary: 'The own invitation code (aff_code), to be passed as aff_code at registration',
  }, async ({ user }) => ok(user.aff_code));

  api.route({
    method: 'POST', path: '/api/user/aff_transfer', tag: 'account', access: ROLE.user, body: affTransferBody,
    summary: 'Move referral quota (aff_quota) to the balance: at least AffTransferMinQuota, at most aff_quota',
    description: 'One transaction: aff_quota − quota, balance + quota, a ledger row (aff_quota_delta −quota) and a top-up log row (type 1); the relay\'s balance mirror moves once.',
    errors: ['INVALID_JSON'],
  }, async ({ body, user }) => {
    const policy = await loadRegistrationPolicy(sql);
    const credit = await transferAffQuota(ctx, Number(user.id), body.quota, policy.affTransferMinQuota);
    await afterConsoleCredit(ctx, credit);
    return ok();
  });

  registerSettingRoutes(api, ctx);
  registerEmailRoutes(api, ctx);
  registerOidcRoutes(api, ctx);

  // ------------------------------------------------------------------ administration (role >= 10)

  api.route({
    method: 'GET', path: '/api/user/', tag: 'admin: accounts', access: ROLE.admin, query: listUsersQuery,
    data: pageOf(accountSchema),
    summary: 'List accounts (paged); optional keyword and group filters; an administrator sees only accounts of a lower role',
  }, async ({ query, user }) => ok(await listAccounts(sql, query, user)));

  api.route({
    method: 'GET', path: '/api/user/search', tag: 'admin: accounts', access: ROLE.admin, query: listUsersQuery,
    data: pageOf(accountSchema),
    summary: 'Search accounts: keyword matches the id exactly, or username, display name or e-mail in part; an administrator sees only accounts of a lower role',
  }, async ({ query, user }) => ok(await listAccounts(sql, query, user)));

  api.route({
    method: 'GET', path: '/api/user/:id', tag: 'admin: accounts', access: ROLE.admin, params: idParams, data: accountSchema,
    summary: 'One account (an administrator sees only accounts of a lower role)', errors: ['NOT_FOUND'],
  }, async ({ params, user }) => {
    const [row] = await sql<UserRow[]>`SELECT * FROM users WHERE id = ${params.id} AND deleted_at IS NULL`;
    if (!row) throw new ConsoleError('NOT_FOUND', 'account not found');
    // The list's rule, the administrator's own account included (it is not listed either, and new-api
    // refuses it too): GET /api/user/self is where an account reads itself.
    assertCanManage(user, row);
    return ok(toAccount(row));
  });

  api.route({
    method: 'POST', path: '/api/user/', tag: 'admin: accounts', access: ROLE.admin, body: createUserBody, data: accountSchema,
    summary: 'Create an account of a lower role than the caller\'s (role 1 by default; 10 by the super administrator), in group `default` unless one is given',
    description: 'Registration\'s rules for username and password (PasswordMinLength and PasswordRequireLetterAndDigit included), without its switches, ' +
      'its per-address limit or an e-mail code; the balance starts at 0 (add it with add_quota). display_name empty or absent: the username.',
    errors: ['INVALID_JSON', 'USERNAME_TAKEN', 'UNKNOWN_GROUP'],
  }, async ({ body, user: caller }) => {
    const role = body.role ?? ROLE.user;
    if (role >= caller.role) throw new ConsoleError('INSUFFICIENT_ROLE', 'role: you can create only accounts of a lower role than yours');
    assertPasswordRules(await loadRegistrationPolicy(sql), body.password);
    const passwordHash = await ctx.passwords.hash(body.password);
    // The group is checked under the lock a GroupRatio write takes (options/groups.ts), in the
    // transaction of the insert: checked before, a group dropped at the same moment left the account
    // in a group with no price. `default` is always kept: no lock needed.
    const created = await sql.begin(async (tx) => {
      if (body.group !== undefined) {
        await lockGroupsShared(tx);
        await assertAccountGroup(tx, body.group);
      }
      return insertAccount(tx, {
        username: body.username, passwordHash, displayName: body.display_name, role, group: body.group ?? 'default',
      });
    });
    ctx.logger.info({ accountId: Number(created.id), role, by: Number(caller.id) }, 'account created by an administrator');
    return ok(toAccount(created));
  });

  api.route({
    method: 'PUT', path: '/api/user/', tag: 'admin: accounts', access: ROLE.admin, body: updateUserBody, data: accountSchema,
    summary: 'Edit an account of a lower role: quota (sets the balance; a management log row; with expected_quota, only if the balance is still that), group, status, display name, username, password (revokes its sessions and access tokens)',
    description: 'email and role are not changed here: a value other than the stored one is refused (400 naming the field). ' +
      'password \'\' is no reset (new-api\'s form sends it empty). Other fields are ignored.',
    errors: ['UNKNOWN_GROUP', 'NOT_FOUND', 'STATE_CONFLICT', 'USERNAME_TAKEN'],
  }, async ({ body, user: caller }) => {
    if (body.password !== undefined) {
      // Without original_password, unlike PUT /api/user/self: a stolen session of the super
      // administrator must not set its password here and lock the owner out.
      if (Number(body.id) === Number(caller.id)) {
        throw new ConsoleError('VALIDATION_FAILED', 'password: change your own password with PUT /api/user/self (it needs the current one)');
      }
      assertPasswordRules(await loadRegistrationPolicy(sql), body.password);
    }
    // Hashed before the transaction: scrypt takes tens of milliseconds, the row lock should not.
    const hash = body.password === undefined ? undefined : await ctx.passwords.hash(body.password!);
    // A debit takes its hold from the mirror before the commit (console-ledger.ts debitTransaction).
    const change = () => debitTransaction(ctx, async (tx, holds) => {
      // Before the row lock, in the order every group writer takes them; see POST /api/user/.
      if (body.group !== undefined) {
        await lockGroupsShared(tx);
        await assertAccountGroup(tx, body.group);
      }
      const before = await lockAccount(tx, body.id);
      // Banning is disabling: the super administrator cannot lock itself out here either.
      assertCanManage(caller, before, body.status === ACCOUNT_STATUS.banned);
      for (const field of Object.keys(ACCOUNT_FIELDS_ELSEWHERE) as (keyof typeof ACCOUNT_FIELDS_ELSEWHERE)[]) {
        if (body[field] !== undefined && String(body[field]) !== String(before[field])) {
          throw new ConsoleError('VALIDATION_FAILED', `${field}: ${ACCOUNT_FIELDS_ELSEWHERE[field]}`);
        }
      }
      const renamed = body.username !== undefined && body.username !== before.username;
      if (renamed && await usernameTakenByAnother(tx, body.username!, Number(before.id))) throw new ConsoleError('USERNAME_TAKEN');
      let credit: RecordedCredit | undefined;
      if (body.quota !== undefined && body.expected_quota !== undefined && body.expected_quota !== Number(before.quota)) {
        throw new ConsoleError('STATE_CONFLICT', `quota: the balance changed since it was read (now ${before.quota} quota); read it again`);
      }
      let delta = body.quota === undefined ? 0 : body.quota - Number(before.quota);
      // Emptying an account with requests in flight (review lifecycle: refused 400 for as long as it
      // had traffic): everything spendable is removed; what the requests in flight, the debits not yet
      // billed and a relay's credit hold cannot be removed without the balance going below zero as
      // they settle, and what they leave of it stays. Any other balance below that is refused, saying why.
      let held = 0;
      if (delta < 0) {
        const spendable = await spendableBalance(ctx, tx, Number(before.id), Number(before.quota));
        if (spendable + delta < 0) {
          // Nothing spendable, or less than nothing (a debit counted twice until its hold's reaper): refused, never a credit.
          if (body.quota !== 0 || spendable <= 0) throw debitRefused('quota', spendable, Number(before.quota));
          held = Number(before.quota) - spendable;
          delta = -spendable;
        }
      }
      if (delta !== 0) {
        credit = await recordConsoleCredit(tx, {
          requestId: manageRequestId(), type: LOG_TYPE.manage, userId: Number(before.id), delta,
          // The account reads this row (GET /api/log/self): worded as new-api's, without the
          // administrator's login (administrators are hidden from one another and from the accounts
          // they manage). Who did it goes to the console's log below.
          content: held > 0
            ? `An administrator set the balance from ${before.quota} to 0 (${delta} quota); ${held} quota held by requests in flight or not yet billed stays until they settle`
            : `An administrator set the balance from ${before.quota} to ${body.quota} (${delta > 0 ? '+' : ''}${delta} quota)`,
          createdAt: ctx.now(),
        });
        if (credit) await holds.take(credit, 'quota');
      }
      const [after] = await tx<UserRow[]>`
        UPDATE users SET
          ${hash !== undefined ? tx`password_hash = ${hash},` : tx``}
          ${renamed ? tx`username = ${body.username!},` : tx``}
          "group" = ${body.group ?? before.group},
          status = ${body.status ?? before.status},
          display_name = ${body.display_name ?? before.display_name}
        WHERE id = ${body.id}
        RETURNING *`;
      // A reset is for an account someone else may hold the password of: as the owner's own change
      // (and POST /api/user/reset), every session and access token of it ends, and its open password
      // reset codes, under the row lock credentials are issued under (auth/sessions.ts lockIssuer).
      const banned = body.status === ACCOUNT_STATUS.banned && Number(before.status) !== ACCOUNT_STATUS.banned;
      if (banned || hash !== undefined) await revokeAllCredentials(tx, Number(body.id), ctx.now());
      // A reset or an unban also unbinds the sign-on identity (auth/sessions.ts unbindSignOn).
      const unbanned = Number(before.status) === ACCOUNT_STATUS.banned && body.status !== undefined && body.status !== ACCOUNT_STATUS.banned;
      if (unbanned || hash !== undefined) await unbindSignOn(tx, Number(body.id));
      return { updated: after!, credit };
    });
    const { updated, credit } = await retriedWhileEmptying(change, body.quota === 0).catch((err: unknown) => {
      // Another account took the name between the check and the update (or a case or Unicode form
      // of it, migration 022's index): the same 409 as registration.
      if (isUsernameConflict(err)) throw new ConsoleError('USERNAME_TAKEN');
      throw err;
    });
    // Committed: the Redis mirror moves by the same delta (a debit consumes its hold), the management log event is appended.
    if (credit) {
      logBalanceChange(ctx, caller, credit, 'set_quota');
      await afterConsoleCredit(ctx, credit);
    } else await ctx.invalidate({ kind: 'user', id: Number(updated.id) });
    return ok(toAccount(updated));
  });

  api.route({
    method: 'POST', path: '/api/user/manage', tag: 'admin: accounts', access: ROLE.admin, body: manageUserBody, data: accountSchema,
    summary: 'Manage an account: disable, enable, delete, add_quota (signed; a management log row), set_group; promote and demote need role 100',
    errors: ['UNKNOWN_GROUP', 'NOT_FOUND'],
  }, async ({ body, user: caller }) => {
    if ((body.action === 'promote' || body.action === 'demote') && caller.role < ROLE.root) {
      throw new ConsoleError('INSUFFICIENT_ROLE', 'only the super administrator may promote or demote');
    }
    const now = ctx.now();
    const { updated, credit } = await debitTransaction(ctx, async (tx, holds) => {
      // As POST /api/user/: the group is checked under the lock a GroupRatio write takes.
      if (body.action === 'set_group') {
        await lockGroupsShared(tx);
        await assertAccountGroup(tx, body.group);
      }
      const target = await lockAccount(tx, body.id);
      assertCanManage(caller, target, ['disable', 'demote', 'delete'].includes(body.action));
      let credit: RecordedCredit | undefined;
      switch (body.action) {
        case 'disable':
        case 'enable':
          await tx`UPDATE users SET status = ${body.action === 'disable' ? ACCOUNT_STATUS.banned : ACCOUNT_STATUS.enabled} WHERE id = ${body.id}`;
          if (body.action === 'disable') await revokeAllCredentials(tx, Number(body.id), now);
          // Enabling a banned account restores no credential: nor the sign-on identity bound to it.
          else if (Number(target.status) === ACCOUNT_STATUS.banned) await unbindSignOn(tx, Number(body.id));
          break;
        case 'promote':
          if (target.role >= ROLE.admin) throw new ConsoleError('STATE_CONFLICT', 'the account is already an administrator');
          await tx`UPDATE users SET role = ${ROLE.admin} WHERE id = ${body.id}`;
          break;
        case 'demote':
          if (target.role !== ROLE.admin) throw new ConsoleError('STATE_CONFLICT', 'only an administrator (role 10) can be demoted');
          await tx`UPDATE users SET role = ${ROLE.user} WHERE id = ${body.id}`;
          break;
        case 'delete':
          await tx`UPDATE users SET deleted_at = ${now} WHERE id = ${body.id}`;
          await revokeAllCredentials(tx, Number(body.id), now);
          break;
        case 'add_quota':
          await assertDebitCovered(ctx, tx, 'value', Number(target.id), Number(target.quota), body.value);
          credit = await recordConsoleCredit(tx, {
            requestId: manageRequestId(), type: LOG_TYPE.manage, userId: Number(target.id), delta: body.value,
            // As PUT /api/user/'s: no administrator's login in the account's own log row.
            content: `An administrator ${body.value > 0 ? 'added' : 'removed'} ${Math.abs(body.value)} quota${body.reason ? `: ${body.reason}` : ''}`,
            createdAt: now,
          });
          // The debit is taken from the mirror now, atomically against the requests reserving meanwhile.
          if (credit) await holds.take(credit, 'value');
          break;
        case 'set_group':
          await tx`UPDATE users SET "group" = ${body.group} WHERE id = ${body.id}`;
          break;
      }
      const [after] = await tx<UserRow[]>`SELECT * FROM users WHERE id = ${body.id}`;
      return { updated: after!, credit };
    });
    if (credit) {
      logBalanceChange(ctx, caller, credit, 'add_quota');
      await afterConsoleCredit(ctx, credit);
    } else await ctx.invalidate({ kind: 'user', id: Number(updated.id) });
    if (body.action === 'delete') await expireDeletedAccountMirrors(ctx, Number(updated.id));
    return ok(toAccount(updated));
  });
}

/**
 * The audit line of an administrator's balance change, in the console's log (operators read it, the
 * account does not): who made it, by id and login, beside the ledger row it wrote. The account's own
 * log row names no administrator.
 */
function logBalanceChange(ctx: ConsoleContext, caller: UserRow, credit: RecordedCredit, action: 'add_quota' | 'set_quota'): void {
  ctx.logger.info({ accountId: credit.userId, by: Number(caller.id), byUsername: caller.username, action, delta: credit.delta, ledgerId: credit.ledgerId },
    'balance changed by an administrator');
}

/** Whether another account (deleted ones included: a name is not reused) has this name, ignoring case and Unicode compatibility form as migration 022's index does. */
async function usernameTakenByAnother(db: Db, name: string, id: number): Promise<boolean> {
  const [row] = await db`SELECT 1 FROM users WHERE lower(normalize(username, NFKC)) = lower(normalize(${name}::text, NFKC)) AND id <> ${id} LIMIT 1`;
  return row !== undefined;
}

function isUsernameConflict(err: unknown): boolean {
  const e = err as { code?: string; constraint_name?: string };
  return e?.code === '23505' && (e.constraint_name === 'users_username_key' || e.constraint_name === 'users_username_folded');
}

/** The same rule as assertCanManage: an administrator lists only lower roles, the super administrator every account. */
async function listAccounts(sql: Db, q: z.output<typeof listUsersQuery>, caller: UserRow): Promise<Page<ReturnType<typeof toAccount>>> {
  const { page, pageSize, offset } = paging(q);
  const kw = q.keyword;
  const idMatch = kw !== undefined && /^\d{1,15}$/.test(kw) ? Number(kw) : -1;
  const like = kw === undefined ? undefined : containsPattern(kw);
  const where = sql`
    deleted_at IS NULL
    ${caller.role < ROLE.root ? sql`AND role < ${caller.role}` : sql``}
    ${q.group !== undefined ? sql`AND "group" = ${q.group}` : sql``}
    ${like !== undefined ? sql`AND (id = ${idMatch} OR username ILIKE ${like} OR display_name ILIKE ${like} OR email ILIKE ${like})` : sql``}`;
  const [rows, [count]] = await Promise.all([
    sql<UserRow[]>`SELECT * FROM users WHERE ${where} ORDER BY id DESC LIMIT ${pageSize} OFFSET ${offset}`,
    sql<{ total: number }[]>`SELECT count(*)::bigint AS total FROM users WHERE ${where}`,
  ]);
  return { items: rows.map((row) => toAccount(row)), total: Number(count!.total), page, page_size: pageSize };
}

/**
 * Why a credential was not issued on what had been checked (lockIssuer): the account banned meanwhile
 * is ACCOUNT_BANNED, as the same request answers once the ban has committed (a login racing a ban was
 * told its password was wrong); anything else (a password changed, the presenting session revoked)
 * is `otherwise`.
 */
async function refusalOfStaleIssue(db: Db, userId: number, otherwise: 'INVALID_CREDENTIALS' | 'INVALID_ACCESS_TOKEN'): Promise<ConsoleError> {
  const now = await findUserById(db, userId);
  return new ConsoleError(now !== undefined && now.status !== ACCOUNT_STATUS.enabled ? 'ACCOUNT_BANNED' : otherwise);
}

/**
 * Emptying an account (quota 0) takes what its read of the spendable balance found; a request reserved
 * between that read and the debit's hold makes the hold refuse (a 400 for an account with traffic, the
 * refusal emptying was made to end): read again, twice at most.
 */
async function retriedWhileEmptying<T>(change: () => Promise<T>, emptying: boolean): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await change();
    } catch (err) {
      if (!emptying || attempt >= 2 || !isDebitRefusal(err)) throw err;
    }
  }
}
