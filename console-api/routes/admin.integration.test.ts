import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MockUpstream, startMockUpstream } from '../../bench/mock-upstream/mock-upstream.js';
import { quotaCost } from '../../core/pricing/quota-cost.js';
import { createLogger } from '../../infra/logger.js';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';
import { loadRatios } from '../options/groups.js';
import { OPTION_CATALOGUE } from '../options/option-catalogue.js';
import { ACCOUNT, expectShape } from '../testing/contract.js';

let h: ConsoleHarness;
let user: TestAccount;
let admin: TestAccount;
let root: TestAccount;
let mock: MockUpstream;
/** How much of a new option value a log line holds (README, PUT /api/option/). */
const LOGGED_OPTION_VALUE_CHARS = 200;
/** The console's log lines (info and above): option changes are logged with who made them. */
const logLines: string[] = [];
beforeAll(async () => {
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(chunk.toString('utf8'));
      done();
    },
  });
  h = await startConsoleHarness({}, { logger: createLogger({ LOG_LEVEL: 'info' }, 'console-api', stream) });
  user = await h.account();
  admin = await h.account({ role: 10 });
  root = await h.account({ role: 100 });
  mock = await startMockUpstream({ apiKey: 'sk-ant-channel-key' });
});
afterAll(async () => {
  await mock?.close();
  await h?.close();
});

const inject = (method: string, url: string, who: TestAccount | undefined, payload?: unknown) =>
  h.app.inject({
    method: method as 'GET', url, ...(who ? { headers: who.auth } : {}),
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
const watch = async () => {
  const sub = h.redis.duplicate();
  const messages: unknown[] = [];
  await sub.subscribe(h.keys.invalidationChannel());
  sub.on('message', (_c, m) => messages.push(JSON.parse(m)));
  return { messages, stop: async () => { await new Promise((r) => setTimeout(r, 100)); await sub.quit(); } };
};

describe('role guard', () => {
  it('refuses an ordinary account (403) on every administrator endpoint, and anonymous callers (401)', async () => {
    const adminEndpoints = h.app.consoleApi.endpoints.filter((e) => typeof e.access === 'number' && e.access >= 10);
    expect(adminEndpoints.length).toBeGreaterThanOrEqual(18);
    for (const e of adminEndpoints) {
      for (const method of e.methods) {
        const url = e.path.replace(/:id/g, '1');
        const res = await inject(method, url, user, method === 'GET' || method === 'DELETE' ? undefined : {});
        expect(res.statusCode, `${method} ${url}`).toBe(403);
        expect(res.json(), `${method} ${url}`).toEqual({ success: false, message: 'insufficient permission for this operation' });
        expect((await inject(method, url, undefined)).statusCode, `${method} ${url} anonymous`).toBe(401);
      }
    }
  });
});

describe('accounts (administration)', () => {
  it('lists, searches and shows accounts with the Account shape', async () => {
    const target = await h.account({ username: `findme${Date.now() % 100000}` });
    const list = (await inject('GET', '/api/user/?p=1&page_size=2', admin)).json().data;
    expect(list).toMatchObject({ page: 1, page_size: 2 });
    expect(list.total).toBeGreaterThanOrEqual(2);
    expect(list.items).toHaveLength(2);
    for (const a of list.items) expectShape(a, ACCOUNT, 'items[]');
    const found = (await inject('GET', '/api/user/search?keyword=findme', admin)).json().data;
    expect(found.items.map((a: { id: number }) => a.id)).toEqual([target.user.id]);
    const byId = (await inject('GET', `/api/user/search?keyword=${target.user.id}`, admin)).json().data;
    expect(byId.items[0].id).toBe(target.user.id);
    const one = await inject('GET', `/api/user/${target.user.id}`, admin);
    expect(one.statusCode).toBe(200);
    expectShape(one.json().data, ACCOUNT);
    expect((await inject('GET', `/api/user/${root.user.id}`, admin)).statusCode).toBe(403);
    expect((await inject('GET', '/api/user/999999999999', admin)).statusCode).toBe(404);
    expect((await inject('GET', '/api/user/0x1', admin)).json().message).toMatch(/^id: /);
    // A name where the id goes is a path that is no endpoint (routes/channel-list.integration.test.ts).
    expect((await inject('GET', '/api/user/abc', admin)).json()).toEqual({ success: false, message: 'no such endpoint' });
  });

  it('an administrator lists and searches only accounts of a lower role; the super administrator every account', async () => {
    const peer = await h.account({ role: 10, username: `peeradm${Date.now() % 100000}` });
    const page = async (who: TestAccount, url: string) => (await inject('GET', url, who)).json().data as { items: { id: number; role: number }[]; total: number };
    for (const url of ['/api/user/?page_size=100', '/api/user/search?page_size=100']) {
      const seen = await page(admin, url);
      expect(seen.items.map((a) => a.id)).toContain(user.user.id);
      expect(seen.items.every((a) => a.role < 10), url).toBe(true);
      expect(seen.total).toBe(seen.items.length);
      const all = (await page(root, url)).items.map((a) => a.id);
      expect(all).toEqual(expect.arrayContaining([user.user.id, admin.user.id, peer.user.id, root.user.id]));
    }
    expect((await page(admin, `/api/user/search?keyword=${peer.user.username}`)).items).toEqual([]);
    expect((await page(admin, `/api/user/search?keyword=${root.user.id}`)).items).toEqual([]);
    expect((await page(root, `/api/user/search?keyword=${peer.user.username}`)).items.map((a) => a.id)).toEqual([peer.user.id]);
  });

  it('add_quota writes a management (type 3) ledger row and log event and moves the loaded mirror', async () => {
    const target = await h.account({ quota: 1000 });
    await h.redis.set(h.keys.accountBalance(target.user.id), 900);
    const w = await watch();
    const res = await inject('POST', '/api/user/manage', admin, { id: target.user.id, action: 'add_quota', value: 5000, reason: 'refund' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data).toMatchObject({ id: target.user.id, quota: 6000 });
    expect(await h.quotaStore.accountBalance(target.user.id)).toBe(5900);
    const down = await inject('POST', '/api/user/manage', admin, { id: target.user.id, action: 'add_quota', value: -2000 });
    expect(down.json().data.quota).toBe(4000);
    const neg = await inject('POST', '/api/user/manage', admin, { id: target.user.id, action: 'add_quota', value: -5000 });
    expect(neg.statusCode).toBe(400);
    expect(neg.json().message).toMatch(/^value: would make the balance negative/);
    // PUT /api/user/ setting the balance is a management change too.
    expect((await inject('PUT', '/api/user/', admin, { id: target.user.id, quota: 4500 })).statusCode).toBe(200);
    const ledger = await h.sql<{ type: number; quota: number; quota_delta: number; request_id: string }[]>`
      SELECT type, quota, quota_delta, request_id FROM ledger WHERE user_id = ${target.user.id} ORDER BY id`;
    expect(ledger.map((r) => [r.type, r.quota, r.quota_delta])).toEqual([[3, 5000, 5000], [3, 2000, -2000], [3, 500, 500]]);
    for (const r of ledger) expect(r.request_id).toMatch(/^manage:[0-9a-f-]{36}$/);
    const events = (await h.drainUsageStream()).filter((e) => e.user_id === target.user.id);
    expect(events.map((e) => [e.type, e.quota, e.quota_delta])).toEqual([[3, 5000, 5000], [3, 2000, -2000], [3, 500, 500]]);
    // Worded as new-api's rows, without the administrator's login: the account reads its own log
    // (GET /api/log/self) and may not list administrators.
    expect(events.map((e) => e.content)).toEqual([
      'An administrator added 5000 quota: refund',
      'An administrator removed 2000 quota',
      'An administrator set the balance from 4000 to 4500 (+500 quota)',
    ]);
    const own = (await inject('GET', '/api/log/self?type=3', target)).json().data.items as { content: string }[];
    for (const row of own) expect(row.content).not.toContain(admin.user.username);
    // Who did it stays in the console's log, which only operators read.
    const audit = logLines.map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'balance changed by an administrator' && l.accountId === Number(target.user.id));
    expect(audit.map((l) => [l.by, l.delta, l.action])).toEqual([[Number(admin.user.id), 5000, 'add_quota'], [Number(admin.user.id), -2000, 'add_quota'], [Number(admin.user.id), 500, 'set_quota']]);
    // No group, as no protocol: `?group=default` counted it among the group's requests.
    expect(events.map((e) => e.group)).toEqual(['', '', '']);
    const logs = (await inject('GET', '/api/log/self?type=3', target)).json().data;
    expect(logs.total).toBe(3);
    await w.stop();
    expect(w.messages).toContainEqual({ kind: 'user', id: target.user.id });
  });

  it('refuses an add_quota reason with control or invisible formatting characters (it becomes the log row\'s text): 400, nothing moved', async () => {
    const target = await h.account({ quota: 1000 });
    for (const reason of ['refund\u202e', 'a\u0000b', 'line\nbreak', '\u2066x\u2069']) {
      const res = await inject('POST', '/api/user/manage', admin, { id: target.user.id, action: 'add_quota', value: 5, reason });
      expect(res.statusCode, JSON.stringify(reason)).toBe(400);
      // NUL has its own message, from the guard every input passes first.
      expect(res.json()).toEqual({ success: false, message: reason.includes('\u0000') ? 'reason: must not contain NUL (U+0000) characters' : 'reason: must not contain control or invisible formatting characters' });
    }
    const [row] = await h.sql<{ quota: number }[]>`SELECT quota FROM users WHERE id = ${target.user.id}`;
    expect(Number(row!.quota)).toBe(1000);
    expect(await h.sql`SELECT 1 FROM ledger WHERE user_id = ${target.user.id}`).toHaveLength(0);
  });

  it('refuses a credit that would take a balance past what an account holds (2^53 - 1) with a 400, moving nothing', async () => {
    const target = await h.account({ quota: 1000 });
    const big = Number.MAX_SAFE_INTEGER - 1000;
    expect((await inject('POST', '/api/user/manage', admin, { id: target.user.id, action: 'add_quota', value: big })).json().data.quota).toBe(Number.MAX_SAFE_INTEGER);
    for (let i = 0; i < 3; i++) {
      const more = await inject('POST', '/api/user/manage', admin, { id: target.user.id, action: 'add_quota', value: Number.MAX_SAFE_INTEGER });
      expect(more.statusCode).toBe(400);
      expect(more.json()).toEqual({ success: false, message: `the balance would exceed ${Number.MAX_SAFE_INTEGER} quota, the most an account holds` });
    }
    const [row] = await h.sql<{ quota: string }[]>`SELECT quota::text FROM users WHERE id = ${target.user.id}`;
    expect(row!.quota).toBe(String(Number.MAX_SAFE_INTEGER));
    const [ledger] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM ledger WHERE user_id = ${target.user.id}`;
    expect(ledger!.n).toBe(1);
  });

  it('ends every session and access token of an account it bans, so enabling it again does not bring them back', async () => {
    for (const how of ['manage', 'put'] as const) {
      const target = await h.account();
      const access = (await inject('GET', '/api/user/token', target)).json().data as string;
      const ban = how === 'manage'
        ? await inject('POST', '/api/user/manage', admin, { id: target.user.id, action: 'disable' })
        : await inject('PUT', '/api/user/', admin, { id: target.user.id, status: 2 });
      expect(ban.statusCode, how).toBe(200);
      expect((await inject('POST', '/api/user/manage', admin, { id: target.user.id, action: 'enable' })).statusCode).toBe(200);
      const bearer = (token: string) => h.app.inject({ method: 'GET', url: '/api/user/self', headers: { authorization: `Bearer ${token}` } });
      expect((await bearer(target.token)).statusCode, how).toBe(401);
      expect((await bearer(access)).statusCode, how).toBe(401);
    }
  });

  it('disables, enables, changes group; promote and demote are for the super administrator', async () => {
    const target = await h.account();
    const manage = (who: TestAccount, body: object) => inject('POST', '/api/user/manage', who, body);
    expect((await manage(admin, { id: target.user.id, action: 'disable' })).json().data.status).toBe(2);
    // Its session, revoked with the ban, is told why (it read "invalid, expired or revoked", and the
    // web console "your session expired"); once enabled again, it is only a revoked session.
    const banned = await inject('GET', '/api/user/self', target);
    expect(banned.statusCode).toBe(403);
    expect(banned.json()).toEqual({ success: false, message: 'this account is banned' });
    expect((await h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username: target.user.username, password: target.password } })).statusCode).toBe(403);
    expect((await manage(admin, { id: target.user.id, action: 'enable' })).json().data.status).toBe(1);
    // The ban ended its session; enabled again, it signs in anew.
    expect((await inject('GET', '/api/user/self', target)).statusCode).toBe(401);
    const relogin = await h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username: target.user.username, password: target.password } });
    expect(relogin.statusCode).toBe(200);
    const again = (await h.app.inject({ method: 'GET', url: '/api/user/self', headers: { authorization: `Bearer ${relogin.json().data.token}` } }));
    expect(again.statusCode).toBe(200);
    expect((await manage(admin, { id: target.user.id, action: 'set_group', group: 'vip' })).json().data.group).toBe('vip');
    expect((await manage(admin, { id: target.user.id, action: 'set_group', group: 'gold' })).statusCode).toBe(400);
    expect((await manage(admin, { id: target.user.id, action: 'promote' })).statusCode).toBe(403);
    expect((await manage(root, { id: target.user.id, action: 'promote' })).json().data.role).toBe(10);
    expect((await manage(root, { id: target.user.id, action: 'promote' })).statusCode).toBe(409);
    expect((await manage(admin, { id: target.user.id, action: 'disable' })).statusCode).toBe(403); // equal role now
    expect((await manage(root, { id: target.user.id, action: 'demote' })).json().data.role).toBe(1);
    expect((await manage(root, { id: root.user.id, action: 'disable' })).statusCode).toBe(403);
    const bad = await manage(admin, { id: target.user.id, action: 'explode' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toMatch(/^action: /);
    expect((await manage(admin, { id: target.user.id, action: 'delete' })).statusCode).toBe(200);
    expect((await inject('GET', '/api/user/self', target)).statusCode).toBe(401);
    expect((await manage(admin, { id: target.user.id, action: 'enable' })).statusCode).toBe(404);
  });
});

describe('creating accounts (administration)', () => {
  const name = (prefix: string) => `${prefix}${randomBytes(4).toString('hex')}`;

  it('an administrator creates an ordinary account that can log in: the Account shape, role 1, group default, balance 0', async () => {
    const username = name('made');
    const res = await inject('POST', '/api/user/', admin, { username, password: 'created-pass-1' });
    expect(res.statusCode).toBe(200);
    const data = res.json().data;
    expectShape(data, ACCOUNT);
    expect(data).toMatchObject({ username, display_name: username, role: 1, status: 1, group: 'default', quota: 0 });
    const login = await h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username, password: 'created-pass-1' } });
    expect(login.statusCode).toBe(200);
    expect(login.json().data.id).toBe(data.id);
    // The admin's list shows it.
    const found = (await inject('GET', `/api/user/search?keyword=${username}`, admin)).json().data;
    expect(found.items.map((a: { id: number }) => a.id)).toEqual([data.id]);
  });

  it('takes a display name and a known group; refuses an unknown group, a taken name (any case) and a weak password, creating nothing', async () => {
    const username = name('grp');
    const made = await inject('POST', '/api/user/', admin, { username, password: 'created-pass-2', display_name: 'Team VIP', group: 'vip' });
    expect(made.json().data).toMatchObject({ username, display_name: 'Team VIP', group: 'vip' });
    const other = name('nogrp');
    const unknown = await inject('POST', '/api/user/', admin, { username: other, password: 'created-pass-2', group: 'gold' });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json()).toEqual({ success: false, message: 'group: unknown group "gold"' });
    const taken = await inject('POST', '/api/user/', admin, { username: username.toUpperCase(), password: 'created-pass-2' });
    expect(taken.statusCode).toBe(409);
    expect(taken.json()).toEqual({ success: false, message: 'username is already taken' });
    const weak = await inject('POST', '/api/user/', admin, { username: other, password: 'short' });
    expect(weak.statusCode).toBe(400);
    expect(weak.json().message).toMatch(/^password: /);
    const spaced = await inject('POST', '/api/user/', admin, { username: 'has space', password: 'created-pass-2' });
    expect(spaced.json().message).toMatch(/^username: /);
    const [rows] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM users WHERE username IN (${other}, 'has space')`;
    expect(rows!.n).toBe(0);
  });

  it('creates only a lower role than the caller\'s: an administrator no administrator, the super administrator one; no root at all', async () => {
    const byAdmin = await inject('POST', '/api/user/', admin, { username: name('adm'), password: 'created-pass-3', role: 10 });
    expect(byAdmin.statusCode).toBe(403);
    expect(byAdmin.json()).toEqual({ success: false, message: 'role: you can create only accounts of a lower role than yours' });
    const byRoot = await inject('POST', '/api/user/', root, { username: name('adm'), password: 'created-pass-3', role: 10 });
    expect(byRoot.statusCode).toBe(200);
    expect(byRoot.json().data.role).toBe(10);
    const rootRole = await inject('POST', '/api/user/', root, { username: name('root'), password: 'created-pass-3', role: 100 });
    expect(rootRole.statusCode).toBe(400);
    expect(rootRole.json().message).toBe('role: must be 1 (ordinary) or 10 (administrator)');
  });
});

describe('the super administrator cannot lock itself out', () => {
  it('PUT /api/user/ with its own id and status 2 is refused, as the manage action disable is', async () => {
    const put = await inject('PUT', '/api/user/', root, { id: root.user.id, status: 2 });
    expect(put.statusCode, put.body).toBe(403);
    expect(put.json()).toEqual({ success: false, message: 'you cannot disable, demote or delete your own account' });
    const manage = await inject('POST', '/api/user/manage', root, { id: root.user.id, action: 'disable' });
    expect(manage.statusCode).toBe(403);
    const self = await inject('GET', '/api/user/self', root);
    expect(self.json().data.status).toBe(1);
    // Editing itself otherwise stays allowed.
    const rename = await inject('PUT', '/api/user/', root, { id: root.user.id, display_name: 'Root Renamed' });
    expect(rename.statusCode, rename.body).toBe(200);
  });
});

describe('channels (administration)', () => {
  let id = 0;
  it('creates, lists, shows and updates a channel, rebuilding abilities', async () => {
    // The mock provider listens on 127.0.0.1: only the super administrator's option lets a channel point there.
    expect((await inject('PUT', '/api/option/', root, { key: 'ChannelAllowPrivateNetworks', value: true })).statusCode).toBe(200);
    const created = await inject('POST', '/api/channel/', admin, { name: 'mock-a', base_url: mock.url, key: 'sk-ant-channel-key', models: 'claude-haiku-4-5' });
    expect(created.statusCode, created.body).toBe(200);
    id = created.json().data.id;
    const list = (await inject('GET', '/api/channel/?keyword=mock-', admin)).json().data;
    expect(list.items.map((c: { id: number }) => c.id)).toContain(id);
    expect(JSON.stringify(list)).not.toContain('sk-ant-channel-key');
    expect((await inject('GET', `/api/channel/${id}`, admin)).json().data).toMatchObject({ id, name: 'mock-a', response_time: 0, test_time: 0 });
    const w = await watch();
    const upd = await inject('PUT', '/api/channel/', admin, { id, models: ['claude-haiku-4-5', 'claude-sonnet-4-5'], group: 'default,vip', status: 2 });
    expect(upd.statusCode, upd.body).toBe(200);
    expect(upd.json().data).toMatchObject({ models: 'claude-haiku-4-5,claude-sonnet-4-5', group: 'default,vip', status: 2, base_url: mock.url });
    const abilities = await h.sql<{ group: string; model: string; enabled: boolean }[]>`
      SELECT "group", model, enabled FROM abilities WHERE channel_id = ${id} ORDER BY "group", model`;
    expect(abilities).toHaveLength(4);
    expect(abilities.every((a) => !a.enabled)).toBe(true);
    await inject('PUT', '/api/channel/', admin, { id, status: 1 });
    await w.stop();
    expect(w.messages).toContainEqual({ kind: 'channel', id });
    expect((await inject('PUT', '/api/channel/', admin, { id: 99999999, name: 'x' })).statusCode).toBe(404);
  });

  it('tests a channel with a one-token request and records the response time', async () => {
    const res = await inject('GET', `/api/channel/test/${id}`, admin);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().data).toMatchObject({ model: 'claude-haiku-4-5', status_code: 200 });
    expect(typeof res.json().data.time).toBe('number');
    const sent = mock.requests.at(-1)!;
    expect(sent.headers['x-api-key']).toBe('sk-ant-channel-key');
    expect(sent.body).toMatchObject({ model: 'claude-haiku-4-5', max_tokens: 1 });
    expect((await inject('GET', `/api/channel/${id}`, admin)).json().data.test_time).toBeGreaterThan(0);

    await inject('PUT', '/api/channel/', admin, { id, key: 'wrong-key' });
    const failed = await inject('GET', `/api/channel/test/${id}?model=claude-sonnet-4-5`, admin);
    expect(failed.statusCode).toBe(200);
    expect(failed.json()).toMatchObject({ success: false, message: 'channel test failed: HTTP 401 authentication_error', data: { status_code: 401 } });
  });

  it('deletes a channel and its abilities', async () => {
    expect((await inject('DELETE', `/api/channel/${id}`, admin)).statusCode).toBe(200);
    expect(await h.sql`SELECT 1 FROM abilities WHERE channel_id = ${id}`).toHaveLength(0);
    expect((await inject('DELETE', `/api/channel/${id}`, admin)).statusCode).toBe(404);
  });
});

describe('redemption codes (administration)', () => {
  it('creates a batch (at most 100), lists, disables and deletes', async () => {
    const res = await inject('POST', '/api/redemption/', admin, { name: 'batch', quota: 1000, count: 3 });
    expect(res.statusCode).toBe(200);
    const codes = res.json().data as string[];
    expect(codes).toHaveLength(3);
    for (const c of codes) expect(c).toMatch(/^[0-9a-f]{32}$/);
    expect((await inject('POST', '/api/redemption/', admin, { name: 'x', quota: 1, count: 101 })).json().message).toBe('count: must be at most 100');
    expect((await inject('POST', '/api/redemption/', admin, { name: 'x', quota: 0 })).json().message).toMatch(/^quota: /);
    const list = (await inject('GET', '/api/redemption/?keyword=batch&page_size=2', admin)).json().data;
    expect(list).toMatchObject({ total: 3, page: 1, page_size: 2 });
    expect(list.items[0]).toMatchObject({ name: 'batch', quota: 1000, status: 1, user_id: admin.user.id, used_user_id: 0, expired_time: -1 });
    const id = list.items[0].id as number;
    const off = await inject('PUT', '/api/redemption/', admin, { id, status: 2, name: 'renamed' });
    expect(off.json().data).toMatchObject({ status: 2, name: 'renamed' });
    expect((await inject('GET', `/api/redemption/${id}`, admin)).json().data.status).toBe(2);
    // A used code cannot be changed.
    const redeemer = await h.account();
    const disabled = (await inject('POST', `/api/redemption/${id}/key`, admin)).json().data.key as string;
    expect(codes).toContain(disabled);
    expect((await inject('POST', '/api/user/topup', redeemer, { key: codes.find((c) => c !== disabled) })).statusCode).toBe(200);
    const used = (await inject('GET', '/api/redemption/?keyword=batch', admin)).json().data.items.find((r: { status: number }) => r.status === 3);
    expect((await inject('PUT', '/api/redemption/', admin, { id: used.id, status: 1 })).statusCode).toBe(409);
    expect((await inject('DELETE', `/api/redemption/${id}`, admin)).statusCode).toBe(200);
    expect((await inject('DELETE', `/api/redemption/${id}`, admin)).statusCode).toBe(404);
  });
});

describe('redemption codes and the role rules', () => {
  it("an administrator cannot redeem its own code or another administrator's; root's codes, and root its own, can be", async () => {
    const code = async (who: TestAccount) => ((await inject('POST', '/api/redemption/', who, { name: 'self-credit', quota: 777 })).json().data as string[])[0]!;
    const quota = async (who: TestAccount) => Number((await h.sql<{ quota: string }[]>`SELECT quota FROM users WHERE id = ${who.user.id}`)[0]!.quota);
    const redeem = (who: TestAccount, key: string) => inject('POST', '/api/user/topup', who, { key });
    const own = await code(admin);
    const before = await quota(admin);
    const refused = await redeem(admin, own);
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toEqual({ success: false, message: 'an account cannot redeem a code of its own (it would be a quota edit on itself)' });
    expect(await quota(admin)).toBe(before);
    expect((await inject('GET', `/api/redemption/?keyword=${own}`, admin)).json().data.items[0].status).toBe(1);
    // Another administrator may not either (an administrator cannot edit an equal role).
    const peer = await h.account({ role: 10 });
    const byPeer = await redeem(peer, own);
    expect(byPeer.statusCode).toBe(403);
    expect(byPeer.json().message).toBe('an administrator cannot redeem a code created by an account of equal or lower role');
    // An ordinary account may; the super administrator's codes are redeemable by an administrator and by itself.
    expect((await redeem(user, own)).statusCode).toBe(200);
    expect((await redeem(admin, await code(root))).json()).toEqual({ success: true, message: '', data: 777 });
    expect((await redeem(root, await code(root))).statusCode).toBe(200);
  });

  it('an administrator demoted cannot cash a code it wrote as one (review hostileapi: 12,345 credited to itself)', async () => {
    const former = await h.account({ role: 10 });
    const own = ((await inject('POST', '/api/redemption/', former, { name: 'before-demotion', quota: 12_345 })).json().data as string[])[0]!;
    expect((await inject('POST', '/api/user/manage', root, { id: former.user.id, action: 'demote' })).json().data.role).toBe(1);
    const quota = async () => Number((await h.sql<{ quota: string }[]>`SELECT quota FROM users WHERE id = ${former.user.id}`)[0]!.quota);
    const before = await quota();
    const refused = await inject('POST', '/api/user/topup', former, { key: own });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toEqual({ success: false, message: 'an account cannot redeem a code of its own (it would be a quota edit on itself)' });
    expect(await quota()).toBe(before);
    // Nor through another account (review diffreview): a creator that can no longer credit credits no one; the code stays unused.
    const puppet = await h.account();
    const byPuppet = await inject('POST', '/api/user/topup', puppet, { key: own });
    expect(byPuppet.statusCode).toBe(403);
    expect(byPuppet.json()).toEqual({ success: false, message: 'this code\'s creator is no longer an administrator: it cannot be redeemed (ask for a new code)' });
    expect((await inject('GET', `/api/redemption/?keyword=${own}`, root)).json().data.items[0].status).toBe(1);
    // Banned or deleted, the same; root redeems any code.
    const banned = await h.account({ role: 10 });
    const bannedCode = ((await inject('POST', '/api/redemption/', banned, { name: 'before-ban', quota: 10 })).json().data as string[])[0]!;
    await h.sql`UPDATE users SET status = 2 WHERE id = ${banned.user.id}`;
    expect((await inject('POST', '/api/user/topup', puppet, { key: bannedCode })).statusCode).toBe(403);
    expect((await inject('POST', '/api/user/topup', root, { key: own })).json()).toEqual({ success: true, message: '', data: 12_345 });
  });

  it("an administrator cannot change or delete a code of root's or of another administrator, so it cannot raise one it may redeem", async () => {
    const create = async (who: TestAccount, quota = 1000) => {
      const key = ((await inject('POST', '/api/redemption/', who, { name: 'guarded', quota })).json().data as string[])[0]!;
      return { key, id: Number((await inject('GET', `/api/redemption/?keyword=${key}`, root)).json().data.items[0].id) };
    };
    const quota = async (who: TestAccount) => Number((await h.sql<{ quota: string }[]>`SELECT quota FROM users WHERE id = ${who.user.id}`)[0]!.quota);
    const rootCode = await create(root);
    const before = await quota(admin);
    const raised = await inject('PUT', '/api/redemption/', admin, { id: rootCode.id, quota: 5_000_000_000_000 });
    expect(raised.statusCode).toBe(403);
    expect(raised.json()).toEqual({ success: false, message: 'an administrator may change only its own codes and those of accounts of a lower role' });
    expect((await inject('PUT', '/api/redemption/?status_only=true', admin, { id: rootCode.id, status: 2 })).statusCode).toBe(403);
    expect((await inject('DELETE', `/api/redemption/${rootCode.id}`, admin)).statusCode).toBe(403);
    const peerCode = await create(await h.account({ role: 10 }));
    expect((await inject('PUT', '/api/redemption/', admin, { id: peerCode.id, name: 'mine now' })).statusCode).toBe(403);
    const row = (await h.sql<{ quota: string; status: number; name: string }[]>`SELECT quota, status, name FROM redemptions WHERE id IN (${rootCode.id}, ${peerCode.id}) ORDER BY id`);
    expect(row.map((r) => [Number(r.quota), r.status, r.name])).toEqual([[1000, 1, 'guarded'], [1000, 1, 'guarded']]);
    // The code as root made it is all the administrator can redeem.
    expect((await inject('POST', '/api/user/topup', admin, { key: rootCode.key })).json()).toEqual({ success: true, message: '', data: 1000 });
    expect(await quota(admin)).toBe(before + 1000);
    // Its own codes, those of ordinary accounts (made before a demotion) and every code for root stay editable.
    const own = await create(admin);
    expect((await inject('PUT', '/api/redemption/', admin, { id: own.id, quota: 5 })).statusCode).toBe(200);
    const userCode = await h.sql<{ id: string }[]>`INSERT INTO redemptions (created_by, name, key_hash, key_ciphertext, key_mask, status, quota, created_time, expired_time)
      VALUES (${user.user.id}, 'old', ${randomBytes(32)}, ${randomBytes(40)}, '********', 1, 10, 0, -1) RETURNING id`;
    expect((await inject('PUT', '/api/redemption/', admin, { id: Number(userCode[0]!.id), status: 2 })).statusCode).toBe(200);
    expect((await inject('PUT', '/api/redemption/', root, { id: peerCode.id, status: 2 })).statusCode).toBe(200);
    expect((await inject('DELETE', `/api/redemption/${peerCode.id}`, root)).statusCode).toBe(200);
    expect((await inject('PUT', '/api/redemption/', admin, { id: 987_654_321, status: 2 })).statusCode).toBe(404);
  });
});

describe('options (administration)', () => {
  it('lists every option with secrets blank to administrators; only root changes any option', async () => {
    const w = await watch();
    expect((await inject('PUT', '/api/option/', root, { key: 'ModelRatio', value: '{"claude-x":2}' })).statusCode).toBe(200);
    expect((await inject('PUT', '/api/option/', root, { key: 'GroupRatio', value: { default: 1, vip: 0.8, svip: 0.5, team: 1 } })).statusCode).toBe(200);
    // UserUsableGroups unset: the account's own group plus default and vip (new-api's default), not svip or team.
    const auto = { ratio: 'auto', desc: 'automatic selection of an available group' };
    const groups = (await inject('GET', '/api/user/self/groups', user)).json().data;
    expect(groups).toEqual({ default: { ratio: 1, desc: 'default' }, vip: { ratio: 0.8, desc: 'vip' }, auto });
    // UserUsableGroups sets the groups an account sees and may give a key besides its own group.
    expect((await inject('PUT', '/api/option/', root, { key: 'UserUsableGroups', value: { team: 'Team lane' } })).statusCode).toBe(200);
    const listed = (await inject('GET', '/api/user/self/groups', user)).json().data;
    expect(listed).toEqual({ default: { ratio: 1, desc: 'default' }, team: { ratio: 1, desc: 'Team lane' }, auto });
    for (const group of ['svip', 'vip']) {
      const refusedKey = await inject('POST', '/api/token/', user, { name: 'k', expired_time: -1, remain_quota: 0, unlimited_quota: true, group });
      expect(refusedKey.json().message).toBe(`group: unknown group "${group}"`);
    }
    expect((await inject('POST', '/api/token/', user, { name: 'k', expired_time: -1, remain_quota: 0, unlimited_quota: true, group: 'team' })).statusCode).toBe(200);
    expect((await inject('PUT', '/api/option/', root, { key: 'UserUsableGroups', value: '' })).statusCode).toBe(200);
    expect((await inject('PUT', '/api/option/', root, { key: 'AutoGroups', value: '{"x":1}' })).json().message).toMatch(/^value \(AutoGroups\): /);
    const refused = await inject('PUT', '/api/option/', admin, { key: 'EpayKey', value: 'k' });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toEqual({ success: false, message: 'only the super administrator may change EpayKey' });
    expect((await inject('PUT', '/api/option/', root, { key: 'EpayKey', value: 'secret-epay-key' })).statusCode).toBe(200);
    const bad = await inject('PUT', '/api/option/', root, { key: 'CompletionRatio', value: '{"a":"x"}' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toMatch(/^value \(CompletionRatio\): must be an object/);
    expect((await inject('PUT', '/api/option/', root, { key: 'MinTopUp', value: 0 })).json().message).toMatch(/^value \(MinTopUp\): must be at least 1/);
    // An unknown key is named as such, to either role.
    expect((await inject('PUT', '/api/option/', admin, { key: 'Nope', value: 1 })).json().message).toBe('key: unknown option "Nope"');
    expect((await inject('PUT', '/api/option/', root, { key: 'Nope', value: 1 })).json().message).toBe('key: unknown option "Nope"');
    // Administrators still read the options (their pages need GroupRatio, CardpayCurrency, Price): every one root's to change.
    const all = await inject('GET', '/api/option/', admin);
    expect(all.body).not.toContain('secret-epay-key');
    const items = all.json().data as { key: string; value: string; secret: boolean; configured: boolean; write_role: number }[];
    expect(items.find((o) => o.key === 'EpayKey')).toMatchObject({ value: '', secret: true, configured: true, write_role: 100 });
    expect(items.find((o) => o.key === 'ModelRatio')).toMatchObject({ value: '{"claude-x":2}', write_role: 100 });
    expect(items.filter((o) => o.write_role !== 100)).toEqual([]);
    await w.stop();
    expect(w.messages).toContainEqual({ kind: 'options', keys: ['ModelRatio'] });
    expect(w.messages).toContainEqual({ kind: 'options', keys: ['GroupRatio'] });
  });

  // Review finding 1: an administrator priced a group of its own at 0 (GroupRatio), put its key in it
  // and was served free; ModelRatio 0 made a model free for every account. new-api: RootAuth.
  it('refuses an administrator (10) every option write, 403 in the envelope, pricing and groups included, changing nothing', async () => {
    const MODEL = 'claude-sonnet-4-5';
    const usage = { inputTokens: 1_000_000, outputTokens: 1_000_000, cacheReadTokens: 0, cacheCreationTokens: 0, cacheCreation1hTokens: 0 };
    const costIn = async (group: string) => {
      const r = await loadRatios(h.sql);
      return quotaCost(usage, {
        model: r.model(MODEL), completion: r.completion(MODEL), group: r.group(group) ?? NaN,
        cacheRead: r.cacheRead(MODEL), cacheWrite: r.cacheWrite(MODEL), cacheWrite1h: r.cacheWrite1h(MODEL),
      });
    };
    const costBefore = await costIn('default');
    expect(costBefore).toBeGreaterThan(0);
    const storedBefore = new Map(await Promise.all(OPTION_CATALOGUE.map(async (d) => [d.key, await h.storedOption(d.key)] as const)));
    const w = await watch();
    const free = await inject('PUT', '/api/option/', admin, { key: 'GroupRatio', value: { default: 1, vip: 1, svip: 1, free: 0 } });
    expect(free.statusCode).toBe(403);
    expect(free.json()).toEqual({ success: false, message: 'only the super administrator may change GroupRatio' });
    const zero = await inject('PUT', '/api/option/', admin, { key: 'ModelRatio', value: { [MODEL]: 0 } });
    expect(zero.statusCode).toBe(403);
    expect(zero.json()).toEqual({ success: false, message: 'only the super administrator may change ModelRatio' });
    // No group `free`: no key can be put in it, and the model costs what it did.
    expect((await inject('GET', '/api/user/self/groups', admin)).json().data.free).toBeUndefined();
    const key = await inject('POST', '/api/token/', admin, { name: 'free-key', expired_time: -1, remain_quota: 0, unlimited_quota: true, group: 'free' });
    expect(key.json()).toEqual({ success: false, message: 'group: unknown group "free"' });
    expect(await costIn('default')).toBe(costBefore);
    // Every key of the catalogue, whatever the value (the role is checked before it is parsed).
    const values: Record<string, unknown> = {
      CompletionRatio: { [MODEL]: 0 }, CacheRatio: { [MODEL]: 0 }, CreateCacheRatio: { [MODEL]: 0 }, CreateCacheRatio1h: { [MODEL]: 0 },
      LongContextRatio: { [MODEL]: null }, WebSearchCallPrice: '0', ModelContextWindow: { [MODEL]: 1 }, ModelMaxOutputTokens: { [MODEL]: 1 },
      UserUsableGroups: { svip: 'mine' }, AutoGroups: ['svip'], GroupRateLimits: { default: { rpm: 0 } }, TopUpLink: 'https://pay.attacker.example/checkout',
      RegisterEnabled: false, PayMethods: [{ name: 'x', type: 'x' }], Price: '0.00001', QuotaForInviter: '1000000000',
    };
    for (const d of OPTION_CATALOGUE) {
      const res = await inject('PUT', '/api/option/', admin, { key: d.key, value: values[d.key] ?? '' });
      expect(res.statusCode, d.key).toBe(403);
      expect(res.json(), d.key).toEqual({ success: false, message: `only the super administrator may change ${d.key}` });
    }
    for (const d of OPTION_CATALOGUE) expect(await h.storedOption(d.key), d.key).toBe(storedBefore.get(d.key));
    await w.stop();
    expect(w.messages.filter((m) => (m as { kind?: string }).kind === 'options')).toEqual([]);
  });

  // Review finding 2: an administrator pointed every account's top-up page at its own payment link.
  it('refuses an administrator (10) TopUpLink: every account keeps the link root set', async () => {
    const res = await inject('PUT', '/api/option/', admin, { key: 'TopUpLink', value: 'https://pay.attacker.example/checkout' });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ success: false, message: 'only the super administrator may change TopUpLink' });
    expect((await inject('GET', '/api/user/topup/info', user)).json().data.topup_link).toBe('');
    expect((await inject('PUT', '/api/option/', root, { key: 'TopUpLink', value: 'https://shop.example/topup' })).statusCode).toBe(200);
    expect((await inject('PUT', '/api/option/', admin, { key: 'TopUpLink', value: 'https://pay.attacker.example/checkout' })).statusCode).toBe(403);
    expect((await inject('GET', '/api/user/topup/info', user)).json().data.topup_link).toBe('https://shop.example/topup');
    expect((await inject('PUT', '/api/option/', root, { key: 'TopUpLink', value: '' })).statusCode).toBe(200);
  });

  // Review: an option write named no actor. Each is logged with the account, the key and (not for a
  // secret) the start of the new value.
  it('logs every option change with who made it, the key and the value (cut), never a secret\'s value', async () => {
    type Line = { msg?: string; level?: number; reqId?: string; userId?: number; username?: string; option?: string; value?: string; value_chars?: number; secret_option?: boolean };
    const changes = () => logLines.map((l) => JSON.parse(l) as Line).filter((l) => l.msg === 'option changed');
    logLines.length = 0;
    expect((await inject('PUT', '/api/option/', root, { key: 'GroupRatio', value: { default: 1, vip: 0.8, svip: 0.5, team: 1 } })).statusCode).toBe(200);
    const long = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`model-with-a-long-name-${i}`, i + 1]));
    const longText = JSON.stringify(long);
    expect(longText.length).toBeGreaterThan(LOGGED_OPTION_VALUE_CHARS);
    expect((await inject('PUT', '/api/option/', root, { key: 'ModelRatio', value: long })).statusCode).toBe(200);
    const epayKey = `epay-${randomBytes(12).toString('hex')}`;
    expect((await inject('PUT', '/api/option/', root, { key: 'EpayKey', value: epayKey })).statusCode).toBe(200);
    const smtpToken = `smtp-${randomBytes(12).toString('hex')}`;
    expect((await inject('PUT', '/api/option/', root, { key: 'SMTPToken', value: smtpToken })).statusCode).toBe(200);
    // Refused writes change nothing and log no change.
    expect((await inject('PUT', '/api/option/', admin, { key: 'ModelRatio', value: { 'claude-sonnet-4-5': 0 } })).statusCode).toBe(403);
    expect((await inject('PUT', '/api/option/', root, { key: 'MinTopUp', value: 0 })).statusCode).toBe(400);
    const actor = { level: 30, userId: root.user.id, username: root.user.username };
    expect(changes()).toEqual([
      expect.objectContaining({ ...actor, option: 'GroupRatio', value: '{"default":1,"vip":0.8,"svip":0.5,"team":1}' }),
      expect.objectContaining({ ...actor, option: 'ModelRatio', value: `${longText.slice(0, LOGGED_OPTION_VALUE_CHARS)}…`, value_chars: longText.length }),
      expect.objectContaining({ ...actor, option: 'EpayKey', secret_option: true }),
      expect.objectContaining({ ...actor, option: 'SMTPToken', secret_option: true }),
    ]);
    for (const c of changes()) expect(typeof c.reqId, c.option).toBe('string');
    for (const c of changes().filter((l) => l.secret_option)) expect(c, c.option).not.toHaveProperty('value');
    const out = logLines.join('');
    expect(out).not.toContain(epayKey);
    expect(out).not.toContain(smtpToken);
    expect(out).not.toContain('sealed:v1:');
    expect((await inject('PUT', '/api/option/', root, { key: 'ModelRatio', value: {} })).statusCode).toBe(200);
  });

  it('takes only an http(s) URL (or nothing) as TopUpLink: the web console makes it a link', async () => {
    for (const value of ['javascript:alert(document.domain)', 'data:text/html,<script>alert(1)</script>', 'shop.example/topup']) {
      const res = await inject('PUT', '/api/option/', root, { key: 'TopUpLink', value });
      expect(res.statusCode, value).toBe(400);
      expect(res.json(), value).toEqual({ success: false, message: 'value (TopUpLink): must be an http(s) URL or empty' });
    }
    for (const value of ['https://shop.example/topup?plan=1', '']) {
      expect((await inject('PUT', '/api/option/', root, { key: 'TopUpLink', value })).statusCode, value).toBe(200);
    }
  });
});
