// Redemption codes at rest, as API keys are (api-key-crypto.ts): a code is bearer credit, so the row
// keeps HMAC-SHA256 of it (redemption and the exact-code search look it up), an AES-256-GCM copy
// (only an administrator's reveal opens it) and a mask (listings). Without KEY_SECRET a database dump
// yields no code to redeem and no way to test guesses. Keys of their own, derived from KEY_SECRET:
// a code's hash never matches an API key's.
import { randomBytes } from 'node:crypto';
import { createSecretCrypto, type SecretCrypto } from './api-key-crypto.js';

export type RedemptionCodeCrypto = SecretCrypto;

export function createRedemptionCodeCrypto(secret: string): RedemptionCodeCrypto {
  return createSecretCrypto(secret, { hashLabel: 'redemption-code-hash', sealLabel: 'redemption-code-seal' });
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
