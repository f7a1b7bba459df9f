// The chaos suite's own stack, every part a child process it may kill, pause or cut off: a
// redis-server with AOF on a port of the chaos range (6400-6409), an embedded ClickHouse on a free
// port with a data directory of its own (never the shared 8123 one), a Postgres database of its own
// reached by the services through a TCP proxy the suite controls, the Anthropic mock from bench/ with
// slow streams, and the relay and the billing worker from dist/. The suite itself reads Postgres
// directly, so it can audit while the services cannot reach it.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync, rmSync, type WriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { ClickHouseClient } from '@clickhouse/client';
import { createClickHouse } from '../../infra/clickhouse/client.js';
import { isClickHouseReachable } from '../../infra/clickhouse/ensure.js';
import { migrateClickHouse } from '../../infra/clickhouse/migrate.js';
import { loadConfig, type Config } from '../../infra/config.js';
import { createSql, type Sql } from '../../infra/postgres/client.js';
import { migratePostgres } from '../../infra/postgres/migrate.js';
import { projectRoot } from '../../infra/project-root.js';
import { createRedis, type Redis } from '../../infra/redis/client.js';
import { redisKeys, type RedisKeys } from '../../infra/redis/keys.js';
import { ensureBenchFixtures, type BenchFixtures } from '../../bench/lib/fixtures.js';
import { insertAccount } from '../../console-api/accounts/account-store.js';
import { createApiKeyCrypto, generateApiKey, maskApiKey } from '../../infra/secrets/api-key-crypto.js';
import { BENCH_KEY_SECRET, MOCK_KEY } from '../../bench/lib/stack.js';
import { freePort } from '../../infra/testing/free-port.js';
import { TEST_DATABASE_URL } from '../../infra/testing/test-config.js';
import { startRedisServer, type OwnRedisServer } from './redis-server.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

/** The cache usage the mock reports on every answer: the audit prices it. */
export const MOCK_CACHE = { cacheReadTokens: 40, cacheCreationTokens: 12, cacheCreation1hTokens: 4 };

/**
 * The small account's balance: its own client spends it to the end during the suite, so that its
 * reservations meet a balance near zero while the faults strike.
 */
export const SMALL_BALANCE = 60_000;

export interface ChaosStackOptions {
  redisPort: number;
  /** Delay between streamed tokens: a 64-token stream lasts 64 times this. */
  tokenDelayMs: number;
  /** The services' logs go to `<outDir>/logs`, kept after the run. */
  outDir: string;
  log: (line: string) => void;
}

/** How soon a supervised service that exited on its own is started again. */
const SUPERVISOR_RESTART_MS = 200;

/**
 * A service of the stack: started, killed and started again by the suite. A supervised one is also
 * started again when it exits on its own with a failure code, as the supervisor of a deployment
 * (systemd's Restart=on-failure, a container's restart policy) does: a process guard exits 1 on an
 * uncaught exception by design (docs/billing.md, "Known limits": postgres.js throws one out of a timer
 * when Postgres drops a connection mid-transaction), and without a supervisor the suite measured a
 * billing worker that never came back. An exit the suite caused (stop(), a signal) is left to it.
 */
export class ChildService {
  #child: ChildProcess | null = null;
  #exited: Promise<void> = Promise.resolve();
  readonly #log: WriteStream;
  #stopping = false;
  #closed = false;

  constructor(
    readonly name: string,
    readonly script: string,
    readonly env: Record<string, string>,
    readonly ready: () => Promise<boolean>,
    logDir: string,
    readonly supervised = false,
  ) {
    this.#log = createWriteStream(join(logDir, `${name}.log`), { flags: 'a' });
  }

  /** Restarts counted since the stack started (a supervised service that exited on its own). */
  restarts = 0;

  get pid(): number | undefined { return this.#child?.pid; }
  get running(): boolean { return this.#child !== null && this.#child.exitCode === null && this.#child.signalCode === null; }

  async start(timeoutMs = 60_000): Promise<void> {
    if (this.running) throw new Error(`${this.name} is running already`);
    const child = spawn(process.execPath, [resolve(projectRoot(), this.script)], {
      cwd: projectRoot(), env: { ...process.env, ...this.env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.#child = child;
    this.#stopping = false;
    this.#exited = new Promise((r) => child.once('exit', () => r()));
    if (this.supervised) {
      child.once('exit', (code) => {
        if (code === null || code === 0 || this.#stopping || this.#closed) return;
        this.#log.write(`\n[chaos supervisor] ${this.name} exited ${code}; starting it again\n`);
        setTimeout(() => {
          if (this.running || this.#stopping || this.#closed || this.#child !== child) return;
          this.restarts++;
          this.start().catch((err: unknown) => this.#log.write(`[chaos supervisor] ${this.name} did not start again: ${(err as Error).message}\n`));
        }, SUPERVISOR_RESTART_MS);
      });
    }
    child.stdout!.pipe(this.#log, { end: false });
    child.stderr!.pipe(this.#log, { end: false });
    const onExit = () => child.kill('SIGKILL');
    process.once('exit', onExit);
    child.once('exit', () => process.removeListener('exit', onExit));
    const end = Date.now() + timeoutMs;
    while (!(await this.ready().catch(() => false))) {
      if (child.exitCode !== null) throw new Error(`${this.name} exited with ${child.exitCode} at start-up (see its log)`);
      if (Date.now() > end) throw new Error(`${this.name} did not become ready in ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Sends `signal` and waits for the exit (SIGKILL after `timeoutMs`). */
  async stop(signal: NodeJS.Signals, timeoutMs = 60_000): Promise<void> {
    const child = this.#child;
    this.#stopping = true;
    if (!child || !this.running) return;
    child.kill(signal);
    const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    await this.#exited;
    clearTimeout(t);
  }

  /** The exit code of the last run (null: killed by a signal, or running). */
  get exitCode(): number | null { return this.#child?.exitCode ?? null; }

  close(): void {
    this.#closed = true;
    this.#log.end();
  }
}

export interface ChaosStack {
  /** The suite's view: Postgres direct (not through the proxy). */
  config: Config;
  sql: Sql;
  redis: Redis;
  ch: ClickHouseClient;
  keys: RedisKeys;
  fixtures: BenchFixtures;
  /** An account of SMALL_BALANCE quota and its key, which its client runs dry. */
  small: { userId: number; apiKey: string };
  relayUrl: string;
  redisServer: OwnRedisServer;
  postgresProxy: TcpProxy;
  relay: ChildService;
  billing: ChildService;
  clickhouse: ChildService;
  mock: ChildService;
  dataDir: string;
  close(): Promise<void>;
}

async function answers(url: string): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
  await res.arrayBuffer();
  return true;
}

export async function startChaosStack(o: ChaosStackOptions): Promise<ChaosStack> {
  const dataDir = mkdtempSync(join(tmpdir(), 'chaos-stack-'));
  const logDir = join(o.outDir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const services: ChildService[] = [];
  const cleanups: (() => Promise<void> | void)[] = [
    () => rmSync(dataDir, { recursive: true, force: true }),
    () => { for (const s of services) s.close(); },
  ];
  const close = async () => {
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
  };
  try {
    const redisServer = await startRedisServer({ port: o.redisPort, aof: true });
    cleanups.push(() => redisServer.close());

    // The tests' Postgres server (TEST_DATABASE_URL), a database of the suite's own on it.
    const database = `gateway_chaos_${randomBytes(4).toString('hex')}`;
    const server = new URL(TEST_DATABASE_URL);
    const urlOf = (db: string, hostPort = `${server.hostname}:${server.port || '5432'}`) => {
      const u = new URL(server.toString());
      u.pathname = `/${db}`;
      u.host = hostPort;
      return u.toString();
    };
    const direct = urlOf(database);
    const postgresProxy = await startTcpProxy({ host: server.hostname, port: Number(server.port || 5432) });
    cleanups.push(() => postgresProxy.close());
    cleanups.push(async () => {
      const admin = new pg.Client({ connectionString: urlOf('postgres') });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`).finally(() => admin.end());
    });

    const [chPort, relayPort, mockPort, relayMetricsPort, billingMetricsPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
    const chUrl = `http://127.0.0.1:${chPort}`;
    const env: Record<string, string> = {
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      DATABASE_URL: urlOf(database, `127.0.0.1:${postgresProxy.port}`),
      REDIS_URL: redisServer.url,
      REDIS_PREFIX: 'chaos',
      CLICKHOUSE_URL: chUrl,
      CLICKHOUSE_DATABASE: 'chaos',
      CLICKHOUSE_LOCAL_PATH: join(dataDir, 'clickhouse'),
      KEY_SECRET: BENCH_KEY_SECRET,
      RELAY_HOST: '127.0.0.1',
      RELAY_PORT: String(relayPort),
      RELAY_METRICS_PORT: String(relayMetricsPort),
      RELAY_SPOOL_DIR: join(dataDir, 'relay-spool'),
      // A killed relay's reservations are released within seconds, so each fault's audit can drain.
      RESERVATION_TTL_SEC: '6',
      RESERVATION_REAP_INTERVAL_MS: '1000',
      // One consumer name across restarts: a restarted worker reads its own pending entries at once.
      BILLING_CONSUMER: 'chaos-billing',
      BILLING_METRICS_PORT: String(billingMetricsPort),
      MOCK_UPSTREAM_PORT: String(mockPort),
      MOCK_API_KEY: MOCK_KEY,
      MOCK_OUTPUT_TOKENS: '1000000',
      MOCK_TOKEN_DELAY_MS: String(o.tokenDelayMs),
      MOCK_CACHE_READ_TOKENS: String(MOCK_CACHE.cacheReadTokens),
      MOCK_CACHE_CREATION_TOKENS: String(MOCK_CACHE.cacheCreationTokens - MOCK_CACHE.cacheCreation1hTokens),
      MOCK_CACHE_CREATION_1H_TOKENS: String(MOCK_CACHE.cacheCreation1hTokens),
    };
    const config = loadConfig({ ...env, DATABASE_URL: direct });

    const clickhouse = new ChildService('clickhouse', 'dist/infra/clickhouse/local-server-main.js', env, () => isClickHouseReachable(chUrl), logDir);
    await clickhouse.start(120_000);
    cleanups.push(() => clickhouse.stop('SIGTERM'));
    o.log(`stack: redis-server :${o.redisPort} (AOF), ClickHouse ${chUrl}, Postgres ${database} via proxy :${postgresProxy.port}; logs in ${logDir}`);
    await migratePostgres(config);
    await migrateClickHouse(config);

    const sql = createSql(config);
    cleanups.push(() => sql.end({ timeout: 5 }));
    const redis = createRedis(config, 'chaos-suite');
    redis.on('error', () => undefined); // the faults make it fail on purpose; each command reports its own
    cleanups.push(() => redis.disconnect());
    const ch = createClickHouse(config);
    cleanups.push(() => ch.close());
    const keys = redisKeys(config.REDIS_PREFIX);

    const mockUrl = `http://127.0.0.1:${mockPort}`;
    const mock = new ChildService('mock-upstream', 'dist/bench/mock-upstream/main.js', env, () => answers(`${mockUrl}/v1/models`), logDir);
    await mock.start();
    cleanups.push(() => mock.stop('SIGTERM'));
    const fixtures = await ensureBenchFixtures(sql, config, mockUrl, MOCK_KEY);
    const small = await smallAccount(sql, config);

    const relayUrl = `http://127.0.0.1:${relayPort}`;
    const billing = new ChildService('billing', 'dist/billing/main.js', env, () => answers(`http://127.0.0.1:${billingMetricsPort}/metrics`), logDir, true);
    const relay = new ChildService('relay', 'dist/relay/main.js', env, () => answers(`${relayUrl}/health`), logDir, true);
    await billing.start();
    cleanups.push(() => billing.stop('SIGTERM'));
    await relay.start();
    cleanups.push(() => relay.stop('SIGTERM'));
    services.push(relay, billing, mock, clickhouse);
    return { config, sql, redis, ch, keys, fixtures, small, relayUrl, redisServer, postgresProxy, relay, billing, clickhouse, mock, dataDir, close };
  } catch (err) {
    await close();
    throw err;
  }
}

async function smallAccount(sql: Sql, config: Config): Promise<{ userId: number; apiKey: string }> {
  const crypto = createApiKeyCrypto(config.KEY_SECRET);
  const apiKey = generateApiKey();
  return sql.begin(async (tx) => {
    const user = await insertAccount(tx, { username: 'chaos-small', passwordHash: 'x' });
    await tx`UPDATE users SET quota = ${SMALL_BALANCE} WHERE id = ${user.id}`;
    await tx`INSERT INTO tokens (user_id, name, key_hash, key_ciphertext, key_mask, unlimited_quota)
             VALUES (${user.id}, 'chaos-small', ${crypto.hash(apiKey)}, ${crypto.seal(apiKey)}, ${maskApiKey(apiKey)}, true)`;
    return { userId: Number(user.id), apiKey };
  });
}
