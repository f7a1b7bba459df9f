// Login and registration under abuse: the per-address login limit (password spraying), client
// addresses behind a trusted proxy, registration throttling, the password-hashing cap, and
// Cache-Control on answers that carry credentials.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { trustedProxies } from '../app.js';
import { type ConsoleHarness, type TestAccount, startConsoleHarness, uniqueName } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
beforeAll(async () => {
  h = await startConsoleHarness({ TRUSTED_PROXIES: '10.200.0.0/16, 10.201.0.1' }, {
    settings: {
      LOGIN_RATE_LIMIT: 3, LOGIN_IP_RATE_LIMIT: 5, LOGIN_RATE_WINDOW_SEC: 60,
      REGISTER_RATE_LIMIT: 2, REGISTER_RATE_WINDOW_SEC: 3600,
      PASSWORD_HASH_CONCURRENCY: 1, PASSWORD_HASH_MAX_WAITING: 1,
      // The production cost, not the tests' (test-config.ts): the cap is seen only while hashes take time.
      PASSWORD_SCRYPT_LOG2N: 15,
    },
  });
});
afterAll(async () => {
  await h?.close();
});

const login = (username: string, password: string, ip: string, headers: Record<string, string> = {}) =>
  h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username, password }, remoteAddress: ip, headers });
const register = (ip: string, headers: Record<string, string> = {}) =>
  h.app.inject({ method: 'POST', url: '/api/user/register', payload: { username: uniqueName(), password: 'password-123' }, remoteAddress: ip, headers });

/** h.account() logs in from 127.0.0.1; its attempts must not use up that address's budget in these tests. */
async function account(): Promise<TestAccount> {
  const a = await h.account();
  await h.redis.del(h.keys.loginAttemptsFromAddress('127.0.0.1'));
  return a;
}

describe('login: per-address limit', () => {
  it('stops password spraying across usernames from one address; a success does not reset it; other addresses are not affected', async () => {
    const a = await account();
    const ip = '192.0.2.10';
    for (let i = 0; i < 4; i++) expect((await login(uniqueName(), 'Spring2025!', ip)).statusCode).toBe(401);
    expect((await login(a.user.username, a.password, ip)).statusCode).toBe(200);
    const sprayed = await login(uniqueName(), 'Spring2025!', ip);
    expect(sprayed.statusCode).toBe(429);
    expect(sprayed.json()).toEqual({ success: false, message: expect.stringMatching(/^too many login attempts from this address; retry in \d+ s$/) });
    expect(Number(sprayed.headers['retry-after'])).toBeGreaterThan(0);
    expect((await login(a.user.username, a.password, ip)).statusCode).toBe(429);
    expect((await login(a.user.username, a.password, '192.0.2.11')).statusCode).toBe(200);
  });
});

describe('client address behind a trusted proxy (TRUSTED_PROXIES)', () => {
  it('counts clients behind one trusted proxy apart, so one of them cannot lock the others out of an account', async () => {
    const a = await account();
    const proxy = '10.200.3.4';
    const attacker = { 'x-forwarded-for': '198.51.100.1' };
    for (let i = 0; i < 3; i++) expect((await login(a.user.username, 'wrong-password', proxy, attacker)).statusCode).toBe(401);
    expect((await login(a.user.username, a.password, proxy, attacker)).statusCode).toBe(429);
    // The owner, behind the same proxy (a chain of trusted proxies too), still logs in.
    expect((await login(a.user.username, a.password, proxy, { 'x-forwarded-for': '198.51.100.2' })).statusCode).toBe(200);
    expect((await login(a.user.username, a.password, proxy, { 'x-forwarded-for': '198.51.100.3, 10.201.0.1' })).statusCode).toBe(200);
    expect(await h.redis.keys(`${h.config.REDIS_PREFIX}:console:{ip:198.51.100.1}:login:*`)).toHaveLength(1);
  });

  it('ignores X-Forwarded-For from an address that is not a trusted proxy', async () => {
    const a = await account();
    for (let i = 0; i < 3; i++) {
      expect((await login(a.user.username, 'wrong-password', '203.0.113.9', { 'x-forwarded-for': `198.51.100.${50 + i}` })).statusCode).toBe(401);
    }
    expect((await login(a.user.username, a.password, '203.0.113.9', { 'x-forwarded-for': '198.51.100.99' })).statusCode).toBe(429);
  });

  it('parses TRUSTED_PROXIES strictly', () => {
    expect(trustedProxies('')).toBe(false);
    expect(trustedProxies(' 10.0.0.1, 10.1.0.0/16 ::1 ')).toEqual(['10.0.0.1', '10.1.0.0/16', '::1']);
    expect(() => trustedProxies('10.0.0.0/33')).toThrow(/TRUSTED_PROXIES: "10.0.0.0\/33"/);
    expect(() => trustedProxies('proxy.internal')).toThrow(/TRUSTED_PROXIES/);
  });
});

describe('registration throttling', () => {
  it('allows REGISTER_RATE_LIMIT registrations per address per window, then 429 with Retry-After', async () => {
    const ip = '192.0.2.20';
    expect((await register(ip)).statusCode).toBe(200);
    expect((await register(ip)).statusCode).toBe(200);
    const third = await register(ip);
    expect(third.statusCode).toBe(429);
    expect(third.json()).toEqual({ success: false, message: expect.stringMatching(/^too many registrations from this address; retry in \d+ s$/) });
    expect(Number(third.headers['retry-after'])).toBeGreaterThan(3000);
    expect((await register('192.0.2.21')).statusCode).toBe(200);
    // Behind the trusted proxy, each client counts on its own.
    expect((await register('10.200.0.1', { 'x-forwarded-for': '198.51.100.70' })).statusCode).toBe(200);
  });
});

describe('password hashing cap', () => {
  it('runs at most PASSWORD_HASH_CONCURRENCY checks with PASSWORD_HASH_MAX_WAITING waiting; the rest get 429 at once', async () => {
    // Unknown usernames: each login costs a full default-strength scrypt (the timing-equaliser).
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => login(uniqueName(), 'whatever-password', `192.0.2.${100 + i}`)));
    const statuses = results.map((r) => r.statusCode);
    expect(statuses.every((s) => s === 401 || s === 429), statuses.join()).toBe(true);
    expect(statuses.filter((s) => s === 401).length).toBeGreaterThanOrEqual(2);
    const busy = results.filter((r) => r.statusCode === 429);
    expect(busy.length).toBeGreaterThan(0);
    for (const r of busy) {
      expect(r.json()).toEqual({ success: false, message: 'the server is busy checking passwords; retry in 1 s' });
      expect(r.headers['retry-after']).toBe('1');
    }
  });
});

describe('Cache-Control: no-store', () => {
  it('is on every answer that carries a credential, and on every other /api/ answer', async () => {
    const a = await account();
    const logged = await login(a.user.username, a.password, '192.0.2.30');
    expect(logged.statusCode).toBe(200);
    expect(logged.headers['cache-control']).toBe('no-store');
    const access = await h.app.inject({ method: 'GET', url: '/api/user/token', headers: a.auth });
    expect(access.json().success).toBe(true);
    expect(access.headers['cache-control']).toBe('no-store');
    await h.app.inject({ method: 'POST', url: '/api/token/', headers: a.auth, payload: { name: 'k', expired_time: -1, remain_quota: 0, unlimited_quota: true } });
    const id = (await h.app.inject({ method: 'GET', url: '/api/token/', headers: a.auth })).json().data.items[0].id as number;
    const reveal = await h.app.inject({ method: 'POST', url: `/api/token/${id}/key`, headers: a.auth });
    expect(reveal.json().data.key).toMatch(/^sk-/);
    expect(reveal.headers['cache-control']).toBe('no-store');
    for (const res of [
      await h.app.inject({ method: 'GET', url: '/api/user/self', headers: a.auth }),
      await h.app.inject({ method: 'GET', url: '/api/status' }),
      await h.app.inject({ method: 'GET', url: '/api/user/self' }),
      await h.app.inject({ method: 'GET', url: '/api/nope' }),
    ]) {
      expect(res.headers['cache-control']).toBe('no-store');
    }
  });
});
