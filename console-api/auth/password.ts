// Password hashing with scrypt (memory-hard). The stored string carries its own parameters and salt:
//   scrypt$<log2 N>$<r>$<p>$<salt base64url>$<hash base64url>
// so the parameters can be raised later without invalidating existing hashes (verify reads them).
// Default N=2^15, r=8, p=3: one of OWASP's recommended scrypt settings (32 MiB per hash); N is
// PASSWORD_SCRYPT_LOG2N's (password-gate.ts hashes with it).
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

export interface ScryptParams {
  log2N: number;
  r: number;
  p: number;
}

export const DEFAULT_SCRYPT_PARAMS: ScryptParams = { log2N: 15, r: 8, p: 3 };

/** The parameters of new hashes at PASSWORD_SCRYPT_LOG2N: only N is configurable. */
export function scryptParams(log2N: number): ScryptParams {
  return { ...DEFAULT_SCRYPT_PARAMS, log2N };
}
const KEY_LENGTH = 32;
const SALT_LENGTH = 16;

function derive(password: string, salt: Buffer, params: ScryptParams): Promise<Buffer> {
  const N = 2 ** params.log2N;
  return new Promise((resolve, reject) => {
    scrypt(
      password.normalize('NFKC'),
      salt,
      KEY_LENGTH,
      { N, r: params.r, p: params.p, maxmem: 256 * N * params.r + 1024 * 1024 },
      (err, key) => (err ? reject(err) : resolve(key)),
    );
  });
}

export async function hashPassword(password: string, params: ScryptParams = DEFAULT_SCRYPT_PARAMS): Promise<string> {
  const salt = randomBytes(SALT_LENGTH);
  const hash = await derive(password, salt, params);
  return ['scrypt', params.log2N, params.r, params.p, salt.toString('base64url'), hash.toString('base64url')].join('$');
}

/** Constant-time comparison; false for a malformed stored hash rather than an exception. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [log2N, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  if (![log2N, r, p].every((n) => Number.isInteger(n) && n > 0) || log2N > 22) return false;
  const salt = Buffer.from(parts[4]!, 'base64url');
  const expected = Buffer.from(parts[5]!, 'base64url');
  if (expected.length === 0) return false;
  const actual = await derive(password, salt, { log2N, r, p });
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** A hash of a random password per cost, made once: what burnPasswordCheck verifies against. */
const dummyHashes = new Map<number, Promise<string>>();

/**
 * Spends the same time as a real verification, for a login naming an unknown account, so that the
 * response time does not reveal which usernames exist: at the cost new hashes have (`params`), which
 * is what most stored ones have.
 */
export async function burnPasswordCheck(password: string, params: ScryptParams = DEFAULT_SCRYPT_PARAMS): Promise<false> {
  let dummy = dummyHashes.get(params.log2N);
  if (dummy === undefined) dummyHashes.set(params.log2N, dummy = hashPassword(randomBytes(16).toString('hex'), params));
  await verifyPassword(password, await dummy);
  return false;
}
