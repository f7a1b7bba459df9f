// The super administrator exists from the first start. If no account has role 100, one is created
// from ROOT_USERNAME / ROOT_PASSWORD. Without ROOT_PASSWORD a strong password is generated and handed
// to `print` exactly once (main.ts writes it to ROOT_PASSWORD_FILE, mode 0600, or else to stdout, never
// to the pino logger); the database keeps only its hash.
import { randomBytes } from 'node:crypto';
import { chmodSync, writeFileSync } from 'node:fs';
import type { Config } from '../../infra/config.js';
import type { Sql } from '../../infra/postgres/client.js';
import { hashPassword, scryptParams } from '../auth/password.js';
import { insertAccount } from './account-store.js';
import { ROLE } from './roles.js';

/** Serialises concurrent first starts of several console processes. */
const ROOT_LOCK_ID = 727_100;

export interface EnsureRootResult {
  created: boolean;
  username: string;
  /** True when the password was generated (and printed). */
  generatedPassword: boolean;
}

export async function ensureRootAccount(
  sql: Sql,
  config: Pick<Config, 'ROOT_USERNAME' | 'ROOT_PASSWORD' | 'PASSWORD_SCRYPT_LOG2N'>,
  print: (line: string, password: string, username: string) => void,
): Promise<EnsureRootResult> {
  const password = config.ROOT_PASSWORD ?? randomBytes(18).toString('base64url');
  const generated = config.ROOT_PASSWORD === undefined;
  const result = await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${ROOT_LOCK_ID})`;
    const [existing] = await tx<{ username: string }[]>`
      SELECT username FROM users WHERE role >= ${ROLE.root} AND deleted_at IS NULL ORDER BY id LIMIT 1`;
    if (existing) return { created: false, username: existing.username, generatedPassword: false };
    const taken = await tx`SELECT 1 FROM users WHERE username = ${config.ROOT_USERNAME}`;
    if (taken.length > 0) {
      throw new Error(`ROOT_USERNAME "${config.ROOT_USERNAME}" belongs to an account that is not a super administrator`);
    }
    const row = await insertAccount(tx, {
      username: config.ROOT_USERNAME,
      displayName: 'Root User',
      passwordHash: await hashPassword(password, scryptParams(config.PASSWORD_SCRYPT_LOG2N)),
      role: ROLE.root,
    });
    return { created: true, username: row.username, generatedPassword: generated };
  });
  if (result.created && generated) {
    print(`Root account "${result.username}" created. Generated password (shown only once): ${password}`, password, result.username);
  }
  return result;
}

/**
 * How main.ts hands a generated root password over: to `file` (ROOT_PASSWORD_FILE), readable by its
 * owner only, with a line naming the file on `out`; without a file, the line with the password on
 * `out` (stdout), once. Why a file: make run's stdout is a log file, kept and copied where a password
 * must not be.
 */
export function rootPasswordReveal(file: string | undefined, out: (text: string) => void): (line: string, password: string, username: string) => void {
  return (line, password, username) => {
    if (file === undefined) return void out(`${line}\n`);
    writeFileSync(file, `${password}\n`, { mode: 0o600 });
    // An existing file keeps its mode through writeFileSync.
    chmodSync(file, 0o600);
    out(`Root account "${username}" created. Generated password written to ${file}\n`);
  };
}
