// API keys at rest: the relay finds a key by HMAC-SHA256(secret, key), and only the owner's reveal
// endpoint decrypts the AES-256-GCM copy. Without KEY_SECRET a database dump yields neither the key
// nor a way to test guesses against the hash. Channel credentials use the same sealing.
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';

const KEY_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const KEY_BODY_LENGTH = 48;

export interface ApiKeyCrypto {
  hash(key: string): Buffer;
  seal(plain: string): Buffer;
  open(sealed: Buffer): string;
}

export function createApiKeyCrypto(secret: string): ApiKeyCrypto {
  // A process that seals or looks up keys must not run on a missing secret: every key it stored
  // would be sealed under a value anyone can guess. (The config refuses the old public default.)
  if (secret.length < 16) {
    throw new Error('KEY_SECRET is not set: give it 32 random bytes (head -c 32 /dev/urandom | base64); make generates one into .data/key-secret');
  }
  const hmacKey = createHash('sha256').update('api-key-hash\0' + secret).digest();
  const encKey = createHash('sha256').update('api-key-seal\0' + secret).digest();
  return {
    hash: (key) => createHmac('sha256', hmacKey).update(key).digest(),
    seal(plain) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', encKey, iv);
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return Buffer.concat([iv, cipher.getAuthTag(), body]);
    },
    open(sealed) {
      const decipher = createDecipheriv('aes-256-gcm', encKey, sealed.subarray(0, 12));
      decipher.setAuthTag(sealed.subarray(12, 28));
      return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]).toString('utf8');
    },
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
