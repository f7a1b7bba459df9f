// The stack under test, as separate processes so that each one's CPU and memory are its own: the
// mock provider, the bare proxy, the OpenAI-format mock provider and a bare proxy of its own (the
// OpenAI-format channel's scenarios), the relay, the billing worker and the console API, spawned from
// dist/ with the bench's own database, Redis prefix, ClickHouse database and KEY_SECRET. ClickHouse
// is used at its URL when it answers, otherwise an embedded one is started on a free port with its
// data under .data/clickhouse-bench.
//
// attachStack() is the other mode: a stack that is already running, given by URL (relay, mock
// provider, console, databases). Nothing of it is spawned, migrated, paused or stopped; the bench
// starts only the bare proxy (in front of the given mock) and finds the PIDs of the stack's processes
// from their listening ports when they run on this host (for CPU and memory figures). It has no
// OpenAI-format mock: the scenarios of the OpenAI-format channel do not run there.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isClickHouseReachable } from '../../infra/clickhouse/ensure.js';
import { migrateClickHouse } from '../../infra/clickhouse/migrate.js';
import { nodeFlagsFor } from '../../infra/launch/node-flags.js';
import { loadConfig, type Config } from '../../infra/config.js';
import { migratePostgres } from '../../infra/postgres/migrate.js';
import { projectRoot } from '../../infra/project-root.js';
import { pidsListeningOn } from './proc.js';
import { startPeerGateway } from './peer-gateway.js';
import { FAILING_CHANNEL_KEY } from './channel-failure.js';
import { freePort } from '../../infra/testing/free-port.js';
import type { BareUpstreamApi } from '../bare-proxy.js';

export const BENCH_KEY_SECRET = 'bench-only-key-secret-0123456789abcdef';
export const MOCK_KEY = 'sk-ant-mock-bench';
/** The Bearer key the bench's OpenAI-format mock requires (its channel's credential). */
export const MOCK_OPENAI_KEY = 'sk-proj-mock-bench';
/**
 * The cached_tokens the bench's OpenAI-format mock reports in every answer's prompt (part of its
 * prompt_tokens, as OpenAI counts them): the audit covers the relay's reading of them as cache reads.
 */
export const MOCK_OPENAI_CACHED_TOKENS = 4;

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
  /** Node flags for the bare hop (with BENCH_CPU_PROF: --cpu-prof into profiles/bare). */
  bareNodeArgs?: string[];
  /** Node flags for the billing worker (BENCH_BILLING_NODE_ARGS, e.g. --cpu-prof --cpu-prof-dir DIR). */
  billingNodeArgs?: string[];
  /** Node flags for the console-api and the embedded ClickHouse (BENCH_CONSOLE_NODE_ARGS, BENCH_CLICKHOUSE_NODE_ARGS). */
  consoleNodeArgs?: string[];
  clickhouseNodeArgs?: string[];
  /** How the bare hop reads a JSON answer (bare-proxy.ts; BENCH_BARE_UPSTREAM_API); its default when absent. */
  bareUpstreamApi?: BareUpstreamApi;
  /** Relay entry point (default dist/relay/main.js). */
  relayEntry?: string;
  /** Billing worker entry point (default dist/billing/main.js). */
  billingEntry?: string;
  /** Console API entry point (default dist/console-api/main.js): an older build's, for before/after runs. */
  consoleEntry?: string;
  log: (line: string) => void;
}

export interface Service {
  name: string;
  pid: number;
  url: string;
  child: ChildProcess;
}

/** mockOpenai, bareOpenai: the OpenAI-format mock and the bare proxy in front of it (own stack only). */
export type ServiceName = 'mock' | 'bare' | 'mockOpenai' | 'bareOpenai' | 'relay' | 'billing' | 'console' | 'clickhouse' | 'peer';

/** A service's processes: the one the bench spawned, or those found for it (attached mode); undefined when neither. */
export function servicePids(stack: Pick<Stack, 'services' | 'foreignPids'>, key: ServiceName): number[] | undefined {
  const own = stack.services[key];
  return own ? [own.pid] : stack.foreignPids[key]?.pids;
}

export interface Stack {
  /** 'own': every process spawned here; 'attached': a running stack given by URL (only the bare proxy is ours). */
  mode: 'own' | 'attached';
  config: Config;
  /** The processes this bench spawned (and may pause or stop). */
  services: Record<ServiceName, Service | undefined>;
  /** PIDs of the stack's processes it did not spawn, where they could be found (attached mode), with how. */
  foreignPids: Partial<Record<ServiceName, { pids: number[]; how: string }>>;
  mockUrl: string;
  /** The credential the mock provider requires (sent by the channel, the bare proxy and mock-direct runs). */
  mockKey: string;
  bareUrl: string;
  /**
   * The OpenAI-format mock provider (bench/mock-upstream-openai/) that the OpenAI-format channel (type 1)
   * points at, its Bearer key, and the bare proxy in front of it (--upstream-format openai). Undefined
   * when attached: the scenarios served by that channel are then skipped.
   */
  openai: { mockUrl: string; mockKey: string; bareUrl: string } | undefined;
  /** The peer gateway (Portkey, lib/peer-gateway.ts) in front of the same mock; undefined when it could not start. */
  peerUrl: string | undefined;
  peerVersion: string | undefined;
  relayUrl: string;
  consoleUrl: string;
  /** The billing worker's /metrics, when known. */
  billingMetricsUrl: string | undefined;
  /** The relay's /metrics (on RELAY_METRICS_PORT, not the relay's own port), when known. */
  relayMetricsUrl: string | undefined;
  /** What the mode changes in the report (skipped runs, processes not found, ...). */
  notes: string[];
  /** Starts relay, billing and console (after the fixtures exist, so that the relay loads the channel). */
  startGateway(): Promise<void>;
  stopRelay(): Promise<void>;
  /** Stops the bare hop, so that a profiled one writes its profile. */
  stopBare(): Promise<void>;
  close(): Promise<void>;
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
    }, [], o.clickhouseNodeArgs ?? []);
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

  const [relayPort, consolePort, mockPort, barePort, metricsPort, relayMetricsPort, openaiMockPort, openaiBarePort] = await Promise.all([
    freePort(), freePort(), freePort(), freePort(), freePort(), freePort(), freePort(), freePort(),
  ]);
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
    RELAY_METRICS_PORT: String(relayMetricsPort),
  };
  const config = loadConfig(env);
  o.log('migrating Postgres and ClickHouse');
  await migratePostgres(config);
  await migrateClickHouse(config);

  const mockUrl = `http://127.0.0.1:${mockPort}`;
  const bareUrl = `http://127.0.0.1:${barePort}`;
  const openaiMockUrl = `http://127.0.0.1:${openaiMockPort}`;
  const openaiBareUrl = `http://127.0.0.1:${openaiBarePort}`;
  const relayUrl = `http://127.0.0.1:${relayPort}`;
  const consoleUrl = `http://127.0.0.1:${consolePort}`;

  const services: Stack['services'] = { mock: undefined, bare: undefined, mockOpenai: undefined, bareOpenai: undefined, relay: undefined, billing: undefined, console: undefined, clickhouse, peer: undefined };
  const add = (key: keyof Stack['services'], name: string, url: string, child: ChildProcess): Service => {
    const s = { name, pid: child.pid!, url, child };
    services[key] = s;
    children.push(s);
    return s;
  };

  // The mock answers with as many tokens as max_tokens asks (each scenario sets max_tokens), and
  // reports some cache usage on every answer, so that the money audit covers cache pricing: few
  // enough tokens that the bench's short prompts still bound them, as a real prompt bounds its cache.
  // Image and document blocks (the mix scenario's media requests, given by URL) cost what the
  // provider charges for a ~1,100 px image and a two-page PDF: a few bytes that the body's length
  // does not bound, so the audit covers the relay's context-window reservation too.
  const mock = add('mock', 'mock-upstream', mockUrl, spawnService('mock-upstream', 'dist/bench/mock-upstream/main.js', {
    ...env, MOCK_API_KEY: MOCK_KEY, MOCK_OUTPUT_TOKENS: '1000000',
    MOCK_CACHE_READ_TOKENS: '40', MOCK_CACHE_CREATION_TOKENS: '8', MOCK_CACHE_CREATION_1H_TOKENS: '4',
    MOCK_DOCUMENT_TOKENS: '3000', MOCK_IMAGE_TOKENS: '1600',
    // The errors scenario's second channel, whose key the bench revokes mid-run (lib/channel-failure.ts).
    MOCK_API_KEYS: FAILING_CHANNEL_KEY, MOCK_CONTROL: 'true',
  }));
  const bare = add('bare', 'bare-proxy', bareUrl, spawnService('bare-proxy', 'dist/bench/bare-proxy.js', env,
    ['--upstream', mockUrl, '--port', String(barePort), '--api-key', MOCK_KEY, ...bareUpstreamApiArgs(o.bareUpstreamApi)], o.bareNodeArgs ?? []));
  // The OpenAI-format channel's provider (the oai-* scenarios): output as long as max_tokens asks, and
  // some cached tokens in every prompt (inside prompt_tokens, as OpenAI counts them), so that the audit
  // covers how the relay reads an OpenAI usage. Its bare proxy sends the key as a Bearer token, as the
  // relay sends an OpenAI-format channel's; not profiled (BENCH_CPU_PROF compares the relay with the
  // Anthropic mock's bare hop).
  const mockOpenai = add('mockOpenai', 'mock-upstream-openai', openaiMockUrl, spawnService('mock-upstream-openai', 'dist/bench/mock-upstream-openai/main.js', {
    ...env, MOCK_OPENAI_PORT: String(openaiMockPort), MOCK_OPENAI_KEY, MOCK_OPENAI_OUTPUT_TOKENS: '1000000',
    MOCK_OPENAI_CACHED_TOKENS: String(MOCK_OPENAI_CACHED_TOKENS),
  }));
  const bareOpenai = add('bareOpenai', 'bare-proxy-openai', openaiBareUrl, spawnService('bare-proxy-openai', 'dist/bench/bare-proxy.js', env,
    ['--upstream', openaiMockUrl, '--port', String(openaiBarePort), '--api-key', MOCK_OPENAI_KEY, '--upstream-format', 'openai', ...bareUpstreamApiArgs(o.bareUpstreamApi)]));
  await waitHttp(`${mockUrl}/v1/models`, mock.child, 'mock-upstream');
  await waitHttp(`${bareUrl}/health`, bare.child, 'bare-proxy');
  await waitHttp(`${openaiMockUrl}/v1/models`, mockOpenai.child, 'mock-upstream-openai');
  await waitHttp(`${openaiBareUrl}/health`, bareOpenai.child, 'bare-proxy-openai');
  const peer = await startPeer(logDir, o.log);
  if (peer) {
    services.peer = peer;
    children.push(peer);
  }

  // Started as deployed: with the Node flags their launchers give them (infra/launch/node-flags.ts).
  const relayFlags = nodeFlagsFor('relay', { ...process.env, ...env });
  const billingFlags = nodeFlagsFor('billing', { ...process.env, ...env });
  return {
    mode: 'own',
    peerUrl: peer?.url, peerVersion: peer?.version,
    config,
    services,
    foreignPids: {},
    mockKey: MOCK_KEY,
    notes: [`The relay runs with the Node flags \`${relayFlags.join(' ') || '(none)'}\`, the billing worker with \`${billingFlags.join(' ') || '(none)'}\` (RELAY_NODE_FLAGS, BILLING_NODE_FLAGS; infra/launch/node-flags.ts).`],
    mockUrl, bareUrl, relayUrl, consoleUrl,
    openai: { mockUrl: openaiMockUrl, mockKey: MOCK_OPENAI_KEY, bareUrl: openaiBareUrl },
    billingMetricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    relayMetricsUrl: `http://127.0.0.1:${relayMetricsPort}/metrics`,
    async startGateway(): Promise<void> {
      const billing = add('billing', 'billing', '', spawnService('billing', o.billingEntry ?? 'dist/billing/main.js', env, [], [...billingFlags, ...(o.billingNodeArgs ?? [])]));
      const consoleSvc = add('console', 'console-api', consoleUrl, spawnService('console-api', o.consoleEntry ?? 'dist/console-api/main.js', env, [], o.consoleNodeArgs ?? []));
      const relay = add('relay', 'relay', relayUrl, spawnService('relay', o.relayEntry ?? 'dist/relay/main.js', env, [], [...relayFlags, ...(o.relayNodeArgs ?? [])]));
      await waitHttp(`${relayUrl}/health`, relay.child, 'relay');
      await waitHttp(`${consoleUrl}/api/status`, consoleSvc.child, 'console-api');
      await new Promise((r) => setTimeout(r, 300));
      if (billing.child.exitCode !== null) throw new Error('billing worker exited (see logs/billing.log)');
    },
    async stopRelay() {
      if (services.relay) await stopChild(services.relay.child);
    },
    async stopBare() {
      await stopChild(bare.child);
    },
    async close() {
      for (const s of [...children].reverse()) await stopChild(s.child).catch(() => {});
    },
  };
}

export interface AttachOptions {
  outDir: string;
  relayUrl: string;
  mockUrl: string;
  mockKey: string;
  consoleUrl: string | undefined;
  billingMetricsUrl: string | undefined;
  relayMetricsUrl: string | undefined;
  databaseUrl: string;
  redisUrl: string;
  redisPrefix: string;
  clickhouseUrl: string;
  clickhouseDatabase: string;
  /** The stack's KEY_SECRET: the bench seals its API key and the channel's credential with it. */
  keySecret: string | undefined;
  /** PIDs given on the command line; the others are looked up by listening port on loopback URLs. */
  pids: Partial<Record<ServiceName, number[]>>;
  /** How the bare hop reads a JSON answer (bare-proxy.ts; BENCH_BARE_UPSTREAM_API); its default when absent. */
  bareUpstreamApi?: BareUpstreamApi;
  log: (line: string) => void;
}

const stripSlash = (u: string): string => u.replace(/\/+$/, '');

/** The local port of a URL whose host is this machine (loopback), else undefined. */
function localPort(url: string | undefined): number | undefined {
  if (!url) return undefined;
  const u = new URL(url);
  if (!['127.0.0.1', 'localhost', '[::1]', '::1', '0.0.0.0'].includes(u.hostname)) return undefined;
  return Number(u.port || (u.protocol === 'https:' ? 443 : 80));
}

async function answers(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await res.arrayBuffer();
    return true;
  } catch {
    return false;
  }
}

/** A running stack given by URL: checks that it answers, spawns the bare proxy in front of its mock. */
export async function attachStack(o: AttachOptions): Promise<Stack> {
  const root = projectRoot();
  const logDir = join(o.outDir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const notes: string[] = [];
  const relayUrl = stripSlash(o.relayUrl), mockUrl = stripSlash(o.mockUrl);
  const consoleUrl = o.consoleUrl ? stripSlash(o.consoleUrl) : '';

  if (!o.keySecret) {
    throw new Error('--relay-url: the stack\'s KEY_SECRET is needed to seal the bench\'s API key (--key-secret-file .data/key-secret, --key-secret or KEY_SECRET)');
  }
  const config = loadConfig({
    LOG_LEVEL: 'warn',
    DATABASE_URL: o.databaseUrl,
    REDIS_URL: o.redisUrl,
    REDIS_PREFIX: o.redisPrefix,
    CLICKHOUSE_URL: o.clickhouseUrl,
    CLICKHOUSE_DATABASE: o.clickhouseDatabase,
    KEY_SECRET: o.keySecret,
    SEED_DEMO: 'false',
  });

  for (const [name, url] of [['relay', `${relayUrl}/health`], ['mock provider', `${mockUrl}/v1/models`]] as const) {
    if (!(await answers(url))) throw new Error(`${name} does not answer ${url}`);
  }
  if (consoleUrl && !(await answers(`${consoleUrl}/api/status`))) throw new Error(`console-api does not answer ${consoleUrl}/api/status`);
  if (!(await isClickHouseReachable(o.clickhouseUrl))) throw new Error(`ClickHouse does not answer ${o.clickhouseUrl}`);
  o.log(`attached: relay ${relayUrl}, mock ${mockUrl}${consoleUrl ? `, console ${consoleUrl}` : ''}; Postgres, Redis prefix ${o.redisPrefix}, ClickHouse ${o.clickhouseUrl}/${o.clickhouseDatabase} as given (no migration, nothing spawned but the bare proxy)`);

  // The stack's processes on this host: given PIDs first, else the process listening on the URL's port.
  const foreignPids: Stack['foreignPids'] = {};
  const ports: Array<[ServiceName, string | undefined]> = [
    ['relay', relayUrl], ['mock', mockUrl], ['console', consoleUrl || undefined], ['billing', o.billingMetricsUrl], ['clickhouse', o.clickhouseUrl],
  ];
  for (const [name, url] of ports) {
    const given = o.pids[name];
    if (given?.length) {
      foreignPids[name] = { pids: given, how: 'given' };
      continue;
    }
    const port = localPort(url);
    const found = port === undefined ? [] : pidsListeningOn(port);
    if (found.length) foreignPids[name] = { pids: found, how: `listening on :${port}` };
  }
  const missing = (['relay', 'billing', 'mock'] as const).filter((n) => !foreignPids[n]);
  for (const [name, f] of Object.entries(foreignPids)) o.log(`  ${name}: pid ${f.pids.join(', ')} (${f.how})`);
  if (missing.length) {
    notes.push(`No PID found for ${missing.join(', ')} (not on this host, not visible, or no URL given): ${missing.length > 1 ? 'their' : 'its'} CPU and memory are not reported${missing.includes('relay') ? ', nor the relay\'s CPU per request (give --relay-pid)' : ''}.`);
  }
  notes.push('Attached to a running stack: the billing-paused runs are skipped (the bench does not stop processes it did not start).');

  // The bare proxy is the bench's own, in front of the given mock.
  const barePort = await freePort();
  const bareUrl = `http://127.0.0.1:${barePort}`;
  const out = createWriteStream(join(logDir, 'bare-proxy.log'));
  const child = spawn(process.execPath, [resolve(root, 'dist/bench/bare-proxy.js'), '--upstream', mockUrl, '--port', String(barePort), '--api-key', o.mockKey, ...bareUpstreamApiArgs(o.bareUpstreamApi)], {
    cwd: root, env: { ...process.env, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.pipe(out);
  child.stderr!.pipe(out);
  const bare: Service = { name: 'bare-proxy', pid: child.pid!, url: bareUrl, child };
  await waitHttp(`${bareUrl}/health`, child, 'bare-proxy');
  const peer = await startPeer(logDir, o.log);

  return {
    mode: 'attached',
    peerUrl: peer?.url, peerVersion: peer?.version,
    config,
    services: { mock: undefined, bare, mockOpenai: undefined, bareOpenai: undefined, relay: undefined, billing: undefined, console: undefined, clickhouse: undefined, peer },
    foreignPids,
    mockUrl, mockKey: o.mockKey, bareUrl, relayUrl, consoleUrl,
    openai: undefined,
    billingMetricsUrl: o.billingMetricsUrl,
    relayMetricsUrl: o.relayMetricsUrl,
    notes,
    async startGateway(): Promise<void> {
      // Already running.
    },
    async stopRelay(): Promise<void> {
      // Not ours.
    },
    async stopBare(): Promise<void> {
      await stopChild(child);
    },
    async close(): Promise<void> {
      await stopChild(child).catch(() => {});
      if (peer) await stopChild(peer.child).catch(() => {});
    },
  };
}

/** The peer gateway on a free port; a failure to start is logged and the peer runs are skipped. */
async function startPeer(logDir: string, log: (line: string) => void): Promise<(Service & { version: string }) | undefined> {
  try {
    const peer = await startPeerGateway(await freePort(), logDir);
    log(`peer: Portkey gateway ${peer.version} at ${peer.url}`);
    return peer;
  } catch (err) {
    log(`peer: not started (${(err as Error).message}); the peer runs are skipped`);
    return undefined;
  }
}

function bareUpstreamApiArgs(api: BareUpstreamApi | undefined): string[] {
  return api ? ['--upstream-api', api] : [];
}
