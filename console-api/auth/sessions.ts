// Console sessions: what a console credential opens. A credential is 32 random bytes in hex (never
// starts with `sk-`, so it cannot be confused with an API key); only its SHA-256 is stored, in the
// access_tokens table (new-api's name). Two kinds:
//   session: issued by login, expires after SESSION_TTL_SEC.
//   access:  new-api's "access token", issued by GET /api/user/token, no expiry; issuing one replaces
//            the user's previous one (its row deleted: one access row per account, as new-api's one
//            users.access_token column).
import { createHash, randomBytes } from 'node:crypto';
import type { Sql } from '../../infra/postgres/client.js';
import type { UserRow } from '../accounts/account-view.js';
import { ACCOUNT_STATUS } from '../accounts/roles.js';
import { readRetryingOnce } from '../../infra/postgres/unavailable.js';
import type { Db } from '../db.js';

export type SessionKind = 'session' | 'access';

export function hashCredential(credential: string): Buffer {
  return createHash('sha256').update(credential, 'utf8').digest();
}

function newCredential(): string {
  return randomBytes(32).toString('hex');
}

/**
 * What a new credential is issued on the strength of, checked again under the account's row lock:
 * the password hash the login verified, or the credential the request presented.
 */
export interface IssuedOn {
  passwordHash?: string;
  credential?: string;
  /** The credential by its hash (hashCredential), as a sign-on binding keeps it (oidc_states). */
  credentialHash?: Buffer;
}

/**
 * Locks the account's row for the credential about to be written and checks, under the lock, that
 * what the credential is issued on still holds: the account enabled and not deleted, the password
 * verified still its password, the presented credential still live. Why: a password change, a ban or
 * a reset revokes every credential under the same lock (revokeAllCredentials), so a credential is
 * either written before it (and revoked by it) or checked after it (and refused). Checked outside
 * the lock, a login with the old password or a stolen session's GET /api/user/token in flight during
 * the change wrote a credential the change never saw, alive after it (a never-expiring one for the
 * access token). A password change takes it too (routes/user.ts): on the password it verified and
 * the session that asks.
 */
export async function lockIssuer(tx: Db, userId: number, on: IssuedOn, nowSec: number): Promise<boolean> {
  const [user] = await tx<{ password_hash: string; status: number }[]>`
    SELECT password_hash, status FROM users WHERE id = ${userId} AND deleted_at IS NULL FOR UPDATE`;
  if (!user || Number(user.status) !== ACCOUNT_STATUS.enabled) return false;
  if (on.passwordHash !== undefined && user.password_hash !== on.passwordHash) return false;
  const credentialHash = on.credential !== undefined ? hashCredential(on.credential) : on.credentialHash;
  if (credentialHash !== undefined) {
    const [live] = await tx`
      SELECT 1 FROM access_tokens
      WHERE token_hash = ${credentialHash} AND user_id = ${userId} AND revoked_at IS NULL
        AND (expires_at IS NULL OR expires_at > ${nowSec})`;
    if (!live) return false;
  }
  return true;
}

/** A new session, or null when what it is issued on no longer holds (lockIssuer). */
export async function issueSession(sql: Sql, userId: number, ttlSec: number, nowSec: number, on: IssuedOn = {}): Promise<string | null> {
  const credential = newCredential();
  return sql.begin(async (tx) => {
    if (!(await lockIssuer(tx, userId, on, nowSec))) return null;
    await tx`
      INSERT INTO access_tokens (user_id, token_hash, kind, created_at, expires_at)
      VALUES (${userId}, ${hashCredential(credential)}, 'session', ${nowSec}, ${nowSec + ttlSec})`;
    return credential;
  });
}

/**
 * A new long-lived access token; the previous access token(s) of the user stop working at once. They
 * are deleted, not revoked: a revoked row was kept a week (billing/console-row-pruning.ts), so every
 * call left one more row; replaced, an account has one access row at most, as new-api's one column.
 * Nothing reads a replaced token's row (a ban, the one revocation whose reason is told, cannot have
 * happened: lockIssuer checks the account is enabled). The row lock also keeps concurrent calls from
 * leaving several alive (each removed the others' before they were written). Null when the presented
 * credential is no longer live (lockIssuer).
 */
export async function issueAccessToken(sql: Sql, userId: number, nowSec: number, on: IssuedOn): Promise<string | null> {
  const credential = newCredential();
  return sql.begin(async (tx) => {
    if (!(await lockIssuer(tx, userId, on, nowSec))) return null;
    await tx`DELETE FROM access_tokens WHERE user_id = ${userId} AND kind = 'access'`;
    await tx`
      INSERT INTO access_tokens (user_id, token_hash, kind, created_at, expires_at)
      VALUES (${userId}, ${hashCredential(credential)}, 'access', ${nowSec}, NULL)`;
    return credential;
  });
}

/**
 * The account a live (unexpired, unrevoked) session or access token belongs to, or undefined. Every
 * signed-in request starts with it, so a connection lost under it is tried again once before the
 * request is answered 503.
 */
export async function resolveSession(db: Db, credential: string, nowSec: number): Promise<UserRow | undefined> {
  const hash = hashCredential(credential);
  const [row] = await readRetryingOnce(() => db<UserRow[]>`
    SELECT u.* FROM access_tokens t JOIN users u ON u.id = t.user_id
    WHERE t.token_hash = ${hash}
      AND t.revoked_at IS NULL
      AND (t.expires_at IS NULL OR t.expires_at > ${nowSec})
      AND u.deleted_at IS NULL`);
  return row;
}

/**
 * Whether a credential resolveSession refused was revoked with its account's ban: a ban revokes every
 * session (revokeAllCredentials), and its holder, told only that the token is invalid, read "your
 * session expired". Asked only once resolveSession has refused the credential.
 */
export async function revokedByBan(db: Db, credential: string): Promise<boolean> {
  const [row] = await db<{ status: number }[]>`
    SELECT u.status FROM access_tokens t JOIN users u ON u.id = t.user_id
    WHERE t.token_hash = ${hashCredential(credential)} AND t.revoked_at IS NOT NULL AND u.deleted_at IS NULL`;
  return row !== undefined && row.status !== ACCOUNT_STATUS.enabled;
}

/** Revokes the one credential presented (logout of a session, or of an access token). */
export async function revokeSession(db: Db, credential: string, nowSec: number): Promise<void> {
  await db`UPDATE access_tokens SET revoked_at = ${nowSec} WHERE token_hash = ${hashCredential(credential)} AND revoked_at IS NULL`;
}

/**
 * Ends every session and access token of an account, and its open password reset codes: banned or
 * deleted (an account banned because it was taken over must not get the taker's credentials back when
 * enabled again), or its password reset.
 */
export async function revokeAllCredentials(db: Db, userId: number, nowSec: number): Promise<void> {
  // Under the account's row lock (a no-op when the transaction updated the row already): a credential
  // being issued meanwhile is then either revoked here or refused by lockIssuer.
  await db`SELECT 1 FROM users WHERE id = ${userId} FOR UPDATE`;
  await db`UPDATE access_tokens SET revoked_at = ${nowSec} WHERE user_id = ${userId} AND revoked_at IS NULL`;
  await endResetCodes(db, userId, nowSec);
}

/**
 * Ends the account's open password reset codes (email/email-codes.ts). A reset code is a credential
 * too: whoever read the mail (a mailbox open for a moment, an old address) could set the password with
 * it. Ended by whatever ends the account's other credentials (revokeAllCredentials: a reset, an
 * administrator's password reset, a ban, a deletion), by the owner's own password change and by
 * binding another address (the old mailbox no longer controls the account). In the caller's
 * transaction, after it locked the account's row. The codes' rows are locked in id order, as a try
 * (email/email-codes.ts claimEmailCode) locks them, so the two never wait on each other crosswise.
 */
export async function endResetCodes(db: Db, userId: number, nowSec: number): Promise<void> {
  await db`
    UPDATE email_codes SET used_at = ${nowSec}
    WHERE id IN (
      SELECT id FROM email_codes
      WHERE purpose = 'reset' AND user_id = ${userId} AND user_id <> 0 AND used_at IS NULL AND expires_at > ${nowSec}
      ORDER BY id FOR UPDATE)
      AND used_at IS NULL`;
}

/**
 * Removes the account's sign-on binding (users.oidc_id). A bound identity signs in without any
 * password, so it is a credential too, and one a stolen session could have bound: the owner's password
 * change, a reset of the password (by e-mail or by an administrator) and an administrator enabling a
 * banned account (unbanning restores no credential) unbind it; the owner binds again. A ban itself
 * keeps it, so that the banned identity keeps answering ACCOUNT_BANNED instead of creating an account.
 */
export async function unbindSignOn(db: Db, userId: number): Promise<void> {
  await db`UPDATE users SET oidc_id = '' WHERE id = ${userId} AND oidc_id <> ''`;
}

/** Revokes every long-lived access token of the user; returns how many. Sessions are not affected. */
export async function revokeAccessTokens(db: Db, userId: number, nowSec: number): Promise<number> {
  const rows = await db`
    UPDATE access_tokens SET revoked_at = ${nowSec}
    WHERE user_id = ${userId} AND kind = 'access' AND revoked_at IS NULL
    RETURNING id`;
  return rows.length;
}
