// Auditor.drain must not call billing drained while a settlement is on its way: the settlement script
// removes the reservation and appends its usage event in one step, so a drain that reads the stream
// first and the reservations second can see neither (the stream read before the event was appended,
// the reservation read after it was removed) and report a "Redis ≠ Postgres" difference that is not
// there. Here the settlement lands exactly between the drain's reads.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClickHouse } from '../../infra/clickhouse/client.js';
import { createSql, type Sql } from '../../infra/postgres/client.js';
import { createRedis, deleteKeysWithPrefix, redisKeysFor, type Redis } from '../../infra/redis/client.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { createTestDatabase, type TestDatabase } from '../../infra/testing/test-database.js';
import { Auditor } from './audit.js';

const USER_ID = 7;
let db: TestDatabase;
let sql: Sql;
let redis: Redis;
let config: ReturnType<typeof testConfig>;

beforeAll(async () => {
  db = await createTestDatabase('audit');
  config = testConfig({ DATABASE_URL: db.url });
  sql = createSql(config);
  redis = createRedis(config, 'audit-test');
});
afterAll(async () => {
  await deleteKeysWithPrefix(redis, config.REDIS_PREFIX);
  await redis.quit();
  await sql.end({ timeout: 5 });
  await db.drop();
});

describe('Auditor.drain', () => {
  it('waits for a settlement that lands between its reads of the stream and of the reservations', async () => {
    const keys = redisKeysFor(config);
    const shard = keys.shardOf(USER_ID);
    const stream = keys.usageStream(shard);
    const deadlines = keys.reservationDeadlines(shard);
    const member = `${USER_ID}:req-1`;
    await redis.zadd(deadlines, Date.now() + 60_000, member);
    // The settlement (as settleReservations does it, in one step) runs right after the drain's first
    // read of Redis, whichever it is (the stream or the reservations); a stand-in billing worker takes the event off the stream 300 ms later.
    let settledAt = 0;
    let consumed: Promise<unknown> = Promise.resolve();
    const settleOnce = async () => {
      if (settledAt) return;
      settledAt = Date.now();
      await redis.multi().zrem(deadlines, member).xadd(stream, '*', 'e', '{}').exec();
      consumed = new Promise((r) => setTimeout(r, 300)).then(() => redis.del(stream));
    };
    const watched = new Proxy(redis, {
      get(target, prop, receiver) {
        if (prop === 'xlen' || prop === 'zscan') {
          const read = (Reflect.get(target, prop, receiver) as (...a: unknown[]) => Promise<unknown>).bind(target);
          return async (...args: unknown[]) => {
            const answer = await read(...args);
            await settleOnce();
            return answer;
          };
        }
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const ch = createClickHouse(config);
    try {
      const auditor = new Auditor(sql, ch, watched, keys, USER_ID);
      await auditor.drain(10_000);
    } finally {
      await ch.close();
    }
    expect(settledAt).toBeGreaterThan(0);
    const streamAtDrain = await redis.xlen(stream);
    await consumed;
    // Drained means the settlement's event left the stream, not that it was never seen.
    expect(streamAtDrain).toBe(0);
    expect(await redis.zcard(deadlines)).toBe(0);
  });
});
