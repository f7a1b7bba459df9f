// Redemption codes at rest, as API keys are (api-key-crypto.ts): a code is bearer credit, so the row
// keeps HMAC-SHA256 of it (redemption and the exact-code search look it up), an AES-256-GCM copy
// (only an administrator's reveal opens it) and a mask (listings). Without KEY_SECRET a database dump
// yields no code to redeem and no way to test guesses. Keys of their own, derived from KEY_SECRET:
// a code's hash never matches an API key's.
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';

export interface RedemptionCodeCrypto {
  hash(code: string): Buffer;
  seal(code: string): Buffer;
  open(sealed: Buffer): string;
}

export function createRedemptionCodeCrypto(secret: string): RedemptionCodeCrypto {
  // Codes sealed under a guessable value would be readable from a dump: refuse, as for API keys.
  if (secret.length < 16) {
    throw new Error('KEY_SECRET is not set: give it 32 random bytes (head -c 32 /dev/urandom | base64); make generates one into .data/key-secret');
  }
  const hmacKey = createHash('sha256').update('redemption-code-hash\0' + secret).digest();
  const encKey = createHash('sha256').update('redemption-code-seal\0' + secret).digest();
  return {
    hash: (code) => createHmac('sha256', hmacKey).update(code).digest(),
    seal(code) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', encKey, iv);
      const body = Buffer.concat([cipher.update(code, 'utf8'), cipher.final()]);
      return Buffer.concat([iv, cipher.getAuthTag(), body]);
    },
    open(sealed) {
      const decipher = createDecipheriv('aes-256-gcm', encKey, sealed.subarray(0, 12));
      decipher.setAuthTag(sealed.subarray(12, 28));
      return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]).toString('utf8');
    },
  };
}

/** 32 hex characters (128 random bits), like new-api's UUID-without-dashes codes. */
export function generateRedemptionCode(): string {
  return randomBytes(16).toString('hex');
}

/**
 * What listings show: enough to tell codes apart, 96 of a generated code's 128 bits hidden. A shorter
 * code (one made elsewhere before) shows nothing: eight of its characters would give most of it away.
 */
export function maskRedemptionCode(code: string): string {
  return code.length >= 24 ? `${code.slice(0, 4)}${'*'.repeat(8)}${code.slice(-4)}` : '*'.repeat(8);
}
