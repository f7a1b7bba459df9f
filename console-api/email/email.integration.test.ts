// E-mail through the console API, with a local SMTP sink started here (never a real provider): bind an
// address with a code, register with a verified address, reset a forgotten password; codes expire, are
// used once, die after wrong tries, are rate-limited per address and per account, and are stored only
// as an HMAC.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type ConsoleHarness, startConsoleHarness, uniqueName } from '../../tests/harness/console-harness.js';
import { mailText, mailThroughSink, type SmtpSink, startSmtpSink } from '../../tests/harness/smtp-sink.js';

let h: ConsoleHarness;
let sink: SmtpSink;
let clock = Math.floor(Date.now() / 1000);

beforeAll(async () => {
  sink = await startSmtpSink();
  h = await startConsoleHarness({}, { now: () => clock });
  await mailThroughSink(h.sql, sink);
});
afterAll(async () => {
  await h?.close();
  await sink?.close();
});

const get = (url: string, headers: Record<string, string> = {}) => h.app.inject({ method: 'GET', url, headers });
const post = (url: string, payload: unknown, headers: Record<string, string> = {}) =>
  h.app.inject({ method: 'POST', url, payload: payload as object, headers });

function codeIn(text: string, pattern = /\b(\d{6})\b/): string {
  const m = pattern.exec(text);
  if (!m) throw new Error(`no code in ${text}`);
  return m[1]!;
}

async function bindCode(address: string, auth: Record<string, string>): Promise<string> {
  const sent = await get(`/api/verification?email=${encodeURIComponent(address)}&purpose=bind`, auth);
  expect(sent.json()).toEqual({ success: true, message: '' });
  return codeIn(mailText(await sink.next(address)));
}

describe('binding an e-mail address', () => {
  it('binds with the mailed code, once; a wrong code counts; the code is stored only as an HMAC', async () => {
    const a = await h.account();
    const address = `${uniqueName('b')}@example.test`;
    const code = await bindCode(address, a.auth);
    const [row] = await h.sql`SELECT row_to_json(e)::text AS r FROM email_codes e WHERE email = ${address}`;
    expect(row!.r).not.toContain(code);

    const wrong = await post('/api/oauth/email/bind', { email: address, code: code === '000000' ? '000001' : '000000', original_password: a.password }, a.auth);
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json()).toEqual({ success: false, message: 'the code is wrong, expired or already used' });
    const bound = await post('/api/oauth/email/bind', { email: address.toUpperCase(), code, original_password: a.password }, a.auth);
    expect(bound.json()).toEqual({ success: true, message: '' });
    expect((await get('/api/user/self', a.auth)).json().data.email).toBe(address.toUpperCase());
    const again = await post('/api/oauth/email/bind', { email: address, code, original_password: a.password }, a.auth);
    expect(again.statusCode).toBe(400);

    // The address now belongs to an account: another cannot ask for it.
    const b = await h.account();
    const taken = await get(`/api/verification?email=${encodeURIComponent(address)}&purpose=bind`, b.auth);
    expect(taken.statusCode).toBe(409);
    expect(taken.json()).toEqual({ success: false, message: 'this e-mail address already belongs to an account' });
  });

  it('refuses an expired code, a code after 5 wrong tries, and a code issued to another account', async () => {
    const a = await h.account();
    const expiring = `${uniqueName('e')}@example.test`;
    const code = await bindCode(expiring, a.auth);
    clock += 601;
    expect((await post('/api/oauth/email/bind', { email: expiring, code, original_password: a.password }, a.auth)).statusCode).toBe(400);

    const guessed = `${uniqueName('g')}@example.test`;
    const right = await bindCode(guessed, a.auth);
    for (let i = 0; i < 5; i++) {
      const bad = String((Number(right) + 1 + i) % 1_000_000).padStart(6, '0');
      expect((await post('/api/oauth/email/bind', { email: guessed, code: bad, original_password: a.password }, a.auth)).statusCode).toBe(400);
    }
    expect((await post('/api/oauth/email/bind', { email: guessed, code: right, original_password: a.password }, a.auth)).statusCode).toBe(400);

    const other = await h.account();
    const theirs = `${uniqueName('o')}@example.test`;
    const theirCode = await bindCode(theirs, other.auth);
    expect((await post('/api/oauth/email/bind', { email: theirs, code: theirCode, original_password: a.password }, a.auth)).statusCode).toBe(400);
    expect((await post('/api/oauth/email/bind', { email: theirs, code: theirCode, original_password: other.password }, other.auth)).statusCode).toBe(200);
  });

  // Before: another account asking a binding code for the same address ended the owner's, and its
  // wrong tries spent the owner's code's tries.
  it('another account\'s binding codes and wrong tries for the same address leave the owner\'s code as it is', async () => {
    const owner = await h.account();
    const other = await h.account();
    const address = `${uniqueName('x')}@example.test`;
    const code = await bindCode(address, owner.auth);
    const theirs = await bindCode(address, other.auth);
    for (let i = 0; i < 5; i++) {
      const bad = String((Number(code) + 1 + i) % 1_000_000).padStart(6, '0');
      const guess = bad === theirs ? String((Number(bad) + 10) % 1_000_000).padStart(6, '0') : bad;
      expect((await post('/api/oauth/email/bind', { email: address, code: guess, original_password: other.password }, other.auth)).statusCode).toBe(400);
    }
    expect((await post('/api/oauth/email/bind', { email: address, code, original_password: owner.password }, owner.auth)).json()).toEqual({ success: true, message: '' });
    clock += 3601; // the codes of this test (all the file's requests share one client address) out of the hour's limits
  });

  it('limits the codes per address and per account (429 with Retry-After)', async () => {
    const a = await h.account();
    const address = `${uniqueName('r')}@example.test`;
    for (let i = 0; i < 5; i++) await bindCode(address, a.auth);
    const limited = await get(`/api/verification?email=${encodeURIComponent(address)}&purpose=bind`, a.auth);
    expect(limited.statusCode).toBe(429);
    expect(limited.json().message).toBe('too many verification e-mails for this address; retry later');
    expect(limited.headers['retry-after']).toBe('3600');

    const b = await h.account();
    const results = await Promise.all(Array.from({ length: 7 }, (_v, i) =>
      get(`/api/verification?email=${encodeURIComponent(`${uniqueName(`p${i}`)}@example.test`)}&purpose=bind`, b.auth)));
    expect(results.filter((r) => r.statusCode === 200)).toHaveLength(5);
    expect(results.filter((r) => r.statusCode === 429).map((r) => r.json().message)).toEqual(Array(2).fill('too many verification e-mails for this account; retry later'));
    sink.messages.length = 0;

    const anonymous = await get('/api/verification?email=x@example.test&purpose=bind');
    expect(anonymous.statusCode).toBe(401);
  });
});

describe('registration with a verified address', () => {
  it('registers with the mailed code when EmailVerificationEnabled', async () => {
    await h.sql`INSERT INTO options (key, value) VALUES ('EmailVerificationEnabled', 'true') ON CONFLICT (key) DO UPDATE SET value = 'true'`;
    try {
      const address = `${uniqueName('n')}@example.test`;
      expect((await get(`/api/verification?email=${encodeURIComponent(address)}`)).statusCode).toBe(200);
      const code = codeIn(mailText(await sink.next(address)));
      const username = uniqueName('v');
      const res = await post('/api/user/register', { username, password: 'a long password 1', email: address, verification_code: code });
      expect(res.json()).toEqual({ success: true, message: '' });
      const [u] = await h.sql`SELECT email FROM users WHERE username = ${username}`;
      expect(u!.email).toBe(address);
      const reuse = await post('/api/user/register', { username: uniqueName('v'), password: 'a long password 1', email: address, verification_code: code });
      expect(reuse.statusCode).toBe(400);

      // A code mailed while the address was free, which another account took since: refused, the
      // code left unused.
      const later = `${uniqueName('t')}@example.test`;
      expect((await get(`/api/verification?email=${encodeURIComponent(later)}`)).statusCode).toBe(200);
      const laterCode = codeIn(mailText(await sink.next(later)));
      const other = await h.account();
      await h.sql`UPDATE users SET email = ${later} WHERE id = ${other.user.id}`;
      const taken = await post('/api/user/register', { username: uniqueName('v'), password: 'a long password 1', email: later.toUpperCase(), verification_code: laterCode });
      expect(taken.statusCode).toBe(409);
      expect(taken.json()).toEqual({ success: false, message: 'this e-mail address already belongs to an account' });
      const [holders] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM users WHERE lower(email) = ${later}`;
      expect(holders!.n).toBe(1);
    } finally {
      await h.sql`UPDATE options SET value = 'false' WHERE key = 'EmailVerificationEnabled'`;
    }
  });
});

describe('resetting a forgotten password', () => {
  it('resets with the mailed token, once, and revokes every session', async () => {
    const a = await h.account();
    const address = `${uniqueName('f')}@example.test`;
    await h.sql`UPDATE users SET email = ${address} WHERE id = ${a.user.id}`;

    const nobody = await get(`/api/reset_password?email=${encodeURIComponent(`${uniqueName('none')}@example.test`)}`);
    expect(nobody.json()).toEqual({ success: true, message: '' });

    expect((await get(`/api/reset_password?email=${encodeURIComponent(address)}`)).json()).toEqual({ success: true, message: '' });
    const text = mailText(await sink.next(address));
    expect(text).toContain(a.user.username);
    const token = codeIn(text, /Reset code: ([0-9a-f]{32})/);

    const weak = await post('/api/user/reset', { email: address, token, password: 'short' });
    expect(weak.statusCode).toBe(400);
    const res = await post('/api/user/reset', { email: address, token, password: 'a brand new password 2' });
    expect(res.json()).toEqual({ success: true, message: '', data: 'a brand new password 2' });
    expect((await post('/api/user/reset', { email: address, token })).statusCode).toBe(400);

    expect((await get('/api/user/self', a.auth)).statusCode).toBe(401);
    expect((await post('/api/user/login', { username: a.user.username, password: a.password })).statusCode).toBe(401);
    expect((await post('/api/user/login', { username: a.user.username, password: 'a brand new password 2' })).statusCode).toBe(200);
    // A sign-on identity bound to the account (perhaps by a taker's session) is unbound with the reset.
    await h.sql`UPDATE users SET oidc_id = ${uniqueName('sub')} WHERE id = ${a.user.id}`;

    // Without a password a generated one is returned, and works.
    await get(`/api/reset_password?email=${encodeURIComponent(address)}`);
    const token2 = codeIn(mailText(await sink.next(address)), /Reset code: ([0-9a-f]{32})/);
    const generated = await post('/api/user/reset', { email: address, token: token2 });
    const password = generated.json().data as string;
    expect((await h.sql<{ oidc_id: string }[]>`SELECT oidc_id FROM users WHERE id = ${a.user.id}`)[0]!.oidc_id).toBe('');
    expect(password.length).toBeGreaterThanOrEqual(16);
    expect((await post('/api/user/login', { username: a.user.username, password })).statusCode).toBe(200);
  });

  it('answers the same whether or not an account has the address', async () => {
    clock += 3601; // this file's earlier codes out of the hour's limits
    const a = await h.account();
    const address = `${uniqueName('x')}@example.test`;
    await h.sql`UPDATE users SET email = ${address} WHERE id = ${a.user.id}`;
    const missing = `${uniqueName('none')}@example.test`;
    const ask = async (to: string) => {
      const res = await get(`/api/reset_password?email=${encodeURIComponent(to)}`);
      return { status: res.statusCode, body: res.json() };
    };

    await h.sql`UPDATE options SET value = '' WHERE key = 'SMTPServer'`;
    try {
      const known = await ask(address);
      expect(known).toEqual(await ask(missing));
      expect(known).toEqual({ status: 403, body: { success: false, message: 'e-mail is not configured (SMTPServer)' } });
    } finally {
      await h.sql`UPDATE options SET value = '127.0.0.1' WHERE key = 'SMTPServer'`;
    }

    // One more than the codes an address may have an hour: the limit is the account's own.
    for (let i = 0; i < 6; i++) {
      expect(await ask(address)).toEqual({ status: 200, body: { success: true, message: '' } });
      expect(await ask(missing)).toEqual({ status: 200, body: { success: true, message: '' } });
    }
    for (let i = 0; i < 5; i++) await sink.next(address);
  });

  it('answers 403 when SMTP is not configured, and 502 when the SMTP server refuses', async () => {
    const a = await h.account();
    sink.failing = true;
    try {
      const refused = await get(`/api/verification?email=${encodeURIComponent(`${uniqueName('s')}@example.test`)}&purpose=bind`, a.auth);
      expect(refused.statusCode).toBe(502);
      expect(refused.json()).toEqual({ success: false, message: 'the e-mail could not be sent; retry later' });
    } finally {
      sink.failing = false;
    }
    await h.sql`UPDATE options SET value = '' WHERE key = 'SMTPServer'`;
    try {
      const off = await get(`/api/verification?email=${encodeURIComponent(`${uniqueName('s')}@example.test`)}&purpose=bind`, a.auth);
      expect(off.statusCode).toBe(403);
      expect(off.json().message).toBe('e-mail is not configured (SMTPServer)');
    } finally {
      await h.sql`UPDATE options SET value = '127.0.0.1' WHERE key = 'SMTPServer'`;
    }
  });
});

describe('whether an address has an account', () => {
  it('GET /api/verification tells it only within the code limits: 403 for every address with mail off, then 409 counted per address (429 past 5)', async () => {
    clock += 3601; // this file's earlier codes out of the hour's limits
    const a = await h.account();
    const address = `${uniqueName('known')}@example.test`;
    await h.sql`UPDATE users SET email = ${address} WHERE id = ${a.user.id}`;
    const ask = async (to: string) => {
      const res = await h.app.inject({ method: 'GET', url: `/api/verification?email=${encodeURIComponent(to)}`, remoteAddress: '10.66.0.1' });
      return { status: res.statusCode, body: res.json() };
    };
    await h.sql`UPDATE options SET value = '' WHERE key = 'SMTPServer'`;
    try {
      const known = [];
      for (let i = 0; i < 10; i++) known.push(await ask(address));
      const unknown = await ask(`${uniqueName('none')}@example.test`);
      expect(unknown).toEqual({ status: 403, body: { success: false, message: 'e-mail is not configured (SMTPServer)' } });
      expect(known).toEqual(Array(10).fill(unknown));
    } finally {
      await h.sql`UPDATE options SET value = '127.0.0.1' WHERE key = 'SMTPServer'`;
    }
    const answers = [];
    for (let i = 0; i < 7; i++) answers.push((await ask(address.toUpperCase())).status);
    expect(answers).toEqual([409, 409, 409, 409, 409, 429, 429]);
    // The rows that counted them are no codes: none was mailed, none is accepted.
    const [open] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM email_codes WHERE email = ${address} AND used_at IS NULL`;
    expect(open!.n).toBe(0);
    expect(sink.messages.filter((m) => m.to.includes(address.toLowerCase()))).toHaveLength(0);
  });
});

describe('wrong codes under concurrency', () => {
  beforeEach(() => {
    clock += 3601; // this file's earlier codes out of the hour's limits
  });
  const within = <T>(ms: number, p: Promise<T>): Promise<T> => Promise.race([p,
    new Promise<never>((_r, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms).unref())]);
  const guesses = (right: string, n: number) =>
    Array.from({ length: n }, (_v, i) => String((Number(right) + 1 + i) % 1_000_000).padStart(6, '0'));

  // Each bind's transaction holds a pool connection: a wrong code counted on another connection of the
  // same pool leaves every connection waiting for a free one once the pool is full of such binds.
  it('answers twice the pool size of parallel wrong binds, and the console answers after', async () => {
    const a = await h.account();
    const address = `${uniqueName('d')}@example.test`;
    const right = await bindCode(address, a.auth);
    const n = 2 * h.sql.options.max;
    const results = await within(5_000, Promise.all(guesses(right, n).map((code) =>
      post('/api/oauth/email/bind', { email: address, code, original_password: a.password }, a.auth))));
    expect(results.map((r) => r.statusCode)).toEqual(Array(n).fill(400));
    expect((await within(5_000, get('/api/user/self', a.auth))).statusCode).toBe(200);
  });

  it('counts every guess of a parallel burst: no more than 5 are compared, and the code is dead after', async () => {
    const a = await h.account();
    const address = `${uniqueName('q')}@example.test`;
    const right = await bindCode(address, a.auth);
    const results = await within(10_000, Promise.all(guesses(right, 12).map((code) =>
      post('/api/oauth/email/bind', { email: address, code, original_password: a.password }, a.auth))));
    expect(results.map((r) => r.statusCode)).toEqual(Array(12).fill(400));
    const [row] = await h.sql<{ attempts: number }[]>`SELECT attempts FROM email_codes WHERE email = ${address} AND purpose = 'bind'`;
    expect(row!.attempts).toBe(5);
    expect((await post('/api/oauth/email/bind', { email: address, code: right, original_password: a.password }, a.auth)).statusCode).toBe(400);
  });
});
