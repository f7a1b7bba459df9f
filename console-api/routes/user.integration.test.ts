import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, startConsoleHarness, uniqueName } from '../../tests/harness/console-harness.js';
import { encodeUsageEvent, LOG_TYPE } from '../../core/usage/usage-event.js';
import { finishConsoleCredit } from '../../core/ledger/console-credit-follow-up.js';
import { consoleUsageEvent, manageRequestId, recordConsoleCredit } from '../ledger/console-ledger.js';

let h: ConsoleHarness;
beforeAll(async () => {
  h = await startConsoleHarness();
});
afterAll(async () => {
  await h?.close();
});

const post = (url: string, payload: unknown, headers: Record<string, string> = {}) =>
  h.app.inject({ method: 'POST', url, payload: payload as object, headers });
const get = (url: string, headers: Record<string, string> = {}) => h.app.inject({ method: 'GET', url, headers });
const put = (url: string, payload: unknown, headers: Record<string, string> = {}) =>
  h.app.inject({ method: 'PUT', url, payload: payload as object, headers });

// The contract's Account table: every field and its JSON type.
const ACCOUNT_FIELDS: Record<string, 'number' | 'string' | 'object'> = {
  id: 'number', username: 'string', display_name: 'string', role: 'number', status: 'number', email: 'string',
  code_host_id: 'string', chat_platform_id: 'string', oidc_id: 'string', social_app_id: 'string',
  messenger_id: 'string', forum_id: 'string', group: 'string', quota: 'number', used_quota: 'number',
  request_count: 'number', aff_code: 'string', aff_count: 'number', aff_quota: 'number',
  aff_history_quota: 'number', inviter_id: 'number', setting: 'string', card_provider_customer: 'string',
  sidebar_modules: 'string', permissions: 'object',
};

describe('register, login and access tokens', () => {
  const username = uniqueName('r');
  const password = 'correct horse battery';

  it('registers an ordinary account', async () => {
    const res = await post('/api/user/register', { username, password, email: 'a@example.com' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true, message: '' });
    const [row] = await h.sql<{ role: number; group: string; quota: number; aff_code: string; password_hash: string; email: string }[]>`
      SELECT role, "group", quota, aff_code, password_hash, email FROM users WHERE username = ${username}`;
    // Without EmailVerificationEnabled the address is not verified, so it is not kept (new-api's rule):
    // anyone could give anyone's.
    expect(row).toMatchObject({ role: 1, group: 'default', quota: 0, email: '' });
    expect(row!.aff_code).toMatch(/^[A-Za-z0-9]{4,8}$/);
    // scrypt at PASSWORD_SCRYPT_LOG2N (10 in the tests, 15 by default), r 8, p 3.
    expect(row!.password_hash).toMatch(new RegExp(`^scrypt\\$${h.config.PASSWORD_SCRYPT_LOG2N}\\$8\\$3\\$`));
    expect(row!.password_hash).not.toContain(password);
  });

  it('refuses a duplicate username with 409 and bad fields with 400 naming the field', async () => {
    const dup = await post('/api/user/register', { username, password });
    expect(dup.statusCode).toBe(409);
    expect(dup.json()).toMatchObject({ success: false });
    const short = await post('/api/user/register', { username: 'ab', password });
    expect(short.statusCode).toBe(400);
    expect(short.json().message).toMatch(/^username: /);
    const weak = await post('/api/user/register', { username: uniqueName(), password: 'short' });
    expect(weak.statusCode).toBe(400);
    expect(weak.json().message).toMatch(/^password: /);
    const badJson = await h.app.inject({
      method: 'POST', url: '/api/user/register', payload: '{nope', headers: { 'content-type': 'application/json' },
    });
    expect(badJson.statusCode).toBe(400);
    expect(badJson.json()).toEqual({ success: false, message: 'request body is not valid JSON' });
  });

  it('refuses a name that differs from a taken one only in case or Unicode form (409), and logs in by the exact name', async () => {
    const taken = `Look${uniqueName('').slice(-8)}`;
    expect((await post('/api/user/register', { username: taken, password })).statusCode).toBe(200);
    // Upper case, lower case, full-width forms (NFKC folds them to the taken name).
    const fullWidth = [...taken.toLowerCase()].map((c) => String.fromCodePoint(c.codePointAt(0)! + 0xfee0)).join('');
    for (const lookalike of [taken.toUpperCase(), taken.toLowerCase(), fullWidth]) {
      const res = await post('/api/user/register', { username: lookalike, password });
      expect(res.statusCode, lookalike).toBe(409);
      expect(res.json()).toEqual({ success: false, message: 'username is already taken' });
    }
    const [row] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM users WHERE lower(username) = lower(${taken})`;
    expect(row!.n).toBe(1);
    expect((await post('/api/user/login', { username: taken, password })).statusCode).toBe(200);
    expect((await post('/api/user/login', { username: taken.toUpperCase(), password })).statusCode).toBe(401);
  });

  it('refuses a name mixing Latin, Greek and Cyrillic letters (400): a Cyrillic а beside a Latin admin read as admin', async () => {
    const taken = `adm${uniqueName('').slice(-8)}`.toLowerCase();
    expect((await post('/api/user/register', { username: taken, password })).statusCode).toBe(200);
    for (const lookalike of [`\u0430${taken.slice(1)}`, taken.replace('d', '\u0501'), `${taken}\u03bf`]) {
      const res = await post('/api/user/register', { username: lookalike, password });
      expect(res.statusCode, lookalike).toBe(400);
      expect(res.json()).toEqual({ success: false, message: 'username: must not mix Latin, Greek and Cyrillic letters (they have look-alikes: a Cyrillic а reads as a Latin a)' });
    }
    const [row] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM users WHERE username LIKE ${`%${taken.slice(3)}`}`;
    expect(row!.n).toBe(1);
    // A name in one such script alone is a name like any other.
    expect((await post('/api/user/register', { username: `\u0438\u0432\u0430\u043d${taken.slice(-4).replace(/[a-z]/g, '')}`, password })).statusCode).toBe(200);
  });

  let session = '';
  it('logs in with a session token and the account summary', async () => {
    const res = await post('/api/user/login', { username, password });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.success).toBe(true);
    expect(Object.keys(body.data).sort()).toEqual(['display_name', 'group', 'id', 'role', 'status', 'token', 'username']);
    expect(body.data).toMatchObject({ username, display_name: username, role: 1, status: 1, group: 'default' });
    session = body.data.token;
    expect(session).toMatch(/^[0-9a-f]{64}$/);
    const [t] = await h.sql<{ kind: string; expires_at: number; created_at: number }[]>`
      SELECT kind, expires_at, created_at FROM access_tokens WHERE user_id = ${body.data.id}`;
    expect(t!.kind).toBe('session');
    expect(t!.expires_at - t!.created_at).toBe(h.config.SESSION_TTL_SEC);
  });

  it('refuses a wrong password (401) and a banned account (403)', async () => {
    const wrong = await post('/api/user/login', { username, password: 'wrong password' });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json()).toEqual({ success: false, message: 'username or password is incorrect' });
    const nobody = await post('/api/user/login', { username: uniqueName(), password });
    expect(nobody.statusCode).toBe(401);
    const banned = await h.account();
    await h.sql`UPDATE users SET status = 2 WHERE id = ${banned.user.id}`;
    const res = await post('/api/user/login', { username: banned.user.username, password: banned.password });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ success: false, message: 'this account is banned' });
    // A token issued before the ban stops working too.
    expect((await get('/api/user/self', banned.auth)).statusCode).toBe(403);
  });

  it('issues an access token that revokes the previous one; both kinds authenticate', async () => {
    const first = await get('/api/user/token', { authorization: `Bearer ${session}` });
    expect(first.statusCode).toBe(200);
    const access1 = first.json().data as string;
    expect(typeof access1).toBe('string');
    expect((await get('/api/user/self', { authorization: `Bearer ${access1}` })).statusCode).toBe(200);
    const second = await get('/api/user/token', { authorization: `Bearer ${access1}` });
    const access2 = second.json().data as string;
    expect(access2).not.toBe(access1);
    const revoked = await get('/api/user/self', { authorization: `Bearer ${access1}` });
    expect(revoked.statusCode).toBe(401);
    expect(revoked.json().success).toBe(false);
    expect((await get('/api/user/self', { authorization: `Bearer ${access2}` })).statusCode).toBe(200);
    // The session survives: only access tokens are replaced.
    expect((await get('/api/user/self', { authorization: `Bearer ${session}` })).statusCode).toBe(200);
    // new-api takes an access token without its scheme too (scripts written for it send it so).
    expect((await get('/api/user/self', { authorization: access2 })).statusCode).toBe(200);
    // Another scheme is no token.
    expect((await get('/api/user/self', { authorization: `Basic ${access2}` })).statusCode).toBe(401);
  });

  it('a new access token replaces the previous one (one access row per account, as new-api\'s one column); at most 10 a minute per account, then 429 with Retry-After', async () => {
    const a = await h.account();
    const b = await h.account();
    const accessRows = async (userId: number) =>
      (await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM access_tokens WHERE user_id = ${userId} AND kind = 'access'`)[0]!.n;
    const issued: string[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await get('/api/user/token', a.auth);
      expect(res.statusCode, res.body).toBe(200);
      issued.push(res.json().data as string);
      expect(await accessRows(a.user.id)).toBe(1);
    }
    const refused = await get('/api/user/token', a.auth);
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toEqual({ success: false, message: expect.stringMatching(/^too many access tokens issued for this account; retry in \d+ s$/) });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(60);
    // Nothing was issued or revoked by the refused call: the last token still works, the earlier ones do not.
    expect(await accessRows(a.user.id)).toBe(1);
    expect((await get('/api/user/self', { authorization: `Bearer ${issued[9]}` })).statusCode).toBe(200);
    expect((await get('/api/user/self', { authorization: `Bearer ${issued[0]}` })).statusCode).toBe(401);
    // Revoking with DELETE leaves the one row (revoked) until the next issue replaces it.
    expect((await h.app.inject({ method: 'DELETE', url: '/api/user/token', headers: b.auth })).statusCode).toBe(200);
    expect((await get('/api/user/token', b.auth)).statusCode).toBe(200);
    expect((await h.app.inject({ method: 'DELETE', url: '/api/user/token', headers: b.auth })).json().data).toEqual({ revoked: 1 });
    expect(await accessRows(b.user.id)).toBe(1);
    // Another account has its own budget.
    expect((await get('/api/user/token', b.auth)).statusCode).toBe(200);
    expect(await accessRows(b.user.id)).toBe(1);
  });

  it('refuses missing, unknown and expired credentials and sk- API keys with 401', async () => {
    const none = await get('/api/user/self');
    expect(none.statusCode).toBe(401);
    expect(none.json().success).toBe(false);
    expect((await get('/api/user/self', { authorization: 'Bearer deadbeef' })).statusCode).toBe(401);
    const sk = await get('/api/user/self', { authorization: 'Bearer sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL' });
    expect(sk.statusCode).toBe(401);
    expect(sk.json()).toEqual({ success: false, message: expect.stringMatching(/sk- API key is not accepted/) });
    await h.sql`UPDATE access_tokens SET expires_at = 1 WHERE token_hash IS NOT NULL AND kind = 'session'`;
    expect((await get('/api/user/self', { authorization: `Bearer ${session}` })).statusCode).toBe(401);
  });
});

describe('GET /api/user/self', () => {
  it('returns every Account field of the contract with its type, and never the password hash', async () => {
    const a = await h.account({ quota: 1234 });
    const res = await get('/api/user/self', a.auth);
    expect(res.statusCode).toBe(200);
    const { success, message, data } = res.json();
    expect(success).toBe(true);
    expect(message).toBe('');
    expect(Object.keys(data).sort()).toEqual(Object.keys(ACCOUNT_FIELDS).sort());
    for (const [field, type] of Object.entries(ACCOUNT_FIELDS)) expect(typeof data[field], field).toBe(type);
    for (const f of ['id', 'role', 'status', 'quota', 'used_quota', 'request_count', 'aff_count', 'aff_quota', 'aff_history_quota', 'inviter_id']) {
      expect(Number.isInteger(data[f]), f).toBe(true);
    }
    expect(data).toMatchObject({ id: a.user.id, quota: 1234, code_host_id: '', inviter_id: 0 });
    expect(data.permissions).toMatchObject({ sidebar_settings: true, manage_users: false, manage_options: false, manage_payment_settings: false });
    for (const v of Object.values(data.permissions)) expect(typeof v).toBe('boolean');
    expect(res.body).not.toContain('password');
  });

  it('derives permissions from the role', async () => {
    const admin = await h.account({ role: 10 });
    const perms = (await get('/api/user/self', admin.auth)).json().data.permissions;
    expect(perms).toMatchObject({ manage_users: true, manage_channels: true, manage_options: true, manage_payment_settings: false });
    const root = await h.account({ role: 100 });
    expect((await get('/api/user/self', root.auth)).json().data.permissions).toMatchObject({ manage_options: true, manage_payment_settings: true });
  });
});

describe('administrator debits (issue 10, item 5)', () => {
  it('are checked against the spendable mirror, which has open reservations and unbilled debits taken off', async () => {
    const admin = await h.account({ role: 10 });
    const target = await h.account({ quota: 1000 });
    const id = target.user.id;
    // 800 is reserved or settled but not yet billed: Postgres still says 1000.
    await h.redis.set(h.keys.accountBalance(id), 200);
    const manage = (value: number) => post('/api/user/manage', { id, action: 'add_quota', value }, admin.auth);
    const pgQuota = async () => Number((await h.sql`SELECT quota FROM users WHERE id = ${id}`)[0]!.quota);

    const tooMuch = await manage(-500);
    expect(tooMuch.statusCode).toBe(400);
    expect(tooMuch.json().message).toMatch(/^value: would make the balance negative \(spendable 200, Postgres 1000\); 800 of it is held by requests in flight, debits not yet billed, or credit a relay holds/);
    const setTooLow = await put('/api/user/', { id, quota: 400 }, admin.auth);
    expect(setTooLow.statusCode).toBe(400);
    expect(setTooLow.json().message).toMatch(/^quota: would make the balance negative \(spendable 200, Postgres 1000\)/);
    expect([await h.quotaStore.accountBalance(id), await pgQuota()]).toEqual([200, 1000]);

    expect((await manage(-150)).statusCode).toBe(200);
    expect((await put('/api/user/', { id, quota: 800 }, admin.auth)).statusCode).toBe(200);
    expect([await h.quotaStore.accountBalance(id), await pgQuota()]).toEqual([0, 800]);
    // Credits are never refused.
    expect((await put('/api/user/', { id, quota: 900 }, admin.auth)).statusCode).toBe(200);
    expect(await h.quotaStore.accountBalance(id)).toBe(100);
  });

  it('empty an account with requests in flight: what is spendable is removed, what they hold stays until they settle', async () => {
    // Review lifecycle: PUT quota 0 was refused 400 for as long as the account had traffic.
    const admin = await h.account({ role: 10 });
    const target = await h.account({ quota: 1000 });
    const id = target.user.id;
    // 800 is reserved or settled but not yet billed: Postgres still says 1000.
    await h.redis.set(h.keys.accountBalance(id), 200);
    const emptied = await put('/api/user/', { id, quota: 0 }, admin.auth);
    expect(emptied.statusCode, emptied.body).toBe(200);
    const [row] = await h.sql<{ quota: string }[]>`SELECT quota FROM users WHERE id = ${id}`;
    expect(Number(row!.quota)).toBe(800);
    expect(await h.quotaStore.accountBalance(id)).toBe(0);
    const [entry] = await h.sql<{ quota_delta: string; log_event: string }[]>`SELECT quota_delta, log_event FROM ledger WHERE user_id = ${id} AND type = 3`;
    expect(Number(entry!.quota_delta)).toBe(-200);
    // The account's log row says so.
    expect(String(entry!.log_event)).toContain('An administrator set the balance from 1000 to 0 (-200 quota); 800 quota held by requests in flight or not yet billed stays until they settle');
    // Nothing spendable left: refused, saying why.
    const again = await put('/api/user/', { id, quota: 0 }, admin.auth);
    expect(again.statusCode).toBe(400);
    expect(again.json().message).toMatch(/^quota: would make the balance negative \(spendable 0, Postgres 800\)/);
    // Less than nothing spendable (a mirror below zero): refused too, never turned into a credit.
    await h.redis.set(h.keys.accountBalance(id), -70);
    const below = await put('/api/user/', { id, quota: 0 }, admin.auth);
    expect(below.statusCode).toBe(400);
    expect(Number((await h.sql<{ quota: string }[]>`SELECT quota FROM users WHERE id = ${id}`)[0]!.quota)).toBe(800);
  });

  it('count a committed console debit that has not reached the mirror yet: two debits in that window cannot both pass', async () => {
    const admin = await h.account({ role: 10 });
    const target = await h.account({ quota: 1000 });
    const id = target.user.id;
    // 200 reserved or unbilled: Postgres 1000, mirror 800.
    await h.redis.set(h.keys.accountBalance(id), 800);
    // An administrator's -500 committed, its mirror step not run yet (it runs after the commit, and
    // the billing worker's follow-up retries it 30 s later when it fails): Postgres 500, mirror 800.
    const first = await h.sql.begin((tx) => recordConsoleCredit(tx, {
      requestId: manageRequestId(), type: LOG_TYPE.manage, userId: id, delta: -500, content: 'first debit', createdAt: Math.floor(Date.now() / 1000),
    }));
    const manage = (value: number) => post('/api/user/manage', { id, action: 'add_quota', value }, admin.auth);
    // Spendable is 300 (800 less the pending 500), not min(800, 500) = 500.
    const second = await manage(-500);
    expect(second.statusCode).toBe(400);
    expect(second.json().message).toMatch(/^value: would make the balance negative \(spendable 300, Postgres 500\)/);
    // Once the first debit reached the mirror it is counted once, not twice, though its row stays
    // pending until the billing worker settles its log event.
    await finishConsoleCredit({ sql: h.sql, redis: h.redis, quota: h.quotaStore }, {
      ledgerId: first!.ledgerId, userId: id, delta: -500, creditSeq: first!.creditSeq, logEvent: encodeUsageEvent(consoleUsageEvent(first!)),
    });
    expect((await h.sql`SELECT follow_up_pending FROM ledger WHERE id = ${first!.ledgerId}`)[0]!.follow_up_pending).toBe(true);
    expect(await h.quotaStore.accountBalance(id)).toBe(300);
    expect((await manage(-300)).statusCode).toBe(200);
    expect([await h.quotaStore.accountBalance(id), Number((await h.sql`SELECT quota FROM users WHERE id = ${id}`)[0]!.quota)]).toEqual([0, 200]);
  });

  it('check Postgres when the mirror is not loaded', async () => {
    const admin = await h.account({ role: 10 });
    const target = await h.account({ quota: 100 });
    const res = await post('/api/user/manage', { id: target.user.id, action: 'add_quota', value: -150 }, admin.auth);
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(/^value: would make the balance negative \(spendable 100, Postgres 100\)/);
    expect((await put('/api/user/', { id: target.user.id, quota: 0 }, admin.auth)).statusCode).toBe(200);
  });
});

describe('PUT /api/user/ (administrator)', () => {
  it('moves the loaded Redis mirror by the quota delta and publishes an invalidation', async () => {
    const admin = await h.account({ role: 10 });
    const target = await h.account({ quota: 1000 });
    // The relay has loaded the mirror and 300 is reserved: mirror = 1000 - 300.
    await h.redis.set(h.keys.accountBalance(target.user.id), 700);
    const sub = h.redis.duplicate();
    const messages: string[] = [];
    await sub.subscribe(h.keys.invalidationChannel());
    sub.on('message', (_c, m) => messages.push(m));

    const res = await put('/api/user/', { id: target.user.id, quota: 5000, group: 'vip' }, admin.auth);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ success: true, message: '', data: { id: target.user.id, quota: 5000, group: 'vip' } });
    expect(await h.quotaStore.accountBalance(target.user.id)).toBe(700 + 4000);
    const [row] = await h.sql<{ quota: number; group: string }[]>`SELECT quota, "group" FROM users WHERE id = ${target.user.id}`;
    expect(row).toEqual({ quota: 5000, group: 'vip' });

    const down = await put('/api/user/', { id: target.user.id, quota: 4500 }, admin.auth);
    expect(down.statusCode).toBe(200);
    expect(await h.quotaStore.accountBalance(target.user.id)).toBe(4200);

    await new Promise((r) => setTimeout(r, 100));
    expect(messages.map((m) => JSON.parse(m))).toContainEqual({ kind: 'user', id: target.user.id });
    await sub.quit();
  });

  it('refuses a balance set from a stale reading (expected_quota), so a top-up made meanwhile is not undone', async () => {
    const admin = await h.account({ role: 10 });
    const target = await h.account({ quota: 1000 });
    // The form was loaded at 1000; the account tops up 250000 meanwhile.
    await h.sql`UPDATE users SET quota = quota + 250000 WHERE id = ${target.user.id}`;
    const stale = await put('/api/user/', { id: target.user.id, display_name: 'renamed', quota: 1000, expected_quota: 1000 }, admin.auth);
    expect(stale.statusCode).toBe(409);
    expect(stale.json()).toEqual({ success: false, message: 'quota: the balance changed since it was read (now 251000 quota); read it again' });
    const [row] = await h.sql<{ quota: number; display_name: string }[]>`SELECT quota, display_name FROM users WHERE id = ${target.user.id}`;
    expect(row).toEqual({ quota: 251000, display_name: expect.not.stringMatching(/^renamed$/) });
    // Read again: set.
    const fresh = await put('/api/user/', { id: target.user.id, quota: 2000, expected_quota: 251000 }, admin.auth);
    expect(fresh.json().data.quota).toBe(2000);
    // Without quota the balance is not touched, expected_quota or not.
    expect((await put('/api/user/', { id: target.user.id, display_name: 'renamed' }, admin.auth)).json().data).toMatchObject({ quota: 2000, display_name: 'renamed' });
  });

  // A balance goes below zero by a cost above its reservation (docs/billing.md): the console's form
  // sends the balance it read as expected_quota, and an overdrawn account's could not be set (review pay).
  it('sets the balance of an overdrawn account from its negative reading (expected_quota below 0)', async () => {
    const admin = await h.account({ role: 10 });
    const target = await h.account({ quota: 0 });
    await h.sql`UPDATE users SET quota = -1234 WHERE id = ${target.user.id}`;
    const res = await put('/api/user/', { id: target.user.id, quota: 500000, expected_quota: -1234 }, admin.auth);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data.quota).toBe(500000);
    const stale = await put('/api/user/', { id: target.user.id, quota: 1, expected_quota: -1234 }, admin.auth);
    expect(stale.statusCode).toBe(409);
    // The balance set is still at least 0.
    expect((await put('/api/user/', { id: target.user.id, quota: -1, expected_quota: 500000 }, admin.auth)).statusCode).toBe(400);
  });

  it('leaves an unloaded mirror unloaded (it will be seeded from Postgres)', async () => {
    const admin = await h.account({ role: 10 });
    const target = await h.account({ quota: 10 });
    expect((await put('/api/user/', { id: target.user.id, quota: 20 }, admin.auth)).statusCode).toBe(200);
    expect(await h.quotaStore.accountBalance(target.user.id)).toBeNull();
  });

  it('refuses an ordinary user (403), an equal role (403), unknown groups (400) and unknown ids (404)', async () => {
    const user = await h.account();
    const other = await h.account();
    const res = await put('/api/user/', { id: other.user.id, quota: 1 }, user.auth);
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ success: false, message: 'insufficient permission for this operation' });

    const admin = await h.account({ role: 10 });
    const admin2 = await h.account({ role: 10 });
    expect((await put('/api/user/', { id: admin2.user.id, quota: 1 }, admin.auth)).statusCode).toBe(403);
    expect((await put('/api/user/', { id: admin.user.id, quota: 1e9 }, admin.auth)).statusCode).toBe(403);

    const bad = await put('/api/user/', { id: other.user.id, group: 'nope' }, admin.auth);
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toMatch(/^group: /);
    const badStatus = await put('/api/user/', { id: other.user.id, status: 7 }, admin.auth);
    expect(badStatus.statusCode).toBe(400);
    expect(badStatus.json().message).toMatch(/^status: /);
    expect((await put('/api/user/', { id: 999_999_999_999, quota: 1 }, admin.auth)).statusCode).toBe(404);
    const root = await h.account({ role: 100 });
    expect((await put('/api/user/', { id: admin.user.id, status: 2 }, root.auth)).statusCode).toBe(200);
  });
});

describe('PUT /api/user/: password, username and the fields it does not change (D1)', () => {
  const login = (username: string, password: string) => post('/api/user/login', { username, password });
  const setOption = (key: string, value: string) =>
    h.sql`INSERT INTO options (key, value) VALUES (${key}, ${value}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;

  it('resets a password: stored hashed, the old one refused, every session and access token of the account revoked', async () => {
    const admin = await h.account({ role: 10 });
    const target = await h.account();
    const access = (await get('/api/user/token', target.auth)).json().data as string;
    const res = await put('/api/user/', { id: target.user.id, password: 'a new password 1' }, admin.auth);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data).not.toHaveProperty('password');
    expect(res.json().data).not.toHaveProperty('password_hash');
    const [row] = await h.sql<{ password_hash: string }[]>`SELECT password_hash FROM users WHERE id = ${target.user.id}`;
    expect(row!.password_hash).toMatch(/^scrypt\$/);
    expect(row!.password_hash).not.toContain('a new password 1');
    expect((await login(target.user.username, target.password)).statusCode).toBe(401);
    expect((await login(target.user.username, 'a new password 1')).statusCode).toBe(200);
    for (const credential of [target.token, access]) {
      const self = await get('/api/user/self', { authorization: `Bearer ${credential}` });
      expect(self.statusCode).toBe(401);
      expect(self.json().message).toBe('access token is invalid, expired or revoked');
    }
  });

  it('takes password \'\' (new-api\'s form, field left empty) as no reset', async () => {
    const admin = await h.account({ role: 10 });
    const target = await h.account();
    const res = await put('/api/user/', { id: target.user.id, password: '', display_name: 'Renamed' }, admin.auth);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data.display_name).toBe('Renamed');
    expect((await login(target.user.username, target.password)).statusCode).toBe(200);
    expect((await get('/api/user/self', target.auth)).statusCode).toBe(200);
  });

  it('applies the password rules of registration (PasswordMinLength, PasswordRequireLetterAndDigit)', async () => {
    const admin = await h.account({ role: 10 });
    const target = await h.account();
    const short = await put('/api/user/', { id: target.user.id, password: 'short' }, admin.auth);
    expect(short.statusCode).toBe(400);
    expect(short.json()).toEqual({ success: false, message: 'password: must be at least 8 characters' });
    await setOption('PasswordMinLength', '12');
    await setOption('PasswordRequireLetterAndDigit', 'true');
    try {
      expect((await put('/api/user/', { id: target.user.id, password: 'elevenchars' }, admin.auth)).json().message)
        .toBe('password: must be at least 12 characters');
      expect((await put('/api/user/', { id: target.user.id, password: 'only letters here' }, admin.auth)).json().message)
        .toBe('password: must contain a letter and a digit');
      expect((await login(target.user.username, target.password)).statusCode).toBe(200);
    } finally {
      await h.sql`DELETE FROM options WHERE key IN ('PasswordMinLength', 'PasswordRequireLetterAndDigit')`;
    }
  });

  it('keeps the role rules: not root, not another administrator, not oneself (own password: PUT /api/user/self)', async () => {
    const admin = await h.account({ role: 10 });
    const admin2 = await h.account({ role: 10 });
    const root = await h.account({ role: 100 });
    expect((await put('/api/user/', { id: admin2.user.id, password: 'a new password 1' }, admin.auth)).statusCode).toBe(403);
    expect((await put('/api/user/', { id: root.user.id, password: 'a new password 1' }, admin.auth)).statusCode).toBe(403);
    const self = await put('/api/user/', { id: admin.user.id, password: 'a new password 1' }, admin.auth);
    expect(self.statusCode).toBe(400);
    expect(self.json().message).toMatch(/^password: change your own password with PUT \/api\/user\/self/);
    const rootSelf = await put('/api/user/', { id: root.user.id, password: 'a new password 1' }, root.auth);
    expect(rootSelf.statusCode).toBe(400);
    for (const a of [admin, admin2, root]) expect((await login(a.user.username, a.password)).statusCode).toBe(200);
    // The super administrator resets an administrator's.
    expect((await put('/api/user/', { id: admin2.user.id, password: 'a new password 1' }, root.auth)).statusCode).toBe(200);
    expect((await login(admin2.user.username, 'a new password 1')).statusCode).toBe(200);
  });

  it('renames with registration\'s rules: 409 for a taken name (case and Unicode form folded), 400 for a bad one', async () => {
    const admin = await h.account({ role: 10 });
    const target = await h.account();
    const other = await h.account({ username: uniqueName('Taken') });
    const fresh = uniqueName('nu');
    const res = await put('/api/user/', { id: target.user.id, username: fresh }, admin.auth);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data.username).toBe(fresh);
    expect((await login(fresh, target.password)).statusCode).toBe(200);
    // Its own name again (new-api's form sends it unchanged), or in another case: no conflict with itself.
    expect((await put('/api/user/', { id: target.user.id, username: fresh }, admin.auth)).statusCode).toBe(200);
    expect((await put('/api/user/', { id: target.user.id, username: fresh.toUpperCase() }, admin.auth)).statusCode).toBe(200);
    for (const name of [other.user.username, other.user.username.toLowerCase()]) {
      const taken = await put('/api/user/', { id: target.user.id, username: name }, admin.auth);
      expect(taken.statusCode).toBe(409);
      expect(taken.json()).toEqual({ success: false, message: 'username is already taken' });
    }
    for (const bad of ['ab', 'has space', 'x'.repeat(21), '\u0430dmin']) {
      const r = await put('/api/user/', { id: target.user.id, username: bad }, admin.auth);
      expect(r.statusCode).toBe(400);
      expect(r.json().message).toMatch(/^username: /);
    }
    // Renaming is an edit like the others: not of an administrator's peer.
    const peer = await h.account({ role: 10 });
    expect((await put('/api/user/', { id: peer.user.id, username: uniqueName('x') }, admin.auth)).statusCode).toBe(403);
  });

  it('refuses a change of email or role naming the field, and accepts them unchanged (new-api sends the whole account)', async () => {
    const admin = await h.account({ role: 10 });
    const target = await h.account();
    await h.sql`UPDATE users SET email = 'kept@example.com' WHERE id = ${target.user.id}`;
    const email = await put('/api/user/', { id: target.user.id, email: 'new@example.com', display_name: 'not applied' }, admin.auth);
    expect(email.statusCode).toBe(400);
    expect(email.json().message).toMatch(/^email: an administrator cannot change/);
    const role = await put('/api/user/', { id: target.user.id, role: 10 }, admin.auth);
    expect(role.statusCode).toBe(400);
    expect(role.json().message).toMatch(/^role: is changed with POST \/api\/user\/manage/);
    const [row] = await h.sql<{ role: number; email: string; display_name: string }[]>`SELECT role, email, display_name FROM users WHERE id = ${target.user.id}`;
    expect(row).toEqual({ role: 1, email: 'kept@example.com', display_name: target.user.display_name });
    const same = await put('/api/user/', {
      id: target.user.id, username: target.user.username, display_name: 'Shown', password: '', email: 'kept@example.com', role: 1,
      group: 'default', quota: 0, github_id: '', remark: '',
    }, admin.auth);
    expect(same.statusCode, same.body).toBe(200);
    expect(same.json().data).toMatchObject({ display_name: 'Shown', email: 'kept@example.com', role: 1 });
  });

  it('GET /api/user/:id follows the list: an administrator does not read itself there (403), root does', async () => {
    const admin = await h.account({ role: 10 });
    const root = await h.account({ role: 100 });
    const own = await get(`/api/user/${admin.user.id}`, admin.auth);
    expect(own.statusCode).toBe(403);
    expect((await get(`/api/user/${root.user.id}`, root.auth)).statusCode).toBe(200);
  });
});

describe('unknown routes', () => {
  it('answer 404 in the envelope', async () => {
    const res = await get('/api/nope');
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ success: false, message: 'no such endpoint' });
  });
});
