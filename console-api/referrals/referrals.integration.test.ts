// Referrals through the console API on real Postgres, Redis and ClickHouse: every movement is checked
// against the books (users.quota = Σ ledger.quota_delta, users.aff_quota = Σ ledger.aff_quota_delta,
// the Redis mirror, the log rows), a shared code used by many registrations at once is counted exactly.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { finishConsoleFollowUps } from '../../billing/console-follow-up.js';
import { createLogger } from '../../infra/logger.js';
import { type ConsoleHarness, startConsoleHarness, uniqueName } from '../../tests/harness/console-harness.js';

const INVITER_REWARD = 1_000;
const INVITEE_REWARD = 500;

let h: ConsoleHarness;
beforeAll(async () => {
  h = await startConsoleHarness();
  await setOption('QuotaForInviter', String(INVITER_REWARD));
  await setOption('QuotaForInvitee', String(INVITEE_REWARD));
  await setOption('AffTransferMinQuota', '300');
});
afterAll(async () => {
  await h?.close();
});

async function setOption(key: string, value: string): Promise<void> {
  await h.sql`INSERT INTO options (key, value) VALUES (${key}, ${value}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
}

const register = (payload: Record<string, unknown>, headers: Record<string, string> = {}) =>
  h.app.inject({ method: 'POST', url: '/api/user/register', payload, headers });
const PASSWORD = 'a good long password 1';

interface Books {
  quota: number;
  aff_quota: number;
  aff_history_quota: number;
  aff_count: number;
  inviter_id: number;
  ledgerQuota: number;
  ledgerAff: number;
  ledgerRows: number;
}

async function books(userId: number): Promise<Books> {
  const [u] = await h.sql<{ quota: number; aff_quota: number; aff_history_quota: number; aff_count: number; inviter_id: number }[]>`
    SELECT quota, aff_quota, aff_history_quota, aff_count, inviter_id FROM users WHERE id = ${userId}`;
  const [l] = await h.sql<{ q: string; a: string; n: string }[]>`
    SELECT COALESCE(SUM(quota_delta), 0) AS q, COALESCE(SUM(aff_quota_delta), 0) AS a, COUNT(*) AS n FROM ledger WHERE user_id = ${userId}`;
  return {
    quota: Number(u!.quota), aff_quota: Number(u!.aff_quota), aff_history_quota: Number(u!.aff_history_quota),
    aff_count: Number(u!.aff_count), inviter_id: Number(u!.inviter_id),
    ledgerQuota: Number(l!.q), ledgerAff: Number(l!.a), ledgerRows: Number(l!.n),
  };
}

async function userId(username: string): Promise<number> {
  const [row] = await h.sql<{ id: number }[]>`SELECT id FROM users WHERE username = ${username}`;
  return Number(row!.id);
}

async function logRows(uid: number): Promise<{ type: number; quota: number; content: string }[]> {
  const r = await h.clickhouse.query({
    query: 'SELECT type, quota, content FROM logs FINAL WHERE user_id = {u:UInt64} ORDER BY id',
    query_params: { u: uid }, format: 'JSONEachRow',
  });
  return (await r.json<{ type: number; quota: string; content: string }>()).map((x) => ({ type: Number(x.type), quota: Number(x.quota), content: x.content }));
}

describe('the welcome credit of a new account (QuotaForNewUser)', () => {
  it('credits each registered account once, with its ledger and log row, beside the invitation reward', async () => {
    const WELCOME = 700;
    await setOption('QuotaForNewUser', String(WELCOME));
    try {
      const plain = uniqueName('new');
      expect((await register({ username: plain, password: PASSWORD })).statusCode).toBe(200);
      const plainId = await userId(plain);
      expect(await books(plainId)).toMatchObject({ quota: WELCOME, ledgerQuota: WELCOME, ledgerRows: 1 });

      const inviter = await h.account();
      const invited = uniqueName('new');
      expect((await register({ username: invited, password: PASSWORD, aff_code: inviter.user.aff_code })).statusCode).toBe(200);
      const invitedId = await userId(invited);
      expect(await books(invitedId)).toMatchObject({ quota: WELCOME + INVITEE_REWARD, ledgerQuota: WELCOME + INVITEE_REWARD, ledgerRows: 2 });

      const events = await h.drainUsageStream();
      expect(events.map((e) => e.request_id).filter((id) => id.startsWith('new-account:')).sort()).toEqual([`new-account:${invitedId}`, `new-account:${plainId}`].sort());
      expect(await logRows(plainId)).toEqual([{ type: 1, quota: WELCOME, content: `welcome credit for a new account: +${WELCOME} quota` }]);
      expect((await logRows(invitedId)).map((r) => r.quota).sort()).toEqual([INVITEE_REWARD, WELCOME]);
      // An account an administrator creates gets none (its quota is the administrator's to set).
      const admin = await h.account({ role: 10 });
      const made = uniqueName('adm');
      const created = await h.app.inject({ method: 'POST', url: '/api/user/', headers: admin.auth, payload: { username: made, password: PASSWORD } });
      expect(created.statusCode, created.body).toBe(200);
      expect(await books(await userId(made))).toMatchObject({ quota: 0, ledgerRows: 0 });
    } finally {
      await setOption('QuotaForNewUser', '0');
    }
  });
});

describe('registration with an invitation code', () => {
  it('counts the invitation, pays both rewards with ledger and log rows, and moves a loaded mirror once', async () => {
    const inviter = await h.account({ quota: 2_000 });
    // The inviter's mirror is loaded (as a relay would have it): the reward moves aff_quota, not the balance.
    await h.redis.set(h.keys.accountBalance(inviter.user.id), 2_000);
    const name = uniqueName('inv');
    const res = await register({ username: name, password: PASSWORD, aff_code: inviter.user.aff_code });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true, message: '' });
    const inviteeId = await userId(name);

    const a = await books(inviter.user.id);
    expect(a).toMatchObject({ quota: 2_000, aff_count: 1, aff_quota: INVITER_REWARD, aff_history_quota: INVITER_REWARD });
    // users.aff_quota = Σ ledger.aff_quota_delta; the balance part of the reward row is 0 (the 2,000 were set directly).
    expect(a.ledgerAff).toBe(a.aff_quota);
    expect(a.ledgerQuota).toBe(0);
    const b = await books(inviteeId);
    expect(b).toMatchObject({ quota: INVITEE_REWARD, inviter_id: inviter.user.id, aff_count: 0, aff_quota: 0 });
    expect(b.ledgerQuota).toBe(b.quota);
    expect(b.ledgerRows).toBe(1);
    expect(await h.quotaStore.accountBalance(inviter.user.id)).toBe(2_000);

    const events = await h.drainUsageStream();
    expect(events.map((e) => e.request_id).sort()).toEqual([`aff-invitee:${inviteeId}`, `aff-inviter:${inviteeId}`]);
    expect(await logRows(inviter.user.id)).toEqual([expect.objectContaining({ type: 3, quota: INVITER_REWARD })]);
    expect(await logRows(inviteeId)).toEqual([expect.objectContaining({ type: 1, quota: INVITEE_REWARD })]);
    // Neither row names the other account: a shared invite link told its owner every newcomer's login
    // name, and every newcomer the inviter's, an administrator's included (review logs).
    expect((await logRows(inviter.user.id))[0]!.content).toBe(`referral reward: an account registered with your invitation code; +${INVITER_REWARD} referral quota (aff_quota, not the balance)`);
    expect((await logRows(inviteeId))[0]!.content).toBe(`invitation reward: registered with an invitation code; +${INVITEE_REWARD} quota`);
    // The billing worker settled both log events: nothing is left pending for its follow-up.
    const [pending] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM ledger WHERE user_id IN (${inviter.user.id}, ${inviteeId}) AND follow_up_pending`;
    expect(pending!.n).toBe(0);

    const self = await h.app.inject({ method: 'GET', url: '/api/user/self', headers: inviter.auth });
    expect(self.json().data).toMatchObject({ aff_count: 1, aff_quota: INVITER_REWARD, aff_history_quota: INVITER_REWARD });
    const aff = await h.app.inject({ method: 'GET', url: '/api/user/aff', headers: inviter.auth });
    expect(aff.json()).toEqual({ success: true, message: '', data: inviter.user.aff_code });
  });

  it('counts a code used by many registrations at once exactly, with the sums of every reward', async () => {
    const inviter = await h.account();
    const n = 24;
    const names = Array.from({ length: n }, () => uniqueName('c'));
    const results = await Promise.all(names.map((username) => register({ username, password: PASSWORD, aff_code: inviter.user.aff_code })));
    expect(results.map((r) => r.statusCode)).toEqual(Array(n).fill(200));
    const a = await books(inviter.user.id);
    expect(a).toMatchObject({ aff_count: n, aff_quota: n * INVITER_REWARD, aff_history_quota: n * INVITER_REWARD, ledgerAff: n * INVITER_REWARD, ledgerRows: n });
    const [invitees] = await h.sql<{ n: number; q: string }[]>`
      SELECT count(*)::int AS n, SUM(quota) AS q FROM users WHERE inviter_id = ${inviter.user.id}`;
    expect(invitees).toEqual({ n, q: String(n * INVITEE_REWARD) });
    const [ledger] = await h.sql<{ q: string }[]>`
      SELECT SUM(l.quota_delta) AS q FROM ledger l JOIN users u ON u.id = l.user_id WHERE u.inviter_id = ${inviter.user.id}`;
    expect(Number(ledger!.q)).toBe(n * INVITEE_REWARD);
    await h.drainUsageStream();
    const logs = await logRows(inviter.user.id);
    expect(logs).toHaveLength(n);
    expect(logs.reduce((s, r) => s + r.quota, 0)).toBe(n * INVITER_REWARD);
  });

  it('refuses an unknown code and a self-invitation, creating no account and moving nothing', async () => {
    const inviter = await h.account();
    await h.sql`UPDATE users SET email = 'owner@example.com' WHERE id = ${inviter.user.id}`;
    const unknown = await register({ username: uniqueName(), password: PASSWORD, aff_code: 'NOSUCHCODE' });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json()).toEqual({ success: false, message: 'aff_code: unknown invitation code' });

    const sameEmailName = uniqueName();
    const sameEmail = await register({ username: sameEmailName, password: PASSWORD, email: 'Owner@Example.com', aff_code: inviter.user.aff_code });
    expect(sameEmail.statusCode).toBe(400);
    expect(sameEmail.json().message).toBe('aff_code: an account cannot invite itself');
    const byOwner = await register({ username: uniqueName(), password: PASSWORD, aff_code: inviter.user.aff_code }, inviter.auth);
    expect(byOwner.statusCode).toBe(400);
    expect(byOwner.json().message).toBe('aff_code: an account cannot invite itself');

    const [exists] = await h.sql`SELECT 1 FROM users WHERE username = ${sameEmailName}`;
    expect(exists).toBeUndefined();
    expect(await books(inviter.user.id)).toMatchObject({ aff_count: 0, aff_quota: 0, ledgerRows: 0 });
  });

  it('refuses the code of a banned account, which earns nothing (review hostileapi: its aff_quota went 0 → 1000)', async () => {
    const inviter = await h.account();
    await h.sql`UPDATE users SET status = 2 WHERE id = ${inviter.user.id}`;
    const name = uniqueName();
    const res = await register({ username: name, password: PASSWORD, aff_code: inviter.user.aff_code });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ success: false, message: 'aff_code: unknown invitation code' });
    const [exists] = await h.sql`SELECT 1 FROM users WHERE username = ${name}`;
    expect(exists).toBeUndefined();
    expect(await books(inviter.user.id)).toMatchObject({ aff_count: 0, aff_quota: 0, ledgerRows: 0 });
  });
});

describe('POST /api/user/aff_transfer', () => {
  it('moves referral quota to the balance in one transaction with its ledger and log rows; the mirror moves once', async () => {
    const inviter = await h.account({ quota: 10_000 });
    for (let i = 0; i < 3; i++) {
      expect((await register({ username: uniqueName('t'), password: PASSWORD, aff_code: inviter.user.aff_code })).statusCode).toBe(200);
    }
    await h.drainUsageStream();
    await h.redis.set(h.keys.accountBalance(inviter.user.id), 10_000);
    const transfer = (quota: unknown) => h.app.inject({ method: 'POST', url: '/api/user/aff_transfer', payload: { quota }, headers: inviter.auth });

    const small = await transfer(299);
    expect(small.statusCode).toBe(400);
    expect(small.json().message).toBe('quota: the smallest transfer is 300 quota');
    const tooMuch = await transfer(3 * INVITER_REWARD + 1);
    expect(tooMuch.statusCode).toBe(400);
    expect(tooMuch.json().message).toBe(`quota: exceeds the referral quota available (${3 * INVITER_REWARD} quota)`);
    expect((await transfer('100')).statusCode).toBe(400);

    const res = await transfer(1_200);
    expect(res.statusCode).toBe(200);
    const a = await books(inviter.user.id);
    expect(a).toMatchObject({ quota: 11_200, aff_quota: 3 * INVITER_REWARD - 1_200, aff_history_quota: 3 * INVITER_REWARD });
    expect(a.ledgerAff).toBe(a.aff_quota);
    // The balance rose by exactly what the ledger's balance column records (10,000 were set directly).
    expect(a.ledgerQuota).toBe(1_200);
    expect(await h.quotaStore.accountBalance(inviter.user.id)).toBe(11_200);

    // The billing worker's follow-up finishing the same credit again moves nothing twice.
    const [row] = await h.sql<{ id: number }[]>`SELECT id FROM ledger WHERE user_id = ${inviter.user.id} AND request_id LIKE 'aff-transfer:%'`;
    await h.sql`UPDATE ledger SET follow_up_pending = true, settled_at = now() - interval '1 hour' WHERE id = ${row!.id}`;
    const log = createLogger(h.config, 'test-follow-up');
    await finishConsoleFollowUps({ sql: h.sql, redis: h.redis, quota: h.quotaStore, log }, 0);
    expect(await h.quotaStore.accountBalance(inviter.user.id)).toBe(11_200);
    await h.drainUsageStream();
    const transfers = (await logRows(inviter.user.id)).filter((r) => r.type === 1);
    expect(transfers).toEqual([expect.objectContaining({ type: 1, quota: 1_200 })]);

    // Parallel transfers of the whole remainder: exactly one succeeds, aff_quota never goes negative.
    const rest = 3 * INVITER_REWARD - 1_200;
    const racing = await Promise.all(Array.from({ length: 6 }, () => transfer(rest)));
    expect(racing.filter((r) => r.statusCode === 200)).toHaveLength(1);
    const end = await books(inviter.user.id);
    expect(end).toMatchObject({ quota: 10_000 + 3 * INVITER_REWARD, aff_quota: 0, ledgerAff: 0, ledgerQuota: 3 * INVITER_REWARD });
    expect(await h.quotaStore.accountBalance(inviter.user.id)).toBe(end.quota);
  });
});

describe('registration options', () => {
  it('closes registration, applies the password rules, and requires a verified e-mail when asked', async () => {
    await setOption('PasswordRegisterEnabled', 'false');
    const closed = await register({ username: uniqueName(), password: PASSWORD });
    expect(closed.statusCode).toBe(403);
    expect(closed.json()).toEqual({ success: false, message: 'registration is closed' });
    await setOption('PasswordRegisterEnabled', 'true');
    await setOption('RegisterEnabled', 'false');
    expect((await register({ username: uniqueName(), password: PASSWORD })).statusCode).toBe(403);
    await setOption('RegisterEnabled', 'true');

    await setOption('PasswordMinLength', '12');
    await setOption('PasswordRequireLetterAndDigit', 'true');
    const short = await register({ username: uniqueName(), password: 'abcdefgh1' });
    expect(short.statusCode).toBe(400);
    expect(short.json().message).toBe('password: must be at least 12 characters');
    const noDigit = await register({ username: uniqueName(), password: 'only letters here' });
    expect(noDigit.json().message).toBe('password: must contain a letter and a digit');
    expect((await register({ username: uniqueName(), password: 'letters and 1 digit' })).statusCode).toBe(200);
    // A password change follows the same rules.
    const changer = await h.account();
    const change = await h.app.inject({
      method: 'PUT', url: '/api/user/self', headers: changer.auth, payload: { original_password: changer.password, password: 'abcdefgh1' },
    });
    expect(change.statusCode).toBe(400);
    expect(change.json().message).toBe('password: must be at least 12 characters');
    await setOption('PasswordMinLength', '8');
    await setOption('PasswordRequireLetterAndDigit', 'false');

    await setOption('EmailVerificationEnabled', 'true');
    const unverified = await register({ username: uniqueName(), password: PASSWORD, email: 'x@example.com' });
    expect(unverified.statusCode).toBe(400);
    expect(unverified.json().message).toMatch(/^verification_code: /);
    const wrong = await register({ username: uniqueName(), password: PASSWORD, email: 'x@example.com', verification_code: '123456' });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json()).toEqual({ success: false, message: 'the code is wrong, expired or already used' });
    await setOption('EmailVerificationEnabled', 'false');

    const bad = await h.app.inject({
      method: 'PUT', url: '/api/option/', payload: { key: 'PasswordMinLength', value: 4 },
      headers: (await h.account({ role: 100 })).auth,
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toMatch(/PasswordMinLength/);
  });
});
