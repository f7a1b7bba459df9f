// ClickHouse unreachable must not hold the money: the worker keeps debiting Postgres and
// acknowledging the stream, the log rows wait in the Postgres outbox, and once ClickHouse answers
// again every row arrives exactly once. The worker reaches ClickHouse through a TCP proxy the test
// cuts and restores.
import { randomUUID } from 'node:crypto';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClickHouse } from '../infra/clickhouse/client.js';
import { createLogger } from '../infra/logger.js';
import { createSql } from '../infra/postgres/client.js';
import { createRedis } from '../infra/redis/client.js';
import { redisKeys } from '../infra/redis/keys.js';
import { testConfig } from '../infra/testing/test-config.js';
import { createTestDatabase } from '../infra/testing/test-database.js';
import { BILLING_GROUP, BillingWorker } from './billing-worker.js';
import { encodeUsageEvent, type UsageEvent } from '../core/usage/usage-event.js';
import { billingMetrics } from './metrics/billing-metrics.js';

const config = testConfig();
const sql = createSql(config);
const redis = createRedis(config, 'billing-outage-test', { blocking: true });
const ch = createClickHouse(config);
const log = createLogger(config, 'billing-outage-test');
const stream = redisKeys(config.REDIS_PREFIX).usageStream();
const target = new URL(config.CLICKHOUSE_URL);
let userId = 0;
let proxy: Server;
let proxied: ReturnType<typeof createClickHouse>;
let up = false;
const open = new Set<Socket>();

function usage(quota: number): UsageEvent {
  return {
    v: 1, type: 2, request_id: randomUUID(), upstream_request_id: 'req_x', user_id: userId, username: 'outage-test',
    token_id: 0, token_name: 'k', token_limited: false, channel: 0, model_name: 'claude-haiku-4-5', group: 'default',
    quota, prompt_tokens: 10, completion_tokens: 20, is_stream: false, use_time_ms: 300,
    created_at: Math.floor(Date.now() / 1000), content: 'outage', ...{},
  };
}

async function waitFor(check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function logged(): Promise<{ n: number; q: number }> {
  const rs = await ch.query({ query: 'SELECT count() AS n, sum(quota) AS q FROM logs FINAL WHERE user_id = {u:UInt64}', query_params: { u: userId }, format: 'JSONEachRow' });
  const [row] = await rs.json<{ n: string | number; q: string | number }>();
  return { n: Number(row!.n), q: Number(row!.q) };
}

async function ledger(): Promise<{ n: number; q: number }> {
  const [r] = await sql`SELECT COUNT(*)::int AS n, COALESCE(SUM(quota), 0)::bigint AS q FROM ledger WHERE user_id = ${userId}`;
  return { n: r!.n as number, q: Number(r!.q) };
}

beforeAll(async () => {
  const name = `outage-${randomUUID().slice(0, 8)}`;
  const [u] = await sql`INSERT INTO users (username, password_hash, quota, aff_code) VALUES (${name}, 'x', 1000000, ${name}) RETURNING id`;
  userId = u!.id as number;
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
  const port = (proxy.address() as AddressInfo).port;
  proxied = createClickHouse(testConfig({ CLICKHOUSE_URL: `http://127.0.0.1:${port}` }));
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

describe('ClickHouse down', () => {
  it('debits Postgres and acknowledges the stream while ClickHouse is down; the log rows arrive once it returns', async () => {
    const w = new BillingWorker(redis, sql, proxied, log, {
      stream, deadLetterStream: stream + ':dead', consumer: 'outage', batchSize: 10, blockMs: 20, claimIdleMs: 60_000, minBatchIntervalMs: 0,
    });
    await w.start();
    const quotas: number[] = [];
    // Several batches, the later ones appended while the first already failed its log insert.
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 15; i++) {
        const q = 7 + round * 15 + i;
        quotas.push(q);
        await redis.xadd(stream, '*', 'e', encodeUsageEvent(usage(q)));
      }
      await new Promise((r) => setTimeout(r, 150));
    }
    const total = quotas.reduce((a, b) => a + b, 0);
    await waitFor(async () => (await ledger()).n === quotas.length);
    await waitFor(async () => (await redis.xlen(stream)) === 0);
    expect(await ledger()).toEqual({ n: quotas.length, q: total });
    const [u] = await sql`SELECT quota, used_quota, request_count FROM users WHERE id = ${userId}`;
    expect({ quota: Number(u!.quota), used: Number(u!.used_quota), n: Number(u!.request_count) }).toEqual({ quota: 1000000 - total, used: total, n: quotas.length });
    expect(((await redis.xpending(stream, BILLING_GROUP)) as [number])[0]).toBe(0);
    expect(await logged()).toEqual({ n: 0, q: 0 });
    // The health says so while billing goes on (it answered 'ok' with nothing about the logs).
    const down = billingMetrics.health();
    expect(down.status).toBe('ok');
    expect(down.logStore).toMatchObject({ status: 'failing', failingSince: expect.any(Number), lastError: expect.any(String) });
    expect(billingMetrics.logStoreUp.value).toBe(0);
    const [ob] = await sql`SELECT COUNT(*)::int AS n, COALESCE(SUM((row::jsonb->>'quota')::bigint), 0)::bigint AS q FROM log_outbox WHERE (row::jsonb->>'user_id')::bigint = ${userId}`;
    expect({ n: ob!.n as number, q: Number(ob!.q) }).toEqual({ n: quotas.length, q: total });

    up = true;
    await waitFor(async () => (await logged()).n === quotas.length);
    await waitFor(async () => billingMetrics.health().logStore.status === 'ok');
    expect(billingMetrics.logStoreUp.value).toBe(1);
    await w.stop();
    expect(await logged()).toEqual({ n: quotas.length, q: total });
    expect(await logged()).toEqual(await ledger());
    const [left] = await sql`SELECT COUNT(*)::int AS n FROM log_outbox WHERE (row::jsonb->>'user_id')::bigint = ${userId}`;
    expect(left!.n).toBe(0);
    // Exactly once: no duplicate even before ClickHouse merges.
    const rs = await ch.query({ query: 'SELECT count() AS n FROM logs WHERE user_id = {u:UInt64}', query_params: { u: userId }, format: 'JSONEachRow' });
    const [raw] = await rs.json<{ n: string | number }>();
    expect(Number(raw!.n)).toBe(quotas.length);
  }, 40_000);

  // A pass can fail in Postgres with ClickHouse up (a connection terminated, a restart): the health
  // blamed ClickHouse for it ("log rows could not be sent to ClickHouse", the gauge at 0).
  it('a log pass that fails in Postgres leaves the log store healthy, and says where it failed', async () => {
    const db = await createTestDatabase('outbox-pg');
    const scratch = createSql(testConfig({ DATABASE_URL: db.url }));
    const lines: string[] = [];
    const captured = createLogger({ LOG_LEVEL: 'error' }, 'billing-outage-test', { write: (line: string) => void lines.push(line) });
    const scratchStream = `${stream}:pg-${randomUUID().slice(0, 8)}`;
    const w = new BillingWorker(redis, scratch, ch, captured, {
      stream: scratchStream, deadLetterStream: scratchStream + ':dead', consumer: 'outbox-pg', batchSize: 10, blockMs: 20, claimIdleMs: 60_000, minBatchIntervalMs: 0,
    });
    try {
      const [u] = await scratch`INSERT INTO users (username, password_hash, quota, aff_code) VALUES ('outbox-pg', 'x', 1000000, 'outbox-pg') RETURNING id`;
      // Each pass's claim reads the batches table: gone, every pass fails in Postgres.
      await scratch`DROP TABLE log_outbox_batches`;
      expect(billingMetrics.health().logStore.status).toBe('ok');
      await w.start();
      await redis.xadd(scratchStream, '*', 'e', encodeUsageEvent({ ...usage(11), user_id: u!.id as number }));
      await waitFor(async () => lines.some((l) => l.includes('a log outbox pass failed in Postgres')));
      // Debited all the same; the row waits in the outbox.
      await waitFor(async () => Number((await scratch`SELECT quota FROM users WHERE id = ${u!.id as number}`)[0]!.quota) === 1000000 - 11);
      const [queued] = await scratch`SELECT COUNT(*)::int AS n FROM log_outbox`;
      expect(queued!.n).toBe(1);
      expect(billingMetrics.health().logStore).toMatchObject({ status: 'ok', lastError: null });
      expect(billingMetrics.logStoreUp.value).toBe(1);
      expect(lines.some((l) => l.includes('could not be sent to ClickHouse'))).toBe(false);
    } finally {
      await w.stop();
      await scratch.end();
      await redis.del(scratchStream, scratchStream + ':dead');
      await db.drop();
    }
  }, 40_000);
});
