// A console credit whose after-commit steps never ran (the console died right after COMMIT) is finished
// by the billing worker's follow-up: the Redis mirror moves once, the log row appears once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { afterConsoleCredit, debitTransaction, manageRequestId, recordConsoleCredit } from '../console-api/ledger/console-ledger.js';
import { consoleDebitHoldId } from '../core/quota/quota-store.js';
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

describe('console debit holds (an administrator debit takes its amount from the mirror before its commit)', () => {
  const ctx = () => ({ sql: h.sql, quotaStore: h.quotaStore, logger: createLogger(h.config, 'debit') });
  const debit = (userId: number, delta: number, after?: () => Promise<void>) => debitTransaction(ctx(), async (tx, holds) => {
    const credit = await recordConsoleCredit(tx, {
      requestId: manageRequestId(), type: 3, userId, delta, content: 'admin debit', createdAt: Math.floor(Date.now() / 1000),
    });
    await holds.take(credit!, 'value');
    await after?.();
    return credit!;
  });
  const holdKey = (userId: number, ledgerId: number) => h.keys.reservation(userId, consoleDebitHoldId(ledgerId));

  it('the follow-up consumes the hold of a debit whose console died after its commit: debited once', async () => {
    const user = await h.account({ quota: 1_000 });
    const userId = Number(user.user.id);
    await h.redis.set(h.keys.accountBalance(userId), 1_000);
    // Committed; the console dies before afterConsoleCredit. The hold already took the debit.
    const credit = await debit(userId, -300);
    expect(await h.quotaStore.accountBalance(userId)).toBe(700);
    expect(await h.redis.hget(holdKey(userId, credit.ledgerId), 'amount')).toBe('300');
    await finishConsoleFollowUps(deps(), 0);
    expect(await h.quotaStore.accountBalance(userId)).toBe(700);
    expect(await h.redis.exists(holdKey(userId, credit.ledgerId))).toBe(0);
    // The reaper finds nothing of it; another pass changes nothing.
    await h.quotaStore.releaseExpired(Date.now() + 3_600_000, 1000, () => '{}');
    await finishConsoleFollowUps(deps(), 0);
    expect(await h.quotaStore.accountBalance(userId)).toBe(700);
    await h.drainUsageStream();
    const [u] = await h.sql`SELECT quota FROM users WHERE id = ${userId}`;
    expect(Number(u!.quota)).toBe(700);
  });

  it('an unloaded mirror is seeded with the committed state the transaction holds, then held and consumed once', async () => {
    const user = await h.account({ quota: 1_000 });
    const userId = Number(user.user.id);
    await h.redis.del(h.keys.accountBalance(userId), h.keys.accountCreditSeq(userId));
    const [before] = await h.sql`SELECT credit_seq FROM users WHERE id = ${userId}`;
    const credit = await debit(userId, -300);
    expect(await h.quotaStore.accountBalance(userId)).toBe(700);
    expect(Number(await h.redis.get(h.keys.accountCreditSeq(userId)))).toBe(Number(before!.credit_seq));
    const consoleCtx = { quotaStore: h.quotaStore, redis: h.redis, keys: h.keys, sql: h.sql, logger: createLogger(h.config, 'x'), invalidate: async () => {} };
    await afterConsoleCredit(consoleCtx as unknown as Parameters<typeof afterConsoleCredit>[0], credit);
    await finishConsoleFollowUps(deps(), 0);
    expect(await h.quotaStore.accountBalance(userId)).toBe(700);
    expect(await h.redis.exists(holdKey(userId, credit.ledgerId))).toBe(0);
    await h.drainUsageStream();
  });

  it('a transaction that fails after the hold gives it back at once, with no log event', async () => {
    const user = await h.account({ quota: 1_000 });
    const userId = Number(user.user.id);
    await h.redis.set(h.keys.accountBalance(userId), 1_000);
    let ledgerId = 0;
    await expect(debitTransaction(ctx(), async (tx, holds) => {
      const credit = await recordConsoleCredit(tx, {
        requestId: manageRequestId(), type: 3, userId, delta: -300, content: 'admin debit', createdAt: Math.floor(Date.now() / 1000),
      });
      ledgerId = credit!.ledgerId;
      await holds.take(credit!, 'value');
      expect(await h.quotaStore.accountBalance(userId)).toBe(700);
      throw new Error('a later statement failed');
    })).rejects.toThrow('a later statement failed');
    expect(await h.quotaStore.accountBalance(userId)).toBe(1_000);
    expect(await h.redis.exists(holdKey(userId, ledgerId))).toBe(0);
    const events = await h.drainUsageStream();
    expect(events.filter((e) => e.user_id === userId)).toEqual([]);
    const [row] = await h.sql`SELECT count(*)::int AS n FROM ledger WHERE user_id = ${userId} AND quota_delta = -300`;
    expect(row!.n).toBe(0);
  });

  it('a debit the mirror cannot cover is refused by its hold, and the transaction rolls back', async () => {
    const user = await h.account({ quota: 1_000 });
    const userId = Number(user.user.id);
    await h.redis.set(h.keys.accountBalance(userId), 200);
    await expect(debit(userId, -300)).rejects.toThrow(/^value: would make the balance negative \(spendable 200, Postgres 1000\)/);
    expect(await h.quotaStore.accountBalance(userId)).toBe(200);
    const [u] = await h.sql`SELECT quota FROM users WHERE id = ${userId}`;
    expect(Number(u!.quota)).toBe(1_000);
  });

  it('a COMMIT whose outcome is unknown leaves the hold: the follow-up consumes it if the row committed', async () => {
    const user = await h.account({ quota: 1_000 });
    const userId = Number(user.user.id);
    await h.redis.set(h.keys.accountBalance(userId), 1_000);
    // The commit goes through, but its answer is lost (the connection drops): the error is no PostgresError.
    const lost = { ...ctx(), sql: { begin: async (cb: (tx: unknown) => Promise<unknown>) => { await h.sql.begin(cb as never); throw new Error('write CONNECTION_CLOSED'); } } };
    let ledgerId = 0;
    await expect(debitTransaction(lost as never, async (tx, holds) => {
      const credit = await recordConsoleCredit(tx, {
        requestId: manageRequestId(), type: 3, userId, delta: -300, content: 'admin debit', createdAt: Math.floor(Date.now() / 1000),
      });
      ledgerId = credit!.ledgerId;
      await holds.take(credit!, 'value');
      return credit;
    // Its rows cannot be looked for either (this stand-in's every transaction loses its answer): the
    // outcome is said to be unknown (console-ledger.ts debitTransaction), not "retry".
    })).rejects.toMatchObject({ code: 'COMMIT_OUTCOME_UNKNOWN' });
    expect(await h.quotaStore.accountBalance(userId)).toBe(700);
    expect(await h.redis.exists(holdKey(userId, ledgerId))).toBe(1);
    await finishConsoleFollowUps(deps(), 0);
    expect(await h.quotaStore.accountBalance(userId)).toBe(700);
    expect(await h.redis.exists(holdKey(userId, ledgerId))).toBe(0);
    await h.drainUsageStream();
  });
});

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
    expect(await h.quotaStore.accountBalance(userId)).toBe(1_250);

    const events = await h.drainUsageStream();
    expect(events.filter((e) => e.request_id === requestId)).toHaveLength(1);
    expect(await ledgerRow(requestId)).toMatchObject({ follow_up_pending: false, log_event: null });
    expect(await finishConsoleFollowUps(deps(), 0)).toBe(0);
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
    await h.drainUsageStream();
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
    await h.drainUsageStream();
    expect(await ledgerRow(credit!.requestId)).toMatchObject({ follow_up_pending: false });

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

  it('logs a credit whose appended event was lost before billing read it (Redis restart without persistence)', async () => {
    const user = await h.account({ quota: 1_000 });
    const userId = Number(user.user.id);
    await h.redis.set(h.keys.accountBalance(userId), 1_000);
    const credit = await h.sql.begin((tx) => recordConsoleCredit(tx, {
      requestId: manageRequestId(), type: 3, userId, delta: 250, content: 'admin adjustment', createdAt: Math.floor(Date.now() / 1000),
    }));
    const consoleCtx = { quotaStore: h.quotaStore, redis: h.redis, keys: h.keys, sql: h.sql, logger: createLogger(h.config, 'x'), invalidate: async () => {} };
    await afterConsoleCredit(consoleCtx as unknown as Parameters<typeof afterConsoleCredit>[0], credit!);
    // The append succeeded; Redis then loses the entry before the billing worker reads it.
    const stream = h.keys.usageStream();
    const entries = (await h.redis.xrange(stream, '-', '+')) as [string, string[]][];
    const lost = entries.filter(([, f]) => f.some((v) => v.includes(credit!.requestId))).map(([id]) => id);
    expect(lost).toHaveLength(1);
    await h.redis.xdel(stream, ...lost);
    await h.drainUsageStream();

    await finishConsoleFollowUps(deps(), 0);
    await h.drainUsageStream();
    // A second pass once the log row landed finds nothing left to do.
    await finishConsoleFollowUps(deps(), 0);
    await h.drainUsageStream();

    const rs = await h.clickhouse.query({
      query: 'SELECT count() AS n, sum(quota) AS q FROM logs FINAL WHERE user_id = {u:UInt64} AND type = 3',
      query_params: { u: userId }, format: 'JSONEachRow',
    });
    const [row] = await rs.json<{ n: number | string; q: number | string }>();
    const [u] = await h.sql`SELECT quota FROM users WHERE id = ${userId}`;
    const [l] = await h.sql`SELECT count(*)::int AS n, sum(quota_delta)::int AS q FROM ledger WHERE user_id = ${userId} AND type = 3`;
    expect({
      logs: { n: Number(row!.n), q: Number(row!.q) },
      ledger: l, users: Number(u!.quota), mirror: await h.quotaStore.accountBalance(userId),
      row: await ledgerRow(credit!.requestId),
    }).toMatchObject({
      logs: { n: 1, q: 250 }, ledger: { n: 1, q: 250 }, users: 1_250, mirror: 1_250,
      row: { follow_up_pending: false, log_event: null },
    });
  });

  describe('key quota edits (issue 10, item 5)', () => {
    async function limitedKey(remain: number) {
      const owner = await h.account();
      const name = `k-${owner.user.id}`;
      const res = await h.app.inject({
        method: 'POST', url: '/api/token/', headers: owner.auth,
        payload: { name, expired_time: -1, remain_quota: remain, unlimited_quota: false, group: '' },
      });
      expect(res.statusCode, res.body).toBe(200);
      const [row] = await h.sql`SELECT id FROM tokens WHERE user_id = ${owner.user.id} AND name = ${name}`;
      return { owner, userId: Number(owner.user.id), tokenId: Number(row!.id) };
    }
    const edit = (k: Awaited<ReturnType<typeof limitedKey>>, remain: number) =>
      h.app.inject({ method: 'PUT', url: '/api/token/', headers: k.owner.auth, payload: { id: k.tokenId, remain_quota: remain } });
    /** Runs `f` while every Redis step of the console's quota store fails. */
    async function withRedisStepFailing<T>(f: () => Promise<T>): Promise<T> {
      const store = h.quotaStore as unknown as Record<string, unknown>;
      const saved = ['adjustTokenOnce'].map((name) => [name, store[name]] as const);
      for (const [name] of saved) store[name] = async () => { throw new Error('redis down'); };
      try {
        return await f();
      } finally {
        for (const [name, fn] of saved) store[name] = fn;
      }
    }

    it('finishes an edit whose Redis step failed, once', async () => {
      const k = await limitedKey(1_000);
      await h.redis.set(h.keys.tokenRemain(k.userId, k.tokenId), 900); // loaded, 100 reserved
      expect((await withRedisStepFailing(() => edit(k, 1_500))).statusCode).toBe(200);
      expect(await h.quotaStore.tokenRemain(k.userId, k.tokenId)).toBe(900);
      await finishConsoleFollowUps(deps(), 0);
      await finishConsoleFollowUps(deps(), 0);
      expect(await h.quotaStore.tokenRemain(k.userId, k.tokenId)).toBe(1_400);
      // The console's own step and a follow-up of the same edit move the mirror once.
      expect((await edit(k, 1_200)).statusCode).toBe(200);
      await finishConsoleFollowUps(deps(), 0);
      expect(await h.quotaStore.tokenRemain(k.userId, k.tokenId)).toBe(1_100);
    });

    it('does not apply an edit again to a key mirror reseeded after its commit', async () => {
      const k = await limitedKey(1_000);
      await h.redis.set(h.keys.tokenRemain(k.userId, k.tokenId), 1_000);
      expect((await withRedisStepFailing(() => edit(k, 1_500))).statusCode).toBe(200);
      await h.redis.del(h.keys.tokenRemain(k.userId, k.tokenId));
      const requestId = `req-${k.tokenId}-key-refill`;
      await h.redis.set(h.keys.accountBalance(k.userId), 1_000_000);
      expect(await h.quotaStore.reserve({ userId: k.userId, tokenId: k.tokenId, tokenLimited: true, requestId, amount: 100, deadlineMs: Date.now() + 60_000 })).toBe('reserved');
      expect(await h.quotaStore.tokenRemain(k.userId, k.tokenId)).toBe(1_400);
      await finishConsoleFollowUps(deps(), 0);
      expect(await h.quotaStore.tokenRemain(k.userId, k.tokenId)).toBe(1_400);
      const [row] = await h.sql`SELECT remain_quota FROM tokens WHERE id = ${k.tokenId}`;
      expect(Number(row!.remain_quota)).toBe(1_500);
    });
  });
});
