import { describe, expect, it } from 'vitest';
import { clientBucket } from './login-limiter.js';

describe('clientBucket', () => {
  it('counts an IPv6 client by its /64 whatever the spelling, an IPv4 one (mapped or not) by its address', () => {
    for (const ip of ['2001:db8:1:2::1', '2001:0db8:0001:0002:ffff:ffff:ffff:ffff', '2001:DB8:1:2:0:0:0:9', '2001:db8:1:2::1.2.3.4']) {
      expect(clientBucket(ip), ip).toBe('2001:db8:1:2::/64');
    }
    expect(clientBucket('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(clientBucket('::1')).toBe('0:0:0:0::/64');
    expect(clientBucket('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(clientBucket('203.0.113.7')).toBe('203.0.113.7');
    expect(clientBucket('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(clientBucket('not an address')).toBe('not an address');
  });
});
