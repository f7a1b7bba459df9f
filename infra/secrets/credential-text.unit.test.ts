// scrubCredentials: what a provider's error or a log line may quote of a credential.
import { describe, expect, it } from 'vitest';
import { CENSOR, scrubCredentials } from './credential-text.js';

const KEY = 'ChanCredAnth9fK2mQ7xLp4Zt8Rw';

describe('scrubCredentials', () => {
  it('scrubs a known key in another case (before: a provider that lower- or upper-cased it passed it on)', () => {
    expect(scrubCredentials(`key ${KEY.toLowerCase()} and ${KEY.toUpperCase()}.`, KEY)).toBe(`key ${CENSOR} and ${CENSOR}.`);
    expect(scrubCredentials(`key ${KEY}`, KEY)).toBe(`key ${CENSOR}`);
  });

  it('scrubs a Basic credential, which holds a key base64-encoded (before: passed on as it was)', () => {
    const basic = Buffer.from(`u:${KEY}`).toString('base64');
    expect(scrubCredentials(`auth: Basic ${basic}`, KEY)).toBe(`auth: Basic ${CENSOR}`);
    expect(scrubCredentials(`Authorization: bearer abcdefgh12345678`)).toBe(`Authorization: bearer ${CENSOR}`);
  });

  it('leaves text that holds no credential as it is', () => {
    expect(scrubCredentials('messages: too long', KEY)).toBe('messages: too long');
    // Words after "basic" are no credential: only the base64 of user:password is.
    for (const text of ['basic authentication is not supported', 'use Basic tokenization instead', 'includes basic features only', 'Basic dGVzdGluZw== is no pair']) {
      expect(scrubCredentials(text, KEY)).toBe(text);
    }
    expect(scrubCredentials(`${KEY.slice(0, 12)} is not the key`, KEY)).toBe(`${KEY.slice(0, 12)} is not the key`);
  });
});
