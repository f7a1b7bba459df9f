// The web console's sign-in and its serving: the session cookie (HttpOnly, SameSite=Strict), the CSRF
// token every cookie-authenticated write needs, the `__Host-` names over HTTPS (a trusted proxy's
// X-Forwarded-Proto) that a planted unprefixed pair cannot stand in for, the Bearer header unaffected,
// the CSP, and the static files with a single-page fallback that never answers for /api/.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, startConsoleHarness } from '../../tests/harness/console-harness.js';
import { CSRF_COOKIE, csrfTokenOf, SESSION_COOKIE } from './browser-session.js';

const PROXY_BLOCK = '10.200.0.0/16';
/** A TLS-terminating proxy listed in TRUSTED_PROXIES. */
const PROXY = '10.200.7.8';
const HTTPS = { 'x-forwarded-proto': 'https' };

let h: ConsoleHarness;
let webDir: string;
beforeAll(async () => {
  webDir = mkdtempSync(join(tmpdir(), 'console-web-'));
  mkdirSync(join(webDir, 'assets'));
  writeFileSync(join(webDir, 'index.html'), '<!doctype html><title>console</title><script type="module" src="/assets/app-abc123.js"></script>');
  writeFileSync(join(webDir, 'assets', 'app-abc123.js'), 'console.log("app")');
  h = await startConsoleHarness({ CONSOLE_WEB_DIR: webDir, TRUSTED_PROXIES: PROXY_BLOCK });
});
afterAll(async () => {
  await h?.close();
  rmSync(webDir, { recursive: true, force: true });
});

interface SetCookie { name: string; value: string; httpOnly?: boolean; sameSite?: string; path?: string; maxAge?: number; secure?: boolean; domain?: string }

async function cookieLogin(username: string, password: string) {
  const res = await h.app.inject({
    method: 'POST', url: '/api/user/login', payload: { username, password }, headers: { 'x-console-session': 'cookie' },
  });
  const cookies = res.cookies as SetCookie[];
  return { res, session: cookies.find((c) => c.name === SESSION_COOKIE), csrf: cookies.find((c) => c.name === CSRF_COOKIE) };
}

describe('cookie sign-in', () => {
  it('sets an HttpOnly SameSite=Strict session cookie and a readable CSRF cookie; the body carries no token', async () => {
    const a = await h.account();
    const { res, session, csrf } = await cookieLogin(a.user.username, a.password);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ username: a.user.username, token: '' });
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/' });
    expect(session!.value).toMatch(/^[0-9a-f]{64}$/);
    expect(session!.maxAge).toBe(h.config.SESSION_TTL_SEC);
    expect(csrf!.httpOnly).toBeFalsy();
    expect(csrf).toMatchObject({ sameSite: 'Strict', value: csrfTokenOf(session!.value) });
    // Plain HTTP (a local stack): no Secure, no `__Host-` name, which a browser would refuse there.
    expect(res.cookies.map((c) => c.name).sort()).toEqual([CSRF_COOKIE, SESSION_COOKIE].sort());
    for (const c of [session!, csrf!]) expect(c.secure).toBeFalsy();
  });

  it('a failed login sets no cookie; a login without the header still answers the token (API clients)', async () => {
    const a = await h.account();
    const bad = await cookieLogin(a.user.username, 'wrong-password');
    expect(bad.res.statusCode).toBe(401);
    expect(bad.session).toBeUndefined();
    const plain = await h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username: a.user.username, password: a.password } });
    expect(plain.json().data.token).toMatch(/^[0-9a-f]{64}$/);
    expect(plain.cookies).toHaveLength(0);
  });

  it('authenticates reads and writes by the cookie with the CSRF header; refuses a write without it', async () => {
    const a = await h.account();
    const { session, csrf } = await cookieLogin(a.user.username, a.password);
    const cookies = { [SESSION_COOKIE]: session!.value, [CSRF_COOKIE]: csrf!.value };

    const read = await h.app.inject({ method: 'GET', url: '/api/user/self', cookies, headers: { 'x-csrf-token': csrf!.value } });
    expect(read.statusCode).toBe(200);
    expect(read.json().data.username).toBe(a.user.username);

    const key = { name: 'cookie-key', expired_time: -1, remain_quota: 0, unlimited_quota: true };
    const forged = await h.app.inject({ method: 'POST', url: '/api/token/', cookies, payload: key });
    expect(forged.statusCode).toBe(403);
    expect(forged.json()).toEqual({ success: false, message: expect.stringContaining('X-CSRF-Token') });
    const wrong = await h.app.inject({ method: 'POST', url: '/api/token/', cookies, payload: key, headers: { 'x-csrf-token': csrfTokenOf('another-session') } });
    expect(wrong.statusCode).toBe(403);
    const [before] = await h.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM tokens WHERE user_id = ${a.user.id}`;
    expect(before!.count).toBe(0);

    const write = await h.app.inject({ method: 'POST', url: '/api/token/', cookies, payload: key, headers: { 'x-csrf-token': csrf!.value } });
    expect(write.statusCode).toBe(200);
    const [after] = await h.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM tokens WHERE user_id = ${a.user.id}`;
    expect(after!.count).toBe(1);

    // A read without the header is anonymous: a side-effecting GET (a new access token) is refused.
    const anonymous = await h.app.inject({ method: 'GET', url: '/api/user/token', cookies });
    expect(anonymous.statusCode).toBe(401);
  });

  it('logout revokes the session and clears both cookies', async () => {
    const a = await h.account();
    const { session, csrf } = await cookieLogin(a.user.username, a.password);
    const cookies = { [SESSION_COOKIE]: session!.value };
    const headers = { 'x-csrf-token': csrf!.value };
    const out = await h.app.inject({ method: 'POST', url: '/api/user/logout', cookies, headers });
    expect(out.statusCode).toBe(200);
    const cleared = out.cookies as SetCookie[];
    expect(cleared.map((c) => c.name).sort()).toEqual([CSRF_COOKIE, SESSION_COOKIE].sort());
    for (const c of cleared) expect(c.value).toBe('');
    expect((await h.app.inject({ method: 'GET', url: '/api/user/self', cookies, headers })).statusCode).toBe(401);
  });

  it('keeps the cookies on a wrong current password; clears them once the session is revoked', async () => {
    const a = await h.account();
    const { session, csrf } = await cookieLogin(a.user.username, a.password);
    const cookies = { [SESSION_COOKIE]: session!.value };
    const headers = { 'x-csrf-token': csrf!.value };
    const wrong = await h.app.inject({
      method: 'PUT', url: '/api/user/self', cookies, headers, payload: { original_password: 'not-it-at-all', password: 'another-password-1' },
    });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.cookies).toHaveLength(0);
    expect((await h.app.inject({ method: 'GET', url: '/api/user/self', cookies, headers })).statusCode).toBe(200);

    await h.sql`UPDATE access_tokens SET revoked_at = 1 WHERE user_id = ${a.user.id}`;
    const dead = await h.app.inject({ method: 'GET', url: '/api/user/self', cookies, headers });
    expect(dead.statusCode).toBe(401);
    expect((dead.cookies as SetCookie[]).map((c) => [c.name, c.value]).sort()).toEqual([[CSRF_COOKIE, ''], [SESSION_COOKIE, '']]);
  });

  it('a stale session cookie never stands in the way of logging in', async () => {
    const a = await h.account();
    const res = await h.app.inject({
      method: 'POST', url: '/api/user/login', cookies: { [SESSION_COOKIE]: 'f'.repeat(64) },
      headers: { 'x-console-session': 'cookie' }, payload: { username: a.user.username, password: a.password },
    });
    expect(res.statusCode).toBe(200);
    expect((res.cookies as SetCookie[]).find((c) => c.name === SESSION_COOKIE)!.value).toMatch(/^[0-9a-f]{64}$/);
  });

  it('the Bearer header wins over a cookie and needs no CSRF header', async () => {
    const a = await h.account();
    const b = await h.account();
    const { session } = await cookieLogin(b.user.username, b.password);
    const res = await h.app.inject({
      method: 'POST', url: '/api/token/', headers: a.auth, cookies: { [SESSION_COOKIE]: session!.value },
      payload: { name: 'bearer-key', expired_time: -1, remain_quota: 0, unlimited_quota: true },
    });
    expect(res.statusCode).toBe(200);
    const rows = await h.sql<{ user_id: number }[]>`SELECT user_id FROM tokens WHERE name = 'bearer-key'`;
    expect(rows.map((r) => Number(r.user_id))).toEqual([Number(a.user.id)]);
  });
});

describe('cookie sign-in over HTTPS (a trusted proxy\'s X-Forwarded-Proto)', () => {
  const HOST_SESSION = `__Host-${SESSION_COOKIE}`;
  const HOST_CSRF = `__Host-${CSRF_COOKIE}`;

  async function httpsLogin(username: string, password: string, remoteAddress = PROXY) {
    const res = await h.app.inject({
      method: 'POST', url: '/api/user/login', payload: { username, password }, remoteAddress, headers: { 'x-console-session': 'cookie', ...HTTPS },
    });
    return { res, cookies: res.cookies as SetCookie[] };
  }
  const httpsInject = (opts: { method: 'GET' | 'POST'; url: string; cookies: Record<string, string>; headers?: Record<string, string>; payload?: object }) =>
    h.app.inject({ ...opts, remoteAddress: PROXY, headers: { ...HTTPS, ...opts.headers } });

  it('sets __Host- cookies: Secure, Path=/, no Domain; expires the unprefixed names; the body carries no token', async () => {
    const a = await h.account();
    const { res, cookies } = await httpsLogin(a.user.username, a.password);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ username: a.user.username, token: '' });
    const session = cookies.find((c) => c.name === HOST_SESSION);
    const csrf = cookies.find((c) => c.name === HOST_CSRF);
    expect(session).toMatchObject({ httpOnly: true, secure: true, sameSite: 'Strict', path: '/', maxAge: h.config.SESSION_TTL_SEC });
    expect(session!.value).toMatch(/^[0-9a-f]{64}$/);
    expect(csrf).toMatchObject({ secure: true, sameSite: 'Strict', path: '/', value: csrfTokenOf(session!.value) });
    expect(csrf!.httpOnly).toBeFalsy();
    for (const c of [session!, csrf!]) expect(c.domain).toBeUndefined();
    // The unprefixed pair of an earlier sign-in is only expired, never set.
    const legacy = cookies.filter((x) => !x.name.startsWith('__Host-'));
    expect(legacy.map((c) => c.name).sort()).toEqual([CSRF_COOKIE, SESSION_COOKIE].sort());
    for (const c of legacy) expect([c.value, c.maxAge]).toEqual(['', 0]);

    // The __Host- pair signs the browser in: a read, and a write with the CSRF header.
    const headers = { 'x-csrf-token': csrf!.value };
    const read = await httpsInject({ method: 'GET', url: '/api/user/self', cookies: { [HOST_SESSION]: session!.value, [HOST_CSRF]: csrf!.value }, headers });
    expect(read.statusCode).toBe(200);
    expect(read.json().data.username).toBe(a.user.username);
    const key = { name: 'https-cookie-key', expired_time: -1, remain_quota: 0, unlimited_quota: true };
    expect((await httpsInject({ method: 'POST', url: '/api/token/', cookies: { [HOST_SESSION]: session!.value }, payload: key })).statusCode).toBe(403);
    expect((await httpsInject({ method: 'POST', url: '/api/token/', cookies: { [HOST_SESSION]: session!.value }, payload: key, headers })).statusCode).toBe(200);
  });

  it('ignores an unprefixed pair planted by another origin (login CSRF): the attacker\'s session never signs the browser in', async () => {
    const victim = await h.account();
    const attacker = await h.account();
    const planted = { [SESSION_COOKIE]: attacker.token, [CSRF_COOKIE]: csrfTokenOf(attacker.token) };
    const plantedHeader = { 'x-csrf-token': csrfTokenOf(attacker.token) };

    // Only the planted pair: anonymous, never the attacker.
    const alone = await httpsInject({ method: 'GET', url: '/api/user/self', cookies: planted, headers: plantedHeader });
    expect(alone.statusCode).toBe(401);
    const key = { name: 'planted-key', expired_time: -1, remain_quota: 0, unlimited_quota: true };
    const write = await httpsInject({ method: 'POST', url: '/api/token/', cookies: planted, headers: plantedHeader, payload: key });
    expect(write.statusCode).toBe(401);
    const rows = await h.sql<{ count: number }[]>`SELECT count(*)::int AS count FROM tokens WHERE user_id = ${attacker.user.id}`;
    expect(rows[0]!.count).toBe(0);

    // Planted beside the victim's own __Host- pair: the victim stays the victim.
    const { cookies } = await httpsLogin(victim.user.username, victim.password);
    const session = cookies.find((c) => c.name === HOST_SESSION)!.value;
    const both = { ...planted, [HOST_SESSION]: session, [HOST_CSRF]: csrfTokenOf(session) };
    const mine = await httpsInject({ method: 'GET', url: '/api/user/self', cookies: both, headers: { 'x-csrf-token': csrfTokenOf(session) } });
    expect(mine.json().data.username).toBe(victim.user.username);
    expect((await httpsInject({ method: 'GET', url: '/api/user/self', cookies: both, headers: plantedHeader })).statusCode).toBe(401);
  });

  it('logout clears the __Host- cookies login set (Secure, Path=/)', async () => {
    const a = await h.account();
    const { cookies } = await httpsLogin(a.user.username, a.password);
    const session = cookies.find((c) => c.name === HOST_SESSION)!.value;
    const headers = { 'x-csrf-token': csrfTokenOf(session) };
    const out = await httpsInject({ method: 'POST', url: '/api/user/logout', cookies: { [HOST_SESSION]: session }, headers });
    expect(out.statusCode).toBe(200);
    const cleared = out.cookies as SetCookie[];
    expect(cleared.map((c) => c.name).sort()).toEqual([HOST_CSRF, HOST_SESSION].sort());
    for (const c of cleared) expect(c).toMatchObject({ value: '', secure: true, path: '/' });
    expect((await httpsInject({ method: 'GET', url: '/api/user/self', cookies: { [HOST_SESSION]: session }, headers })).statusCode).toBe(401);
  });

  it('X-Forwarded-Proto from an address that is not a trusted proxy changes nothing: plain HTTP names, no Secure', async () => {
    const a = await h.account();
    const { cookies } = await httpsLogin(a.user.username, a.password, '203.0.113.9');
    expect(cookies.map((c) => c.name).sort()).toEqual([CSRF_COOKIE, SESSION_COOKIE].sort());
    for (const c of cookies) expect(c.secure).toBeFalsy();
    // And a plain-HTTP request reads the unprefixed names, as before.
    const session = cookies.find((c) => c.name === SESSION_COOKIE)!.value;
    const read = await h.app.inject({ method: 'GET', url: '/api/user/self', cookies: { [SESSION_COOKIE]: session }, headers: { 'x-csrf-token': csrfTokenOf(session) } });
    expect(read.json().data.username).toBe(a.user.username);
  });
});

describe('web console serving', () => {
  it('serves index.html at / and for client-side routes, with a strict CSP', async () => {
    for (const url of ['/', '/keys', '/admin/channels?x=1']) {
      const res = await h.app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(200);
      expect(res.headers['content-type']).toContain('text/html');
      expect(res.body).toContain('<title>console</title>');
      const csp = String(res.headers['content-security-policy']);
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toContain('unsafe-inline');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
    }
  });

  it('serves hashed assets cacheable; a missing asset is a 404, not the page', async () => {
    const asset = await h.app.inject({ method: 'GET', url: '/assets/app-abc123.js' });
    expect(asset.statusCode).toBe(200);
    expect(asset.headers['content-type']).toContain('javascript');
    expect(asset.headers['cache-control']).toContain('immutable');
    const missing = await h.app.inject({ method: 'GET', url: '/assets/gone-000.js' });
    expect(missing.statusCode).toBe(404);
    // A path climbing out of the directory stays inside it: the page, never the file.
    const escape = await h.app.inject({ method: 'GET', url: '/..%2f..%2f..%2fetc%2fpasswd' });
    expect(escape.body).not.toContain('root:');
    expect(escape.body).toContain('<title>console</title>');
  });

  it('never answers for /api/: unknown API paths stay the envelope 404', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/api/no-such-endpoint' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ success: false, message: 'no such endpoint' });
    const post = await h.app.inject({ method: 'POST', url: '/keys', payload: {} });
    expect(post.statusCode).toBe(404);
  });

  it('the OpenAPI route table holds no static route', () => {
    expect(h.app.routeTable.every((r) => r.url.startsWith('/api/'))).toBe(true);
  });
});
