// A Redis swapped under running services: the server at REDIS_URL replaced by one holding another
// gateway database's accounts (another gateway's backup restored, the address now naming another
// server). The services refused such a Redis at start only, the relay also after a reconnect but
// without a test: the billing worker settled the other database's usage into this database's
// account of the same id (777,777 quota taken from an account that never spent it), and the
// console-api went on crediting that Redis's mirrors. Now each service asks again after every
// reconnect: the relay refuses requests (529 quota_store_foreign, GET /ready 503), the billing
// worker reads and settles nothing there (the other gateway's worker keeps its entries), the console-api
// stops (exit 78); with this database's Redis back, the relay and the billing worker go on by themselves.
import Anthropic from '@anthropic-ai/sdk';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BILLING_GROUP } from '../../billing/billing-worker.js';
import { billingMetrics } from '../../billing/metrics/billing-metrics.js';
import { postgresBalanceSource } from '../../core/quota/postgres-balance-source.js';
import { QuotaStore } from '../../core/quota/quota-store.js';
import { encodeUsageEvent, usageEvent } from '../../core/usage/usage-event.js';
import { projectRoot } from '../../infra/project-root.js';
import { createRedis, type Redis } from '../../infra/redis/client.js';
import { freePort } from '../../infra/testing/free-port.js';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../harness/gateway-stack.js';
import { startRedisServer, type OwnRedisServer } from './redis-server.js';
import { until } from '../harness/until.js';

const MODEL = 'claude-sonnet-4-6';
const FOREIGN_COST = 777_777;

let ours: OwnRedisServer;
let foreign: OwnRedisServer | null = null;
let stack: GatewayStack;
let account: TestAccount;
let anthropic: Anthropic;

beforeAll(async () => {
  ours = await startRedisServer({ port: await freePort(), aof: true });
  stack = await startGatewayStack({ env: { REDIS_URL: ours.url } });
  await mockChannel(stack, [MODEL]);
  account = await fundedAccount(stack, 50_000_000);
  const key = await createApiKey(stack, account);
  anthropic = new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 });
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await foreign?.close();
  await ours?.close();
});

/**
 * One statement, one snapshot: read in two, a settlement committing between them gave a ledger row
 * counted with the balance from before it (CI: "ledgerRows 3" beside the old spent).
 */
async function books(): Promise<{ balance: number; spent: number; ledgerRows: number }> {
  const [b] = await stack.sql`
    SELECT u.quota, u.used_quota, (SELECT count(*)::int FROM ledger WHERE user_id = u.id) AS n FROM users u WHERE u.id = ${account.id}`;
  return { balance: Number(b!.quota), spent: Number(b!.used_quota), ledgerRows: Number(b!.n) };
}

async function ready(): Promise<{ status: number; body: string }> {
  const res = await fetch(`${stack.relayUrl}/ready`);
  return { status: res.status, body: await res.text() };
}

/**
 * Another database's Redis, made on a port of its own and left on disk: bound to another
 * database_instance, holding a settled request of its account with this test's account id (ids
 * restart at 1 in every database) in the usage stream, the billing group made as its worker would.
 */
async function anotherDatabasesRedis(): Promise<OwnRedisServer> {
  const server = await startRedisServer({ port: await freePort(), aof: true });
  const redis: Redis = createRedis({ ...stack.config, REDIS_URL: server.url }, 'test-foreign');
  try {
    await redis.set(stack.keys.databaseInstance(), randomUUID());
    await redis.xgroup('CREATE', stack.keys.usageStream(), BILLING_GROUP, '0', 'MKSTREAM');
    // The other database's relay reserved and settled, as a relay does (its balance source is beside the
    // point: the mirror is that Redis's).
    const quota = new QuotaStore(redis, stack.keys, postgresBalanceSource(stack.sql));
    const requestId = `foreign-${randomUUID()}`;
    const tokenId = 1;
    expect(await quota.reserve({ userId: account.id, tokenId, tokenLimited: false, requestId, amount: FOREIGN_COST, deadlineMs: Date.now() + 600_000 })).toBe('reserved');
    const event = usageEvent({
      type: 2, request_id: requestId, user_id: account.id, token_id: tokenId, token_limited: false, quota: FOREIGN_COST,
      created_at: Math.floor(Date.now() / 1000), content: 'another database\'s request', model_name: MODEL,
    });
    expect(await quota.settle({ userId: account.id, tokenId, requestId, cost: FOREIGN_COST, eventJson: encodeUsageEvent(event) })).toBe(true);
    expect(await redis.xlen(stack.keys.usageStream())).toBe(1);
    // Down cleanly, its append-only file complete (SHUTDOWN writes it; a SIGKILL might lose the last second).
    await redis.call('SHUTDOWN').catch(() => {});
  } finally {
    redis.disconnect();
  }
  await until('the other Redis to stop', async () => !server.running);
  return server;
}

describe('a Redis swapped under running services', () => {
  it('is refused by the relay, billed nothing by the billing worker and stops the console-api; with this database\'s Redis back, service goes on', async () => {
    // Served and billed on this database's Redis.
    const first = await anthropic.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
    expect(first.type).toBe('message');
    await until('the first request billed', async () => (await books()).spent > 0);
    expect(await ready()).toEqual({ status: 200, body: '{"status":"ok"}' });

    // A console-api of its own process, on the same database and Redis.
    const consoleApi = spawn(process.execPath, [join(projectRoot(), 'dist/console-api/main.js')], {
      cwd: projectRoot(),
      env: {
        ...process.env, NODE_ENV: 'test', LOG_LEVEL: 'info', KEY_SECRET: stack.config.KEY_SECRET,
        DATABASE_URL: stack.config.DATABASE_URL, REDIS_URL: ours.url, REDIS_PREFIX: stack.config.REDIS_PREFIX,
        CLICKHOUSE_URL: stack.config.CLICKHOUSE_URL, CLICKHOUSE_DATABASE: stack.config.CLICKHOUSE_DATABASE,
        CONSOLE_HOST: '127.0.0.1', CONSOLE_PORT: '0', ROOT_PASSWORD_FILE: join(ours.dir, 'root-password'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let consoleOutput = '';
    consoleApi.stdout.on('data', (d: Buffer) => { consoleOutput += d.toString(); });
    consoleApi.stderr.on('data', (d: Buffer) => { consoleOutput += d.toString(); });
    const consoleExit = new Promise<number | null>((resolve) => consoleApi.once('exit', (code) => resolve(code)));
    try {
      await until('the console-api to listen', async () => /listening/i.test(consoleOutput) || consoleApi.exitCode !== null);
      expect(consoleApi.exitCode, consoleOutput).toBeNull();

      const before = await books();
      const otherData = await anotherDatabasesRedis();
      // The swap: this database's Redis goes down, the other one's data comes up at its address.
      await ours.kill();
      foreign = await startRedisServer({ port: ours.port, aof: true, dir: otherData.dir });

      // The relay: every request refused, said to be the store's configuration; not ready, yet alive.
      // (503 quota_store_unavailable while no Redis answers at the address.)
      await until('the relay to find the other database\'s Redis', async () => (await ready()).body.includes('quota_store_foreign'));
      expect(await ready()).toEqual({ status: 503, body: '{"status":"unavailable","reason":"quota_store_foreign"}' });
      expect((await fetch(`${stack.relayUrl}/health`)).status).toBe(200);
      const refused = await anthropic.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] })
        .then(() => null, (err: unknown) => err);
      expect(refused).toBeInstanceOf(Anthropic.APIError);
      expect((refused as InstanceType<typeof Anthropic.APIError>).status).toBe(529);
      expect((refused as InstanceType<typeof Anthropic.APIError>).message).toContain('another gateway database');

      // The billing worker neither settled nor even read the other database's entry (read, it would
      // stay pending under this worker's name, out of reach of that gateway's own worker): it says it
      // is failing, for the Redis is not known to be its database's.
      await until('the billing worker to refuse the other database\'s Redis', async () => {
        const h = billingMetrics.health();
        return h.status === 'failing' && (h.lastError ?? '').includes('not known to hold this database\'s accounts');
      });
      const foreignRedis = createRedis({ ...stack.config, REDIS_URL: foreign.url }, 'test-foreign-check');
      try {
        expect(await foreignRedis.xlen(stack.keys.usageStream())).toBe(1);
        expect(await foreignRedis.xpending(stack.keys.usageStream(), BILLING_GROUP)).toEqual([0, null, null, null]);
      } finally {
        foreignRedis.disconnect();
      }
      expect(await books()).toEqual(before);

      // The console-api stopped as a configuration to fix.
      const code = await Promise.race([consoleExit, new Promise<string>((r) => setTimeout(() => r('still running'), 20_000))]);
      expect(code, consoleOutput).toBe(78);
      expect(consoleOutput).toContain('holds, under this prefix, the balances, reservations and usage of another gateway database');

      // This database's Redis back at the address: served and billed again, the other's usage never.
      await foreign.kill();
      await ours.start();
      await until('the relay to be ready again', async () => (await ready()).status === 200);
      const again = await anthropic.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
      expect(again.type).toBe('message');
      const after = await until('the request billed', async () => {
        const b = await books();
        return b.ledgerRows > before.ledgerRows ? b : null;
      });
      // Every quota unit spent is a consumption row of the ledger, the other database's request none.
      const [row] = await stack.sql`SELECT coalesce(sum(quota), 0)::bigint AS spent, count(*) FILTER (WHERE quota = ${FOREIGN_COST})::int AS foreign
                                    FROM ledger WHERE user_id = ${account.id} AND type = 2`;
      expect(before.balance - after.balance, JSON.stringify({ before, after })).toBe(after.spent - before.spent);
      expect(before.balance - after.balance).toBeLessThan(FOREIGN_COST);
      expect(Number(row!.spent), JSON.stringify({ before, after })).toBe(after.spent);
      expect(row!.foreign).toBe(0);
    } finally {
      if (consoleApi.exitCode === null) consoleApi.kill('SIGKILL');
    }
  }, 120_000);
});
