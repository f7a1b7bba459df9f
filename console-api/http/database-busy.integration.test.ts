// A console write that meets a row another transaction holds waits CONSOLE_DB_LOCK_TIMEOUT_MS, then is
// answered 503 DATABASE_BUSY with Retry-After, its transaction rolled back whole: before, it waited as
// long as the lock was held (a user row held 45 s made add_quota, PUT /api/user/self and POST
// /api/token/ take ~44 s each), holding a pooled connection all that time. The lock is held here by a
// transaction on a pool of the test's own, as a stuck transaction or a long maintenance statement would.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../infra/postgres/client.js';
import { type ConsoleHarness, startConsoleHarness } from '../../tests/harness/console-harness.js';
import { withUserRowLocked } from '../../tests/harness/row-lock.js';

const BUSY = { success: false, message: 'the database is busy with a conflicting change; nothing was changed, retry shortly' };

let h: ConsoleHarness;
let side: Sql;
beforeAll(async () => {
  h = await startConsoleHarness({ CONSOLE_DB_LOCK_TIMEOUT_MS: '300' });
  side = createSql(h.config, { max: 2 });
});
afterAll(async () => {
  await side?.end({ timeout: 5 });
  await h?.close();
});

const ledgerOf = (userId: number) =>
  h.sql<{ quota_delta: number }[]>`SELECT quota_delta FROM ledger WHERE user_id = ${userId} ORDER BY id`;
const balanceOf = async (userId: number) =>
  (await h.sql<{ quota: number }[]>`SELECT quota FROM users WHERE id = ${userId}`)[0]!.quota;

describe('a console write meeting a row another transaction holds', () => {
  it('add_quota is 503 DATABASE_BUSY with Retry-After, moves nothing, and passes once the row is free', async () => {
    const admin = await h.account({ role: 10 });
    const target = await h.account({ quota: 1000 });
    await h.redis.set(h.keys.accountBalance(target.user.id), 1000);
    const res = await withUserRowLocked(side, target.user.id, () =>
      h.app.inject({ method: 'POST', url: '/api/user/manage', headers: admin.auth, payload: { id: target.user.id, action: 'add_quota', value: 5000 } }));
    expect(res.statusCode, res.body).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.json()).toEqual(BUSY);
    // Nothing of the refused credit anywhere: balance, ledger, the relay's mirror, the log stream.
    expect(await balanceOf(target.user.id)).toBe(1000);
    expect(await ledgerOf(target.user.id)).toEqual([]);
    expect(await h.quotaStore.accountBalance(target.user.id)).toBe(1000);
    expect((await h.drainUsageStream()).filter((e) => e.user_id === target.user.id)).toEqual([]);

    const again = await h.app.inject({ method: 'POST', url: '/api/user/manage', headers: admin.auth, payload: { id: target.user.id, action: 'add_quota', value: 5000 } });
    expect(again.statusCode, again.body).toBe(200);
    expect(await balanceOf(target.user.id)).toBe(6000);
    expect((await ledgerOf(target.user.id)).map((r) => r.quota_delta)).toEqual([5000]);
    expect(await h.quotaStore.accountBalance(target.user.id)).toBe(6000);
  });

  it("an account holder's own change (PUT /api/user/self) is refused the same way, and reads go on", async () => {
    const user = await h.account();
    await withUserRowLocked(side, user.user.id, async () => {
      const write = await h.app.inject({ method: 'PUT', url: '/api/user/self', headers: user.auth, payload: { display_name: 'Renamed while locked' } });
      expect(write.statusCode, write.body).toBe(503);
      expect(write.json()).toEqual(BUSY);
      // A read takes no row lock: the account is still shown while its row is held.
      const read = await h.app.inject({ method: 'GET', url: '/api/user/self', headers: user.auth });
      expect(read.statusCode).toBe(200);
      expect((read.json() as { data: { display_name: string } }).data.display_name).not.toBe('Renamed while locked');
    });
    const after = await h.app.inject({ method: 'PUT', url: '/api/user/self', headers: user.auth, payload: { display_name: 'Renamed after' } });
    expect(after.statusCode, after.body).toBe(200);
    expect((after.json() as { data: { display_name: string } }).data.display_name).toBe('Renamed after');
  });
});

describe('a console statement past CONSOLE_DB_STATEMENT_TIMEOUT_MS', () => {
  it('is 503 DATABASE_BUSY too (the lock wait here unlimited, the statement not)', async () => {
    const other = await startConsoleHarness({ CONSOLE_DB_LOCK_TIMEOUT_MS: '0', CONSOLE_DB_STATEMENT_TIMEOUT_MS: '300' });
    const otherSide = createSql(other.config, { max: 1 });
    try {
      const admin = await other.account({ role: 10 });
      const target = await other.account({ quota: 700 });
      const res = await withUserRowLocked(otherSide, target.user.id, () =>
        other.app.inject({ method: 'POST', url: '/api/user/manage', headers: admin.auth, payload: { id: target.user.id, action: 'add_quota', value: 300 } }));
      expect(res.statusCode, res.body).toBe(503);
      expect(res.headers['retry-after']).toBe('1');
      expect(res.json()).toEqual(BUSY);
      const [row] = await other.sql<{ quota: number; n: number }[]>`
        SELECT u.quota, (SELECT count(*)::int FROM ledger l WHERE l.user_id = u.id) AS n FROM users u WHERE u.id = ${target.user.id}`;
      expect(row).toEqual({ quota: 700, n: 0 });
    } finally {
      await otherSide.end({ timeout: 5 });
      await other.close();
    }
  });
});
