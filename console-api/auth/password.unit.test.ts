import { describe, expect, it } from 'vitest';
import { hashPassword, verifyPassword } from './password.js';

const FAST = { log2N: 10, r: 8, p: 1 };

describe('scrypt password hashing', () => {
  it('verifies the right password only, with salt and parameters in the string', async () => {
    const a = await hashPassword('hunter22-password', FAST);
    const b = await hashPassword('hunter22-password', FAST);
    expect(a).toMatch(/^scrypt\$10\$8\$1\$[\w-]{22}\$[\w-]{43}$/);
    expect(a).not.toBe(b);
    expect(await verifyPassword('hunter22-password', a)).toBe(true);
    expect(await verifyPassword('hunter22-Password', a)).toBe(false);
  });

  it('uses the memory-hard default and reads parameters back from the hash', async () => {
    const h = await hashPassword('default-params');
    expect(h.startsWith('scrypt$15$8$3$')).toBe(true);
    expect(await verifyPassword('default-params', h)).toBe(true);
  });

  it('treats malformed hashes as a mismatch', async () => {
    for (const bad of ['', 'plain', 'scrypt$x$8$1$a$b', 'scrypt$40$8$1$AAAA$AAAA', 'bcrypt$10$8$1$AAAA$AAAA']) {
      expect(await verifyPassword('x', bad)).toBe(false);
    }
  });
});
