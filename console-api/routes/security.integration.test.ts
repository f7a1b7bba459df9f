import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, startConsoleHarness } from '../../tests/harness/console-harness.js';

// A clock the test moves: sessions expire by it.
let clock = Math.floor(Date.now() / 1000);
let h: ConsoleHarness;
beforeAll(async () => {
  h = await startConsoleHarness({ SESSION_TTL_SEC: '3600' }, { now: () => clock, settings: { LOGIN_RATE_LIMIT: 3, LOGIN_RATE_WINDOW_SEC: 60 } });
});
afterAll(async () => {
  await h?.close();
});

const login = (username: string, password: string, ip = '127.0.0.1') =>
  h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username, password }, remoteAddress: ip });
const self = (token: string) => h.app.inject({ method: 'GET', url: '/api/user/self', headers: { authorization: `Bearer ${token}` } });

describe('login rate limit', () => {
  it('answers 429 with Retry-After after the limit per username and address; others are not affected', async () => {
    const a = await h.account();
    for (let i = 0; i < 3; i++) expect((await login(a.user.username, 'wrong-password')).statusCode).toBe(401);
    const limited = await login(a.user.username, a.password);
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toEqual({ success: false, message: expect.stringMatching(/^too many login attempts .* retry in \d+ s$/) });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    // Another address, or another account, still logs in.
    expect((await login(a.user.username, a.password, '10.0.0.9')).statusCode).toBe(200);
    const b = await h.account();
    expect((await login(b.user.username, b.password)).statusCode).toBe(200);
    // The window passes.
    const keys = await h.redis.keys(`${h.config.REDIS_PREFIX}:console:{ip:127.0.0.1}:login:*`);
    expect(keys.length).toBeGreaterThan(0);
    await h.redis.del(...keys);
    expect((await login(a.user.username, a.password)).statusCode).toBe(200);
  });

  it('counts an IPv6 client by its /64: rotating addresses inside one prefix does not reset the count', async () => {
    const a = await h.account();
    const ips = Array.from({ length: 6 }, (_, i) => `2001:db8:1:2::${(i + 1).toString(16)}`);
    const codes = [];
    for (const ip of ips) codes.push((await login(a.user.username, 'wrong-password', ip)).statusCode);
    expect(codes).toEqual([401, 401, 401, 429, 429, 429]);
    // Another /64 is another client; an IPv4 client mapped into IPv6 is the IPv4 one.
    expect((await login(a.user.username, a.password, '2001:db8:1:3::1')).statusCode).toBe(200);
    const b = await h.account();
    for (let i = 0; i < 3; i++) await login(b.user.username, 'wrong-password', '10.7.7.7');
    expect((await login(b.user.username, b.password, '::ffff:10.7.7.7')).statusCode).toBe(429);
  });

  it('counts guesses of the current password on a password change like login attempts', async () => {
    const a = await h.account();
    const change = (original: string) => h.app.inject({
      method: 'PUT', url: '/api/user/self', headers: a.auth, remoteAddress: '10.2.2.2',
      payload: { password: 'a brand new password 1', original_password: original },
    });
    const codes = [];
    for (let i = 0; i < 4; i++) codes.push((await change(`wrong guess ${i}`)).statusCode);
    expect(codes).toEqual([401, 401, 401, 429]);
    expect((await change(a.password)).statusCode).toBe(429);
  });

  it('answers a password change without original_password with 400 naming it, not counted as a guess', async () => {
    const a = await h.account();
    const change = (payload: object) => h.app.inject({
      method: 'PUT', url: '/api/user/self', headers: a.auth, remoteAddress: '10.3.3.3', payload: { password: 'a brand new password 2', ...payload },
    });
    for (let i = 0; i < 5; i++) {
      for (const payload of [{}, { original_password: '' }]) {
        const res = await change(payload);
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json()).toEqual({ success: false, message: 'original_password: is required to change the password' });
      }
    }
    // None of them counted: the limit (3) still allows the real change, and the password is unchanged until then.
    expect((await login(a.user.username, a.password, '10.3.3.3')).statusCode).toBe(200);
    const res = await change({ original_password: a.password });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('counts parallel guesses too', async () => {
    const a = await h.account();
    const results = await Promise.all(Array.from({ length: 10 }, () => login(a.user.username, 'wrong-password', '10.1.1.1')));
    expect(results.filter((r) => r.statusCode === 401)).toHaveLength(3);
    expect(results.filter((r) => r.statusCode === 429)).toHaveLength(7);
  });
});

describe('sessions and access tokens', () => {
  it('a session expires after SESSION_TTL_SEC', async () => {
    const a = await h.account();
    expect((await self(a.token)).statusCode).toBe(200);
    clock += 3599;
    expect((await self(a.token)).statusCode).toBe(200);
    clock += 2;
    const expired = await self(a.token);
    expect(expired.statusCode).toBe(401);
    expect(expired.json()).toEqual({ success: false, message: 'access token is invalid, expired or revoked' });
  });

  it('logout revokes the presented session only', async () => {
    const a = await h.account();
    const second = (await login(a.user.username, a.password)).json().data.token as string;
    const out = await h.app.inject({ method: 'POST', url: '/api/user/logout', headers: a.auth });
    expect(out.json()).toEqual({ success: true, message: '' });
    expect((await self(a.token)).statusCode).toBe(401);
    expect((await self(second)).statusCode).toBe(200);
  });

  it('DELETE /api/user/token revokes access tokens; GET /api/user/token regenerates one', async () => {
    const a = await h.account();
    const access = (await h.app.inject({ method: 'GET', url: '/api/user/token', headers: a.auth })).json().data as string;
    expect((await self(access)).statusCode).toBe(200);
    const del = await h.app.inject({ method: 'DELETE', url: '/api/user/token', headers: a.auth });
    expect(del.json()).toEqual({ success: true, message: '', data: { revoked: 1 } });
    expect((await self(access)).statusCode).toBe(401);
    expect((await self(a.token)).statusCode).toBe(200);
    const fresh = (await h.app.inject({ method: 'GET', url: '/api/user/token', headers: a.auth })).json().data as string;
    expect(fresh).not.toBe(access);
    expect((await self(fresh)).statusCode).toBe(200);
  });
});
