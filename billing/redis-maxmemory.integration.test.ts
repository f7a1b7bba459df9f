// Redis at maxmemory with noeviction refuses every command that may grow memory (SET, XADD, XGROUP
// CREATE), and every command queued in a MULTI (EXECABORT), though XREADGROUP, XACK, XDEL and
// XAUTOCLAIM alone are let through. The billing worker read in a MULTI with SET NX, acknowledged in a
// MULTI and created its group with XGROUP CREATE at start-up: at the limit it could neither start nor
// bill, and since billing is what frees Redis memory (settled entries are deleted), the limit was
// never left. On a redis-server of its own (port 7463), filled past maxmemory while events are
// queued (1.2 MB), a worker must start, bill every event (the sums equal), let memory fall back under
// the limit, and keep an undecodable entry pending until its dead letter can be written.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClickHouseAdmin } from '../infra/clickhouse/client.js';
import { migrateClickHouse } from '../infra/clickhouse/migrate.js';
import type { Config } from '../infra/config.js';
import { createLogger } from '../infra/logger.js';
import { createSql, type Sql } from '../infra/postgres/client.js';
import { createRedis, redisKeysFor, type Redis } from '../infra/redis/client.js';
import type { RedisKeys } from '../infra/redis/keys.js';
import { testConfig } from '../infra/testing/test-config.js';
import { createTestDatabase, type TestDatabase } from '../infra/testing/test-database.js';
import { encodeUsageEvent, USAGE_EVENT_FIELD, usageEvent } from '../core/usage/usage-event.js';
import { startRedisServer, type OwnRedisServer } from '../tests/chaos/redis-server.js';
import { BILLING_GROUP } from './billing-worker.js';
import { startBilling, type RunningBilling } from './service.js';

const REDIS_PORT = 7463;
const EVENTS = 150;
// Each entry carries this beside its event (the worker reads only the event's field): 1.2 MB of
// backlog, well above what the worker's own connections and scripts add to Redis's memory meanwhile.
const PADDING = 'x'.repeat(8_000);

let server: OwnRedisServer;
// Databases of its own (Postgres and ClickHouse): the worker's log outbox drain would otherwise send
// other test files' queued log rows (billing/clickhouse-outage.integration.test.ts counts on their
// staying queued), and user ids restart in a new Postgres database.
let db: TestDatabase;
let config: Config;
let sql: Sql;
let redis: Redis;
let keys: RedisKeys;
let billing: RunningBilling | null = null;

beforeAll(async () => {
  server = await startRedisServer({ port: REDIS_PORT, aof: false });
  db = await createTestDatabase('maxmemory');
  config = testConfig({ REDIS_URL: server.url, DATABASE_URL: db.url, CLICKHOUSE_DATABASE: db.name, BILLING_BATCH_SIZE: '40' });
  await migrateClickHouse(config);
  sql = createSql(config);
  redis = createRedis(config, 'maxmemory-test');
  keys = redisKeysFor(config);
});
afterAll(async () => {
  await billing?.close();
  redis?.disconnect();
  await sql?.end({ timeout: 5 });
  await server?.close();
  if (config) {
    const admin = createClickHouseAdmin(config);
    await admin.command({ query: `DROP DATABASE IF EXISTS ${config.CLICKHOUSE_DATABASE}` });
    await admin.close();
  }
  await db?.drop();
});

async function usedMemory(): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))![1]);
}

/** Sets maxmemory under what is used now (noeviction): every write that may grow memory is refused. */
async function overMaxmemory(): Promise<number> {
  await redis.config('SET', 'maxmemory-policy', 'noeviction');
  const limit = (await usedMemory()) - 32 * 1024;
  await redis.config('SET', 'maxmemory', String(limit));
  await expect(redis.set(`${config.REDIS_PREFIX}:probe`, '1')).rejects.toThrow(/^OOM/);
  return limit;
}

async function waitFor(what: string, check: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function account(funded: number): Promise<number> {
  const name = `oom-${randomUUID().slice(0, 8)}`;
  const [u] = await sql`INSERT INTO users (username, password_hash, quota, aff_code) VALUES (${name}, 'x', ${funded}, ${name}) RETURNING id`;
  return Number(u!.id);
}

/** Queues `n` events for the account (while Redis takes writes); returns their total quota. */
async function queue(userId: number, n: number, tag: string): Promise<number> {
  let total = 0;
  for (let i = 0; i < n; i++) {
    const quota = 1 + (i % 9);
    total += quota;
    const encoded = encodeUsageEvent(usageEvent({
      type: 2, request_id: `${tag}-${i}`, user_id: userId, quota, created_at: Math.floor(Date.now() / 1000), content: 'maxmemory test',
    }));
    await redis.xadd(keys.usageStream(), '*', USAGE_EVENT_FIELD, encoded, 'pad', PADDING);
  }
  return total;
}

async function books(userId: number): Promise<{ rows: number; ledger: number; balance: number }> {
  const [l] = await sql`SELECT count(*)::int AS n, coalesce(sum(quota), 0)::bigint AS q FROM ledger WHERE user_id = ${userId}`;
  const [u] = await sql`SELECT quota FROM users WHERE id = ${userId}`;
  return { rows: l!.n as number, ledger: Number(l!.q), balance: Number(u!.quota) };
}

describe('Redis at maxmemory (noeviction)', () => {
  it('a billing worker starts (no consumer group yet), bills the queued events and memory falls under the limit', async () => {
    const funded = 1_000_000;
    const userId = await account(funded);
    const total = await queue(userId, EVENTS, `oom-start-${userId}`);
    expect(await redis.exists(keys.redisIncarnation())).toBe(0);
    const limit = await overMaxmemory();

    billing = await startBilling(config, createLogger(config, 'maxmemory-test'));
    await waitFor('every queued event billed', async () => (await books(userId)).rows === EVENTS);
    expect(await books(userId)).toEqual({ rows: EVENTS, ledger: total, balance: funded - total });
    await waitFor('the stream emptied', async () => (await redis.xlen(keys.usageStream())) === 0);
    expect(await redis.exists(keys.redisIncarnation())).toBe(1);
    expect(await usedMemory()).toBeLessThan(limit);
    // Under the limit again: writes are taken.
    expect(await redis.set(`${config.REDIS_PREFIX}:probe`, '1')).toBe('OK');
    await billing.close();
    billing = null;
  });

  it('a worker resumed at the limit bills the backlog; an undecodable entry stays pending until its dead letter fits', async () => {
    await redis.config('SET', 'maxmemory', '0');
    const funded = 1_000_000;
    const userId = await account(funded);
    // First in the stream: read while Redis is still at the limit, so its dead letter is refused at first.
    const badId = (await redis.xadd(keys.usageStream(), '*', USAGE_EVENT_FIELD, '{"not":"an event"}', 'pad', PADDING))!;
    const first = await queue(userId, EVENTS / 2, `oom-resume-a-${userId}`);
    const second = await queue(userId, EVENTS / 2, `oom-resume-b-${userId}`);
    // A worker ran before: the consumer group exists (XGROUP CREATE at start-up was refused even so).
    await redis.xgroup('CREATE', keys.usageStream(), BILLING_GROUP, '0', 'MKSTREAM').catch((err: Error) => {
      if (!err.message.startsWith('BUSYGROUP')) throw err;
    });
    const limit = await overMaxmemory();

    billing = await startBilling(config, createLogger(config, 'maxmemory-test'));
    await waitFor('every decodable event billed', async () => (await books(userId)).rows === EVENTS);
    expect(await books(userId)).toEqual({ rows: EVENTS, ledger: first + second, balance: funded - first - second });
    // Memory falls as the settled entries go; then the dead letter fits, and only then is the entry acknowledged.
    await waitFor('the stream emptied', async () => (await redis.xlen(keys.usageStream())) === 0);
    expect(await usedMemory()).toBeLessThan(limit);
    const letters = (await redis.xrange(keys.usageDeadLetterStream(), '-', '+')) as [string, string[]][];
    expect(letters.map(([, f]) => f.slice(0, 2))).toEqual([['source_id', badId]]);
    const [pending] = (await redis.xpending(keys.usageStream(), BILLING_GROUP)) as [number];
    expect(pending).toBe(0);
  });
});
