// An entry the worker cannot bill is acknowledged only once its dead letter is written. The dead
// letter and the acknowledgement went in one MULTI whose replies nobody read: a dead-letter XADD that
// failed at EXEC (WRONGTYPE: the dead-letter key hand-edited into a string) still let XACK + XDEL run,
// and the entry, with its Redis debit, was gone for good. Now the entry stays pending while the dead
// letter cannot be written, the entries around it are billed meanwhile, and once the key is mended the
// dead letter is written and the entry acknowledged.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../infra/logger.js';
import { createClickHouseAdmin } from '../infra/clickhouse/client.js';
import { migrateClickHouse } from '../infra/clickhouse/migrate.js';
import type { Config } from '../infra/config.js';
import { createSql, type Sql } from '../infra/postgres/client.js';
import { createRedis, redisKeysFor } from '../infra/redis/client.js';
import type { RedisKeys } from '../infra/redis/keys.js';
import { testConfig } from '../infra/testing/test-config.js';
import { createTestDatabase, type TestDatabase } from '../infra/testing/test-database.js';
import { appendUsageEvent, encodeUsageEvent, USAGE_EVENT_FIELD, usageEvent } from '../core/usage/usage-event.js';
import { BILLING_GROUP } from './billing-worker.js';
import { startBilling, type RunningBilling } from './service.js';

// Databases of its own (Postgres and ClickHouse): the worker's log outbox drain would otherwise send
// other test files' queued log rows (billing/clickhouse-outage.integration.test.ts counts on their
// staying queued), and user ids restart in a new Postgres database.
let db: TestDatabase;
let config: Config;
let sql: Sql;
const redis = createRedis(testConfig(), 'dead-letter-failure-test');
let stream: string;
let dead: string;
let keys: RedisKeys;
let billing: RunningBilling | null = null;

beforeAll(async () => {
  db = await createTestDatabase('deadletterfail');
  config = testConfig({ DATABASE_URL: db.url, CLICKHOUSE_DATABASE: db.name });
  await migrateClickHouse(config);
  sql = createSql(config);
  keys = redisKeysFor(config);
  stream = keys.usageStream();
  dead = keys.usageDeadLetterStream();
  billing = await startBilling(config, createLogger(config, 'dead-letter-failure-test'));
});
afterAll(async () => {
  await billing?.close();
  if (config) {
    const left = await redis.keys(`${config.REDIS_PREFIX}:*`);
    if (left.length) await redis.del(...left);
  }
  redis.disconnect();
  await sql?.end({ timeout: 5 });
  if (config) {
    const admin = createClickHouseAdmin(config);
    await admin.command({ query: `DROP DATABASE IF EXISTS ${config.CLICKHOUSE_DATABASE}` });
    await admin.close();
  }
  await db?.drop();
});

async function waitFor(what: string, check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function pendingIds(): Promise<string[]> {
  const rows = (await redis.xpending(stream, BILLING_GROUP, '-', '+', 100)) as [string, string, number, number][];
  return rows.map((r) => r[0]);
}

describe('a dead letter that cannot be written', () => {
  it('leaves its entry pending and in the stream, bills the others, and is written once it can be', async () => {
    const name = `dlf-${randomUUID().slice(0, 8)}`;
    const [u] = await sql`INSERT INTO users (username, password_hash, quota, aff_code) VALUES (${name}, 'x', 10000, ${name}) RETURNING id`;
    const userId = Number(u!.id);
    const event = (i: number) => encodeUsageEvent(usageEvent({
      type: 2, request_id: `${name}-${i}`, user_id: userId, quota: 10 * i, created_at: Math.floor(Date.now() / 1000), content: '',
    }));

    // The dead-letter stream's key holds a string (a hand edit): XADD to it fails with WRONGTYPE.
    await redis.set(dead, 'not a stream');
    await appendUsageEvent(redis, stream, event(1));
    const badId = (await redis.xadd(stream, '*', USAGE_EVENT_FIELD, '{"not":"an event"}'))!;
    await appendUsageEvent(redis, stream, event(2));

    await waitFor('the decodable events billed', async () => {
      const [l] = await sql`SELECT count(*)::int AS n FROM ledger WHERE user_id = ${userId}`;
      return l!.n === 2;
    });
    // Tried and refused more than once meanwhile; the entry is still there, pending, not acknowledged.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await pendingIds()).toEqual([badId]);
    expect((await redis.xrange(stream, '-', '+')).map(([id]) => id)).toEqual([badId]);
    expect(await redis.get(dead)).toBe('not a stream');
    const [u2] = await sql`SELECT quota FROM users WHERE id = ${userId}`;
    expect(Number(u2!.quota)).toBe(10000 - 30);

    // Mended: the dead letter is written, with the entry's id, and only then the entry acknowledged.
    await redis.del(dead);
    await waitFor('the dead letter written and the entry acknowledged', async () => (await redis.xlen(stream)) === 0, 40_000);
    expect(await pendingIds()).toEqual([]);
    const letters = (await redis.xrange(dead, '-', '+')) as [string, string[]][];
    expect(letters).toHaveLength(1);
    // With the Redis data it was debited in (mirror-repair.ts): replayed after a restart, it is repaired too.
    expect(letters[0]![1]).toEqual(['source_id', badId, USAGE_EVENT_FIELD, '{"not":"an event"}', 'i', await redis.get(keys.redisIncarnation())]);
  });
});
