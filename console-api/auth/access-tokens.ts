// Console credentials. A token is 32 random bytes in hex (never starts with `sk-`, so it cannot be
// confused with an API key); only its SHA-256 is stored in access_tokens.
//   session: issued by login, expires after SESSION_TTL_SEC.
//   access:  issued by GET /api/user/token, no expiry; issuing one revokes the user's previous one.
import { createHash, randomBytes } from 'node:crypto';
import type { Sql } from '../../infra/postgres/client.js';
import type { UserRow } from '../accounts/account-view.js';
import type { Db } from '../db.js';

export type AccessTokenKind = 'session' | 'access';

export function hashAccessToken(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

function newToken(): string {
  return randomBytes(32).toString('hex');
}

export async function issueSessionToken(db: Db, userId: number, ttlSec: number, nowSec: number): Promise<string> {
  const token = newToken();
  await db`
    INSERT INTO access_tokens (user_id, token_hash, kind, created_at, expires_at)
    VALUES (${userId}, ${hashAccessToken(token)}, 'session', ${nowSec}, ${nowSec + ttlSec})`;
  return token;
}

/** A new long-lived access token; the previous access token(s) of the user stop working at once. */
export async function issueAccessToken(sql: Sql, userId: number, nowSec: number): Promise<string> {
  const token = newToken();
  await sql.begin(async (tx) => {
    await tx`
      UPDATE access_tokens SET revoked_at = ${nowSec}
      WHERE user_id = ${userId} AND kind = 'access' AND revoked_at IS NULL`;
    await tx`
      INSERT INTO access_tokens (user_id, token_hash, kind, created_at, expires_at)
      VALUES (${userId}, ${hashAccessToken(token)}, 'access', ${nowSec}, NULL)`;
  });
  return token;
}

/** The account a live (unexpired, unrevoked) token belongs to, or undefined. */
export async function resolveAccessToken(db: Db, token: string, nowSec: number): Promise<UserRow | undefined> {
  const [row] = await db<UserRow[]>`
    SELECT u.* FROM access_tokens t JOIN users u ON u.id = t.user_id
    WHERE t.token_hash = ${hashAccessToken(token)}
      AND t.revoked_at IS NULL
      AND (t.expires_at IS NULL OR t.expires_at > ${nowSec})
      AND u.deleted_at IS NULL`;
  return row;
}

/** Revokes the one token presented (logout of a session, or of an access token). */
export async function revokeToken(db: Db, token: string, nowSec: number): Promise<void> {
  await db`UPDATE access_tokens SET revoked_at = ${nowSec} WHERE token_hash = ${hashAccessToken(token)} AND revoked_at IS NULL`;
}

/** Revokes every long-lived access token of the user; returns how many. Sessions are not affected. */
export async function revokeAccessTokens(db: Db, userId: number, nowSec: number): Promise<number> {
  const rows = await db`
    UPDATE access_tokens SET revoked_at = ${nowSec}
    WHERE user_id = ${userId} AND kind = 'access' AND revoked_at IS NULL
    RETURNING id`;
  return rows.length;
}
