// Console sessions: what a console credential opens. A credential is 32 random bytes in hex (never
// starts with `sk-`, so it cannot be confused with an API key); only its SHA-256 is stored, in the
// access_tokens table (new-api's name). Two kinds:
//   session: issued by login, expires after SESSION_TTL_SEC.
//   access:  new-api's "access token", issued by GET /api/user/token, no expiry; issuing one revokes
//            the user's previous one.
import { createHash, randomBytes } from 'node:crypto';
import type { Sql } from '../../infra/postgres/client.js';
import type { UserRow } from '../accounts/account-view.js';
import type { Db } from '../db.js';

export type SessionKind = 'session' | 'access';

export function hashCredential(credential: string): Buffer {
  return createHash('sha256').update(credential, 'utf8').digest();
}

function newCredential(): string {
  return randomBytes(32).toString('hex');
}

export async function issueSession(db: Db, userId: number, ttlSec: number, nowSec: number): Promise<string> {
  const credential = newCredential();
  await db`
    INSERT INTO access_tokens (user_id, token_hash, kind, created_at, expires_at)
    VALUES (${userId}, ${hashCredential(credential)}, 'session', ${nowSec}, ${nowSec + ttlSec})`;
  return credential;
}

/** A new long-lived access token; the previous access token(s) of the user stop working at once. */
export async function issueAccessToken(sql: Sql, userId: number, nowSec: number): Promise<string> {
  const credential = newCredential();
  await sql.begin(async (tx) => {
    await tx`
      UPDATE access_tokens SET revoked_at = ${nowSec}
      WHERE user_id = ${userId} AND kind = 'access' AND revoked_at IS NULL`;
    await tx`
      INSERT INTO access_tokens (user_id, token_hash, kind, created_at, expires_at)
      VALUES (${userId}, ${hashCredential(credential)}, 'access', ${nowSec}, NULL)`;
  });
  return credential;
}

/** The account a live (unexpired, unrevoked) session or access token belongs to, or undefined. */
export async function resolveSession(db: Db, credential: string, nowSec: number): Promise<UserRow | undefined> {
  const [row] = await db<UserRow[]>`
    SELECT u.* FROM access_tokens t JOIN users u ON u.id = t.user_id
    WHERE t.token_hash = ${hashCredential(credential)}
      AND t.revoked_at IS NULL
      AND (t.expires_at IS NULL OR t.expires_at > ${nowSec})
      AND u.deleted_at IS NULL`;
  return row;
}

/** Revokes the one credential presented (logout of a session, or of an access token). */
export async function revokeSession(db: Db, credential: string, nowSec: number): Promise<void> {
  await db`UPDATE access_tokens SET revoked_at = ${nowSec} WHERE token_hash = ${hashCredential(credential)} AND revoked_at IS NULL`;
}

/**
 * Ends every session and access token of an account: banned or deleted (an account banned because it
 * was taken over must not get the taker's credentials back when enabled again), or its password reset.
 */
export async function revokeAllCredentials(db: Db, userId: number, nowSec: number): Promise<void> {
  await db`UPDATE access_tokens SET revoked_at = ${nowSec} WHERE user_id = ${userId} AND revoked_at IS NULL`;
}

/** Revokes every long-lived access token of the user; returns how many. Sessions are not affected. */
export async function revokeAccessTokens(db: Db, userId: number, nowSec: number): Promise<number> {
  const rows = await db`
    UPDATE access_tokens SET revoked_at = ${nowSec}
    WHERE user_id = ${userId} AND kind = 'access' AND revoked_at IS NULL
    RETURNING id`;
  return rows.length;
}
