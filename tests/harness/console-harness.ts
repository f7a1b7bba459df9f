// Integration-test harness: a console app on the real services with a Postgres database of its own
// (created, migrated and dropped here), its own Redis key prefix, and the shared ClickHouse test
// database. User ids start at a random offset so rows this file writes to ClickHouse never mix with
// another test file's.
import { randomBytes, randomInt } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { type ClickHouseClient, createClickHouse } from '../../infra/clickhouse/client.js';
import { createClickHouseReader } from '../../infra/clickhouse/read-client.js';
import type { Config } from '../../infra/config.js';
import type { Sql } from '../../infra/postgres/client.js';
import { createRedis, type Redis } from '../../infra/redis/client.js';
import { type RedisKeys, redisKeys } from '../../infra/redis/keys.js';
import { testConfig, uniqueName } from '../../infra/testing/test-config.js';
import { BILLING_GROUP, BillingWorker } from '../../billing/billing-worker.js';
import { decodeUsageEvent, encodedUsageEventsOf, type UsageEvent } from '../../core/usage/usage-event.js';
import { createLogger } from '../../infra/logger.js';
import { QuotaStore } from '../../core/quota/quota-store.js';
import { insertAccount } from '../../console-api/accounts/account-store.js';
import type { UserRow } from '../../console-api/accounts/account-view.js';
import { postgresBalanceSource } from '../../core/quota/postgres-balance-source.js';
import { createTestDatabase } from '../../infra/testing/test-database.js';
import { hashPassword } from '../../console-api/auth/password.js';
import { buildConsoleApp, type ConsoleDeps } from '../../console-api/app.js';
import { createConsoleSql } from '../../console-api/db.js';

/** Cheap scrypt parameters for accounts a test inserts directly (the stored hash carries them). */
const FAST_SCRYPT = { log2N: 10, r: 8, p: 1 };

export interface TestAccount {
  user: UserRow;
  password: string;
  token: string;
  auth: { authorization: string };
}

export interface ConsoleHarness {
  app: FastifyInstance;
  config: Config;
  sql: Sql;
  redis: Redis;
  clickhouse: ClickHouseClient;
  quotaStore: QuotaStore;
  keys: RedisKeys;
  /** Inserts an account (fast hash) and logs it in through the API. */
  account(opts?: { role?: number; group?: string; quota?: number; username?: string }): Promise<TestAccount>;
  /** Bills what the console appended to the usage stream (as the billing worker would): log rows land in ClickHouse. */
  drainUsageStream(): Promise<UsageEvent[]>;
  /** PUT /api/option/ {key, value} as `who`. */
  putOption(who: TestAccount, key: string, value: unknown): Promise<LightMyRequestResponse>;
  /** The option's stored text (undefined: never set). */
  storedOption(key: string): Promise<string | undefined>;
  close(): Promise<void>;
}

export { uniqueName };

export interface HarnessDeps {
  now?: ConsoleDeps['now'];
  settings?: ConsoleDeps['settings'];
  /** Tests of what the console logs pass a logger writing where they can read it. */
  logger?: ConsoleDeps['logger'];
}

export async function startConsoleHarness(overrides: Record<string, string> = {}, deps: HarnessDeps = {}): Promise<ConsoleHarness> {
  const db = await createTestDatabase('console');
  // Every test client is 127.0.0.1: the per-address limits would count all of a file's accounts as
  // one client. Tests of those limits set them (overrides or deps.settings).
  const config = testConfig({ DATABASE_URL: db.url, LOGIN_IP_RATE_LIMIT: '1000000', REGISTER_RATE_LIMIT: '1000000', ...overrides });
  const sql = createConsoleSql(config, { max: 4 });
  // Ids far above any other test file's, so ClickHouse rows keyed by user_id never collide.
  await sql`SELECT setval('users_id_seq', ${randomInt(1_000_000, 2 ** 31)})`;
  const redis = createRedis(config, 'console-test');
  const clickhouse = createClickHouse(config);
  const logReader = createClickHouseReader(config);
  const keys = redisKeys(config.REDIS_PREFIX);
  const quotaStore = new QuotaStore(redis, keys, postgresBalanceSource(sql));
  const app = buildConsoleApp({ config, sql, redis, logReader, quotaStore, ...deps });
  await app.ready();

  return {
    app, config, sql, redis, clickhouse, quotaStore, keys,
    async account(opts = {}) {
      const password = `pw-${randomBytes(8).toString('hex')}`;
      const user = await insertAccount(sql, {
        username: opts.username ?? uniqueName(),
        passwordHash: await hashPassword(password, FAST_SCRYPT),
        role: opts.role ?? 1,
        group: opts.group ?? 'default',
      });
      if (opts.quota !== undefined) await sql`UPDATE users SET quota = ${opts.quota} WHERE id = ${user.id}`;
      const res = await app.inject({ method: 'POST', url: '/api/user/login', payload: { username: user.username, password } });
      const token = (res.json() as { data: { token: string } }).data.token;
      return { user: { ...user, quota: opts.quota ?? user.quota }, password, token, auth: { authorization: `Bearer ${token}` } };
    },
    putOption(who, key, value) {
      return app.inject({ method: 'PUT', url: '/api/option/', headers: who.auth, payload: { key, value } });
    },
    async storedOption(key) {
      return (await sql<{ value: string }[]>`SELECT value FROM options WHERE key = ${key}`)[0]?.value;
    },
    async drainUsageStream() {
      const stream = keys.usageStream();
      const entries = (await redis.xrange(stream, '-', '+')) as [string, string[]][];
      if (entries.length === 0) return [];
      await redis.xgroup('CREATE', stream, BILLING_GROUP, '0', 'MKSTREAM').catch(() => undefined);
      const worker = new BillingWorker(redis, sql, clickhouse, createLogger(config, 'test-billing'), {
        stream, deadLetterStream: keys.usageDeadLetterStream(), consumer: 'test', batchSize: 1000, blockMs: 10, claimIdleMs: 1000, minBatchIntervalMs: 0,
      });
      await worker.processEntries(entries);
      await worker.drainOutbox();
      return entries.flatMap(([, fields]) => (encodedUsageEventsOf(fields) ?? []).map(decodeUsageEvent));
    },
    async close() {
      await app.close();
      const stale = await redis.keys(`${config.REDIS_PREFIX}:*`);
      if (stale.length) await redis.del(...stale);
      await Promise.allSettled([sql.end({ timeout: 5 }), redis.quit(), clickhouse.close(), logReader.close()]);
      await db.drop();
    },
  };
}
