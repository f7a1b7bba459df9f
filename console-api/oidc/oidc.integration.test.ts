// OpenID Connect sign-on end to end: a local OpenID provider (oidc-provider 9, started here on
// 127.0.0.1, never a real one) and the console as relying party (openid-client 6). The test plays the
// browser: it follows the provider's redirects with its cookies, signs in on the provider's development
// login form, and hands the redirect back to the console's callback.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, startConsoleHarness, uniqueName } from '../../tests/harness/console-harness.js';

const CLIENT_ID = 'gateway-console';
const CLIENT_SECRET = 'a-client-secret-for-the-test-provider';
const REDIRECT_URI = 'http://127.0.0.1:3001/api/oauth/oidc';

/** The provider's users: subject → claims. */
const identities = new Map<string, { email: string; email_verified: boolean; name: string }>();

let h: ConsoleHarness;
let server: Server;
let issuer = '';

beforeAll(async () => {
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_q, r) => r.end();
  server = createServer((req, res) => handler(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const provider = new Provider(issuer, {
    clients: [{
      client_id: CLIENT_ID, client_secret: CLIENT_SECRET, redirect_uris: [REDIRECT_URI],
      grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic',
    }],
    pkce: { required: () => true },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name', 'preferred_username'] },
    cookies: { keys: ['test-cookie-key-0123456789'] },
    features: { devInteractions: { enabled: true } },
    async findAccount(_ctx, sub) {
      const who = identities.get(sub);
      if (!who) return undefined;
      return { accountId: sub, claims: async () => ({ sub, ...who, preferred_username: sub }) };
    },
  });
  handler = provider.callback();
  h = await startConsoleHarness();
  await setOptions({ 'oidc.enabled': 'true', 'oidc.well_known': issuer, 'oidc.client_id': CLIENT_ID, 'oidc.client_secret': CLIENT_SECRET });
});
afterAll(async () => {
  await h?.close();
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
});

async function setOptions(values: Record<string, string>): Promise<void> {
  for (const [key, value] of Object.entries(values)) {
    await h.sql`INSERT INTO options (key, value) VALUES (${key}, ${value}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
  }
}

/** The browser that started each sign-on (by its state): the value of its console_oidc cookie. */
const browserOf = new Map<string, string>();

async function start(headers: Record<string, string> = {}, query = '', browser?: string): Promise<string> {
  const res = await h.app.inject({ method: 'GET', url: `/api/oauth/oidc/start${query}`, headers, ...(browser ? { cookies: { console_oidc: browser } } : {}) });
  expect(res.statusCode).toBe(200);
  const url = new URL(res.json().data.authorization_url as string);
  const cookie = res.cookies.find((c) => c.name === 'console_oidc')!;
  expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/api/oauth/oidc' });
  browserOf.set(url.searchParams.get('state')!, cookie.value);
  expect(url.origin).toBe(issuer);
  expect(url.searchParams.get('code_challenge_method')).toBe('S256');
  expect(url.searchParams.get('state')).toBeTruthy();
  expect(url.searchParams.get('nonce')).toBeTruthy();
  expect(url.searchParams.get('redirect_uri')).toBe(REDIRECT_URI);
  return url.href;
}

/** The browser's part: through the provider's login and consent, to the redirect back to the console. */
async function signInAtProvider(authorizationUrl: string, subject: string): Promise<string> {
  const jar = new Map<string, string>();
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const keep = (res: Response) => {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair!.indexOf('=');
      jar.set(pair!.slice(0, i), pair!.slice(i + 1));
    }
  };
  let url = authorizationUrl;
  for (let step = 0; step < 12; step++) {
    if (url.startsWith(REDIRECT_URI)) return url;
    const res = await fetch(url, { redirect: 'manual', headers: { cookie: cookie() } });
    keep(res);
    if (res.status >= 300 && res.status < 400) {
      url = new URL(res.headers.get('location')!, url).href;
      continue;
    }
    const html = await res.text();
    expect(res.status, html.slice(0, 300)).toBe(200);
    const action = /<form[^>]*action="([^"]+)"/.exec(html)![1]!;
    const prompt = /name="prompt" value="([a-z]+)"/.exec(html)![1]!;
    const form = new URLSearchParams(prompt === 'login' ? { prompt, login: subject, password: 'any' } : { prompt });
    const posted = await fetch(new URL(action, url), {
      method: 'POST', redirect: 'manual', body: form,
      headers: { cookie: cookie(), 'content-type': 'application/x-www-form-urlencoded' },
    });
    keep(posted);
    expect(posted.status).toBeGreaterThanOrEqual(300);
    url = new URL(posted.headers.get('location')!, url).href;
  }
  throw new Error('the provider never redirected back');
}

/** The redirect back, by default in the browser that started the sign-on. */
const callback = (redirect: string, headers: Record<string, string> = {}, browser?: string | null) => {
  const u = new URL(redirect);
  const cookie = browser === undefined ? browserOf.get(u.searchParams.get('state') ?? '') : browser;
  return h.app.inject({ method: 'GET', url: `/api/oauth/oidc${u.search}`, headers, ...(cookie ? { cookies: { console_oidc: cookie } } : {}) });
};

function identity(email?: string, verified = true): string {
  const sub = uniqueName('sub');
  identities.set(sub, { email: email ?? `${sub}@example.test`, email_verified: verified, name: `Person ${sub}` });
  return sub;
}

describe('OpenID Connect sign-on', () => {
  it('creates an account for a new identity, opens a session like login, and signs the same account in again', async () => {
    const sub = identity();
    const res = await callback(await signInAtProvider(await start(), sub));
    expect(res.statusCode).toBe(200);
    const data = res.json().data;
    expect(data.token).toMatch(/^[0-9a-f]{64}$/);
    const self = await h.app.inject({ method: 'GET', url: '/api/user/self', headers: { authorization: `Bearer ${data.token}` } });
    expect(self.json().data).toMatchObject({ id: data.id, oidc_id: sub, email: `${sub}@example.test`, role: 1 });
    const [session] = await h.sql`SELECT kind, expires_at - created_at AS ttl FROM access_tokens WHERE user_id = ${data.id}`;
    expect(session).toEqual({ kind: 'session', ttl: h.config.SESSION_TTL_SEC });

    const again = await callback(await signInAtProvider(await start(), sub));
    expect(again.json().data).toMatchObject({ id: data.id });
    const [count] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM users WHERE oidc_id = ${sub}`;
    expect(count!.n).toBe(1);
  });

  it('signs a browser in to the web console with its session cookies and a redirect to /', async () => {
    const sub = identity();
    const redirect = new URL(await signInAtProvider(await start(), sub));
    const res = await callback(redirect.href, { 'sec-fetch-mode': 'navigate' });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/');
    const cookies = Object.fromEntries(res.cookies.map((c) => [c.name, c]));
    expect(cookies.console_session).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
    expect(cookies.console_csrf!.httpOnly).toBeFalsy();
    // The web console's requests: the session cookie and its CSRF token.
    const self = await h.app.inject({
      method: 'GET', url: '/api/user/self',
      cookies: { console_session: cookies.console_session!.value }, headers: { 'x-csrf-token': cookies.console_csrf!.value },
    });
    expect(self.json().data).toMatchObject({ oidc_id: sub });
  });

  it('uses a state once, refuses an unknown one, and refuses a code exchanged with another flow\'s verifier (PKCE)', async () => {
    const sub = identity();
    const redirect = await signInAtProvider(await start(), sub);
    expect((await callback(redirect)).statusCode).toBe(200);
    const replay = await callback(redirect);
    expect(replay.statusCode).toBe(400);
    expect(replay.json().message).toBe('the sign-on state is unknown, expired or already used, or this browser did not start it; start again from this browser');
    const forged = new URL(redirect);
    forged.searchParams.set('state', 'not-a-state-we-issued');
    expect((await callback(forged.href)).statusCode).toBe(400);

    // Flow A's state with flow B's code: the code is bound to B's challenge, A's verifier fails it.
    const a = new URL(await start());
    const bRedirect = new URL(await signInAtProvider(await start(), sub));
    bRedirect.searchParams.set('state', a.searchParams.get('state')!);
    const mixed = await callback(bRedirect.href);
    expect(mixed.statusCode).toBe(400);
    expect(mixed.json().message).toMatch(/^the sign-on could not be completed/);
  });

  it('lets only the browser that started a sign-on finish it (no login CSRF), and keeps a browser\'s binding across starts', async () => {
    const attacker = await h.account();
    const victim = identity();
    // The attacker starts a binding of its account and sends the victim the provider's link; the
    // victim signs in at the provider, whose redirect reaches the console in the victim's browser.
    const link = await start(attacker.auth);
    const redirect = await signInAtProvider(link, victim);
    for (const browser of [null, 'A'.repeat(43)]) {
      const refused = await callback(redirect, { 'sec-fetch-mode': 'navigate' }, browser);
      expect(refused.statusCode).toBe(400);
      expect(refused.json()).toEqual({ success: false, message: 'the sign-on state is unknown, expired or already used, or this browser did not start it; start again from this browser' });
      expect(refused.cookies.find((c) => c.name === 'console_session')).toBeUndefined();
    }
    const [row] = await h.sql`SELECT oidc_id FROM users WHERE id = ${attacker.user.id}`;
    expect(row!.oidc_id).toBe('');
    // The same for a sign-in the attacker started: the victim's browser is not signed in to the account.
    const signIn = await callback(await signInAtProvider(await start(), identity()), { 'sec-fetch-mode': 'navigate' }, null);
    expect(signIn.statusCode).toBe(400);
    // Two sign-ons started in one browser (two tabs) share its cookie, and both finish there.
    const first = await start();
    const browser = browserOf.get(new URL(first).searchParams.get('state')!)!;
    const second = await start({}, '', browser);
    expect(browserOf.get(new URL(second).searchParams.get('state')!)).toBe(browser);
    expect((await callback(await signInAtProvider(second, identity()))).statusCode).toBe(200);
    expect((await callback(await signInAtProvider(first, identity()))).statusCode).toBe(200);
  });

  it('binds an identity to the logged-in account, once; another account cannot take it', async () => {
    const owner = await h.account();
    const sub = identity();
    const bound = await callback(await signInAtProvider(await start(owner.auth), sub));
    expect(bound.json()).toMatchObject({ success: true, data: { id: owner.user.id, token: '' } });
    const [row] = await h.sql`SELECT oidc_id FROM users WHERE id = ${owner.user.id}`;
    expect(row!.oidc_id).toBe(sub);
    const signIn = await callback(await signInAtProvider(await start(), sub));
    expect(signIn.json().data.id).toBe(owner.user.id);

    const other = await h.account();
    const stolen = await callback(await signInAtProvider(await start(other.auth), sub));
    expect(stolen.statusCode).toBe(409);
    expect(stolen.json().message).toBe('this sign-on identity is already bound to another account');
  });

  it('does not take over an account by its e-mail address, and applies the allowed domains and the invitation code', async () => {
    const existing = await h.account();
    const address = `${uniqueName('taken')}@example.test`;
    await h.sql`UPDATE users SET email = ${address} WHERE id = ${existing.user.id}`;
    const takeover = await callback(await signInAtProvider(await start(), identity(address)));
    expect(takeover.statusCode).toBe(409);
    expect(takeover.json().message).toMatch(/^an account with this e-mail address exists: log in to it and bind sign-on/);

    await setOptions({ 'oidc.allowed_email_domains': 'allowed.test, corp.test' });
    try {
      const outside = await callback(await signInAtProvider(await start(), identity(`${uniqueName('x')}@elsewhere.test`)));
      expect(outside.statusCode).toBe(403);
      const unverified = await callback(await signInAtProvider(await start(), identity(`${uniqueName('x')}@allowed.test`, false)));
      expect(unverified.statusCode).toBe(403);

      const inviter = await h.account();
      const sub = identity(`${uniqueName('y')}@corp.test`);
      const res = await callback(await signInAtProvider(await start({}, `?aff_code=${inviter.user.aff_code}`), sub));
      expect(res.statusCode).toBe(200);
      const [row] = await h.sql`SELECT inviter_id FROM users WHERE oidc_id = ${sub}`;
      expect(Number(row!.inviter_id)).toBe(inviter.user.id);
      const [inv] = await h.sql`SELECT aff_count FROM users WHERE id = ${inviter.user.id}`;
      expect(inv!.aff_count).toBe(1);
    } finally {
      await setOptions({ 'oidc.allowed_email_domains': '' });
    }
  });

  it('waits for a writer of the same address (its advisory lock) and then refuses: one address, one account', async () => {
    const existing = await h.account();
    const address = `${uniqueName('race')}@example.test`;
    const redirect = await signInAtProvider(await start(), identity(address));
    let release!: () => void;
    const released = new Promise<void>((r) => { release = r; });
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => { locked = r; });
    // Another writer of users.email (a binding, a registration) in the middle of its transaction: it
    // holds the address's lock (email/email-codes.ts lockEmailAddress) and has written the address.
    const writer = h.sql.begin(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(hashtext(${`email:${address}`}))`;
      await tx`UPDATE users SET email = ${address} WHERE id = ${existing.user.id}`;
      locked();
      await released;
    });
    await isLocked;
    let answer;
    try {
      let done = false;
      const pending = callback(redirect).finally(() => { done = true; });
      for (let i = 0; i < 300 && !done; i++) {
        const [w] = await h.sql<{ n: number }[]>`
          SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'advisory'`;
        if (w!.n >= 1) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      release();
      await writer;
      answer = await pending;
    } finally {
      release();
      await writer;
    }
    expect(answer.statusCode).toBe(409);
    expect(answer.json().message).toMatch(/^an account with this e-mail address exists/);
    const holders = await h.sql`SELECT id FROM users WHERE lower(email) = ${address} AND deleted_at IS NULL`;
    expect(holders).toHaveLength(1);
  });

  it('refuses sign-on when it is disabled or registration is closed', async () => {
    await setOptions({ RegisterEnabled: 'false' });
    try {
      const closed = await callback(await signInAtProvider(await start(), identity()));
      expect(closed.statusCode).toBe(403);
      expect(closed.json().message).toBe('registration is closed');
    } finally {
      await setOptions({ RegisterEnabled: 'true' });
    }
    await setOptions({ 'oidc.enabled': 'false' });
    try {
      const off = await h.app.inject({ method: 'GET', url: '/api/oauth/oidc/start' });
      expect(off.statusCode).toBe(403);
      expect(off.json()).toEqual({ success: false, message: 'OpenID Connect sign-on is not enabled' });
    } finally {
      await setOptions({ 'oidc.enabled': 'true' });
    }
  });
});
