// API keys at rest: the relay finds a key by HMAC-SHA256(secret, key), and only the owner's reveal
// endpoint decrypts the AES-256-GCM copy. Without KEY_SECRET a database dump yields neither the key
// nor a way to test guesses against the hash. Channel credentials use the same sealing, redemption codes
// the same scheme under keys of their own (createSecretCrypto); the secrets kept in text columns
// (secret options, accounts' webhook secrets) use createTextSealer below.
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';

const KEY_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const KEY_BODY_LENGTH = 48;

/** HMAC-SHA256 lookup hash and AES-256-GCM copy of a bearer secret (an API key, a redemption code). */
export interface SecretCrypto {
  hash(plain: string): Buffer;
  seal(plain: string): Buffer;
  open(sealed: Buffer): string;
}

export type ApiKeyCrypto = SecretCrypto;

function deriveKey(label: string, secret: string): Buffer {
  // A process that seals or looks up keys must not run on a missing secret: every key it stored
  // would be sealed under a value anyone can guess. (The config refuses the old public default.)
  if (secret.length < 16) {
    throw new Error('KEY_SECRET is not set: give it 32 random bytes (head -c 32 /dev/urandom | base64); make generates one into .data/key-secret');
  }
  return createHash('sha256').update(label + '\0' + secret).digest();
}

/** IV (12 bytes), tag (16), ciphertext. `aad` ties the ciphertext to where it is stored. */
function sealBytes(encKey: Buffer, plain: string, aad?: Buffer): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', encKey, iv);
  if (aad) cipher.setAAD(aad);
  const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]);
}

function openBytes(encKey: Buffer, sealed: Buffer, aad?: Buffer): string {
  const decipher = createDecipheriv('aes-256-gcm', encKey, sealed.subarray(0, 12));
  decipher.setAuthTag(sealed.subarray(12, 28));
  if (aad) decipher.setAAD(aad);
  return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]).toString('utf8');
}

/**
 * The labels give each kind of secret keys of its own, so one kind's hash never matches another's.
 * They are part of every stored hash and ciphertext: changing one orphans what was stored under it.
 */
export function createSecretCrypto(secret: string, labels: { hashLabel: string; sealLabel: string }): SecretCrypto {
  const hmacKey = deriveKey(labels.hashLabel, secret);
  const encKey = deriveKey(labels.sealLabel, secret);
  return {
    hash: (plain) => createHmac('sha256', hmacKey).update(plain).digest(),
    seal: (plain) => sealBytes(encKey, plain),
    open: (sealed) => openBytes(encKey, sealed),
  };
}

export function createApiKeyCrypto(secret: string): ApiKeyCrypto {
  return createSecretCrypto(secret, { hashLabel: 'api-key-hash', sealLabel: 'api-key-seal' });
}

/**
 * How a sealed secret starts in a text column. A value without it was stored before these secrets
 * were sealed and is read as plaintext until it is sealed in turn (console-api/secrets/seal-legacy-secrets.ts).
 */
export const SEALED_TEXT_PREFIX = 'sealed:v1:';

export function isSealedText(stored: string): boolean {
  return stored.startsWith(SEALED_TEXT_PREFIX);
}

export interface TextSealer {
  /**
   * SEALED_TEXT_PREFIX and the base64 of IV, tag and ciphertext. `context` (the option's key, the
   * account) is authenticated: a sealed value copied into another row does not open there, so write
   * access to the table cannot make one secret be sent where another is (SMTPToken to an SMTP server
   * of one's choosing, say).
   */
  seal(plain: string, context: string): string;
  /** The plaintext; a value without the prefix is returned as stored. Throws if it was sealed under another KEY_SECRET, purpose or context. */
  open(stored: string, context: string): string;
}

/** Sealing of secrets kept as text, under a key of their own per `purpose` (none shared with the API keys'). */
export function createTextSealer(secret: string, purpose: string): TextSealer {
  const encKey = deriveKey(`text-seal:${purpose}`, secret);
  return {
    seal: (plain, context) => SEALED_TEXT_PREFIX + sealBytes(encKey, plain, Buffer.from(context, 'utf8')).toString('base64'),
    open(stored, context) {
      if (!isSealedText(stored)) return stored;
      return openBytes(encKey, Buffer.from(stored.slice(SEALED_TEXT_PREFIX.length), 'base64'), Buffer.from(context, 'utf8'));
    },
  };
}

/** A TextSealer whose context is always derived from what the secret belongs to (an option key, an account). */
export interface ScopedTextSealer<Owner> {
  seal(owner: Owner, plain: string): string;
  /** The plaintext of the stored value; one stored before sealing (no prefix) as it is. */
  open(owner: Owner, stored: string): string;
}

/** `contextOf` must never change for an owner: it is authenticated into each value sealed for it. */
export function createScopedTextSealer<Owner>(secret: string, purpose: string, contextOf: (owner: Owner) => string): ScopedTextSealer<Owner> {
  const sealer = createTextSealer(secret, purpose);
  return {
    seal: (owner, plain) => sealer.seal(plain, contextOf(owner)),
    open: (owner, stored) => sealer.open(stored, contextOf(owner)),
  };
}

/** A new `sk-` key: 48 characters drawn uniformly (rejection sampling) from 62, about 285 bits. */
export function generateApiKey(): string {
  let out = 'sk-';
  while (out.length < 3 + KEY_BODY_LENGTH) {
    for (const byte of randomBytes(64)) {
      if (byte < 248 && out.length < 3 + KEY_BODY_LENGTH) out += KEY_ALPHABET[byte % 62];
    }
  }
  return out;
}

/** KEY_ALPHABET membership by char code (0..127), for hasApiKeyShape's loop. */
const IN_KEY_ALPHABET = new Uint8Array(128);
for (let i = 0; i < KEY_ALPHABET.length; i++) IN_KEY_ALPHABET[KEY_ALPHABET.charCodeAt(i)] = 1;

/**
 * Whether `key` could be one generateApiKey made: `sk-` and KEY_BODY_LENGTH characters of KEY_ALPHABET.
 * The relay refuses anything else before hashing it or asking Postgres, so made-up values cost
 * neither a query nor a cache entry. A synchronous loop, no allocation.
 */
export function hasApiKeyShape(key: string): boolean {
  if (key.length !== 3 + KEY_BODY_LENGTH || key.charCodeAt(0) !== 0x73 || key.charCodeAt(1) !== 0x6b || key.charCodeAt(2) !== 0x2d) return false;
  for (let i = 3; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c >= 128 || IN_KEY_ALPHABET[c] === 0) return false;
  }
  return true;
}

/** What listings show: enough to recognise a key, not enough to use it. */
export function maskApiKey(key: string): string {
  return `${key.slice(0, 7)}${'*'.repeat(8)}${key.slice(-4)}`;
}
