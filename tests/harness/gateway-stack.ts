// The whole gateway in one test process: mock provider, relay, billing worker and console-api, on the
// real Postgres, Redis and ClickHouse, each with this stack's own Redis prefix.
//
// Scaled out on request (docs/scaling.md): TEST_REDIS_CLUSTER_NODES=host:port,... puts every stack on
// that Redis Cluster (16 virtual shards); TEST_GATEWAY_RELAYS=2 starts a second relay and makes
// relayUrl a round-robin TCP balancer over both (per connection, as an L4 load balancer does), and a
// second billing worker. So `TEST_REDIS_CLUSTER_NODES=... TEST_GATEWAY_RELAYS=2 npx vitest run relay`
// runs the relay test set on two relays over a cluster. `relay` stays the first relay.
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { ClickHouseClient } from '@clickhouse/client';
import type { FastifyInstance } from 'fastify';
import { startMockUpstream, type MockUpstream, type MockUpstreamOptions } from '../../bench/mock-upstream/mock-upstream.js';
import { startBilling, type RunningBilling } from '../../billing/service.js';
import { postgresBalanceSource } from '../../core/quota/postgres-balance-source.js';
import { buildConsoleApp } from '../../console-api/app.js';
import { hashPassword, scryptParams } from '../../console-api/auth/password.js';
import { QuotaStore } from '../../core/quota/quota-store.js';
import { ratiosFromOptions } from '../../core/pricing/ratios.js';
import { startRelay, type RunningRelay } from '../../relay/server.js';
import { settlementsInFlight } from '../../relay/messages/settlement.js';
import { createClickHouse, createClickHouseAdmin } from '../../infra/clickhouse/client.js';
import { createClickHouseReader } from '../../infra/clickhouse/read-client.js';
import { migrateClickHouse } from '../../infra/clickhouse/migrate.js';
import type { Config } from '../../infra/config.js';
import { createLogger } from '../../infra/logger.js';
import { createSql, type Sql } from '../../infra/postgres/client.js';
import { createRedis, deleteKeysWithPrefix, redisKeysFor, type Redis } from '../../infra/redis/client.js';
import type { RedisKeys } from '../../infra/redis/keys.js';
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
  /** Every relay of the stack (TEST_GATEWAY_RELAYS), the first being `relay`. */
  relays: RunningRelay[];
  adminToken: string;
  close(): Promise<void>;
}

export interface StackOptions {
  env?: Record<string, string>;
  mock?: MockUpstreamOptions;
  /** Relays to start (behind a round-robin balancer when more than one); default TEST_GATEWAY_RELAYS, else 1. */
  relays?: number;
}

export async function startGatewayStack(opts: StackOptions = {}): Promise<GatewayStack> {
  const mock = await startMockUpstream({ apiKey: MOCK_CHANNEL_KEY, ...opts.mock });
  const db = await createTestDatabase('stack');
  // A ClickHouse database of its own too: user ids restart in each new Postgres database.
  // Every client of a test stack is 127.0.0.1: the console's per-address login and registration
  // limits would count all of a file's accounts as one client (opts.env may set them back).
  const cluster: Record<string, string> = process.env.TEST_REDIS_CLUSTER_NODES ? { REDIS_CLUSTER_NODES: process.env.TEST_REDIS_CLUSTER_NODES, REDIS_SHARDS: '16' } : {};
  const config = testConfig({
    DATABASE_URL: db.url, CLICKHOUSE_DATABASE: db.name, LOGIN_IP_RATE_LIMIT: '1000000', REGISTER_RATE_LIMIT: '1000000', ...cluster, ...opts.env,
  });
  await migrateClickHouse(config);
  const log = createLogger(config, 'test');
  const sql = createSql(config);
  // The mock provider runs on 127.0.0.1: this stack's channels may point at private addresses (off by
  // default, see core/net/outbound-guard.ts). Written before the relays start, as they read options
  // then and on announcements, and nothing announces a row written here.
  await sql`INSERT INTO options (key, value) VALUES ('ChannelAllowPrivateNetworks', 'true') ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
  const relay: RunningRelay = await startRelay(config, log);
  const relays = [relay];
  for (let i = 1; i < (opts.relays ?? Number(process.env.TEST_GATEWAY_RELAYS ?? 1)); i++) relays.push(await startRelay(config, log));
  const billing = await startBilling(config, log);
  const moreBilling: RunningBilling[] = [];
  // A second billing worker shares the shard streams (the sharded layout) under its own consumer name.
  if (relays.length > 1 && config.REDIS_CLUSTER_NODES) moreBilling.push(await startBilling({ ...config, BILLING_CONSUMER: `${config.BILLING_CONSUMER}-2` }, log));
  const balancer = relays.length > 1 ? await roundRobin(relays.map((r) => r.port)) : null;
  const redis = createRedis(config, 'test');
  const ch = createClickHouse(config);
  const logReader = createClickHouseReader(config);
  const keys = redisKeysFor(config);
  const quota = new QuotaStore(redis, keys, postgresBalanceSource(sql));
  const app: FastifyInstance = buildConsoleApp({ config, sql, redis, logReader, quotaStore: quota, logger: log });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const consolePort = typeof address === 'object' && address ? address.port : 0;

  const stack: GatewayStack = {
    config, mock, sql, redis, ch, keys, quota, billing, relay, relays,
    relayUrl: `http://127.0.0.1:${balancer?.port ?? relay.port}`,
    consoleUrl: `http://127.0.0.1:${consolePort}`,
    adminToken: '',
    async close() {
      await app.close();
      await balancer?.close();
      for (const r of relays) await r.close();
      for (const b of moreBilling) await b.close();
      await billing.close();
      await mock.close();
      await deleteKeysWithPrefix(redis, config.REDIS_PREFIX);
      // Its relays' spool, whatever a relay closed with Redis down left there (no relay replays it now).
      rmSync(join(config.RELAY_SPOOL_DIR, config.REDIS_PREFIX), { recursive: true, force: true });
      await redis.quit();
      await sql.end({ timeout: 5 });
      await ch.close();
      await logReader.close();
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
            VALUES (${adminName}, 'Test Admin', ${await hashPassword(adminPassword, scryptParams(config.PASSWORD_SCRYPT_LOG2N))}, 100, ${randomBytes(6).toString('hex')})`;
  stack.adminToken = await login(stack, adminName, adminPassword);
  return stack;
}

export { uniqueName };

/** A TCP balancer handing each new connection to the next port in turn. */
async function roundRobin(ports: number[]): Promise<{ port: number; close(): Promise<void> }> {
  let next = 0;
  const open = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(ports[next++ % ports.length]!, '127.0.0.1');
    for (const s of [client, upstream]) {
      open.add(s);
      s.once('close', () => open.delete(s));
      s.on('error', () => { client.destroy(); upstream.destroy(); });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    close: () => new Promise<void>((resolve) => {
      for (const s of open) s.destroy();
      server.close(() => resolve());
    }),
  };
}

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

/** The account's balance as Postgres has it (users.quota): what the books are checked against. */
export async function accountQuota(stack: GatewayStack, userId: number): Promise<number> {
  const [u] = await stack.sql<{ quota: string | number }[]>`SELECT quota FROM users WHERE id = ${userId}`;
  if (!u) throw new Error(`no account ${userId}`);
  return Number(u.quota);
}

/**
 * Prices at ratio 1 (option ModelRatio) each of `models` that no ratio prices yet, as an operator
 * prices a channel's models: the relay refuses a model without a price. Waits until the relays serve it.
 */
export async function priceModels(stack: GatewayStack, models: string[]): Promise<void> {
  const [row] = await stack.sql`SELECT value FROM options WHERE key = 'ModelRatio'`;
  const current = (row?.value as string | undefined) ?? '{}';
  const ratios = ratiosFromOptions(new Map([['ModelRatio', current]]));
  const missing = models.filter((m) => !ratios.priced(m));
  if (missing.length === 0) return;
  const value = JSON.stringify({ ...JSON.parse(current), ...Object.fromEntries(missing.map((m) => [m, 1])) });
  const { json } = await consoleCall(stack, 'PUT', '/api/option/', stack.adminToken, { key: 'ModelRatio', value });
  if (!json.success) throw new Error(`pricing the models failed: ${json.message}`);
  const deadline = Date.now() + 5000;
  while (!stack.relays.every((r) => missing.every((m) => r.hasPrice(m)))) {
    if (Date.now() > deadline) throw new Error('the relay did not pick up the models\' prices');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Sets (a string) or removes (null) options as stored, past the console's checks (a test of what the
 * relay does with a value the console would refuse), and tells the relays as the console does; then
 * waits `settleMs` for them to reload.
 */
export async function storeOptions(stack: GatewayStack, values: Record<string, string | null>, settleMs = 300): Promise<void> {
  for (const [key, value] of Object.entries(values)) {
    if (value === null) await stack.sql`DELETE FROM options WHERE key = ${key}`;
    else await stack.sql`INSERT INTO options (key, value) VALUES (${key}, ${value}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
  }
  await stack.redis.publish(stack.keys.invalidationChannel(), JSON.stringify({ kind: 'options', keys: Object.keys(values) }));
  await new Promise((r) => setTimeout(r, settleMs));
}

/** Creates a channel to the mock provider serving `models` for `group`, each priced (priceModels). */
export async function mockChannel(stack: GatewayStack, models: string[], group = 'default', extra: Record<string, unknown> = {}): Promise<number> {
  await priceModels(stack, models);
  return unpricedMockChannel(stack, models, group, extra);
}

/** mockChannel without pricing its models: for the tests of what a model without a price gets. */
export async function unpricedMockChannel(stack: GatewayStack, models: string[], group = 'default', extra: Record<string, unknown> = {}): Promise<number> {
  const { json } = await consoleCall<{ id: number }>(stack, 'POST', '/api/channel/', stack.adminToken, {
    name: uniqueName('mock-'), base_url: stack.mock.url, key: MOCK_CHANNEL_KEY, models: models.join(','), group, ...extra,
  });
  if (!json.success) throw new Error(`channel creation failed: ${json.message}`);
  // The relay reloads its routes on the console's announcement; wait until it has.
  const deadline = Date.now() + 5000;
  while ((extra.status ?? 1) === 1 && !stack.relays.every((r) => r.hasChannel(json.data!.id))) {
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

/**
 * Waits until this process's relays have handed every settlement to Redis (they send them a few
 * milliseconds after the answer, QuotaStore.settleSoon), then until the usage stream (every shard's,
 * in the sharded layout) and the log outbox are empty: every answered request is billed and logged.
 */
export async function billingSettled(stack: GatewayStack, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const streams = Array.from({ length: stack.keys.streamShards }, (_, s) => stack.keys.usageStream(s));
  for (;;) {
    if (settlementsInFlight() > 0) {
      if (Date.now() > deadline) throw new Error(`billing did not settle: ${settlementsInFlight()} settlements not taken by Redis`);
      await new Promise((r) => setTimeout(r, 5));
      continue;
    }
    // What the relays' credit slices hold back would show in every balance the test reads next.
    await Promise.all(stack.relays.map((r) => r.returnCreditSlices()));
    let len = 0;
    for (const stream of streams) len += await stack.redis.xlen(stream);
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

/**
 * The account's balance once every settlement already sent has reached Postgres: the reading to take
 * before a request whose debit a test checks, when an earlier request's settlement may still be on its
 * way (CI's cluster pass once read a balance 6 units high: the previous test's last answer, unsettled).
 */
export async function settledAccountQuota(stack: GatewayStack, userId: number): Promise<number> {
  await billingSettled(stack);
  return accountQuota(stack, userId);
}

/** Waits for a request's ledger row: streams cut short settle after their delivered text is counted. */
export async function ledgerRow(stack: GatewayStack, requestId: string, timeoutMs = 10_000): Promise<LedgerRow> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await billingSettled(stack);
    const [row] = await stack.sql`SELECT quota, prompt_tokens, completion_tokens, channel_id, "group", type FROM ledger WHERE request_id = ${requestId}`;
    if (row) {
      // Billed after the wait above (a stream cut short settles late): its log row may still be in
      // the outbox, on its way to ClickHouse, which the caller reads next (review streamend: once).
      await billingSettled(stack);
      return row as unknown as LedgerRow;
    }
    if (Date.now() > deadline) throw new Error(`request ${requestId} was never billed`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
