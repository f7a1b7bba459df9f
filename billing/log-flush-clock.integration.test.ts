// The log outbox on its own clock (logFlushIntervalMs, BILLING_LOG_FLUSH_INTERVAL_MS): settlements
// commit at their own pace, and their log rows go to ClickHouse once per interval in fewer, larger
// inserts, or at once when a full insert's worth (logBatchSize) is queued. The outbox's contract stays:
// rows leave Postgres only after ClickHouse took them, so a failed insert keeps them for the next tick.
// ClickHouse is reached through a TCP proxy the test can cut; its inserts are counted on the way.
import { randomUUID } from 'node:crypto';
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { text as textOf } from 'node:stream/consumers';
import type { ClickHouseClient } from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClickHouse } from '../infra/clickhouse/client.js';
import { createLogger } from '../infra/logger.js';
import { createSql } from '../infra/postgres/client.js';
import { createRedis } from '../infra/redis/client.js';
import { redisKeys } from '../infra/redis/keys.js';
import { testConfig } from '../infra/testing/test-config.js';
import { BillingWorker, type BillingWorkerOptions } from './billing-worker.js';
import { encodeUsageEvent, type UsageEvent } from '../core/usage/usage-event.js';

const config = testConfig();
const sql = createSql(config);
const redis = createRedis(config, 'log-clock-test', { blocking: true });
const ch = createClickHouse(config);
const log = createLogger(config, 'log-clock-test');
const keys = redisKeys(config.REDIS_PREFIX);
const target = new URL(config.CLICKHOUSE_URL);
let proxy: Server;
let proxied: ClickHouseClient;
let up = true;
const open = new Set<Socket>();
/** Every insert the worker attempted: its row count and whether ClickHouse took it. */
let inserts: { rows: number; ok: boolean }[] = [];

/** The proxied client, its inserts recorded; everything else passed through. */
function counting(client: ClickHouseClient): ClickHouseClient {
  return new Proxy(client, {
    get(t, p) {
      if (p === 'exec') {
        // The worker sends its log rows as an INSERT … FORMAT JSONEachRow body (billing/log-outbox.ts).
        return async (params: Parameters<ClickHouseClient['exec']>[0] & { values?: Readable }) => {
          if (!params.query.startsWith('INSERT') || params.values === undefined) return t.exec(params);
          const text = await textOf(params.values);
          const rows = text.split('\n').filter(Boolean).length;
          try {
            const r = await t.exec({ ...params, values: Readable.from([text]) });
            inserts.push({ rows, ok: true });
            return r;
          } catch (err) {
            inserts.push({ rows, ok: false });
            throw err;
          }
        };
      }
      const v = Reflect.get(t, p, t) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
}

async function account(): Promise<number> {
  const name = `logclock-${randomUUID().slice(0, 8)}`;
  const [u] = await sql`INSERT INTO users (username, password_hash, quota, aff_code) VALUES (${name}, 'x', 1000000, ${name}) RETURNING id`;
  return u!.id as number;
}

function usage(userId: number, quota: number): UsageEvent {
  return {
    v: 1, type: 2, request_id: randomUUID(), upstream_request_id: 'req_x', user_id: userId, username: 'logclock',
    token_id: 0, token_name: 'k', token_limited: false, channel: 0, model_name: 'claude-haiku-4-5', group: 'default',
    quota, prompt_tokens: 10, completion_tokens: 20, is_stream: false, use_time_ms: 300,
    created_at: Math.floor(Date.now() / 1000), content: 'log clock',
  };
}

async function waitFor(check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function logged(userId: number): Promise<{ n: number; q: number }> {
  const rs = await ch.query({ query: 'SELECT count() AS n, sum(quota) AS q FROM logs FINAL WHERE user_id = {u:UInt64}', query_params: { u: userId }, format: 'JSONEachRow' });
  const [row] = await rs.json<{ n: string | number; q: string | number }>();
  return { n: Number(row!.n), q: Number(row!.q) };
}

async function ledger(userId: number): Promise<{ n: number; q: number }> {
  const [r] = await sql`SELECT COUNT(*)::int AS n, COALESCE(SUM(quota), 0)::bigint AS q FROM ledger WHERE user_id = ${userId}`;
  return { n: r!.n as number, q: Number(r!.q) };
}

async function queued(userId: number): Promise<{ n: number; q: number }> {
  const [r] = await sql`SELECT COUNT(*)::int AS n, COALESCE(SUM((row::jsonb->>'quota')::bigint), 0)::bigint AS q FROM log_outbox WHERE (row::jsonb->>'user_id')::bigint = ${userId}`;
  return { n: r!.n as number, q: Number(r!.q) };
}

function worker(stream: string, opts: Partial<BillingWorkerOptions>): BillingWorker {
  return new BillingWorker(redis, sql, counting(proxied), log, {
    stream, deadLetterStream: stream + ':dead', consumer: 'log-clock', batchSize: 10, blockMs: 20, claimIdleMs: 60_000,
    minBatchIntervalMs: 0, ...opts,
  });
}

/** Appends one event per quota; returns their sum. */
async function append(stream: string, userId: number, quotas: number[]): Promise<number> {
  for (const q of quotas) await redis.xadd(stream, '*', 'e', encodeUsageEvent(usage(userId, q)));
  return quotas.reduce((a, b) => a + b, 0);
}

beforeAll(async () => {
  // Down: a connection is accepted and dropped at once, as a ClickHouse restarting would.
  proxy = createServer((client) => {
    open.add(client);
    client.on('close', () => open.delete(client));
    if (!up) return void client.destroy();
    const server = createConnection({ host: target.hostname, port: Number(target.port || 8123) });
    client.pipe(server).pipe(client);
    client.on('error', () => server.destroy());
    server.on('error', () => client.destroy());
    client.on('close', () => server.destroy());
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  proxied = createClickHouse(testConfig({ CLICKHOUSE_URL: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}` }));
});

afterAll(async () => {
  for (const s of open) s.destroy();
  await new Promise((r) => proxy.close(r));
  await proxied.close();
  const left = await redis.keys(`${config.REDIS_PREFIX}:*`);
  if (left.length) await redis.del(...left);
  redis.disconnect();
  await sql.end();
  await ch.close();
});

describe('log outbox on its own clock', () => {
  it('settles each batch at once and sends the rows of many batches in one insert per interval', async () => {
    const userId = await account();
    const stream = keys.usageStream() + ':many';
    const interval = 1000;
    const w = worker(stream, { logFlushIntervalMs: interval, logBatchSize: 5000 });
    let batches = 0;
    w.onBatch = () => { batches++; };
    inserts = [];
    const startedAt = Date.now();
    await w.start();
    const quotas: number[] = [];
    // Twelve small batches, 100 ms apart: each one settles alone (minBatchIntervalMs 0).
    for (let round = 0; round < 12; round++) {
      const round_ = Array.from({ length: 4 }, (_, i) => 3 + round * 4 + i);
      quotas.push(...round_);
      await append(stream, userId, round_);
      await new Promise((r) => setTimeout(r, 100));
    }
    const total = quotas.reduce((a, b) => a + b, 0);
    await waitFor(async () => (await ledger(userId)).n === quotas.length);
    // No batch follows the last one: the clock alone sends what is queued.
    await waitFor(async () => (await logged(userId)).n === quotas.length);
    const elapsed = Date.now() - startedAt;
    await w.stop();

    expect(await ledger(userId)).toEqual({ n: quotas.length, q: total });
    expect(await logged(userId)).toEqual({ n: quotas.length, q: total });
    expect(await queued(userId)).toEqual({ n: 0, q: 0 });
    // One pass per interval (plus the first at start and the last at stop), however many batches:
    // a loaded machine makes fewer passes, never more.
    const sent = inserts.filter((i) => i.ok);
    expect(batches).toBeGreaterThanOrEqual(6);
    expect(sent.length).toBeLessThanOrEqual(Math.floor(elapsed / interval) + 2);
    expect(sent.length).toBeLessThan(batches);
  }, 60_000);

  it('starts a pass at once when a full insert is queued, and not before on a slow clock', async () => {
    const userId = await account();
    const stream = keys.usageStream() + ':full';
    // The clock would not tick again during the test: only a full insert's worth starts a pass.
    const w = worker(stream, { logFlushIntervalMs: 600_000, logBatchSize: 20 });
    inserts = [];
    let passes = 0;
    w.onLogPass = () => { passes++; };
    await w.start();
    // The pass at start is over before anything of ours is queued.
    await waitFor(async () => passes >= 1);
    const attemptsAtStart = inserts.length;
    let total = await append(stream, userId, Array.from({ length: 12 }, (_, i) => 5 + i));
    await waitFor(async () => (await ledger(userId)).n === 12);
    await new Promise((r) => setTimeout(r, 500));
    expect(inserts.length).toBe(attemptsAtStart);
    expect(await queued(userId)).toEqual({ n: 12, q: total });

    total += await append(stream, userId, Array.from({ length: 10 }, (_, i) => 50 + i));
    await waitFor(async () => (await logged(userId)).n === 22);
    expect(inserts.length).toBeGreaterThan(attemptsAtStart);
    await w.stop();
    expect(await logged(userId)).toEqual({ n: 22, q: total });
    expect(await ledger(userId)).toEqual({ n: 22, q: total });
    expect(await queued(userId)).toEqual({ n: 0, q: 0 });
  }, 60_000);

  it('keeps the rows in the outbox when an insert fails and sends them on a later tick, once', async () => {
    const userId = await account();
    const stream = keys.usageStream() + ':down';
    const w = worker(stream, { logFlushIntervalMs: 300, logBatchSize: 5000 });
    inserts = [];
    up = false;
    // Kept-alive connections from the tests before would still pass: cut them too.
    for (const s of open) s.destroy();
    try {
      await w.start();
      const total = await append(stream, userId, Array.from({ length: 20 }, (_, i) => 11 + i));
      await waitFor(async () => (await ledger(userId)).n === 20);
      // A tick after the commit tried and failed: the rows are still queued, none in ClickHouse.
      const failedBefore = inserts.filter((i) => !i.ok).length;
      await waitFor(async () => inserts.filter((i) => !i.ok).length > failedBefore);
      expect(await queued(userId)).toEqual({ n: 20, q: total });
      expect(await logged(userId)).toEqual({ n: 0, q: 0 });
      expect(await ledger(userId)).toEqual({ n: 20, q: total });

      up = true;
      await waitFor(async () => (await logged(userId)).n === 20);
      await w.stop();
      expect(await logged(userId)).toEqual({ n: 20, q: total });
      expect(await queued(userId)).toEqual({ n: 0, q: 0 });
      // Exactly once: no duplicate even before ClickHouse merges.
      const rs = await ch.query({ query: 'SELECT count() AS n FROM logs WHERE user_id = {u:UInt64}', query_params: { u: userId }, format: 'JSONEachRow' });
      const [raw] = await rs.json<{ n: string | number }>();
      expect(Number(raw!.n)).toBe(20);
    } finally {
      up = true;
    }
  }, 60_000);
  it('vacuums the outbox itself once it has sent its vacuum-rows worth, autovacuum or not', async () => {
    const userId = await account();
    const stream = keys.usageStream() + ':vacuum';
    const vacuums = async () => {
      const [r] = await sql`SELECT vacuum_count + autovacuum_count AS n FROM pg_stat_user_tables WHERE relname = 'log_outbox'`;
      return Number(r!.n);
    };
    const before = await vacuums();
    const w = worker(stream, { logBatchSize: 5, outboxVacuumRows: 12 });
    await w.start();
    const total = await append(stream, userId, Array.from({ length: 14 }, (_, i) => 1 + i));
    await waitFor(async () => (await logged(userId)).n === 14);
    // 14 rows sent in passes of at most 5: one vacuum once 12 were passed, the stats a moment later.
    await waitFor(async () => (await vacuums()) > before, 10_000);
    await w.stop();
    expect(await logged(userId)).toEqual({ n: 14, q: total });
    expect(await ledger(userId)).toEqual({ n: 14, q: total });
    expect(await queued(userId)).toEqual({ n: 0, q: 0 });
  }, 60_000);
});
