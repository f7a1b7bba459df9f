// The stack under test, as separate processes so that each one's CPU and memory are its own: the
// mock provider, the bare proxy, the relay, the billing worker and the console API, spawned from
// dist/ with the bench's own database, Redis prefix, ClickHouse database and KEY_SECRET. ClickHouse
// is used at its URL when it answers, otherwise an embedded one is started on a free port with its
// data under .data/clickhouse-bench.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import net from 'node:net';
import { join, resolve } from 'node:path';
import { isClickHouseReachable } from '../../infra/clickhouse/ensure.js';
import { migrateClickHouse } from '../../infra/clickhouse/migrate.js';
import { loadConfig, type Config } from '../../infra/config.js';
import { migratePostgres } from '../../infra/postgres/migrate.js';
import { projectRoot } from '../../infra/project-root.js';

export const BENCH_KEY_SECRET = 'bench-only-key-secret-0123456789abcdef';
export const MOCK_KEY = 'sk-ant-mock-bench';

export interface StackOptions {
  outDir: string;
  databaseUrl: string;
  redisUrl: string;
  redisPrefix: string;
  clickhouseUrl?: string;
  clickhouseDatabase: string;
  /** Always start an embedded ClickHouse of the bench's own. */
  ownClickHouse?: boolean;
  /** Node flags for the relay (e.g. --cpu-prof). */
  relayNodeArgs?: string[];
  /** Relay entry point (default dist/relay/main.js). */
  relayEntry?: string;
  /** Billing worker entry point (default dist/billing/main.js). */
  billingEntry?: string;
  log: (line: string) => void;
}

export interface Service {
  name: string;
  pid: number;
  url: string;
  child: ChildProcess;
}

export interface Stack {
  config: Config;
  services: Record<'mock' | 'bare' | 'relay' | 'billing' | 'console' | 'clickhouse', Service | undefined>;
  mockUrl: string;
  bareUrl: string;
  relayUrl: string;
  consoleUrl: string;
  billingMetricsUrl: string;
  /** Starts relay, billing and console (after the fixtures exist, so that the relay loads the channel). */
  startGateway(): Promise<void>;
  stopRelay(): Promise<void>;
  close(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function waitHttp(url: string, child: ChildProcess, name: string, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode} (see its log)`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      return;
    } catch {
      // not yet
    }
    if (Date.now() > end) throw new Error(`${name} did not answer ${url} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function stopChild(child: ChildProcess, timeoutMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  await exited;
  clearTimeout(t);
}

export async function startStack(o: StackOptions): Promise<Stack> {
  const root = projectRoot();
  const logDir = join(o.outDir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const children: Service[] = [];

  const spawnService = (name: string, script: string, env: Record<string, string>, args: string[] = [], nodeArgs: string[] = []): ChildProcess => {
    const out = createWriteStream(join(logDir, `${name}.log`));
    const child = spawn(process.execPath, [...nodeArgs, resolve(root, script), ...args], {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.pipe(out);
    child.stderr!.pipe(out);
    return child;
  };

  let clickhouse: Service | undefined;
  let chUrl = o.clickhouseUrl ?? 'http://127.0.0.1:8123';
  if (o.ownClickHouse || !(await isClickHouseReachable(chUrl))) {
    const port = await freePort();
    chUrl = `http://127.0.0.1:${port}`;
    o.log(`clickhouse: starting the embedded server at ${chUrl} (data in .data/clickhouse-bench)`);
    const child = spawnService('clickhouse', 'dist/infra/clickhouse/local-server-main.js', {
      CLICKHOUSE_URL: chUrl, CLICKHOUSE_LOCAL_PATH: join(root, '.data/clickhouse-bench'), LOG_LEVEL: 'warn',
    });
    clickhouse = { name: 'clickhouse', pid: child.pid!, url: chUrl, child };
    children.push(clickhouse);
    const end = Date.now() + 60_000;
    while (!(await isClickHouseReachable(chUrl))) {
      if (child.exitCode !== null || Date.now() > end) throw new Error('embedded ClickHouse did not start (see logs/clickhouse.log)');
      await new Promise((r) => setTimeout(r, 200));
    }
  } else {
    o.log(`clickhouse: using ${chUrl}`);
  }

  const [relayPort, consolePort, mockPort, barePort, metricsPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  const env: Record<string, string> = {
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    DATABASE_URL: o.databaseUrl,
    REDIS_URL: o.redisUrl,
    REDIS_PREFIX: o.redisPrefix,
    CLICKHOUSE_URL: chUrl,
    CLICKHOUSE_DATABASE: o.clickhouseDatabase,
    KEY_SECRET: BENCH_KEY_SECRET,
    RELAY_HOST: '127.0.0.1',
    RELAY_PORT: String(relayPort),
    CONSOLE_HOST: '127.0.0.1',
    CONSOLE_PORT: String(consolePort),
    MOCK_UPSTREAM_PORT: String(mockPort),
    MOCK_UPSTREAM_KEY: MOCK_KEY,
    ROOT_PASSWORD: 'bench-root-password',
    SEED_DEMO: 'false',
    BILLING_CONSUMER: 'bench-billing',
    BILLING_METRICS_PORT: String(metricsPort),
  };
  const config = loadConfig(env);
  o.log('migrating Postgres and ClickHouse');
  await migratePostgres(config);
  await migrateClickHouse(config);

  const mockUrl = `http://127.0.0.1:${mockPort}`;
  const bareUrl = `http://127.0.0.1:${barePort}`;
  const relayUrl = `http://127.0.0.1:${relayPort}`;
  const consoleUrl = `http://127.0.0.1:${consolePort}`;

  const services: Stack['services'] = { mock: undefined, bare: undefined, relay: undefined, billing: undefined, console: undefined, clickhouse };
  const add = (key: keyof Stack['services'], name: string, url: string, child: ChildProcess): Service => {
    const s = { name, pid: child.pid!, url, child };
    services[key] = s;
    children.push(s);
    return s;
  };

  // The mock answers with as many tokens as max_tokens asks (each scenario sets max_tokens).
  const mock = add('mock', 'mock-upstream', mockUrl, spawnService('mock-upstream', 'dist/bench/mock-upstream/main.js', {
    ...env, MOCK_API_KEY: MOCK_KEY, MOCK_OUTPUT_TOKENS: '1000000',
  }));
  const bare = add('bare', 'bare-proxy', bareUrl, spawnService('bare-proxy', 'dist/bench/bare-proxy.js', env,
    ['--upstream', mockUrl, '--port', String(barePort), '--api-key', MOCK_KEY]));
  await waitHttp(`${mockUrl}/v1/models`, mock.child, 'mock-upstream');
  await waitHttp(`${bareUrl}/health`, bare.child, 'bare-proxy');

  return {
    config,
    services,
    mockUrl, bareUrl, relayUrl, consoleUrl,
    billingMetricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    async startGateway(): Promise<void> {
      const billing = add('billing', 'billing', '', spawnService('billing', o.billingEntry ?? 'dist/billing/main.js', env));
      const consoleSvc = add('console', 'console-api', consoleUrl, spawnService('console-api', 'dist/console-api/main.js', env));
      const relay = add('relay', 'relay', relayUrl, spawnService('relay', o.relayEntry ?? 'dist/relay/main.js', env, [], o.relayNodeArgs ?? []));
      await waitHttp(`${relayUrl}/health`, relay.child, 'relay');
      await waitHttp(`${consoleUrl}/api/status`, consoleSvc.child, 'console-api');
      await new Promise((r) => setTimeout(r, 300));
      if (billing.child.exitCode !== null) throw new Error('billing worker exited (see logs/billing.log)');
    },
    async stopRelay() {
      if (services.relay) await stopChild(services.relay.child);
    },
    async close() {
      for (const s of [...children].reverse()) await stopChild(s.child).catch(() => {});
    },
  };
}
