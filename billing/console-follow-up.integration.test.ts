// A console credit whose after-commit steps never ran (the console died right after COMMIT) is finished
// by the billing worker's follow-up: the Redis mirror moves once, the log row appears once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { afterConsoleCredit, manageRequestId, recordConsoleCredit } from '../console-api/ledger/console-ledger.js';
import { startConsoleHarness, type ConsoleHarness } from '../tests/harness/console-harness.js';
import { createLogger } from '../infra/logger.js';
import { encodeUsageEvent, usageEvent } from '../core/usage/usage-event.js';
import { finishConsoleFollowUps } from './console-follow-up.js';

let h: ConsoleHarness;
beforeAll(async () => {
  h = await startConsoleHarness();
});
afterAll(async () => {
  await h?.close();
});

const deps = () => ({ sql: h.sql, redis: h.redis, quota: h.quotaStore, stream: h.keys.usageStream(), log: createLogger(h.config, 'follow-up') });

async function ledgerRow(requestId: string) {
  const [row] = await h.sql`SELECT id, follow_up_pending, log_event FROM ledger WHERE request_id = ${requestId}`;
  return row as { id: number; follow_up_pending: boolean; log_event: string | null };
}

describe('console follow-up', () => {
  it('finishes a committed credit whose console died before updating the mirror and the log', async () => {
    const user = await h.account({ quota: 1_000 });
    const userId = Number(user.user.id);
    await h.redis.set(h.keys.accountBalance(userId), 1_000);
    const requestId = manageRequestId();
    // The transaction commits; the process dies before afterConsoleCredit.
    await h.sql.begin((tx) => recordConsoleCredit(tx, {
      requestId, type: 3, userId, delta: 250, content: 'admin adjustment', createdAt: Math.floor(Date.now() / 1000),
    }));
    expect(await ledgerRow(requestId)).toMatchObject({ follow_up_pending: true, log_event: expect.stringContaining(requestId) });
    expect(await h.quotaStore.accountBalance(userId)).toBe(1_000);

    expect(await finishConsoleFollowUps(deps(), 0)).toBeGreaterThanOrEqual(1);
    expect(await finishConsoleFollowUps(deps(), 0)).toBe(0);
    expect(await h.quotaStore.accountBalance(userId)).toBe(1_250);
    expect(await ledgerRow(requestId)).toMatchObject({ follow_up_pending: false, log_event: null });

    const events = await h.drainUsageStream();
    expect(events.filter((e) => e.request_id === requestId)).toHaveLength(1);
    const rs = await h.clickhouse.query({
      query: 'SELECT count() AS n, sum(quota) AS q FROM logs FINAL WHERE user_id = {u:UInt64} AND type = 3',
      query_params: { u: userId }, format: 'JSONEachRow',
    });
    const [row] = await rs.json<{ n: number | string; q: number | string }>();
    expect({ n: Number(row!.n), q: Number(row!.q) }).toEqual({ n: 1, q: 250 });
  });

  it('moves the mirror once when the console and the follow-up both finish the same credit', async () => {
    const user = await h.account({ quota: 500 });
    const userId = Number(user.user.id);
    await h.redis.set(h.keys.accountBalance(userId), 500);
    const credit = await h.sql.begin((tx) => recordConsoleCredit(tx, {
      requestId: manageRequestId(), type: 3, userId, delta: -100, content: 'x', createdAt: Math.floor(Date.now() / 1000),
    }));
    // The follow-up runs while the slow console is still finishing.
    await finishConsoleFollowUps(deps(), 0);
    const consoleCtx = { quotaStore: h.quotaStore, redis: h.redis, keys: h.keys, sql: h.sql, logger: createLogger(h.config, 'x'), invalidate: async () => {} };
    await afterConsoleCredit(consoleCtx as unknown as Parameters<typeof afterConsoleCredit>[0], credit!);
    expect(await h.quotaStore.accountBalance(userId)).toBe(400);
    expect(await ledgerRow(credit!.requestId)).toMatchObject({ follow_up_pending: false });
  });

  it('credits once when the mirror is refilled from Postgres between the commit and the follow-up', async () => {
    const user = await h.account({ quota: 1_000 });
    const userId = Number(user.user.id);
    await h.redis.set(h.keys.accountBalance(userId), 1_000);
    const credit = await h.sql.begin((tx) => recordConsoleCredit(tx, {
      requestId: manageRequestId(), type: 3, userId, delta: 250, content: 'admin adjustment', createdAt: Math.floor(Date.now() / 1000),
    }));
    // The console's Redis step fails after COMMIT: the row stays pending.
    const failing = { adjustAccountOnce: async () => { throw new Error('redis down'); } };
    const consoleCtx = { quotaStore: failing, redis: h.redis, keys: h.keys, sql: h.sql, logger: createLogger(h.config, 'x'), invalidate: async () => {} };
    await afterConsoleCredit(consoleCtx as unknown as Parameters<typeof afterConsoleCredit>[0], credit!);
    expect(await ledgerRow(credit!.requestId)).toMatchObject({ follow_up_pending: true });

    // The mirror is lost; the next relay request seeds it from users.quota, which has the credit.
    await h.redis.del(h.keys.accountBalance(userId));
    const requestId = `req-${userId}-refill`;
    expect(await h.quotaStore.reserve({ userId, tokenId: 0, tokenLimited: false, requestId, amount: 100, deadlineMs: Date.now() + 60_000 })).toBe('reserved');
    const event = usageEvent({ type: 2, request_id: requestId, user_id: userId, quota: 100, created_at: Math.floor(Date.now() / 1000), content: '' });
    await h.quotaStore.settle({ userId, tokenId: 0, requestId, cost: 100, eventJson: encodeUsageEvent(event) });
    expect(await h.quotaStore.accountBalance(userId)).toBe(1_150);

    await finishConsoleFollowUps(deps(), 0);
    expect(await ledgerRow(credit!.requestId)).toMatchObject({ follow_up_pending: false });
    await h.drainUsageStream();

    const [u] = await h.sql`SELECT quota FROM users WHERE id = ${userId}`;
    const [l] = await h.sql`
      SELECT coalesce(sum(quota_delta) FILTER (WHERE type IN (1, 3)), 0) AS credits,
             coalesce(sum(quota) FILTER (WHERE type IN (2, 5)), 0) AS spent
      FROM ledger WHERE user_id = ${userId}`;
    const rs = await h.clickhouse.query({
      query: 'SELECT countIf(type = 3) AS n, sumIf(quota, type = 3) AS credited, sumIf(quota, type IN (2, 5)) AS spent FROM logs FINAL WHERE user_id = {u:UInt64}',
      query_params: { u: userId }, format: 'JSONEachRow',
    });
    const [logs] = await rs.json<{ n: number | string; credited: number | string; spent: number | string }>();
    expect({
      mirror: await h.quotaStore.accountBalance(userId),
      users: Number(u!.quota),
      ledger: 1_000 + Number(l!.credits) - Number(l!.spent),
      logs: { n: Number(logs!.n), credited: Number(logs!.credited), spent: Number(logs!.spent) },
    }).toEqual({ mirror: 1_150, users: 1_150, ledger: 1_150, logs: { n: 1, credited: 250, spent: 100 } });
  });
});
