// The billing worker and the console-api as deployed (node dist/…/main.js: make build first), their
// Postgres connections terminated under them, must stay up and go on working.
//
// They died of it (exit code 1): postgres.js's fetch_types ran an array-type query on each new
// connection with a promise nothing awaited, so a connection terminated as it opened (pg_terminate_backend,
// FATAL 57P01) or a statement timeout gave an unhandled rejection, and neither process had a guard
// against one (infra/postgres/client.ts, infra/process-guards.ts). Reproduced at random by terminating
// their connections every 50 ms (exit after 6-48 rounds); here deterministically: they reach a scratch
// database through a proxy (infra/testing/postgres-fault-proxy.ts) that answers that query, whenever a
// process sends it, as a terminated backend does, and that terminates their idle connections every
// 50 ms for a bounded number of rounds, so that they open new ones all the time. The billing worker
// also has every backend terminated whatever it is doing, its settlement transactions included:
// postgres.js then crashed it from a timer (#1208), which patches/postgres+3.4.9.patch mends.
//
// TEST_DIST_DIR runs another build than dist/ (a directory under the project root, or absolute).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { isAbsolute, join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClickHouseAdmin } from '../../infra/clickhouse/client.js';
import { migrateClickHouse } from '../../infra/clickhouse/migrate.js';
import { createRedis, type Redis } from '../../infra/redis/client.js';
import { redisKeys } from '../../infra/redis/keys.js';
import { projectRoot } from '../../infra/project-root.js';
import { createTestDatabase, type TestDatabase } from '../../infra/testing/test-database.js';
import { startPostgresFaultProxy, type PostgresFaultProxy } from '../../infra/testing/postgres-fault-proxy.js';
import { testConfig, TEST_DATABASE_URL } from '../../infra/testing/test-config.js';
import { appendUsageEvent, encodeUsageEvent, usageEvent } from '../../core/usage/usage-event.js';

const ROUNDS = 60;
const ROUND_MS = 50;

const config = testConfig();
let db: TestDatabase;
let proxy: PostgresFaultProxy;
let audit: pg.Client;
let redis: Redis;

function distEntry(path: string): string {
  const dir = process.env.TEST_DIST_DIR ?? 'dist';
  return join(isAbsolute(dir) ? dir : join(projectRoot(), dir), path);
}

beforeAll(async () => {
  db = await createTestDatabase('pgfaults');
  // A ClickHouse database of its own too: user ids restart in each new Postgres database.
  await migrateClickHouse(testConfig({ DATABASE_URL: db.url, CLICKHOUSE_DATABASE: db.name }));
  const target = new URL(TEST_DATABASE_URL);
  proxy = await startPostgresFaultProxy({ host: target.hostname, port: Number(target.port || 5432) }, { failQueriesContaining: ['typarray'] });
  // The test's own reads go to the scratch database directly, not through the proxy.
  audit = new pg.Client({ connectionString: db.url });
  await audit.connect();
  redis = createRedis(config, 'pgfaults-test');
});
afterAll(async () => {
  redis?.disconnect();
  await audit?.end().catch(() => undefined);
  await proxy?.close();
  if (db) {
    const admin = createClickHouseAdmin(testConfig({ CLICKHOUSE_DATABASE: db.name }));
    await admin.command({ query: `DROP DATABASE IF EXISTS ${db.name}` });
    await admin.close();
  }
  await db?.drop();
});

/** The scratch database through the proxy: what the processes are given. */
function proxiedUrl(): string {
  const url = new URL(db.url);
  url.port = String(proxy.port);
  return url.toString();
}

interface Child {
  proc: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
  running(): boolean;
}

function start(entry: string, env: Record<string, string>, ready: RegExp): Promise<{ child: Child; match: RegExpExecArray }> {
  const proc = spawn(process.execPath, [distEntry(entry)], {
    env: {
      ...process.env as Record<string, string>,
      NODE_ENV: 'test', LOG_LEVEL: 'info',
      DATABASE_URL: proxiedUrl(), REDIS_URL: config.REDIS_URL, KEY_SECRET: config.KEY_SECRET,
      CLICKHOUSE_URL: config.CLICKHOUSE_URL, CLICKHOUSE_DATABASE: db.name,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let code: number | null | undefined;
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (c) => { code = c; resolve(c); }));
  const child: Child = { proc, output: () => output, exited, running: () => code === undefined };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${entry} did not start:\n${output}`)), 20_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      const m = ready.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve({ child, match: m });
      }
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', onData);
    void exited.then((c) => reject(new Error(`${entry} exited (${c}) before it was ready:\n${output}`)));
  });
}

async function stop(child: Child): Promise<void> {
  if (!child.running()) return;
  child.proc.kill('SIGTERM');
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), 10_000);
  await child.exited;
  clearTimeout(timer);
}

/** Ends the processes' idle connections at the proxy (as a terminated backend does): how many. */
const terminateIdle = async (): Promise<number> => proxy.terminateIdle();

/**
 * pg_terminate_backend on every backend of the scratch database but the test's own, whatever it is
 * doing: inside a settlement's transaction, in a statement, idle. How many.
 */
async function terminateEveryBackend(): Promise<number> {
  const r = await audit.query(
    `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
    [db.name],
  );
  return r.rows[0].n as number;
}

/** Ends connections with `terminate` `rounds` times, ROUND_MS apart, running `during` each round. */
async function terminateLoop(rounds: number, during: () => Promise<void> = async () => {}, terminate = terminateIdle): Promise<number> {
  let terminated = 0;
  for (let i = 0; i < rounds; i++) {
    terminated += await terminate();
    await during();
    await new Promise((res) => setTimeout(res, ROUND_MS));
  }
  return terminated;
}

async function waitFor(what: string, check: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A billing worker settling events while `terminate` ends its connections every round: it must stay
 * up, and the ledger and the balance must hold every event once.
 */
async function billingUnderTerminations(terminate: () => Promise<number>): Promise<void> {
  const prefix = `pgfaults-${randomUUID().slice(0, 8)}`;
  const keys = redisKeys(prefix);
  const name = `faults-${randomUUID().slice(0, 8)}`;
  const funded = 1_000_000;
  const u = await audit.query(`INSERT INTO users (username, password_hash, quota, aff_code) VALUES ($1, 'x', $2, $1) RETURNING id`, [name, funded]);
  const userId = Number(u.rows[0].id);
  const { child } = await start('billing/main.js', {
    REDIS_PREFIX: prefix, BILLING_CONSUMER: `${prefix}-worker`, BILLING_METRICS_PORT: '0',
    BILLING_BLOCK_MS: '20', BILLING_MIN_BATCH_INTERVAL_MS: '0', RESERVATION_REAP_INTERVAL_MS: '200',
  }, /billing worker started/);
  let sent = 0;
  let quota = 0;
  const send = async () => {
    const cost = 1 + (sent % 7);
    const event = usageEvent({ type: 2, request_id: `${prefix}-${sent}`, user_id: userId, quota: cost, created_at: Math.floor(Date.now() / 1000), content: '' });
    await appendUsageEvent(redis, keys.usageStream(), encodeUsageEvent(event));
    sent++;
    quota += cost;
  };
  try {
    for (let i = 0; i < 5; i++) await send();
    const opened = proxy.connections;
    const terminated = await terminateLoop(ROUNDS, send, terminate);
    expect(child.running(), child.output()).toBe(true);
    // Connections were ended under it and it opened new ones: each open once a chance to die of it.
    expect(terminated).toBeGreaterThan(5);
    expect(proxy.connections - opened).toBeGreaterThan(5);
    await waitFor('every event in the ledger', async () => {
      const r = await audit.query(`SELECT count(*)::int AS n FROM ledger WHERE user_id = $1`, [userId]);
      return r.rows[0].n === sent || !child.running();
    });
    expect(child.running(), child.output()).toBe(true);
    const l = await audit.query(`SELECT count(*)::int AS n, coalesce(sum(quota), 0)::bigint AS q FROM ledger WHERE user_id = $1`, [userId]);
    const b = await audit.query(`SELECT quota FROM users WHERE id = $1`, [userId]);
    expect({ rows: l.rows[0].n, ledger: Number(l.rows[0].q), balance: Number(b.rows[0].quota) }).toEqual({ rows: sent, ledger: quota, balance: funded - quota });
    await waitFor('the usage stream acknowledged and emptied', async () => (await redis.xlen(keys.usageStream())) === 0);
    expect(proxy.failedQueries).toBe(0);
  } finally {
    await stop(child);
    const left = await redis.keys(`${prefix}:*`);
    if (left.length) await redis.del(...left);
  }
}

describe('Postgres connections terminated under the processes', () => {
  it('the billing worker stays up and bills every event exactly once', async () => {
    await billingUnderTerminations(terminateIdle);
  });

  // Its settlement transactions cut too: postgres.js wrote its ROLLBACK to the closed socket from a
  // timer (an uncaught TypeError: exit 1 within 6-48 rounds), and a reopened connection failed its
  // first statement with the old connection's error (patches/postgres+3.4.9.patch;
  // infra/postgres/closed-transaction.integration.test.ts).
  it('the billing worker stays up and bills every event exactly once with busy connections terminated', async () => {
    await billingUnderTerminations(terminateEveryBackend);
  });

  it('the console-api stays up and answers once Postgres does', async () => {
    const prefix = `pgfaults-${randomUUID().slice(0, 8)}`;
    const { child, match } = await start('console-api/main.js', {
      REDIS_PREFIX: prefix, CONSOLE_HOST: '127.0.0.1', CONSOLE_PORT: '0',
    }, /listening at http:\/\/127\.0\.0\.1:(\d+)/);
    const url = `http://127.0.0.1:${match[1]}/api/status`;
    const statuses = new Map<number, number>();
    const ask = async () => {
      // Several at once, so that the pool opens several connections to be terminated.
      const answers = await Promise.all([1, 2, 3].map(() => fetch(url).then((r) => r.status, () => 0)));
      for (const s of answers) statuses.set(s, (statuses.get(s) ?? 0) + 1);
    };
    try {
      await ask();
      const opened = proxy.connections;
      const terminated = await terminateLoop(ROUNDS, ask);
      expect(child.running(), child.output()).toBe(true);
      expect(terminated).toBeGreaterThan(5);
      expect(proxy.connections - opened).toBeGreaterThan(5);
      // Postgres answers again: so does the console, from the same process.
      await waitFor('GET /api/status answered 200', async () => (await fetch(url).then((r) => r.status, () => 0)) === 200 || !child.running());
      expect(child.running(), child.output()).toBe(true);
      // Every request answered, by the same process: 200, or 503 DATABASE_UNAVAILABLE (retry shortly)
      // for one whose connection was ended under it, never a 500.
      expect([...statuses.keys()].filter((s) => s !== 200 && s !== 503)).toEqual([]);
      expect(statuses.get(200) ?? 0).toBeGreaterThan(0);
      expect(proxy.failedQueries).toBe(0);
    } finally {
      await stop(child);
      const left = await redis.keys(`${prefix}:*`);
      if (left.length) await redis.del(...left);
    }
  });
});
