// Password reset codes and the address they were mailed to, against a careless or malicious holder
// (review "holder", findings 1-5): a password change, a ban or a new address ends the open reset codes;
// a reset is refused once the account no longer holds the address or is disabled or deleted; the reset
// request answers before any of the code's work; an anonymous requester can neither end the owner's
// open code nor spend the owner's budget with requests of other kinds; and two writers of one address
// serialize on it, so that only one account ends up holding it.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../infra/postgres/client.js';
import { type ConsoleHarness, startConsoleHarness, uniqueName } from '../../tests/harness/console-harness.js';
import { withUserRowLocked } from '../../tests/harness/row-lock.js';
import { mailText, mailThroughSink, type SmtpSink, startSmtpSink } from '../../tests/harness/smtp-sink.js';

let h: ConsoleHarness;
let sink: SmtpSink;
let side: Sql;
let clock = Math.floor(Date.now() / 1000);

beforeAll(async () => {
  sink = await startSmtpSink();
  // One hash at a time and one waiting: a hash per wrong code would answer most of a burst 429.
  h = await startConsoleHarness({ PASSWORD_HASH_CONCURRENCY: '1', PASSWORD_HASH_MAX_WAITING: '1' }, { now: () => clock });
  side = createSql(h.config, { max: 3 });
  await mailThroughSink(h.sql, sink);
});
afterAll(async () => {
  await side?.end();
  await h?.close();
  await sink?.close();
});
beforeEach(() => {
  clock += 3601; // the earlier tests' codes out of the hour's limits
});

const get = (url: string, headers: Record<string, string> = {}, remoteAddress = '127.0.0.1') =>
  h.app.inject({ method: 'GET', url, headers, remoteAddress });
const post = (url: string, payload: unknown, headers: Record<string, string> = {}) =>
  h.app.inject({ method: 'POST', url, payload: payload as object, headers });
const resetCodeOf = (text: string) => /Reset code: ([0-9a-f]{32})/.exec(text)![1]!;
const code6 = (text: string) => /\b(\d{6})\b/.exec(text)![1]!;
const INVALID = { success: false, message: 'the code is wrong, expired or already used' };
const within = <T>(ms: number, p: Promise<T>): Promise<T> => Promise.race([p,
  new Promise<never>((_r, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms).unref())]);
const noMail = (to: string, ms = 1000) => sink.next(to, ms).then(() => false, () => true);

async function accountWithEmail(role?: number) {
  const a = await h.account(role === undefined ? {} : { role });
  const address = `${uniqueName('r')}@example.test`;
  await h.sql`UPDATE users SET email = ${address} WHERE id = ${a.user.id}`;
  return { ...a, address };
}

async function resetCode(address: string, remoteAddress = '127.0.0.1'): Promise<string> {
  expect((await get(`/api/reset_password?email=${encodeURIComponent(address)}`, {}, remoteAddress)).json()).toEqual({ success: true, message: '' });
  return resetCodeOf(mailText(await sink.next(address)));
}

const reset = (address: string, token: string, password = 'a taker password 9') =>
  post('/api/user/reset', { email: address, token, password });

describe('a password change, a ban and a new address end the open reset codes', () => {
  it('the owner\'s own password change (PUT /api/user/self)', async () => {
    const v = await accountWithEmail();
    const code = await resetCode(v.address);
    const changed = await h.app.inject({ method: 'PUT', url: '/api/user/self', headers: v.auth,
      payload: { original_password: v.password, password: 'the owner new password 1' } });
    expect(changed.statusCode).toBe(200);
    const r = await reset(v.address, code);
    expect(r.statusCode).toBe(400);
    expect(r.json()).toEqual(INVALID);
    expect((await post('/api/user/login', { username: v.user.username, password: 'the owner new password 1' })).statusCode).toBe(200);
  });

  it('an administrator\'s password reset (PUT /api/user/ password)', async () => {
    const admin = await h.account({ role: 10 });
    const v = await accountWithEmail();
    const code = await resetCode(v.address);
    const put = await h.app.inject({ method: 'PUT', url: '/api/user/', headers: admin.auth, payload: { id: v.user.id, password: 'set by the admin 1' } });
    expect(put.statusCode).toBe(200);
    expect((await reset(v.address, code)).json()).toEqual(INVALID);
    expect((await post('/api/user/login', { username: v.user.username, password: 'set by the admin 1' })).statusCode).toBe(200);
  });

  it('a ban (manage disable, or PUT /api/user/ status 2), still after the account is enabled again', async () => {
    const admin = await h.account({ role: 10 });
    const v = await accountWithEmail();
    const code = await resetCode(v.address);
    expect((await post('/api/user/manage', { id: v.user.id, action: 'disable' }, admin.auth)).statusCode).toBe(200);
    expect((await post('/api/user/manage', { id: v.user.id, action: 'enable' }, admin.auth)).statusCode).toBe(200);
    expect((await reset(v.address, code)).json()).toEqual(INVALID);

    const code2 = await resetCode(v.address);
    const put = (status: number) => h.app.inject({ method: 'PUT', url: '/api/user/', headers: admin.auth, payload: { id: v.user.id, status } });
    expect((await put(2)).statusCode).toBe(200);
    expect((await put(1)).statusCode).toBe(200);
    expect((await reset(v.address, code2)).json()).toEqual(INVALID);
  });

  it('binding another address: the old mailbox no longer resets the account', async () => {
    const v = await accountWithEmail();
    const code = await resetCode(v.address);
    const fresh = `${uniqueName('n')}@example.test`;
    expect((await get(`/api/verification?email=${encodeURIComponent(fresh)}&purpose=bind`, v.auth)).json().success).toBe(true);
    const bindCode = code6(mailText(await sink.next(fresh)));
    expect((await post('/api/oauth/email/bind', { email: fresh, code: bindCode, original_password: v.password }, v.auth)).json().success).toBe(true);
    expect((await reset(v.address, code)).json()).toEqual(INVALID);
    expect((await post('/api/user/login', { username: v.user.username, password: v.password })).statusCode).toBe(200);
  });
});

describe('POST /api/user/reset checks the account under its row lock', () => {
  it('refuses a code once the account no longer holds the address, is disabled or deleted', async () => {
    for (const change of ['address', 'disabled', 'deleted'] as const) {
      const v = await accountWithEmail();
      const code = await resetCode(v.address);
      // Changed behind the console's back (no path that ends the codes): the reset itself must check.
      if (change === 'address') await h.sql`UPDATE users SET email = ${`${uniqueName('else')}@example.test`} WHERE id = ${v.user.id}`;
      if (change === 'disabled') await h.sql`UPDATE users SET status = 2 WHERE id = ${v.user.id}`;
      if (change === 'deleted') await h.sql`UPDATE users SET deleted_at = ${clock} WHERE id = ${v.user.id}`;
      const r = await reset(v.address, code);
      expect({ change, status: r.statusCode, body: r.json() }).toEqual({ change, status: 400, body: INVALID });
      const [row] = await h.sql<{ password_hash: string }[]>`SELECT password_hash FROM users WHERE id = ${v.user.id}`;
      expect(row!.password_hash).toBe(v.user.password_hash);
    }
  });

  it('accepts the address in another case, and the code of an account that holds it', async () => {
    const v = await accountWithEmail();
    const code = await resetCode(v.address.toUpperCase());
    expect((await reset(v.address.toUpperCase(), code)).statusCode).toBe(200);
  });
});

describe('GET /api/reset_password answers before the code is issued', () => {
  it('answers while the code\'s issuing waits, then mails the code', async () => {
    const v = await accountWithEmail();
    let release!: () => void;
    const released = new Promise<void>((r) => { release = r; });
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => { locked = r; });
    // The address's code lock held (as a parallel request for the address holds it while it counts).
    const holder = side.begin(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(hashtext(${`email-code:${v.address}`}))`;
      locked();
      await released;
    });
    await isLocked;
    try {
      const answered = await within(3000, get(`/api/reset_password?email=${encodeURIComponent(v.address)}`));
      expect(answered.json()).toEqual({ success: true, message: '' });
    } finally {
      release();
      await holder;
    }
    const code = resetCodeOf(mailText(await sink.next(v.address)));
    expect((await reset(v.address, code)).statusCode).toBe(200);
  });
});

describe('an anonymous requester cannot take the owner\'s recovery away', () => {
  it('new requests from another client leave the owner\'s open code valid; using one ends them all; the address limit holds', async () => {
    const v = await accountWithEmail();
    const victimCode = await resetCode(v.address);
    const later: string[] = [];
    for (let i = 0; i < 4; i++) later.push(await resetCode(v.address, '10.9.9.9'));
    // The address's 5 codes an hour are spent: a sixth request is answered the same, and mails nothing.
    expect((await get(`/api/reset_password?email=${encodeURIComponent(v.address)}`, {}, '10.9.9.8')).json()).toEqual({ success: true, message: '' });
    expect(await noMail(v.address)).toBe(true);

    expect((await reset(v.address, victimCode, 'the owner new password 1')).json()).toEqual({ success: true, message: '', data: 'the owner new password 1' });
    for (const code of later) expect((await reset(v.address, code)).json()).toEqual(INVALID);
    expect((await post('/api/user/login', { username: v.user.username, password: 'the owner new password 1' })).statusCode).toBe(200);
  });

  // Before: each wrong try took one of the 5 from every open code of the address, and 5 strangers'
  // wrong tries (no account, no mailbox, any client) ended the code in the owner's mailbox.
  it('strangers\' wrong tries (any number, any client) do not end the owner\'s codes: a reset code is not counted, it cannot be guessed', async () => {
    const v = await accountWithEmail();
    const codes = [await resetCode(v.address), await resetCode(v.address)];
    for (let i = 0; i < 12; i++) {
      const r = await h.app.inject({ method: 'POST', url: '/api/user/reset', remoteAddress: `10.66.0.${i + 1}`, payload: { email: v.address, token: `${'0'.repeat(30)}${String(i).padStart(2, '0')}`, password: 'stranger pass 1' } });
      expect(r.json()).toEqual(INVALID);
    }
    const rows = await h.sql<{ attempts: number }[]>`SELECT attempts FROM email_codes WHERE email = ${v.address} AND purpose = 'reset' ORDER BY id`;
    expect(rows.map((r) => r.attempts)).toEqual([0, 0]);
    expect((await reset(v.address, codes[1]!, 'the owner new password 1')).json()).toEqual({ success: true, message: '', data: 'the owner new password 1' });
    // Used, it ends the other.
    expect((await reset(v.address, codes[0]!)).json()).toEqual(INVALID);
  });

  it('parallel wrong tries beside a reset and a password change: each answers (no deadlock, no 5xx), and no code works after both', async () => {
    const v = await accountWithEmail();
    const tries = await within(20_000, Promise.all(Array.from({ length: 12 }, (_x, i) => reset(v.address, `${'e'.repeat(30)}${String(i).padStart(2, '0')}`))));
    expect(tries.map((r) => r.statusCode)).toEqual(Array(12).fill(400));

    clock += 3601;
    const w = await accountWithEmail();
    const open = [await resetCode(w.address), await resetCode(w.address), await resetCode(w.address)];
    const all = await within(20_000, Promise.all([
      reset(w.address, open[1]!),
      ...Array.from({ length: 3 }, (_x, i) => reset(w.address, `${'d'.repeat(31)}${i}`)),
      h.app.inject({ method: 'PUT', url: '/api/user/self', headers: w.auth, payload: { original_password: w.password, password: 'the owner new password 1' } }),
    ]));
    for (const r of all) expect([200, 400, 401]).toContain(r.statusCode);
    for (const code of open) expect((await reset(w.address, code)).statusCode).toBe(400);
  });

  it('409 answers of GET /api/verification for the address do not spend its reset codes', async () => {
    const v = await accountWithEmail();
    for (let i = 0; i < 5; i++) {
      expect((await get(`/api/verification?email=${encodeURIComponent(v.address)}`, {}, '10.9.9.7')).statusCode).toBe(409);
    }
    const code = await resetCode(v.address);
    expect((await reset(v.address, code)).statusCode).toBe(200);
  });

  it('the account\'s own binding codes and anonymous reset requests do not spend each other\'s budget', async () => {
    const v = await accountWithEmail();
    for (let i = 0; i < 5; i++) {
      const other = `${uniqueName(`b${i}`)}@example.test`;
      expect((await get(`/api/verification?email=${encodeURIComponent(other)}&purpose=bind`, v.auth)).statusCode).toBe(200);
      await sink.next(other);
    }
    // The account's 5 binding codes of the hour are spent; a reset code is still mailed.
    const code = await resetCode(v.address);
    expect((await reset(v.address, code)).statusCode).toBe(200);

    clock += 3601;
    const w = await accountWithEmail();
    for (let i = 0; i < 5; i++) await resetCode(w.address, '10.9.9.6');
    const other = `${uniqueName('c')}@example.test`;
    const bind = await get(`/api/verification?email=${encodeURIComponent(other)}&purpose=bind`, w.auth);
    expect(bind.json()).toEqual({ success: true, message: '' });
    await sink.next(other);
  });
});

describe('one address, one account', () => {
  async function lockWaiters(): Promise<number> {
    const [w] = await side<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`;
    return w!.n;
  }

  it('a binding and a registration of the same address at once: one commits, the other answers 409 EMAIL_TAKEN', async () => {
    await h.sql`INSERT INTO options (key, value) VALUES ('EmailVerificationEnabled', 'true') ON CONFLICT (key) DO UPDATE SET value = 'true'`;
    try {
      const a = await h.account();
      const address = `${uniqueName('dup')}@example.test`;
      expect((await get(`/api/verification?email=${encodeURIComponent(address)}&purpose=bind`, a.auth)).json().success).toBe(true);
      const bindCode = code6(mailText(await sink.next(address)));
      expect((await get(`/api/verification?email=${encodeURIComponent(address)}`)).json().success).toBe(true);
      const regCode = code6(mailText(await sink.next(address)));

      const [bind, reg] = await withUserRowLocked(side, Number(a.user.id), async () => {
        // The binding waits for A's row (held here, as any write of A's row would hold it) ...
        const bindP = h.app.inject({ method: 'POST', url: '/api/oauth/email/bind', headers: a.auth, payload: { email: address, code: bindCode, original_password: a.password } });
        for (let i = 0; i < 300 && await lockWaiters() < 1; i++) await new Promise((r) => setTimeout(r, 10));
        // ... while a registration of the same address runs: it must wait for the binding's outcome.
        let regDone = false;
        const regP = h.app.inject({ method: 'POST', url: '/api/user/register',
          payload: { username: uniqueName('d'), password: 'password123', email: address, verification_code: regCode } }).finally(() => { regDone = true; });
        for (let i = 0; i < 300 && !regDone && await lockWaiters() < 2; i++) await new Promise((r) => setTimeout(r, 10));
        await new Promise((r) => setTimeout(r, 200));
        return [bindP, regP] as const;
      }).then(async ([b, r]) => [await b, await r] as const);

      const holders = await h.sql<{ id: number }[]>`SELECT id FROM users WHERE lower(email) = ${address} AND deleted_at IS NULL`;
      expect(holders).toHaveLength(1);
      const answers = [bind, reg].map((r) => ({ status: r.statusCode, body: r.json() }));
      expect(answers).toContainEqual({ status: 200, body: { success: true, message: '' } });
      expect(answers).toContainEqual({ status: 409, body: { success: false, message: 'this e-mail address already belongs to an account' } });
    } finally {
      await h.sql`UPDATE options SET value = 'false' WHERE key = 'EmailVerificationEnabled'`;
    }
  });
});

describe('wrong reset codes (anybody may send them)', () => {
  it('are refused without hashing the new password: a burst of them leaves the password hashing to logins (before: 429 "busy checking passwords")', async () => {
    const v = await accountWithEmail();
    await resetCode(v.address);
    const answers = await Promise.all(Array.from({ length: 30 }, () => reset(v.address, 'f'.repeat(32))));
    expect(answers.map((r) => r.statusCode)).toEqual(Array(30).fill(400));
    for (const r of answers) expect(r.json()).toEqual(INVALID);
    // The owner's code still works, and so does a login meanwhile.
    expect((await post('/api/user/login', { username: v.user.username, password: v.password })).statusCode).toBe(200);
  });
});
