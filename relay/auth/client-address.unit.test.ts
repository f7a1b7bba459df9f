import { describe, expect, it } from 'vitest';
import { ClientAddressResolver, forwardedForOf } from './client-address.js';
import type { ApiKeyRecord } from './key-directory.js';
import { ipAllowed } from './key-rules.js';

describe('ClientAddressResolver (X-Forwarded-For from trusted proxies only)', () => {
  const resolver = new ClientAddressResolver('10.0.0.0/8, ::1');

  it('uses the socket address when the peer is not a trusted proxy', () => {
    expect(resolver.resolve('198.51.100.9', '203.0.113.7')).toBe('198.51.100.9');
  });

  it('takes the right-most untrusted hop when the peer is trusted', () => {
    expect(resolver.resolve('10.1.2.3', '203.0.113.7')).toBe('203.0.113.7');
    expect(resolver.resolve('10.1.2.3', '1.2.3.4, 203.0.113.7, 10.9.9.9')).toBe('203.0.113.7');
    expect(resolver.resolve('::1', '2001:db8::5')).toBe('2001:db8::5');
  });

  it('reads every X-Forwarded-For line, in order: a client\'s own line ahead of its proxy\'s is not taken for the list', () => {
    const lines: [string, string][] = [['host', 'relay'], ['x-forwarded-for', '203.0.113.7'], ['content-type', 'application/json'], ['x-forwarded-for', '198.51.100.9']];
    const req = {
      getHeader: (name: string) => lines.find(([n]) => n === name)?.[1] ?? '',
      forEach: (cb: (name: string, value: string) => void) => { for (const [n, v] of lines) cb(n, v); },
    };
    const all = forwardedForOf(req);
    expect(all).toBe('203.0.113.7, 198.51.100.9');
    // The proxy (10.1.2.3) appended the real client, 198.51.100.9: that is the address, not the claimed one.
    expect(resolver.resolve('10.1.2.3', all)).toBe('198.51.100.9');
    expect(forwardedForOf({ getHeader: () => '', forEach: () => { throw new Error('not asked'); } })).toBe('');
    const one = { getHeader: () => '1.2.3.4, 5.6.7.8', forEach: (cb: (n: string, v: string) => void) => cb('x-forwarded-for', '1.2.3.4, 5.6.7.8') };
    expect(forwardedForOf(one)).toBe('1.2.3.4, 5.6.7.8');
  });

  it('ignores a malformed header', () => {
    expect(resolver.resolve('10.1.2.3', 'not-an-ip')).toBe('10.1.2.3');
  });

  it('trusts nobody when unconfigured', () => {
    expect(new ClientAddressResolver('').resolve('10.1.2.3', '203.0.113.7')).toBe('10.1.2.3');
  });
});

describe('ipAllowed', () => {
  const rec = (allowIps: string | null) => ({ allowIps }) as ApiKeyRecord;

  it('matches single addresses and CIDR ranges of both families', () => {
    expect(ipAllowed(rec('192.0.2.1'), '192.0.2.1')).toBe(true);
    expect(ipAllowed(rec('192.0.2.1'), '192.0.2.2')).toBe(false);
    expect(ipAllowed(rec('192.0.2.0/24'), '192.0.2.200')).toBe(true);
    expect(ipAllowed(rec('2001:db8::/32'), '2001:db8:1::9')).toBe(true);
    expect(ipAllowed(rec('2001:db8::/32'), '2001:db9::1')).toBe(false);
    expect(ipAllowed(rec('::1'), '::1')).toBe(true);
  });

  it('matches an IPv4 client seen as an IPv4-mapped IPv6 address', () => {
    expect(ipAllowed(rec('127.0.0.0/8'), '::ffff:127.0.0.1')).toBe(true);
  });

  it('allows everyone when the list is empty or null', () => {
    expect(ipAllowed(rec(null), '203.0.113.1')).toBe(true);
  });
});
