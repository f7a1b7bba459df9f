// The billing worker's pruning of the console's rows that end: unpaid top-up orders expire after a
// day (kept, so a late paid notice still credits them: console-api/routes/payment.integration.test.ts),
// spent console credentials and e-mail codes are deleted. Before it, none of these rows ever left.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConsoleHarness, type ConsoleHarness } from '../tests/harness/console-harness.js';
import { createLogger } from '../infra/logger.js';
import { pruneConsoleRows } from './console-row-pruning.js';

let h: ConsoleHarness;
beforeAll(async () => {
  h = await startConsoleHarness();
});
afterAll(async () => {
  await h?.close();
});

const HOUR = 3600;
const DAY = 24 * HOUR;
const nowSec = () => Math.floor(Date.now() / 1000);
const deps = () => ({ sql: h.sql, log: createLogger(h.config, 'console-row-pruning') });

async function insertOrder(userId: number, status: string, createTime: number): Promise<string> {
  const tradeNo = `USR${userId}NO${randomBytes(8).toString('hex')}`;
  await h.sql`
    INSERT INTO topups (user_id, amount, money, trade_no, payment_method, payment_provider, status, create_time)
    VALUES (${userId}, 10, '73.00', ${tradeNo}, 'alipay', 'epay', ${status}, ${createTime})`;
  return tradeNo;
}
const statusOf = async (tradeNo: string) => (await h.sql<{ status: string }[]>`SELECT status FROM topups WHERE trade_no = ${tradeNo}`)[0]!.status;

describe('console row pruning', () => {
  it('expires a pending order older than a day and leaves recent and completed ones', async () => {
    const { user } = await h.account();
    const now = nowSec();
    const stale = await insertOrder(user.id, 'pending', now - 25 * HOUR);
    const recent = await insertOrder(user.id, 'pending', now - 60);
    const almost = await insertOrder(user.id, 'pending', now - DAY + 60);
    const paid = await insertOrder(user.id, 'success', now - 30 * DAY);

    const result = await pruneConsoleRows(deps(), now);
    expect(result.expiredOrders).toBeGreaterThanOrEqual(1);
    expect(await statusOf(stale)).toBe('expired');
    expect(await statusOf(recent)).toBe('pending');
    expect(await statusOf(almost)).toBe('pending');
    expect(await statusOf(paid)).toBe('success');
    // Expired, not deleted: a paid notice arriving later must still find its order.
    const [row] = await h.sql`SELECT complete_time FROM topups WHERE trade_no = ${stale}`;
    expect(Number(row!.complete_time)).toBe(0);
    // A second run finds nothing more to do.
    expect((await pruneConsoleRows(deps(), now)).expiredOrders).toBe(0);
  });

  it('skips an order a payment is completing right now (its row locked) and leaves it to that payment', async () => {
    const { user } = await h.account();
    const now = nowSec();
    const tradeNo = await insertOrder(user.id, 'pending', now - 30 * HOUR);
    let release!: () => void;
    const held = new Promise<void>((r) => { release = r; });
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => { locked = r; });
    const completion = h.sql.begin(async (tx) => {
      await tx`SELECT id FROM topups WHERE trade_no = ${tradeNo} FOR UPDATE`;
      locked();
      await held;
      await tx`UPDATE topups SET status = 'success' WHERE trade_no = ${tradeNo} AND status = 'pending'`;
    });
    await isLocked;
    await pruneConsoleRows(deps(), now); // does not wait for the lock
    release();
    await completion;
    expect(await statusOf(tradeNo)).toBe('success');
  });

  it('deletes sessions and access tokens expired or revoked over 7 days ago and keeps the others', async () => {
    const account = await h.account();
    const userId = account.user.id;
    const now = nowSec();
    const insert = async (kind: 'session' | 'access', expiresAt: number | null, revokedAt: number | null) => {
      const [row] = await h.sql<{ id: string }[]>`
        INSERT INTO access_tokens (user_id, token_hash, kind, created_at, expires_at, revoked_at)
        VALUES (${userId}, ${randomBytes(32)}, ${kind}, ${now - 30 * DAY}, ${expiresAt}, ${revokedAt})
        RETURNING id`;
      return Number(row!.id);
    };
    const gone = [
      await insert('session', now - 8 * DAY, null),
      await insert('session', now + DAY, now - 8 * DAY),
      await insert('access', null, now - 8 * DAY),
    ];
    const kept = [
      await insert('session', now + DAY, null),
      await insert('session', now - 6 * DAY, null),
      await insert('session', now + DAY, now - 6 * DAY),
      await insert('access', null, null),
      await insert('access', null, now - 6 * DAY),
    ];

    const result = await pruneConsoleRows(deps(), now);
    expect(result.deletedCredentials).toBeGreaterThanOrEqual(3);
    const left = (await h.sql<{ id: string }[]>`SELECT id FROM access_tokens WHERE id IN ${h.sql([...gone, ...kept])}`).map((r) => Number(r.id));
    expect(left.sort()).toEqual([...kept].sort());
    // The account's own login session (live) still opens the console.
    expect((await h.app.inject({ method: 'GET', url: '/api/user/self', headers: account.auth })).statusCode).toBe(200);
  });

  it('deletes e-mail codes expired over a day ago and keeps recent and live ones', async () => {
    const now = nowSec();
    const email = `${randomBytes(6).toString('hex')}@example.com`;
    const insert = async (expiresAt: number) => {
      const [row] = await h.sql<{ id: string }[]>`
        INSERT INTO email_codes (purpose, email, user_id, client_ip, code_hash, created_at, expires_at)
        VALUES ('reset', ${email}, 0, '127.0.0.1', ${randomBytes(32)}, ${expiresAt - 600}, ${expiresAt})
        RETURNING id`;
      return Number(row!.id);
    };
    const old = await insert(now - DAY - 60);
    const recent = await insert(now - DAY + 60);
    const live = await insert(now + 300);

    const result = await pruneConsoleRows(deps(), now);
    expect(result.deletedEmailCodes).toBeGreaterThanOrEqual(1);
    const left = (await h.sql<{ id: string }[]>`SELECT id FROM email_codes WHERE email = ${email} ORDER BY id`).map((r) => Number(r.id));
    expect(left).toEqual([recent, live]);
    expect(left).not.toContain(old);
  });

  it('works through a backlog larger than one batch in one run', async () => {
    const { user } = await h.account();
    const now = nowSec();
    await h.sql`
      INSERT INTO topups (user_id, amount, money, trade_no, payment_method, payment_provider, status, create_time)
      SELECT ${user.id}, 1, '1.00', 'BACKLOG' || ${user.id} || '-' || g, 'alipay', 'epay', 'pending', ${now - 2 * DAY}
      FROM generate_series(1, 2500) g`;
    await pruneConsoleRows(deps(), now);
    const [left] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM topups WHERE user_id = ${user.id} AND status = 'pending'`;
    expect(left!.n).toBe(0);
  });
});
