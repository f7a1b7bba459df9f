// A relay event the billing worker dead-lettered has moved the Redis mirror and nothing else: the
// operator sees it on gateway_billing_dead_letters, and the replay command bills it exactly once,
// however often it is run (issue 15, item 6).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConsoleHarness, type ConsoleHarness } from '../tests/harness/console-harness.js';
import { encodeUsageEvent, usageEvent } from '../core/usage/usage-event.js';
import { BillingMetrics } from './metrics/billing-metrics.js';
import { startBillingMetricsServer } from './metrics/metrics-server.js';
import { deadLetterGauge, replayDeadLetters } from './replay-dead-letters.js';

let h: ConsoleHarness;
beforeAll(async () => {
  h = await startConsoleHarness();
});
afterAll(async () => {
  await h?.close();
});

/** The account's consumption as each store records it, and the dead letters awaiting replay. */
async function books(userId: number) {
  const [u] = await h.sql`SELECT quota FROM users WHERE id = ${userId}`;
  const [l] = await h.sql`SELECT count(*)::int AS n, coalesce(sum(quota), 0)::int AS q FROM ledger WHERE user_id = ${userId} AND type = 2`;
  const rs = await h.clickhouse.query({
    query: 'SELECT count() AS n, sum(quota) AS q, max(use_time) AS t FROM logs FINAL WHERE user_id = {u:UInt64} AND type = 2',
    query_params: { u: userId }, format: 'JSONEachRow',
  });
  const [c] = await rs.json<{ n: number | string; q: number | string; t: number | string }>();
  return {
    users: Number(u!.quota), ledger: l, logs: { n: Number(c!.n), q: Number(c!.q), useTime: Number(c!.t) },
    mirror: await h.quotaStore.accountBalance(userId), dead: await h.redis.xlen(h.keys.usageDeadLetterStream()),
  };
}

describe('dead letters', () => {
  it('are visible on the metric and replayed into Postgres and the log exactly once', async () => {
    const user = await h.account({ quota: 1_000 });
    const userId = Number(user.user.id);
    await h.redis.set(h.keys.accountBalance(userId), 1_000);
    const requestId = `req-${userId}-dead`;
    expect(await h.quotaStore.reserve({ userId, tokenId: 0, tokenLimited: false, requestId, amount: 100, deadlineMs: Date.now() + 60_000 })).toBe('reserved');
    const event = usageEvent({ type: 2, request_id: requestId, user_id: userId, quota: 100, created_at: Math.floor(Date.now() / 1000), content: '' });
    await h.quotaStore.settle({ userId, tokenId: 0, requestId, cost: 100, eventJson: encodeUsageEvent(event) });
    expect(await h.quotaStore.accountBalance(userId)).toBe(900);

    // What billing-worker.ts does with an event its decoder rejects (a worker older than the relay).
    const stream = h.keys.usageStream();
    const dead = h.keys.usageDeadLetterStream();
    const [[sourceId, fields]] = (await h.redis.xrange(stream, '-', '+')) as [string, string[]][] as [[string, string[]]];
    await h.redis.multi().xadd(dead, '*', 'source_id', sourceId, ...fields).xdel(stream, sourceId).exec();
    await h.drainUsageStream();

    const metrics = new BillingMetrics();
    const gauge = deadLetterGauge(h.redis, dead, metrics);
    const server = await startBillingMetricsServer({ host: '127.0.0.1', port: 0, metrics });
    const scrape = async () => {
      await gauge.refresh();
      const body = await (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text();
      return Number(/^gateway_billing_dead_letters (\S+)$/m.exec(body)?.[1]);
    };
    try {
      expect(await scrape()).toBe(1);

      expect(await books(userId)).toEqual({ users: 1_000, ledger: { n: 0, q: 0 }, logs: { n: 0, q: 0, useTime: 0 }, mirror: 900, dead: 1 });

      expect(await replayDeadLetters(h.redis, { stream, deadLetterStream: dead })).toEqual({ replayed: 1, kept: [] });
      await h.drainUsageStream();
      const once = { users: 900, ledger: { n: 1, q: 100 }, logs: { n: 1, q: 100, useTime: 0 }, mirror: 900, dead: 0 };
      expect(await books(userId)).toEqual(once);
      expect(await scrape()).toBe(0);

      // Run again: nothing left to replay. A copy dead-lettered a second time is billed no more.
      expect(await replayDeadLetters(h.redis, { stream, deadLetterStream: dead })).toEqual({ replayed: 0, kept: [] });
      await h.redis.xadd(dead, '*', 'source_id', sourceId, ...fields);
      expect(await replayDeadLetters(h.redis, { stream, deadLetterStream: dead })).toEqual({ replayed: 1, kept: [] });
      await h.drainUsageStream();
      expect(await books(userId)).toEqual(once);

      // An entry that still does not decode stays where the operator sees it.
      await h.redis.xadd(dead, '*', 'source_id', '1-1', 'e', '{"not":"an event"}');
      const report = await replayDeadLetters(h.redis, { stream, deadLetterStream: dead });
      expect(report).toMatchObject({ replayed: 0, kept: [{ sourceId: '1-1' }] });
      expect(await scrape()).toBe(1);
      expect(await h.redis.xlen(stream)).toBe(0);

      // A relay's entry of two events (one settlement call), dead-lettered whole by a worker from
      // before such entries: replayed whole, each of its events billed once.
      const createdAt = Math.floor(Date.now() / 1000);
      const joined = [0, 1].map((i) => encodeUsageEvent(usageEvent({ type: 2, request_id: `req-${userId}-joined-${i}`, user_id: userId, quota: 10, created_at: createdAt, content: '' }))).join('\n');
      await h.redis.xadd(dead, '*', 'source_id', '2-2', 'e', joined);
      expect(await replayDeadLetters(h.redis, { stream, deadLetterStream: dead })).toMatchObject({ replayed: 1, kept: [{ sourceId: '1-1' }] });
      expect(await h.drainUsageStream()).toHaveLength(2);
      expect(await books(userId)).toEqual({ users: 880, ledger: { n: 3, q: 120 }, logs: { n: 3, q: 120, useTime: 0 }, mirror: 900, dead: 1 });
    } finally {
      await server.close();
    }
  });

  it('bill a relay event whose duration a wall-clock step made negative: replayed from the dead letters, and billed at once when new', async () => {
    const user = await h.account({ quota: 1_000 });
    const userId = Number(user.user.id);
    await h.redis.set(h.keys.accountBalance(userId), 1_000);
    const stream = h.keys.usageStream();
    const dead = h.keys.usageDeadLetterStream();
    // The test above leaves an undecodable entry there on purpose.
    await h.redis.del(dead);
    // What a relay whose clock stepped back 1.5 s mid-request wrote: Redis debited it all the same.
    const settleStepped = async (requestId: string) => {
      expect(await h.quotaStore.reserve({ userId, tokenId: 0, tokenLimited: false, requestId, amount: 100, deadlineMs: Date.now() + 60_000 })).toBe('reserved');
      const event = usageEvent({ type: 2, request_id: requestId, user_id: userId, quota: 100, use_time_ms: -1500, created_at: Math.floor(Date.now() / 1000), content: '' });
      await h.quotaStore.settle({ userId, tokenId: 0, requestId, cost: 100, eventJson: encodeUsageEvent(event) });
    };
    // Dead-lettered by a worker from before the fix: the replay now takes it, and it is billed once.
    await settleStepped(`req-${userId}-stepped-old`);
    const [[sourceId, fields]] = (await h.redis.xrange(stream, '-', '+')) as [string, string[]][] as [[string, string[]]];
    await h.redis.multi().xadd(dead, '*', 'source_id', sourceId, ...fields).xdel(stream, sourceId).exec();
    expect(await replayDeadLetters(h.redis, { stream, deadLetterStream: dead })).toEqual({ replayed: 1, kept: [] });
    await h.drainUsageStream();
    expect(await books(userId)).toEqual({ users: 900, ledger: { n: 1, q: 100 }, logs: { n: 1, q: 100, useTime: 0 }, mirror: 900, dead: 0 });

    // Written now: billed by the worker, not dead-lettered.
    await settleStepped(`req-${userId}-stepped-new`);
    await h.drainUsageStream();
    expect(await books(userId)).toEqual({ users: 800, ledger: { n: 2, q: 200 }, logs: { n: 2, q: 200, useTime: 0 }, mirror: 800, dead: 0 });
  });
});
