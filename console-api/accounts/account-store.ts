// Creating accounts: one place that knows the aff_code rule and the unique-violation handling.
import { randomInt } from 'node:crypto';
import type { Db } from '../db.js';
import { ConsoleError } from '../http/errors.js';
import type { UserRow } from './account-view.js';
import { ROLE } from './roles.js';

const AFF_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnpqrstuvwxyz23456789';
export const AFF_CODE_LENGTH = 6;

/** A random invitation code (4–8 characters; we use 6 from a 55-character alphabet, ~34 bits). */
export function generateAffCode(length = AFF_CODE_LENGTH): string {
  let out = '';
  for (let i = 0; i < length; i++) out += AFF_ALPHABET[randomInt(AFF_ALPHABET.length)];
  return out;
}

export interface NewAccount {
  username: string;
  passwordHash: string;
  /** Absent, empty or only white space: the username (a name of spaces would list as an empty cell). */
  displayName?: string;
  email?: string;
  role?: number;
  group?: string;
}

interface PgError {
  code?: string;
  constraint_name?: string;
}

/** Codes tried before giving up: with ~34 bits of code, several collisions in a row mean something else is wrong. */
const AFF_CODE_ATTEMPTS = 6;

/**
 * Inserts an account with a unique aff_code (regenerated on the rare collision). A taken username is
 * USERNAME_TAKEN. `tx` may be a transaction: a colliding code is skipped by ON CONFLICT rather than
 * raised, since a raised error would abort the caller's transaction and fail every retry after it.
 * `affCode` is the code source (tests hand out taken codes).
 */
export async function insertAccount(tx: Db, input: NewAccount, affCode: () => string = generateAffCode): Promise<UserRow> {
  for (let attempt = 0; attempt < AFF_CODE_ATTEMPTS; attempt++) {
    try {
      const [row] = await tx<UserRow[]>`
        INSERT INTO users (username, display_name, password_hash, role, email, "group", quota, aff_code)
        VALUES (${input.username}, ${input.displayName?.trim() ? input.displayName : input.username}, ${input.passwordHash},
                ${input.role ?? ROLE.user}, ${input.email ?? ''}, ${input.group ?? 'default'}, 0,
                ${affCode()})
        ON CONFLICT (aff_code) DO NOTHING
        RETURNING *`;
      if (row) return row;
    } catch (err) {
      const e = err as PgError;
      // users_username_folded: the name differs from a taken one only in case or Unicode form (migration 022).
      if (e.code === '23505' && (e.constraint_name === 'users_username_key' || e.constraint_name === 'users_username_folded')) throw new ConsoleError('USERNAME_TAKEN');
      throw err;
    }
  }
  throw new Error(`no free aff_code after ${AFF_CODE_ATTEMPTS} attempts`);
}

export async function findUserById(sql: Db, id: number): Promise<UserRow | undefined> {
  const [row] = await sql<UserRow[]>`SELECT * FROM users WHERE id = ${id} AND deleted_at IS NULL`;
  return row;
}

export async function findUserByUsername(sql: Db, username: string): Promise<UserRow | undefined> {
  const [row] = await sql<UserRow[]>`SELECT * FROM users WHERE username = ${username} AND deleted_at IS NULL`;
  return row;
}
