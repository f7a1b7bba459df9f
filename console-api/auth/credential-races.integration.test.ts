// Credentials issued while the account's password changes (auth/sessions.ts lockIssuer): a login with
// the old password or a stolen session's GET /api/user/token in flight during a password change must
// not leave a credential alive after it, and concurrent GET /api/user/token calls leave one access
// token. Each race is lined up, not left to timing: the test holds the account's row lock from a
// connection of its own, starts the requests, waits until each is blocked on that lock (or, before
// the fix, done), then lets them go.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../infra/postgres/client.js';
import { type ConsoleHarness, startConsoleHarness } from '../../tests/harness/console-harness.js';
import { withUserRowLocked } from '../../tests/harness/row-lock.js';

let h: ConsoleHarness;
let side: Sql;
beforeAll(async () => {
  h = await startConsoleHarness();
  side = createSql(h.config, { max: 2 });
});
afterAll(async () => {
  await side?.end();
  await h?.close();
});

const self = (token: string) => h.app.inject({ method: 'GET', url: '/api/user/self', headers: { authorization: `Bearer ${token}` } });
const login = (username: string, password: string) => h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username, password } });
const changePassword = (token: string, original: string, password: string) => h.app.inject({
  method: 'PUT', url: '/api/user/self', headers: { authorization: `Bearer ${token}` }, payload: { password, original_password: original },
});

/** Statements of this test's database waiting for a lock. */
async function lockWaiters(): Promise<number> {
  const [row] = await side<{ n: number }[]>`
    SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`;
  return row!.n;
}

/** Until `n` statements wait for a lock, or every one of `done` has settled (the code under test took no lock). */
async function untilBlocked(n: number, done: Promise<unknown>[]): Promise<void> {
  let settled = 0;
  for (const p of done) void p.finally(() => { settled++; });
  for (let i = 0; i < 500; i++) {
    if ((await lockWaiters()) >= n || settled === done.length) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`expected ${n} statements waiting for a lock`);
}

async function liveCredentials(userId: number): Promise<number> {
  const [row] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM access_tokens WHERE user_id = ${userId} AND revoked_at IS NULL`;
  return row!.n;
}

describe('credentials issued during a password change', () => {
  it('an access token a stolen session asks for while the owner changes the password does not outlive the change', async () => {
    const a = await h.account();
    const stolen = (await login(a.user.username, a.password)).json().data.token as string;
    const { change, issued } = await withUserRowLocked(side, a.user.id, async () => {
      const change = changePassword(a.token, a.password, 'a brand new password 1');
      await untilBlocked(1, [change]);
      const issued = h.app.inject({ method: 'GET', url: '/api/user/token', headers: { authorization: `Bearer ${stolen}` } });
      await untilBlocked(2, [issued]);
      return { change, issued };
    });
    expect((await change).statusCode).toBe(200);
    const answer = await issued;
    // Refused (the session was revoked by the change that went first); before, a token that never expires.
    expect(answer.statusCode).toBe(401);
    expect(answer.json()).toMatchObject({ success: false });
    expect((await self(stolen)).statusCode).toBe(401);
    // The owner's session is the only credential alive.
    expect(await liveCredentials(a.user.id)).toBe(1);
    expect((await self(a.token)).statusCode).toBe(200);
  });

  it('a login with the old password in flight during the change gets no session that outlives it', async () => {
    const a = await h.account();
    const { change, old } = await withUserRowLocked(side, a.user.id, async () => {
      const change = changePassword(a.token, a.password, 'a brand new password 2');
      await untilBlocked(1, [change]);
      const old = login(a.user.username, a.password);
      await untilBlocked(2, [old]);
      return { change, old };
    });
    expect((await change).statusCode).toBe(200);
    const answer = await old;
    expect(answer.statusCode).toBe(401);
    expect(await liveCredentials(a.user.id)).toBe(1);
    expect((await login(a.user.username, 'a brand new password 2')).statusCode).toBe(200);
  });

  it('a display-name edit in flight during the change does not write the old password back', async () => {
    const a = await h.account();
    const { change, rename } = await withUserRowLocked(side, a.user.id, async () => {
      const change = changePassword(a.token, a.password, 'a brand new password 3');
      await untilBlocked(1, [change]);
      const rename = h.app.inject({ method: 'PUT', url: '/api/user/self', headers: a.auth, payload: { display_name: 'Renamed' } });
      await untilBlocked(2, [rename]);
      return { change, rename };
    });
    expect((await change).statusCode).toBe(200);
    expect((await rename).json()).toMatchObject({ success: true, data: { display_name: 'Renamed' } });
    expect((await login(a.user.username, a.password)).statusCode).toBe(401);
    expect((await login(a.user.username, 'a brand new password 3')).statusCode).toBe(200);
  });

  it('a second change with the same old password, in flight during the first, is refused', async () => {
    const a = await h.account();
    const other = (await login(a.user.username, a.password)).json().data.token as string;
    const { first, second } = await withUserRowLocked(side, a.user.id, async () => {
      const first = changePassword(a.token, a.password, 'a brand new password 4');
      await untilBlocked(1, [first]);
      const second = changePassword(other, a.password, 'a brand new password 5');
      await untilBlocked(2, [second]);
      return { first, second };
    });
    expect((await first).statusCode).toBe(200);
    expect((await second).statusCode).toBe(401);
    expect((await login(a.user.username, 'a brand new password 4')).statusCode).toBe(200);
  });
});

describe('access tokens issued at once', () => {
  it('concurrent GET /api/user/token calls leave exactly one access token alive', async () => {
    const a = await h.account();
    const answers = await Promise.all(Array.from({ length: 10 }, () => h.app.inject({ method: 'GET', url: '/api/user/token', headers: a.auth })));
    expect(answers.map((r) => r.statusCode)).toEqual(Array(10).fill(200));
    const [row] = await h.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM access_tokens WHERE user_id = ${a.user.id} AND kind = 'access' AND revoked_at IS NULL`;
    expect(row!.n).toBe(1);
    const alive = [];
    for (const r of answers) alive.push((await self(r.json().data as string)).statusCode);
    expect(alive.filter((s) => s === 200)).toHaveLength(1);
  });
});

describe('credentials asked for while the account is banned', () => {
  it('a login and a GET /api/user/token in flight during a ban are refused 403 ACCOUNT_BANNED, as after it (the login was told its password was wrong)', async () => {
    const a = await h.account();
    const banned = { success: false, message: 'this account is banned' };
    // The ban's transaction holds the row while the requests check the password and the session.
    const { loggingIn, issuing } = await withUserRowLocked(side, a.user.id, async () => {
      const loggingIn = login(a.user.username, a.password);
      await untilBlocked(1, [loggingIn]);
      const issuing = h.app.inject({ method: 'GET', url: '/api/user/token', headers: { authorization: `Bearer ${a.token}` } });
      await untilBlocked(2, [issuing]);
      return { loggingIn, issuing };
    }, { beforeRelease: (tx) => tx`UPDATE users SET status = 2 WHERE id = ${a.user.id}` });
    for (const res of [await loggingIn, await issuing]) {
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json()).toEqual(banned);
    }
    expect(await liveCredentials(a.user.id)).toBe(1);
    // The same requests once the ban has committed.
    expect((await login(a.user.username, a.password)).json()).toEqual(banned);
  });
});
