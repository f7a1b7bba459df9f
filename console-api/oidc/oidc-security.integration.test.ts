// OpenID Connect sign-on against what a taker or a hostile provider can do (moved from the review's
// probe): a minimal OpenID provider is started here on 127.0.0.1 (discovery, token endpoint, JWKS) that
// hands the console an ID token with the claims each test chooses, signed with its key or with another
// key. oidc.integration.test.ts runs the ordinary flows against a full provider (oidc-provider).
import { createServer, type Server } from 'node:http';
import { createSign, generateKeyPairSync, type KeyObject, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, startConsoleHarness, uniqueName } from '../../tests/harness/console-harness.js';
import { isOidcIdConflict } from './oidc-routes.js';

const CLIENT_ID = 'security-client';
const CLIENT_SECRET = 'security-client-secret';
const PROXY = '10.200.7.8';

const opKey = generateKeyPairSync('rsa', { modulusLength: 2048 });
const otherKey = generateKeyPairSync('rsa', { modulusLength: 2048 });

/** What the token endpoint answers for a code: the ID token's claims and the key that signs it. */
const codes = new Map<string, { claims: Record<string, unknown>; key: KeyObject }>();

let h: ConsoleHarness;
let op: Server;
let issuer = '';

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
function jwt(claims: Record<string, unknown>, key: KeyObject): string {
  const head = `${b64({ alg: 'RS256', typ: 'JWT', kid: 'k1' })}.${b64(claims)}`;
  return `${head}.${createSign('RSA-SHA256').update(head).sign(key).toString('base64url')}`;
}

beforeAll(async () => {
  op = createServer((req, res) => {
    const url = new URL(req.url!, issuer);
    const json = (v: unknown) => { res.setHeader('content-type', 'application/json'); res.end(JSON.stringify(v)); };
    if (url.pathname === '/.well-known/openid-configuration') {
      return json({
        issuer, authorization_endpoint: `${issuer}/auth`, token_endpoint: `${issuer}/token`, jwks_uri: `${issuer}/jwks`,
        userinfo_endpoint: `${issuer}/me`, response_types_supported: ['code'], subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'], code_challenge_methods_supported: ['S256'],
      });
    }
    if (url.pathname === '/jwks') return json({ keys: [{ ...opKey.publicKey.export({ format: 'jwk' }), kid: 'k1', use: 'sig', alg: 'RS256' }] });
    if (url.pathname === '/token') {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const code = new URLSearchParams(body).get('code') ?? '';
        const what = codes.get(code);
        codes.delete(code);
        if (!what) { res.statusCode = 400; return json({ error: 'invalid_grant' }); }
        json({ access_token: 'at', token_type: 'Bearer', expires_in: 60, id_token: jwt(what.claims, what.key) });
      });
      return;
    }
    res.statusCode = 404;
    res.end();
  });
  await new Promise<void>((r) => op.listen(0, '127.0.0.1', r));
  issuer = `http://127.0.0.1:${(op.address() as AddressInfo).port}`;
  h = await startConsoleHarness({ TRUSTED_PROXIES: PROXY, REGISTER_RATE_LIMIT: '2' });
  await setOptions({ 'oidc.enabled': 'true', 'oidc.well_known': issuer, 'oidc.client_id': CLIENT_ID, 'oidc.client_secret': CLIENT_SECRET });
});
afterAll(async () => {
  await h?.close();
  op?.closeAllConnections();
  await new Promise((r) => op?.close(r));
});

async function setOptions(values: Record<string, string>): Promise<void> {
  for (const [key, value] of Object.entries(values)) {
    await h.sql`INSERT INTO options (key, value) VALUES (${key}, ${value}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
  }
}

/** A client address of its own per test: accounts created by sign-on count against REGISTER_RATE_LIMIT (2). */
let addresses = 0;
const freshAddress = () => `10.77.${Math.floor(++addresses / 250)}.${addresses % 250 + 1}`;

interface Started { state: string; nonce: string; browser: string; cookieName: string; ip: string }

/** GET /api/oauth/oidc/start from a browser (optionally holding a binding cookie already). */
async function start(opts: { auth?: Record<string, string>; cookies?: Record<string, string>; https?: boolean; query?: string; ip?: string } = {}): Promise<Started> {
  const ip = opts.ip ?? freshAddress();
  const res = await h.app.inject({
    method: 'GET', url: `/api/oauth/oidc/start${opts.query ?? ''}`,
    headers: { ...(opts.auth ?? {}), ...(opts.https ? { 'x-forwarded-proto': 'https' } : {}) },
    remoteAddress: opts.https ? PROXY : ip,
    ...(opts.cookies ? { cookies: opts.cookies } : {}),
  });
  expect(res.statusCode, res.body).toBe(200);
  const url = new URL(res.json().data.authorization_url as string);
  const cookie = res.cookies.find((c) => c.name.endsWith('console_oidc'))!;
  return { state: url.searchParams.get('state')!, nonce: url.searchParams.get('nonce')!, browser: cookie.value, cookieName: cookie.name, ip };
}

/** The provider's redirect back, in a browser holding `s.browser` as its binding cookie (by default). */
async function finish(s: Started, sub: string, extra: Record<string, unknown> = {},
  opts: { cookies?: Record<string, string>; key?: KeyObject; navigate?: boolean; https?: boolean } = {}) {
  const code = randomBytes(12).toString('hex');
  const now = Math.floor(Date.now() / 1000);
  codes.set(code, {
    claims: { iss: issuer, aud: CLIENT_ID, sub, iat: now, exp: now + 300, nonce: s.nonce, email: `${sub}@example.test`, email_verified: true, ...extra },
    key: opts.key ?? opKey.privateKey,
  });
  return h.app.inject({
    method: 'GET', url: `/api/oauth/oidc?code=${code}&state=${encodeURIComponent(s.state)}`,
    headers: { ...(opts.navigate ? { 'sec-fetch-mode': 'navigate' } : {}), ...(opts.https ? { 'x-forwarded-proto': 'https' } : {}) },
    remoteAddress: opts.https ? PROXY : s.ip,
    cookies: opts.cookies ?? { [s.cookieName]: s.browser },
  });
}

const REVOKED_BINDING = 'the sign-on could not be completed (the credential that started the binding was signed out or revoked, or the account is banned); log in and start again';

describe('binding an identity: only while the credential that started it is live', () => {
  it('refuses a binding whose session a password change revoked meanwhile; the change also unbinds an identity bound before', async () => {
    const owner = await h.account();
    const stolen = owner.token; // a taker's copy of the owner's session
    const s = await start({ auth: { authorization: `Bearer ${stolen}` } });
    // An identity a stolen session bound earlier, and the owner changing the password from a new session.
    const earlier = uniqueName('atk0');
    expect((await finish(await start({ auth: owner.auth }), earlier)).json().data.id).toBe(owner.user.id);
    const fresh = await h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username: owner.user.username, password: owner.password } });
    const change = await h.app.inject({
      method: 'PUT', url: '/api/user/self', headers: { authorization: `Bearer ${fresh.json().data.token}` },
      payload: { password: 'a new password 123', original_password: owner.password },
    });
    expect(change.statusCode).toBe(200);
    expect((await h.app.inject({ method: 'GET', url: '/api/user/self', headers: { authorization: `Bearer ${stolen}` } })).statusCode).toBe(401);
    // The taker finishes the binding it started, with an identity of its own at the provider.
    const attackerSub = uniqueName('atk');
    const bound = await finish(s, attackerSub);
    expect(bound.statusCode).toBe(400);
    expect(bound.json()).toEqual({ success: false, message: REVOKED_BINDING });
    const [row] = await h.sql<{ oidc_id: string }[]>`SELECT oidc_id FROM users WHERE id = ${owner.user.id}`;
    expect(row!.oidc_id).toBe('');
    for (const sub of [attackerSub, earlier]) {
      const signIn = await finish(await start(), sub);
      expect(signIn.json().data?.id).not.toBe(owner.user.id);
    }
  });

  it('refuses a binding started with an access token revoked meanwhile, and one of an account banned meanwhile', async () => {
    const owner = await h.account();
    const access = (await h.app.inject({ method: 'GET', url: '/api/user/token', headers: owner.auth })).json().data as string;
    const s = await start({ auth: { authorization: `Bearer ${access}` } });
    // A new access token revokes the previous one.
    expect((await h.app.inject({ method: 'GET', url: '/api/user/token', headers: owner.auth })).statusCode).toBe(200);
    expect((await finish(s, uniqueName('atk'))).json()).toEqual({ success: false, message: REVOKED_BINDING });

    const root = await h.account({ role: 100 });
    const other = await h.account();
    const started = await start({ auth: other.auth });
    const manage = (action: string) => h.app.inject({ method: 'POST', url: '/api/user/manage', headers: root.auth, payload: { id: other.user.id, action } });
    expect((await manage('disable')).statusCode).toBe(200);
    expect((await manage('enable')).statusCode).toBe(200);
    expect((await finish(started, uniqueName('atk'))).json()).toEqual({ success: false, message: REVOKED_BINDING });
    // A live credential still binds.
    const sub = uniqueName('own');
    const fresh = await h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username: other.user.username, password: other.password } });
    expect((await finish(await start({ auth: { authorization: `Bearer ${fresh.json().data.token}` } }), sub)).json()).toMatchObject({ success: true, data: { id: other.user.id, token: '' } });
  });

  it('an identity a stolen session bound stays banned with the account, and is unbound when the account is enabled again', async () => {
    const root = await h.account({ role: 100 });
    const owner = await h.account();
    const attackerSub = uniqueName('atk');
    expect((await finish(await start({ auth: owner.auth }), attackerSub)).json().data.id).toBe(owner.user.id);
    const manage = (action: string) => h.app.inject({ method: 'POST', url: '/api/user/manage', headers: root.auth, payload: { id: owner.user.id, action } });
    expect((await manage('disable')).statusCode).toBe(200);
    // Banned: the identity answers ACCOUNT_BANNED (it does not create a fresh account either).
    expect((await finish(await start(), attackerSub)).statusCode).toBe(403);
    expect((await manage('enable')).statusCode).toBe(200);
    const signIn = await finish(await start(), attackerSub);
    expect(signIn.json().data?.id, 'the taker\'s sign-on identity should not come back with the unban').not.toBe(owner.user.id);

    // The same through PUT /api/user/ (status 2, then 1), and an administrator's password reset.
    const second = await h.account();
    const sub2 = uniqueName('atk');
    expect((await finish(await start({ auth: second.auth }), sub2)).json().data.id).toBe(second.user.id);
    const put = (payload: Record<string, unknown>) => h.app.inject({ method: 'PUT', url: '/api/user/', headers: root.auth, payload: { id: second.user.id, ...payload } });
    expect((await put({ status: 2 })).statusCode).toBe(200);
    expect((await h.sql<{ oidc_id: string }[]>`SELECT oidc_id FROM users WHERE id = ${second.user.id}`)[0]!.oidc_id).toBe(sub2);
    expect((await put({ status: 1 })).statusCode).toBe(200);
    expect((await h.sql<{ oidc_id: string }[]>`SELECT oidc_id FROM users WHERE id = ${second.user.id}`)[0]!.oidc_id).toBe('');
    const sub3 = uniqueName('atk');
    const fresh = await h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username: second.user.username, password: second.password } });
    expect((await finish(await start({ auth: { authorization: `Bearer ${fresh.json().data.token}` } }), sub3)).statusCode).toBe(200);
    expect((await put({ password: 'an admin set password 1' })).statusCode).toBe(200);
    expect((await h.sql<{ oidc_id: string }[]>`SELECT oidc_id FROM users WHERE id = ${second.user.id}`)[0]!.oidc_id).toBe('');
  });
});

describe('the browser binding cookie over HTTPS', () => {
  it('is __Host-console_oidc (Secure, Path=/) and only that name is read: a planted console_oidc signs no one in', async () => {
    // The attacker plants console_oidc=K (Domain=<parent>, or from http://), then starts a sign-on
    // itself presenting K.
    const planted = 'P'.repeat(43);
    const s = await start({ cookies: { console_oidc: planted }, https: true });
    expect(s.cookieName).toBe('__Host-console_oidc');
    expect(s.browser).not.toBe(planted);
    const started = await h.app.inject({
      method: 'GET', url: '/api/oauth/oidc/start', headers: { 'x-forwarded-proto': 'https' }, remoteAddress: PROXY,
    });
    expect(started.cookies.find((c) => c.name === '__Host-console_oidc')).toMatchObject({ path: '/', secure: true, httpOnly: true, sameSite: 'Lax' });
    expect(started.cookies.find((c) => c.name === 'console_oidc')).toBeUndefined();
    // The victim's browser follows the attacker's callback link (a top-level navigation: Lax cookies sent).
    const res = await finish(s, uniqueName('attacker'), {}, { cookies: { console_oidc: planted }, navigate: true, https: true });
    expect(res.statusCode).toBe(400);
    expect(res.cookies.find((c) => c.name.endsWith('console_session'))).toBeUndefined();
    // A __Host- binding the browser has is kept (two tabs), and its own callback signs in.
    const again = await start({ cookies: { '__Host-console_oidc': s.browser }, https: true });
    expect(again.browser).toBe(s.browser);
    const own = await finish(again, uniqueName('own'), {}, { navigate: true, https: true });
    expect(own.statusCode).toBe(303);
    expect(own.cookies.find((c) => c.name === '__Host-console_session')).toBeDefined();
  });
});

describe('the ID token and its claims', () => {
  it('refuses an ID token signed with a key not in the provider\'s JWKS', async () => {
    const sub = uniqueName('forged');
    const res = await finish(await start(), sub, {}, { key: otherKey.privateKey });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(/^the sign-on could not be completed/);
    const [n] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM users WHERE oidc_id = ${sub}`;
    expect(n!.n).toBe(0);
  });

  it('oidc.allowed_email_domains: an address with two @ ("x@corp.test@evil.org") is refused, one plain address in the domain passes', async () => {
    await setOptions({ 'oidc.allowed_email_domains': 'corp.test' });
    try {
      for (const email of ['x@corp.test@evil.org', 'x@evil.org@corp.test', '"x@corp.test"@evil.org']) {
        const res = await finish(await start(), uniqueName('dom'), { email, email_verified: true });
        expect(res.statusCode, email).toBe(403);
      }
      const sub = uniqueName('dom');
      expect((await finish(await start(), sub, { email: `${sub}@corp.test` })).statusCode).toBe(200);
    } finally {
      await setOptions({ 'oidc.allowed_email_domains': '' });
    }
    // Without a domain rule such an address is no address: the account is made without it.
    const sub = uniqueName('dom');
    const made = await finish(await start(), sub, { email: 'y@corp.test@evil.org' });
    expect(made.statusCode).toBe(200);
    const [row] = await h.sql<{ email: string }[]>`SELECT email FROM users WHERE oidc_id = ${sub}`;
    expect(row!.email).toBe('');
  });
});

describe('account creation by sign-on', () => {
  it('counts against REGISTER_RATE_LIMIT (2 here) with password registrations, invitation rewards included; a sign-in does not', async () => {
    const inviter = await h.account();
    const ip = freshAddress();
    await setOptions({ QuotaForInvitee: '1000', QuotaForInviter: '500' });
    try {
      const reg = await h.app.inject({ method: 'POST', url: '/api/user/register', remoteAddress: ip, payload: { username: uniqueName('r').slice(0, 20), password: 'password123' } });
      expect(reg.statusCode).toBe(200);
      const made: number[] = [];
      const subs: string[] = [];
      for (let i = 0; i < 3; i++) {
        subs.push(uniqueName('farm'));
        made.push((await finish(await start({ query: `?aff_code=${inviter.user.aff_code}`, ip }), subs[i]!)).statusCode);
      }
      expect(made).toEqual([200, 429, 429]);
      const [inv] = await h.sql<{ aff_count: number }[]>`SELECT aff_count FROM users WHERE id = ${inviter.user.id}`;
      expect(inv!.aff_count).toBe(1);
      expect((await h.app.inject({ method: 'POST', url: '/api/user/register', remoteAddress: ip, payload: { username: uniqueName('r').slice(0, 20), password: 'password123' } })).statusCode).toBe(429);
      // The identity that has an account signs in from the same address.
      expect((await finish(await start({ ip }), subs[0]!)).statusCode).toBe(200);
    } finally {
      await setOptions({ QuotaForInvitee: '0', QuotaForInviter: '0' });
    }
  });
});

describe('claims a provider passes on from what its user typed: registration\'s checks, a legitimate sign-in not refused', () => {
  const displayNameOf = async (sub: string) =>
    (await h.sql<{ display_name: string; username: string }[]>`SELECT display_name, username FROM users WHERE oidc_id = ${sub}`)[0]!;

  it('a name with bidi overrides, ANSI escapes, line breaks, zero-width characters or NUL is stored without them (registration refuses them)', async () => {
    const reg = await h.app.inject({ method: 'POST', url: '/api/user/register', remoteAddress: freshAddress(),
      payload: { username: uniqueName(), password: 'password-1234', display_name: 'support\u202Etroppus' } });
    expect(reg.json()).toEqual({ success: false, message: 'display_name: must not contain control or invisible formatting characters' });
    for (const [name, stored] of [
      ['support\u202Etroppus', 'supporttroppus'],
      ['line1\nline2\u001b[31mred\u001b[0m', 'line1 line2red'],
      ['zero\u200Bwidth\uFEFF', 'zerowidth'],
      ['a\u0000b', 'ab'],
      ['\u2066Ada\u2069 \u061CLovelace', 'Ada Lovelace'],
    ] as const) {
      const sub = uniqueName('nm');
      const res = await finish(await start(), sub, { name });
      expect(res.statusCode, `${JSON.stringify(name)}: ${res.body}`).toBe(200);
      expect((await displayNameOf(sub)).display_name, JSON.stringify(name)).toBe(stored);
    }
  });

  it('a name of nothing but such characters (or not a string) leaves the username as the display name', async () => {
    for (const name of ['\u202E\u200B\u0000', '\u001b[31m', { first: 'x' }]) {
      const sub = uniqueName('nm');
      expect((await finish(await start(), sub, { name })).statusCode).toBe(200);
      const row = await displayNameOf(sub);
      expect(row.display_name, JSON.stringify(name)).toBe(row.username);
    }
  });

  it('a long name is cut to 50 characters at a character boundary: no half surrogate pair (U+FFFD), no split emoji sequence', async () => {
    for (const [name, stored] of [
      [`a${'😀'.repeat(30)}`, `a${'😀'.repeat(24)}`],
      [`${'x'.repeat(45)}👨‍👩‍👧`, 'x'.repeat(45)],
      ['y'.repeat(80), 'y'.repeat(50)],
    ] as const) {
      const sub = uniqueName('emo');
      expect((await finish(await start(), sub, { name })).statusCode).toBe(200);
      const row = await displayNameOf(sub);
      expect(row.display_name).toBe(stored);
      expect(row.display_name).not.toContain('\uFFFD');
    }
  });

  it('a username derived from astral letters or look-alike scripts passes registration\'s rules (at most 20, no U+FFFD)', async () => {
    for (const preferred of ['𝐀𝐁𝐂𝐃𝐄𝐅𝐆𝐇𝐈𝐉𝐊𝐋𝐌𝐍𝐎𝐏', 'аdmin', 'ab']) {
      const sub = uniqueName('un');
      expect((await finish(await start(), sub, { preferred_username: preferred })).statusCode).toBe(200);
      const { username } = await displayNameOf(sub);
      expect(username.length, username).toBeLessThanOrEqual(20);
      expect(username).not.toContain('\uFFFD');
      expect(username).toMatch(/^[^\s\p{C}]{3,20}$/u);
    }
  });

  it('an e-mail address with a NUL or another control character is no address: the account is made without it (it answered 500)', async () => {
    for (const email of ['a\u0000b@example.test', 'a@example.test\u0000', 'a\u001b@example.test', 'a@example.test\t']) {
      const sub = uniqueName('nule');
      const res = await finish(await start(), sub, { email });
      expect(res.statusCode, res.body).toBe(200);
      const [row] = await h.sql<{ email: string }[]>`SELECT email FROM users WHERE oidc_id = ${sub}`;
      expect(row!.email, JSON.stringify(email)).toBe('');
    }
  });

  it('a bound identity whose provider now sends its address with a trailing tab or line break still signs in (it answered 400 on every sign-in)', async () => {
    const sub = uniqueName('tab');
    expect((await finish(await start(), sub, { email: `${sub}@example.test` })).statusCode).toBe(200);
    for (const email of [`${sub}@example.test\t`, `${sub}@example.test\r\n`]) {
      const res = await finish(await start(), sub, { email });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().data.token).toBeTruthy();
    }
    const [row] = await h.sql<{ email: string }[]>`SELECT email FROM users WHERE oidc_id = ${sub}`;
    expect(row!.email).toBe(`${sub}@example.test`);
  });

  it('addresses registration\'s z.email() refuses but a provider asserts (IDN domains, RFC 5322 atext) are kept', async () => {
    for (const local of ['first~last', 'ops&billing', 'a=b', 'x#y', 'x!y', 'x/y', 'x%y', 'иван']) {
      for (const domain of ['xn--80a1acny.xn--p1ai', 'münchen.de', 'corp.example']) {
        const sub = uniqueName('idn');
        const email = `${local}.${randomBytes(4).toString('hex')}@${domain}`;
        expect((await finish(await start(), sub, { email })).statusCode, email).toBe(200);
        const [row] = await h.sql<{ email: string }[]>`SELECT email FROM users WHERE oidc_id = ${sub}`;
        expect(row!.email, email).toBe(email);
      }
    }
    // Not addresses: an empty local part, a domain that is no host name, spaces or invisible characters.
    for (const email of ['@corp.example', 'x@', 'x@-corp.example', 'x@corp..example', 'x@corp', 'x@1.2.3.4', 'x@under_score.example',
      'x@xn--zz.example', 'a b@corp.example', 'x\u200B@corp.example', 'x\u00A0y@corp.example']) {
      const sub = uniqueName('nota');
      expect((await finish(await start(), sub, { email })).statusCode, email).toBe(200);
      const [row] = await h.sql<{ email: string }[]>`SELECT email FROM users WHERE oidc_id = ${sub}`;
      expect(row!.email, JSON.stringify(email)).toBe('');
    }
  });

  it('oidc.allowed_email_domains is compared in punycode on both sides: IDN and atext addresses of an allowed domain sign in, bound ones included', async () => {
    const bound = uniqueName('tilde');
    const u = () => randomBytes(4).toString('hex');
    const boundEmail = `first~last.${u()}@corp.example`;
    expect((await finish(await start(), bound, { email: boundEmail })).statusCode).toBe(200);
    await setOptions({ 'oidc.allowed_email_domains': 'xn--80a1acny.xn--p1ai, MÜNCHEN.de, corp.example' });
    try {
      for (const email of [`ivan${u()}@xn--80a1acny.xn--p1ai`, `ivan${u()}@почта.рф`, `x${u()}@münchen.de`, `x${u()}@xn--mnchen-3ya.de`, `x${u()}@MÜNCHEN.DE`, `ops&billing${u()}@corp.example`]) {
        const res = await finish(await start(), uniqueName('dom'), { email, email_verified: true });
        expect(res.statusCode, `${email}: ${res.body}`).toBe(200);
      }
      expect((await finish(await start(), bound, { email: boundEmail })).statusCode).toBe(200);
      for (const email of [`x${u()}@xn--80a1acny.xn--p1ai.evil.example`, `x${u()}@muenchen.de`, `x${u()}@corp.example\t`]) {
        const res = await finish(await start(), uniqueName('dom'), { email, email_verified: true });
        expect(res.statusCode, email).toBe(403);
      }
    } finally {
      await setOptions({ 'oidc.allowed_email_domains': '' });
    }
  });

  it('an e-mail address registration would refuse (not an address) is no address: the account is made without it', async () => {
    const sub = uniqueName('bad');
    expect((await finish(await start(), sub, { email: 'x\u200B@example.test' })).statusCode).toBe(200);
    const [row] = await h.sql<{ email: string }[]>`SELECT email FROM users WHERE oidc_id = ${sub}`;
    expect(row!.email).toBe('');
  });

  it('a subject longer than 255 characters, or with a NUL or control character: a clear 400, nothing created (it answered 409 "was just bound" or 500)', async () => {
    const message = 'the sign-on identity\'s subject (the ID token\'s sub) is longer than 255 characters or contains control characters; this provider cannot be used for sign-on';
    const accounts = async () => (await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM users`)[0]!.n;
    const before = await accounts();
    for (const sub of [randomBytes(4000).toString('hex'), 's'.repeat(256), `a\u0000b${uniqueName()}`, `a\nb${uniqueName()}`]) {
      const res = await finish(await start(), sub, { email: `${uniqueName('sub')}@example.test` });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toEqual({ success: false, message });
    }
    expect(await accounts()).toBe(before);
    // 255 characters is a subject.
    const longest = `${uniqueName('s')}${'s'.repeat(244)}`;
    expect(longest.length).toBe(255);
    expect((await finish(await start(), longest)).statusCode).toBe(200);
  });

  it('STATE_CONFLICT ("just bound") only for the unique violation on users_oidc_id (23505), not for Postgres\' index row size error', async () => {
    const a = await h.account();
    const b = await h.account();
    const sub = uniqueName('dup');
    await h.sql`UPDATE users SET oidc_id = ${sub} WHERE id = ${a.user.id}`;
    const duplicate = await h.sql`UPDATE users SET oidc_id = ${sub} WHERE id = ${b.user.id}`.catch((e: unknown) => e);
    expect(isOidcIdConflict(duplicate)).toBe(true);
    const tooBig = await h.sql`UPDATE users SET oidc_id = ${randomBytes(4000).toString('hex')} WHERE id = ${b.user.id}`.catch((e: unknown) => e);
    expect((tooBig as { constraint_name?: string }).constraint_name).toBe('users_oidc_id');
    expect(isOidcIdConflict(tooBig)).toBe(false);
  });
});

describe('GET /api/oauth/oidc/start: a per-address limit; unused states expire', () => {
  let limited: ConsoleHarness;
  let clock = Math.floor(Date.now() / 1000);
  beforeAll(async () => {
    limited = await startConsoleHarness({}, { now: () => clock, settings: { LOGIN_IP_RATE_LIMIT: 3, LOGIN_RATE_WINDOW_SEC: 60 } });
    for (const [key, value] of Object.entries({ 'oidc.enabled': 'true', 'oidc.well_known': issuer, 'oidc.client_id': CLIENT_ID, 'oidc.client_secret': CLIENT_SECRET })) {
      await limited.sql`INSERT INTO options (key, value) VALUES (${key}, ${value}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
    }
  });
  afterAll(async () => {
    await limited?.close();
  });
  const startFrom = (ip: string) => limited.app.inject({ method: 'GET', url: '/api/oauth/oidc/start', remoteAddress: ip });
  const states = async () => (await limited.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM oidc_states`)[0]!.n;

  it('LOGIN_IP_RATE_LIMIT starts per client address per LOGIN_RATE_WINDOW_SEC, then 429 with Retry-After writing nothing; other addresses go on', async () => {
    const before = await states();
    for (let i = 0; i < 3; i++) expect((await startFrom('192.0.2.50')).statusCode).toBe(200);
    const refused = await startFrom('192.0.2.50');
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toEqual({ success: false, message: expect.stringMatching(/^too many sign-on starts from this address; retry in \d+ s$/) });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(await states()).toBe(before + 3);
    // An IPv6 client is counted by its /64, as the login limit.
    for (let i = 0; i < 3; i++) expect((await startFrom(`2001:db8:0:7::${i + 1}`)).statusCode).toBe(200);
    expect((await startFrom('2001:db8:0:7::99')).statusCode).toBe(429);
    expect((await startFrom('192.0.2.51')).statusCode).toBe(200);
  });

  it('states unused for 10 minutes are deleted by the next start', async () => {
    expect((await startFrom('192.0.2.60')).statusCode).toBe(200);
    expect(await states()).toBeGreaterThan(1);
    clock += 601;
    expect((await startFrom('192.0.2.61')).statusCode).toBe(200);
    expect(await states()).toBe(1);
  });
});
