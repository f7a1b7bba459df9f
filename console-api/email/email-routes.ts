// E-mail endpoints, new-api's paths: a verification code (registration or binding), binding an
// address to the account, and resetting a forgotten password. Codes: email-codes.ts. The code-carrying
// requests are POSTs with JSON bodies (new-api sends some as query strings): a URL is what access logs
// and proxies keep.
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { loadSmtpSettings, type SmtpSettings } from '../../core/email/mailer.js';
import { ACCOUNT_STATUS, ROLE } from '../accounts/roles.js';
import { bearerToken } from '../auth/require-user.js';
import { clientBucket, verifyCurrentPassword } from '../auth/login-limiter.js';
import { endResetCodes, hashCredential, resolveSession, revokeAllCredentials, unbindSignOn } from '../auth/sessions.js';
import type { ConsoleContext } from '../context.js';
import type { Api } from '../http/api.js';
import { ok } from '../http/envelope.js';
import { ConsoleError } from '../http/errors.js';
import { assertPasswordRules, loadRegistrationPolicy } from '../registration/registration-policy.js';
import { claimEmailCode, EMAIL_CODE_TTL_SEC, findUserByEmail, issueEmailCode, lockEmailAddress, mailCode, normalizeEmail, useEmailCode } from './email-codes.js';

const email = z.email({ error: 'must be an e-mail address' }).max(254, { error: 'must be at most 254 characters' });

export const verificationQuery = z.object({
  email,
  /** register (default, no login) or bind (the logged-in account binds the address). */
  purpose: z.enum(['register', 'bind'], { error: 'must be register or bind' }).optional(),
});
export const emailBindBody = z.object({
  email,
  code: z.string({ error: 'must be a string' }).min(1, { error: 'is required' }).max(64, { error: 'must be at most 64 characters' }),
  /** The account's current password: a bound address resets it, so binding one is changing a credential (assertMayBindAddress). */
  original_password: z.string({ error: 'must be a string' }).max(128, { error: 'must be at most 128 characters' }).optional(),
});

/** How recent a sign-on account's session must be to bind an address without a password (it has none it knows). */
export const BIND_FRESH_SESSION_SEC = 10 * 60;
export const resetRequestQuery = z.object({ email });
export const resetBody = z.object({
  email,
  token: z.string({ error: 'must be a string' }).min(1, { error: 'is required' }).max(64, { error: 'must be at most 64 characters' }),
  /** The new password; when absent one is generated and returned (new-api returns a generated one). */
  password: z.string({ error: 'must be a string' }).min(8, { error: 'must be at least 8 characters' }).max(64, { error: 'must be at most 64 characters' }).optional(),
});

/** GET /api/reset_password requests whose work (after the answer) may be in progress at once. */
export const MAX_PENDING_RESETS = 64;

export function registerEmailRoutes(api: Api, ctx: ConsoleContext): void {
  const { sql } = ctx;
  let pendingResets = 0;

  api.route({
    method: 'GET', path: '/api/verification', tag: 'account: e-mail', access: 'public', query: verificationQuery,
    summary: 'Mail a 6-digit verification code: for registration (purpose=register) or to bind the address to the logged-in account (purpose=bind)',
    description: 'Valid 10 minutes, single use, 5 wrong tries; at most 5 codes per address, 5 per account and 20 per client address per hour (429). ' +
      '403 when SMTPServer is not set (asked first). 409 when the address already belongs to an account, counted against the same limits (429 past them).',
    errors: ['EMAIL_TAKEN', 'RATE_LIMITED', 'FEATURE_DISABLED', 'UPSTREAM_FAILED', 'UNAUTHENTICATED'],
  }, async ({ query, request }) => {
    const purpose = query.purpose ?? 'register';
    let userId = 0;
    if (purpose === 'bind') {
      const bearer = bearerToken(request.headers.authorization);
      const user = bearer ? await resolveSession(sql, bearer, ctx.now()) : undefined;
      if (!user) throw new ConsoleError('UNAUTHENTICATED');
      userId = Number(user.id);
    }
    // Whether an address has an account is told (409, as new-api) only within the limits a code is
    // issued under: mail off is asked first (403 for every address), and a taken address's request
    // counts as a code (one that is never mailed nor usable). Before, the 409 came first: an unlimited
    // account-by-e-mail oracle, even with mail off, beside GET /api/reset_password that hides it.
    const smtp = await loadSmtpSettings(ctx.sql, ctx.optionSealer);
    if (!smtp) throw new ConsoleError('FEATURE_DISABLED', 'e-mail is not configured (SMTPServer)');
    const taken = await findUserByEmail(ctx.sql, query.email) !== undefined;
    // Counted by client as every other per-client limit is: an IPv6 client by its /64, which one
    // subscriber holds whole (30 codes from one /64 rotating addresses passed the 20; review auth).
    const code = await issueEmailCode(ctx, { purpose, email: query.email, userId, clientIp: clientBucket(request.ip), countOnly: taken });
    if (taken) throw new ConsoleError('EMAIL_TAKEN');
    await mailCode(ctx, query.email, 'Your verification code',
      `Your verification code is ${code}. It is valid for ${EMAIL_CODE_TTL_SEC / 60} minutes and can be used once.\n` +
      'If you did not ask for it, ignore this message.', smtp);
    return ok();
  });

  api.route({
    method: 'POST', path: '/api/oauth/email/bind', tag: 'account: e-mail', access: ROLE.user, body: emailBindBody,
    summary: 'Bind an e-mail address to the account with the code GET /api/verification?purpose=bind mailed to it',
    description: 'With original_password, the current password (a bound address receives password reset codes: binding one is a ' +
      `credential change, and a guess is counted as a login attempt); an account made by sign-on, which knows no password, binds without it ` +
      `within ${BIND_FRESH_SESSION_SEC / 60} minutes of signing on.`,
    errors: ['INVALID_JSON', 'INVALID_CODE', 'EMAIL_TAKEN', 'INVALID_CREDENTIALS', 'RATE_LIMITED'],
  }, async ({ body, user, request }) => {
    const claim = await claimEmailCode(ctx, 'bind', body.email, body.code, Number(user.id));
    // After the code (a wrong one is counted and refused first; the code stays usable if the password is wrong).
    await assertMayBindAddress(ctx, user, body.original_password, bearerToken(request.headers.authorization)!, request.ip);
    await sql.begin(async (tx) => {
      // Before the check, as every writer of an address (one address, one account).
      await lockEmailAddress(tx, body.email);
      const owner = await useEmailCode(ctx, tx, claim);
      if (owner !== Number(user.id)) throw new ConsoleError('INVALID_CODE');
      if (await findUserByEmail(tx, body.email, Number(user.id))) throw new ConsoleError('EMAIL_TAKEN');
      await tx`UPDATE users SET email = ${body.email.trim()} WHERE id = ${user.id}`;
      // The reset codes mailed to the address the account leaves: that mailbox no longer resets it.
      await endResetCodes(tx, Number(user.id), ctx.now());
    });
    return ok();
  });

  /**
   * A bound address receives password reset codes: with a stolen session or a leaked access token
   * alone, a taker bound its own address, which outlived the owner's password change, then reset the
   * password and locked the owner out, root's included (review auth). So binding one asks for the
   * current password, as a password change does (a guess counted as a login attempt); an account made
   * by sign-on knows none, and binds within BIND_FRESH_SESSION_SEC of a sign-on instead.
   */
  async function assertMayBindAddress(c: ConsoleContext, user: { id: number | string; username: string; password_hash: string; oidc_id: string },
    password: string | undefined, presented: string, ip: string): Promise<void> {
    if (password === undefined || password === '') {
      if (user.oidc_id !== '') {
        const [session] = await c.sql<{ created_at: number | string }[]>`
          SELECT created_at FROM access_tokens WHERE token_hash = ${hashCredential(presented)} AND kind = 'session' AND revoked_at IS NULL`;
        if (session && c.now() - Number(session.created_at) <= BIND_FRESH_SESSION_SEC) return;
        throw new ConsoleError('VALIDATION_FAILED', `original_password: is required to bind an address, or sign on again: a session of the last ${BIND_FRESH_SESSION_SEC / 60} minutes binds one without it`);
      }
      throw new ConsoleError('VALIDATION_FAILED', 'original_password: is required to bind an address (it receives password reset codes)');
    }
    await verifyCurrentPassword(c, user, password, ip);
  }

  api.route({
    method: 'GET', path: '/api/reset_password', tag: 'account: e-mail', access: 'public', query: resetRequestQuery,
    summary: 'Mail a password reset code to the address, when an account has it',
    description: 'Answers the same whether or not an account has the address (no account enumeration): success, or 403 for every address when SMTPServer is not set. ' +
      'The same limits as GET /api/verification (reset codes counted apart from the other codes), kept silently (an address over them gets no new code). ' +
      'The code is valid 10 minutes, once; a new one leaves the earlier ones valid, and using one ends them all.',
    errors: ['FEATURE_DISABLED'],
  }, async ({ query, request }) => {
    // Every answer must be one an unknown address gets too: whether mail is off is asked before the
    // account, and everything about the account (whether there is one, its limits, the code's issuing
    // and the sending: their failures and their time) happens after the answer, its errors logged.
    // Before, the code's issuing (a transaction with advisory locks) was in the answer's time: an
    // address with an account answered several times slower than one without.
    const smtp = await loadSmtpSettings(ctx.sql, ctx.optionSealer);
    if (!smtp) throw new ConsoleError('FEATURE_DISABLED', 'e-mail is not configured (SMTPServer)');
    // The work no longer holds the request, so a flood of requests is bounded here instead: past
    // MAX_PENDING_RESETS at once, a request is answered the same and dropped (logged).
    if (pendingResets >= MAX_PENDING_RESETS) {
      ctx.logger.warn({ pending: pendingResets }, 'password reset not mailed: too many reset requests in progress');
      return ok();
    }
    pendingResets++;
    const address = query.email;
    const clientIp = clientBucket(request.ip);
    setImmediate(() => void mailResetCode(ctx, address, clientIp, smtp).finally(() => { pendingResets--; }));
    return ok();
  });

  api.route({
    method: 'POST', path: '/api/user/reset', tag: 'account: e-mail', access: 'public', body: resetBody, data: z.string(),
    summary: 'Reset the password with the mailed code; data is the new password (generated when none is given)',
    description: 'Every session and access token of the account is revoked, and its other open reset codes. The password rules of the options apply to a given password. ' +
      'INVALID_CODE also when the account no longer has the address the code was mailed to, or is disabled or deleted.',
    errors: ['INVALID_JSON', 'INVALID_CODE'],
  }, async ({ body }) => {
    const policy = await loadRegistrationPolicy(sql);
    // A generated password meets any rule of the options: long enough, a letter and a digit.
    const length = Math.max(16, policy.passwordMinLength);
    const password = body.password ?? `${randomBytes(length).toString('base64url').slice(0, length - 2)}a7`;
    if (body.password !== undefined) assertPasswordRules(policy, body.password);
    // The code first, the hash only for one that matches: anybody may call this, and a hash per wrong
    // code (~300 ms of scrypt each, unlimited) let 40 anonymous calls fill the hashing queue, so that
    // every login answered 429 "busy checking passwords" (review console). A wrong code costs a read.
    const claim = await claimEmailCode(ctx, 'reset', body.email, body.token);
    const hash = await ctx.passwords.hash(password);
    const now = ctx.now();
    await sql.begin(async (tx) => {
      // The account the code was mailed for, under its row lock (before the code's row, in the order a
      // password change or a ban takes them): still holding the address the code was mailed to, enabled
      // and not deleted. An account that bound another address since, or was banned, is not reset
      // through the old mail (binding and banning also end the codes; this holds whatever changed it).
      const [holder] = await tx`
        SELECT id FROM users
        WHERE id = ${claim.userId} AND deleted_at IS NULL AND status = ${ACCOUNT_STATUS.enabled}
          AND lower(email) = ${normalizeEmail(body.email)}
        FOR UPDATE`;
      if (!holder) throw new ConsoleError('INVALID_CODE');
      // The account's open reset codes (this one among them), locked in id order as a try and their
      // ending (auth/sessions.ts endResetCodes) lock them: never waiting on a parallel try crosswise.
      await tx`
        SELECT id FROM email_codes
        WHERE purpose = 'reset' AND user_id = ${claim.userId} AND user_id <> 0 AND used_at IS NULL
          AND (expires_at > ${now} OR id = ${claim.id})
        ORDER BY id FOR UPDATE`;
      const userId = await useEmailCode(ctx, tx, claim);
      await tx`UPDATE users SET password_hash = ${hash} WHERE id = ${userId}`;
      // With the account's other open reset codes (revokeAllCredentials ends them).
      await revokeAllCredentials(tx, userId, now);
      // The sign-on identity bound to the account may be a taker's, as a session may (auth/sessions.ts).
      await unbindSignOn(tx, userId);
    });
    return ok(password);
  });
}

/**
 * GET /api/reset_password's work after its answer: the address's account, the code (under the limits,
 * an address over them gets none) and the mail. Nothing here reaches the caller: failures are logged.
 */
async function mailResetCode(ctx: ConsoleContext, address: string, clientIp: string, smtp: SmtpSettings): Promise<void> {
  let userId: number | undefined;
  try {
    const user = await findUserByEmail(ctx.sql, address);
    if (!user || user.status !== ACCOUNT_STATUS.enabled) return;
    userId = Number(user.id);
    let code: string;
    try {
      code = await issueEmailCode(ctx, { purpose: 'reset', email: address, userId, clientIp });
    } catch (err) {
      if (!(err instanceof ConsoleError) || err.code !== 'RATE_LIMITED') throw err;
      ctx.logger.info({ userId }, 'password reset not mailed: too many codes');
      return;
    }
    await mailCode(ctx, user.email, 'Password reset',
      `Someone asked to reset the password of the account ${user.username}.\n` +
      `Reset code: ${code}\nValid for ${EMAIL_CODE_TTL_SEC / 60} minutes, once (POST /api/user/reset with email and token).\n` +
      'If it was not you, ignore this message: the password stays as it is.',
      smtp);
  } catch (err) {
    ctx.logger.warn({ userId, reason: (err as Error).message }, 'password reset not mailed');
  }
}
