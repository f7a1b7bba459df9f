// The whole gateway in one test process: mock provider, relay, billing worker and console-api, on the
// real Postgres, Redis and ClickHouse, each with this stack's own Redis prefix.
import { randomBytes } from 'node:crypto';
import type { ClickHouseClient } from '@clickhouse/client';
import type { FastifyInstance } from 'fastify';
import { startMockUpstream, type MockUpstream, type MockUpstreamOptions } from '../../bench/mock-upstream/mock-upstream.js';
import { startBilling, type RunningBilling } from '../../billing/service.js';
import { postgresBalanceSource } from '../../core/quota/postgres-balance-source.js';
import { buildConsoleApp } from '../../console-api/app.js';
import { hashPassword } from '../../console-api/auth/password.js';
import { QuotaStore } from '../../core/quota/quota-store.js';
import { startRelay, type RunningRelay } from '../../relay/server.js';
import { createClickHouse, createClickHouseAdmin } from '../../infra/clickhouse/client.js';
import { migrateClickHouse } from '../../infra/clickhouse/migrate.js';
import type { Config } from '../../infra/config.js';
import { createLogger } from '../../infra/logger.js';
import { createSql, type Sql } from '../../infra/postgres/client.js';
import { createRedis, type Redis } from '../../infra/redis/client.js';
import { redisKeys, type RedisKeys } from '../../infra/redis/keys.js';
import { testConfig, uniqueName } from '../../infra/testing/test-config.js';
import { createTestDatabase } from '../../infra/testing/test-database.js';

export const MOCK_CHANNEL_KEY = 'sk-ant-mock-channel-credential';

export interface GatewayStack {
  config: Config;
  mock: MockUpstream;
  relayUrl: string;
  consoleUrl: string;
  sql: Sql;
  redis: Redis;
  ch: ClickHouseClient;
  keys: RedisKeys;
  quota: QuotaStore;
  billing: RunningBilling;
  relay: RunningRelay;
  adminToken: string;
  close(): Promise<void>;
}

export interface StackOptions {
  env?: Record<string, string>;
  mock?: MockUpstreamOptions;
}

export async function startGatewayStack(opts: StackOptions = {}): Promise<GatewayStack> {
  const mock = await startMockUpstream({ apiKey: MOCK_CHANNEL_KEY, ...opts.mock });
  const db = await createTestDatabase('stack');
  // A ClickHouse database of its own too: user ids restart in each new Postgres database.
  // Every client of a test stack is 127.0.0.1: the console's per-address login and registration
  // limits would count all of a file's accounts as one client (opts.env may set them back).
  const config = testConfig({
    DATABASE_URL: db.url, CLICKHOUSE_DATABASE: db.name, LOGIN_IP_RATE_LIMIT: '1000000', REGISTER_RATE_LIMIT: '1000000', ...opts.env,
  });
  await migrateClickHouse(config);
  const log = createLogger(config, 'test');
  const relay: RunningRelay = await startRelay(config, log);
  const billing = await startBilling(config, log);
  const sql = createSql(config);
  const redis = createRedis(config, 'test');
  const ch = createClickHouse(config);
  const keys = redisKeys(config.REDIS_PREFIX);
  const quota = new QuotaStore(redis, keys, postgresBalanceSource(sql));
  // The mock provider runs on 127.0.0.1: this stack's channels may point at private addresses (off by
  // default, see console-api/channels/upstream-guard.ts).
  await sql`INSERT INTO options (key, value) VALUES ('ChannelAllowPrivateNetworks', 'true') ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
  const app: FastifyInstance = buildConsoleApp({ config, sql, redis, clickhouse: ch, quotaStore: quota, logger: log });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const consolePort = typeof address === 'object' && address ? address.port : 0;

  const stack: GatewayStack = {
    config, mock, sql, redis, ch, keys, quota, billing, relay,
    relayUrl: `http://127.0.0.1:${relay.port}`,
    consoleUrl: `http://127.0.0.1:${consolePort}`,
    adminToken: '',
    async close() {
      await app.close();
      await relay.close();
      await billing.close();
      await mock.close();
      const left = await redis.keys(`${config.REDIS_PREFIX}:*`);
      if (left.length) await redis.del(...left);
      await redis.quit();
      await sql.end({ timeout: 5 });
      await ch.close();
      const admin = createClickHouseAdmin(config);
      await admin.command({ query: `DROP DATABASE IF EXISTS ${config.CLICKHOUSE_DATABASE}` });
      await admin.close();
      await db.drop();
    },
  };
  // A super administrator of this stack's own, made directly: the root account of the shared test
  // database belongs to whichever test created it first.
  const adminName = uniqueName('admin');
  const adminPassword = randomBytes(12).toString('hex');
  await sql`INSERT INTO users (username, display_name, password_hash, role, aff_code)
            VALUES (${adminName}, 'Test Admin', ${await hashPassword(adminPassword)}, 100, ${randomBytes(6).toString('hex')})`;
  stack.adminToken = await login(stack, adminName, adminPassword);
  return stack;
}

export { uniqueName };

export interface Envelope<T = unknown> {
  success: boolean;
  message: string;
  data?: T;
}

export async function consoleCall<T = unknown>(stack: GatewayStack, method: string, path: string, token: string | null, body?: unknown): Promise<{ status: number; json: Envelope<T> }> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(stack.consoleUrl + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Envelope<T> };
}

export async function login(stack: GatewayStack, username: string, password: string): Promise<string> {
  const { json } = await consoleCall<{ token: string }>(stack, 'POST', '/api/user/login', null, { username, password });
  if (!json.success || !json.data?.token) throw new Error(`login failed: ${json.message}`);
  return json.data.token;
}

export interface TestAccount {
  id: number;
  username: string;
  token: string;
}

/** Registers an account through the console and funds it through the admin endpoint. */
export async function fundedAccount(stack: GatewayStack, quota: number, group = 'default'): Promise<TestAccount> {
  const username = uniqueName('u');
  const password = 'password-' + randomBytes(6).toString('hex');
  const reg = await consoleCall(stack, 'POST', '/api/user/register', null, { username, password });
  if (!reg.json.success) throw new Error(`register failed: ${reg.json.message}`);
  const token = await login(stack, username, password);
  const self = await consoleCall<{ id: number }>(stack, 'GET', '/api/user/self', token);
  const id = self.json.data!.id;
  const put = await consoleCall(stack, 'PUT', '/api/user/', stack.adminToken, { id, quota, group });
  if (!put.json.success) throw new Error(`funding failed: ${put.json.message}`);
  return { id, username, token };
}

/** Creates a channel to the mock provider serving `models` for `group`. */
export async function mockChannel(stack: GatewayStack, models: string[], group = 'default', extra: Record<string, unknown> = {}): Promise<number> {
  const { json } = await consoleCall<{ id: number }>(stack, 'POST', '/api/channel/', stack.adminToken, {
    name: uniqueName('mock-'), base_url: stack.mock.url, key: MOCK_CHANNEL_KEY, models: models.join(','), group, ...extra,
  });
  if (!json.success) throw new Error(`channel creation failed: ${json.message}`);
  // The relay reloads its routes on the console's announcement; wait until it has.
  const deadline = Date.now() + 5000;
  while ((extra.status ?? 1) === 1 && !stack.relay.hasChannel(json.data!.id)) {
    if (Date.now() > deadline) throw new Error('the relay did not pick up the new channel');
    await new Promise((r) => setTimeout(r, 10));
  }
  return json.data!.id;
}

/** Creates an API key through the console and reveals its value the way its owner would. */
export async function createApiKey(stack: GatewayStack, account: TestAccount, input: Record<string, unknown> = {}): Promise<{ id: number; key: string }> {
  const name = uniqueName('key-');
  const created = await consoleCall(stack, 'POST', '/api/token/', account.token, {
    name, expired_time: -1, remain_quota: 0, unlimited_quota: true, ...input,
  });
  if (!created.json.success) throw new Error(`key creation failed: ${created.json.message}`);
  const list = await consoleCall<{ items: { id: number; name: string }[] }>(stack, 'GET', '/api/token/?p=1&page_size=100', account.token);
  const item = list.json.data!.items.find((t) => t.name === (input.name ?? name));
  if (!item) throw new Error('created key not listed');
  const revealed = await consoleCall<{ key: string }>(stack, 'POST', `/api/token/${item.id}/key`, account.token);
  return { id: item.id, key: revealed.json.data!.key };
}

/** Waits until the usage stream and the log outbox are empty: every settled request is billed and logged. */
export async function billingSettled(stack: GatewayStack, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const stream = stack.keys.usageStream();
  for (;;) {
    const len = await stack.redis.xlen(stream);
    // An acknowledged entry is in Postgres; its log row reaches ClickHouse when the outbox drains.
    const [outbox] = len === 0 ? await stack.sql`SELECT EXISTS (SELECT 1 FROM log_outbox) AS queued` : [{ queued: true }];
    if (len === 0 && !outbox!.queued) return;
    if (Date.now() > deadline) throw new Error(`billing did not settle: ${len} entries left, log outbox ${outbox!.queued ? 'not ' : ''}empty`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export interface LedgerRow {
  quota: number;
  prompt_tokens: number;
  completion_tokens: number;
  channel_id: number;
  group: string;
  type: number;
}

/** Waits for a request's ledger row: streams cut short settle after their delivered text is counted. */
export async function ledgerRow(stack: GatewayStack, requestId: string, timeoutMs = 10_000): Promise<LedgerRow> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await billingSettled(stack);
    const [row] = await stack.sql`SELECT quota, prompt_tokens, completion_tokens, channel_id, "group", type FROM ledger WHERE request_id = ${requestId}`;
    if (row) return row as unknown as LedgerRow;
    if (Date.now() > deadline) throw new Error(`request ${requestId} was never billed`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
