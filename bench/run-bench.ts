// `make bench`: the gateway's benchmark suite. Starts its own stack (or uses one given by URL), runs
// the scenarios against the mock directly, through the bare proxy and through the relay, audits the
// money after each relay run, draws the load curve, measures the console's log queries at 10 million
// rows, and writes bench/results/<timestamp>/ (report.md, report.json, latency-vs-load.svg, logs/,
// profiles/) and bench/results/latest/.
//
//   node dist/bench/run-bench.js [--duration 6] [--warmup 2] [--quick] [--rates 500,1000,...]
//        [--scenarios small,stream64,long,mix,abort] [--skip-curve] [--skip-scale] [--scale-rows N]
//        [--out DIR] [--database-url URL] [--redis-url URL] [--clickhouse-url URL]
//        [--clickhouse-database DB] [--own-clickhouse] [--relay-entry dist/relay/main.js]
//        [--billing-entry dist/billing/main.js] [--skip-saturation]
//   BENCH_CPU_PROF=1   runs the relay with --cpu-prof and summarises its hottest functions.
//
// Attached mode, against a stack that is already running (nothing spawned but the bare proxy):
//   node dist/bench/run-bench.js --relay-url URL --mock-url URL [--console-url URL]
//        [--relay-metrics-url URL] [--billing-metrics-url URL] [--mock-key K] [--key-secret-file F | --key-secret S]
//        [--database-url URL] [--redis-url URL] [--redis-prefix P] [--clickhouse-url URL]
//        [--clickhouse-database DB] [--relay-pid N] [--billing-pid N] [--mock-pid N] [--scale] ...
// bench/README.md describes what it writes to the target databases and what it skips.
//
// Every figure is relative to a baseline measured in the same run on the same machine: the relay's
// added latency is relay minus mock-direct at the same offered load, its CPU per request is compared
// with the bare proxy's. Nothing here asserts wall-clock bounds; the targets are reported.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createClickHouse } from '../infra/clickhouse/client.js';
import { createSql } from '../infra/postgres/client.js';
import { projectRoot } from '../infra/project-root.js';
import { createRedis } from '../infra/redis/client.js';
import { redisKeys } from '../infra/redis/keys.js';
import { loadOptions } from '../core/options/options-source.js';
import { FALLBACK_COMPLETION_RATIO, ratiosFromOptions } from '../core/pricing/ratios.js';
import { postgresBalanceSource } from '../core/quota/postgres-balance-source.js';
import { QuotaStore } from '../core/quota/quota-store.js';
import { countInputTokens } from './mock-upstream/mock-upstream.js';
import { Auditor, LagProbe, type AuditResult, type ModelExpectation } from './lib/audit.js';
import { cannon, type CannonResult } from './lib/cannon.js';
import { runConsoleScale, type ScaleResult } from './lib/console-scale.js';
import { summarizeProfileDir, type ProfileSummary } from './lib/cpu-profile.js';
import { buildRequest, drive, type DriveResult } from './lib/driver.js';
import { BENCH_MODELS, ensureBenchFixtures } from './lib/fixtures.js';
import { MACHINE, OTHERS, ProcSampler, pidsByComm, type ProcUsage, type Watched } from './lib/proc.js';
import { fmt, svgChart, writeReport, type CurvePoint } from './lib/report.js';
import { attachStack, startStack, type ServiceName, type Stack } from './lib/stack.js';
import { histogramQuantile, scrapeHistogram } from './lib/prom-scrape.js';
import { type Summary } from './lib/stats.js';

// ------------------------------------------------------------------------------------------------
// Options

const { values: args } = parseArgs({
  options: {
    duration: { type: 'string' },
    warmup: { type: 'string' },
    quick: { type: 'boolean' },
    rates: { type: 'string' },
    scenarios: { type: 'string' },
    'skip-curve': { type: 'boolean' },
    'skip-scale': { type: 'boolean' },
    'skip-saturation': { type: 'boolean' },
    'scale-rows': { type: 'string' },
    out: { type: 'string' },
    'database-url': { type: 'string' },
    'redis-url': { type: 'string' },
    'clickhouse-url': { type: 'string' },
    'clickhouse-database': { type: 'string' },
    'own-clickhouse': { type: 'boolean' },
    'relay-entry': { type: 'string' },
    'billing-entry': { type: 'string' },
    'redis-prefix': { type: 'string' },
    // Attached mode: a running stack given by URL.
    'relay-url': { type: 'string' },
    'mock-url': { type: 'string' },
    'mock-key': { type: 'string' },
    'console-url': { type: 'string' },
    'billing-metrics-url': { type: 'string' },
    'relay-metrics-url': { type: 'string' },
    'key-secret': { type: 'string' },
    'key-secret-file': { type: 'string' },
    'relay-pid': { type: 'string' },
    'billing-pid': { type: 'string' },
    'mock-pid': { type: 'string' },
    'console-pid': { type: 'string' },
    scale: { type: 'boolean' },
  },
  strict: true,
});

/** A running stack given by URL (--relay-url): see attachStack in bench/lib/stack.ts. */
const attached = args['relay-url'] !== undefined;
if (attached && !args['mock-url']) {
  process.stderr.write('--relay-url needs --mock-url: the mock provider the relay\'s channel will point at (the mock-direct and bare-proxy baselines use it too)\n');
  process.exit(2);
}
for (const f of ['mock-url', 'console-url', 'billing-metrics-url', 'relay-metrics-url', 'mock-key', 'key-secret', 'key-secret-file', 'relay-pid', 'billing-pid', 'mock-pid', 'console-pid', 'scale'] as const) {
  if (!attached && args[f] !== undefined) {
    process.stderr.write(`--${f} only applies with --relay-url (attached to a running stack)\n`);
    process.exit(2);
  }
}
const pidList = (v: string | undefined): number[] | undefined => {
  if (v === undefined) return undefined;
  const pids = v.split(',').map(Number);
  if (pids.some((p) => !Number.isInteger(p) || p <= 0)) {
    process.stderr.write(`invalid PID list: ${v}\n`);
    process.exit(2);
  }
  return pids;
};
const keySecret = args['key-secret-file'] !== undefined ? readFileSync(args['key-secret-file'], 'utf8').trim() : (args['key-secret'] ?? process.env.KEY_SECRET);

const quick = args.quick === true;
const opts = {
  durationMs: Number(args.duration ?? (quick ? 1.5 : 6)) * 1000,
  warmupMs: Number(args.warmup ?? (quick ? 0.5 : 2)) * 1000,
  rates: (args.rates ?? (quick ? '500,1000' : '500,1000,2000,3000,4000,6000,8000,10000')).split(',').map(Number),
  curveMs: quick ? 1000 : 4000,
  scenarios: (args.scenarios ?? 'small,stream64,long,mix,abort').split(','),
  curve: args['skip-curve'] !== true,
  // Attached: the 10-million-row load writes 1,000 accounts and generated log rows into the target
  // databases, so it runs only when asked for (--scale).
  scale: args['skip-scale'] !== true && (!attached || args.scale === true),
  saturation: args['skip-saturation'] !== true,
  scaleRows: Number(args['scale-rows'] ?? (quick ? 200_000 : 10_000_000)),
  scaleDurationSec: quick ? 1 : 5,
  resultsRoot: args.out ?? join(projectRoot(), 'bench/results'),
  // Own stack: the bench's own databases and a fresh Redis prefix. Attached: the stack's own settings,
  // with the same environment variables and defaults as the services (infra/config.ts).
  databaseUrl: args['database-url'] ?? (attached ? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/gateway' : process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/gateway_bench'),
  redisUrl: args['redis-url'] ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0',
  clickhouseUrl: args['clickhouse-url'] ?? process.env.CLICKHOUSE_URL,
  clickhouseDatabase: args['clickhouse-database'] ?? (attached ? process.env.CLICKHOUSE_DATABASE ?? 'gateway' : process.env.BENCH_CLICKHOUSE_DATABASE ?? 'gateway_bench'),
  redisPrefix: args['redis-prefix'] ?? (attached ? process.env.REDIS_PREFIX ?? 'gw' : `bench-${Date.now().toString(36)}`),
  cpuProf: process.env.BENCH_CPU_PROF === '1' && !attached,
  attached: attached ? {
    relayUrl: args['relay-url']!,
    mockUrl: args['mock-url']!,
    consoleUrl: args['console-url'],
    billingMetricsUrl: args['billing-metrics-url'],
    relayMetricsUrl: args['relay-metrics-url'],
  } : null,
};

const stamp = new Date().toISOString().replace(/[:.]/g, '-').replace(/Z$/, '');
const outDir = join(opts.resultsRoot, stamp);
mkdirSync(outDir, { recursive: true });
const t0 = Date.now();
const log = (line: string): void => {
  process.stdout.write(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)} s] ${line}\n`);
};

// ------------------------------------------------------------------------------------------------
// Scenarios

/** relay-billing-paused: the relay with the billing worker stopped (SIGSTOP) for the run, to tell the
 * relay's own cost from the CPU its billing pipeline (worker, ClickHouse) takes on the same cores. */
type Target = 'mock' | 'bare' | 'relay' | 'relay-billing-paused';
interface BodySpec { model: string; maxTokens: number; stream: boolean }
interface Scenario {
  id: string;
  title: string;
  bodies: BodySpec[];
  /** Offered requests per second; 0 = closed loop. */
  rate: number;
  connections: number;
  targets: Target[];
  abortAfterBodyBytes?: number;
}

const PROMPT = 'Benchmark request: please answer briefly.';
const bodyJson = (b: BodySpec): string =>
  JSON.stringify({ model: b.model, max_tokens: b.maxTokens, stream: b.stream, messages: [{ role: 'user', content: PROMPT }] });

const mixBodies: BodySpec[] = Array.from({ length: 20 }, (_, i) => ({ model: i === 7 ? 'bench-mix-error529' : 'bench-mix', maxTokens: 16, stream: false }));
const ALL: Scenario[] = [
  { id: 'small', title: 'non-streaming, 16 tokens', bodies: [{ model: 'bench-small', maxTokens: 16, stream: false }], rate: 2000, connections: 32, targets: ['mock', 'bare', 'relay', 'relay-billing-paused'] },
  { id: 'stream64', title: 'streaming, 64 tokens', bodies: [{ model: 'bench-stream-64', maxTokens: 64, stream: true }], rate: 2000, connections: 32, targets: ['mock', 'bare', 'relay', 'relay-billing-paused'] },
  { id: 'long', title: 'long stream, 4,000 tokens (closed loop)', bodies: [{ model: 'bench-long', maxTokens: 4000, stream: true }], rate: 0, connections: 8, targets: ['mock', 'bare', 'relay'] },
  { id: 'mix', title: '5% upstream 529 errors', bodies: mixBodies, rate: 2000, connections: 32, targets: ['mock', 'bare', 'relay'] },
  { id: 'abort', title: 'client aborts mid-stream (4,000-token streams cut after 2 KB)', bodies: [{ model: 'bench-abort', maxTokens: 4000, stream: true }], rate: 500, connections: 32, targets: ['mock', 'bare', 'relay'], abortAfterBodyBytes: 2048 },
];
const PROBE_BODY: BodySpec = { model: 'bench-probe', maxTokens: 16, stream: false };

const expectations: Record<string, ModelExpectation> = {};
for (const b of [...ALL.flatMap((s) => s.bodies), PROBE_BODY]) {
  expectations[b.model] = { inputTokens: countInputTokens(JSON.parse(bodyJson(b))), outputTokens: b.maxTokens };
}

// ------------------------------------------------------------------------------------------------
// Runs

interface RunFigures {
  target: string;
  offered: number;
  driver: DriveResult;
  procs: ProcUsage[];
  cpuUsPerReq: number | null;
}

interface ScenarioReport {
  id: string;
  title: string;
  stream: boolean;
  rate: number;
  connections: number;
  runs: RunFigures[];
  audit: AuditResult | null;
  auditPaused: AuditResult | null;
  lag: { lagMs: Summary; missing: number; pollQueryMs: Summary } | null;
  /** From the billing worker's gateway_billing_lag_seconds, when it exposes /metrics: bucket upper bounds, ms. */
  lagMetric: { p50Ms: number; p99Ms: number; count: number } | null;
}

function watched(stack: Stack): Watched[] {
  const s = stack.services;
  const w: Watched[] = [{ name: 'load generator', pids: [process.pid] }];
  const rows: Array<[string, ServiceName]> = [['relay', 'relay'], ['bare proxy', 'bare'], ['mock', 'mock'], ['billing', 'billing'], ['console-api', 'console'], ['clickhouse', 'clickhouse']];
  for (const [name, key] of rows) {
    const pids = s[key] ? [s[key].pid] : stack.foreignPids[key]?.pids;
    if (pids?.length) w.push({ name, pids });
  }
  w.push({ name: 'redis-server', pids: pidsByComm('redis-server') });
  w.push({ name: 'postgres', pids: pidsByComm('postgres') });
  return w;
}

function saturated(procs: ProcUsage[]): string {
  const real = procs.filter((p) => p.name !== MACHINE && p.name !== OTHERS);
  const top = [...real].sort((a, b) => b.cpuPct - a.cpuPct)[0];
  const machine = procs.find((p) => p.name === MACHINE)?.cpuPct;
  const total = machine ?? real.reduce((a, p) => a + p.cpuPct, 0);
  if (!top) return '–';
  const who = top.cpuPct >= 85 ? `${top.name} (${top.cpuPct.toFixed(0)}% of a core)` : `none (top: ${top.name} ${top.cpuPct.toFixed(0)}%)`;
  const cores = cpus().length;
  return total >= 90 * cores ? `${who}; all ${cores} cores busy (${total.toFixed(0)}%)` : `${who}; machine ${total.toFixed(0)}% of ${cores * 100}%`;
}

/**
 * Until the relay answers the bench key with 200 (a running relay picks the new key, channel and
 * prices up from the invalidations, or within its periodic reload). A 401 means the key was sealed
 * with another KEY_SECRET than the relay's.
 */
async function relayReady(relayUrl: string, headers: Record<string, string>, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const res = await fetch(`${relayUrl}/v1/messages`, { method: 'POST', headers, body: bodyJson(PROBE_BODY), signal: AbortSignal.timeout(5000) });
      const text = await res.text();
      if (res.ok) return;
      last = `HTTP ${res.status} ${text.slice(0, 300)}`;
      if (res.status === 401) throw new Error(`the relay rejected the bench's API key (${last}): the key is sealed with --key-secret / KEY_SECRET, which must be the relay's own`);
    } catch (err) {
      if (err instanceof Error && err.message.startsWith('the relay rejected')) throw err;
      last = String(err);
    }
    if (Date.now() > end) throw new Error(`the relay did not serve the bench's model within ${timeoutMs / 1000} s: ${last}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Output tokens the mock gives a request asking for 4,000 (its --output-tokens cap). */
async function mockOutputCap(mockUrl: string, headers: Record<string, string>): Promise<number> {
  const res = await fetch(`${mockUrl}/v1/messages`, { method: 'POST', headers, body: bodyJson({ model: 'bench-probe', maxTokens: 4000, stream: false }), signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  if (!res.ok) throw new Error(`the mock provider answered HTTP ${res.status} (${text.slice(0, 200)})${res.status === 401 ? ': --mock-key must be the key it requires (MOCK_UPSTREAM_KEY of the stack)' : ''}`);
  const n = (JSON.parse(text) as { usage?: { output_tokens?: number } }).usage?.output_tokens;
  if (typeof n !== 'number') throw new Error('the mock provider\'s answer has no usage.output_tokens');
  return n;
}

async function main(): Promise<void> {
  log(`bench: results in ${outDir}`);
  const profileDir = join(outDir, 'profiles');
  const stack = opts.attached ? await attachStack({
    outDir,
    ...opts.attached,
    mockKey: args['mock-key'] ?? process.env.MOCK_UPSTREAM_KEY ?? 'sk-ant-mock-local',
    databaseUrl: opts.databaseUrl,
    redisUrl: opts.redisUrl,
    redisPrefix: opts.redisPrefix,
    clickhouseUrl: opts.clickhouseUrl ?? 'http://127.0.0.1:8123',
    clickhouseDatabase: opts.clickhouseDatabase,
    keySecret,
    pids: { relay: pidList(args['relay-pid']), billing: pidList(args['billing-pid']), mock: pidList(args['mock-pid']), console: pidList(args['console-pid']) },
    log,
  }) : await startStack({
    outDir,
    databaseUrl: opts.databaseUrl,
    redisUrl: opts.redisUrl,
    redisPrefix: opts.redisPrefix,
    clickhouseUrl: opts.clickhouseUrl,
    clickhouseDatabase: opts.clickhouseDatabase,
    ownClickHouse: args['own-clickhouse'] === true,
    relayEntry: args['relay-entry'],
    billingEntry: args['billing-entry'],
    // BENCH_RELAY_NODE_ARGS: extra Node flags for the relay, for experiments (e.g. GC settings).
    relayNodeArgs: [
      ...(opts.cpuProf ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []),
      ...(process.env.BENCH_RELAY_NODE_ARGS ?? '').split(' ').filter(Boolean),
    ],
    log,
  });
  const sql = createSql(stack.config, { max: 4 });
  const redis = createRedis(stack.config, 'bench');
  const ch = createClickHouse(stack.config);
  const keys = redisKeys(stack.config.REDIS_PREFIX);
  const notes = [...stack.notes];
  if (process.env.BENCH_CPU_PROF === '1' && attached) notes.push('BENCH_CPU_PROF ignored: the relay is not the bench\'s to restart with --cpu-prof.');
  if (attached && args['skip-scale'] !== true && args.scale !== true) notes.push('Console at scale skipped (it writes 1,000 accounts and generated log rows into the target databases): --scale runs it.');
  let failed = false;
  // The bench's own stack: its Redis prefix is its own and dropped at the end. Attached: the prefix is
  // the running stack's, and nothing of it is deleted.
  const dropOwnRedisKeys = async (): Promise<void> => {
    if (stack.mode !== 'own') return;
    const left = await redis.keys(`${stack.config.REDIS_PREFIX}:*`).catch(() => [] as string[]);
    if (left.length) await redis.del(...left).catch(() => {});
  };
  // Ctrl-C: stop what the bench started (by PID) and drop its Redis keys before leaving.
  const interrupt = (signal: string): void => {
    log(`${signal}: stopping ${stack.mode === 'own' ? 'the stack' : 'the bare proxy'}`);
    (async () => {
      await dropOwnRedisKeys();
      await stack.close();
    })().finally(() => process.exit(130));
  };
  process.once('SIGINT', () => interrupt('SIGINT'));
  process.once('SIGTERM', () => interrupt('SIGTERM'));
  try {
    const fx = await ensureBenchFixtures(sql, stack.config, stack.mockUrl, stack.mockKey, { exclusive: stack.mode === 'own' });
    // The balance was reset in Postgres: move a loaded Redis mirror by as much (as the console does
    // for a top-up), then tell a running relay to reload the account, key, channels and prices.
    await new QuotaStore(redis, keys, postgresBalanceSource(sql)).adjustAccount(fx.userId, fx.quotaDelta);
    for (const m of [{ kind: 'user', id: fx.userId }, { kind: 'token', id: fx.tokenId, user_id: fx.userId }, { kind: 'channel', id: fx.channelId }, { kind: 'options', keys: ['ModelRatio'] }]) {
      await redis.publish(keys.invalidationChannel(), JSON.stringify(m));
    }
    if (stack.mode === 'attached') log(`bench account ${fx.userId}, key ${fx.tokenId}, channel ${fx.channelId} → ${stack.mockUrl}; invalidations published on ${keys.invalidationChannel()}`);
    await stack.startGateway();
    log(`stack up: relay ${stack.relayUrl}, mock ${stack.mockUrl}, bare proxy ${stack.bareUrl}, console ${stack.consoleUrl || '–'}`);
    const urlOf: Record<Target, string> = { mock: stack.mockUrl, bare: stack.bareUrl, relay: stack.relayUrl, 'relay-billing-paused': stack.relayUrl };
    const isRelay = (t: Target): boolean => t === 'relay' || t === 'relay-billing-paused';
    const headersOf = (target: Target): Record<string, string> => ({
      'content-type': 'application/json',
      'anthropic-version': '2023-06-01',
      'x-api-key': isRelay(target) ? fx.apiKey : stack.mockKey,
    });
    await relayReady(stack.relayUrl, headersOf('relay'));
    // What the mock answers with: a mock started without MOCK_OUTPUT_TOKENS (make run) caps output at
    // 64 tokens, so a 4,000-token stream is 64 tokens long. The expectations follow the mock; the
    // report says so.
    const cap = await mockOutputCap(stack.mockUrl, headersOf('mock'));
    for (const b of [...ALL.flatMap((x) => x.bodies), PROBE_BODY]) expectations[b.model]!.outputTokens = Math.min(b.maxTokens, cap);
    if (cap < 4000) notes.push(`The mock caps output at ${cap} tokens: the long-stream and abort scenarios carry ${cap} tokens, not 4,000 (start the mock with MOCK_OUTPUT_TOKENS=1000000 for the full length).`);
    // Prices the relay applies: the audit's formula uses the same group and completion ratios.
    const ratios = ratiosFromOptions(await loadOptions(sql));
    const groupRatio = ratios.group('default') ?? 1;
    if (groupRatio !== 1) notes.push(`Group ratio of "default" is ${groupRatio}; the audit's formula applies it.`);
    const oddCompletion = Object.keys(BENCH_MODELS).filter((m) => ratios.completion(m) !== FALLBACK_COMPLETION_RATIO);
    if (oddCompletion.length) throw new Error(`CompletionRatio overrides the bench's models (${oddCompletion.join(', ')}): the audit's formula assumes ${FALLBACK_COMPLETION_RATIO}`);
    const auditor = new Auditor(sql, ch, redis, keys, fx.userId);
    const audit = (before: Parameters<Auditor['audit']>[0], clientComplete: number): Promise<AuditResult> =>
      auditor.audit(before, expectations, clientComplete, groupRatio);
    for (const n of notes) log(`note: ${n}`);
    const billingPid = stack.services.billing?.pid;
    const requestsFor = (target: Target, bodies: BodySpec[]): Buffer[] =>
      bodies.map((b) => buildRequest(urlOf[target], '/v1/messages', headersOf(target), bodyJson(b)));
    const w = watched(stack);

    // One relay request first: loads the key cache and the balance mirror.
    await drive({ url: stack.relayUrl, requests: requestsFor('relay', [PROBE_BODY]), connections: 1, rate: 0, durationMs: 200 });

    // --- scenarios ---------------------------------------------------------------------------
    const scenarios: ScenarioReport[] = [];
    for (const sc of ALL.filter((s) => opts.scenarios.includes(s.id))) {
      const report: ScenarioReport = { id: sc.id, title: sc.title, stream: sc.bodies[0]!.stream, rate: sc.rate, connections: sc.connections, runs: [], audit: null, auditPaused: null, lag: null, lagMetric: null };
      // Billing-paused runs need the billing worker to be the bench's own (SIGSTOP).
      for (const target of sc.targets.filter((t) => t !== 'relay-billing-paused' || billingPid !== undefined)) {
        const requests = requestsFor(target, sc.bodies);
        const before = isRelay(target) ? await auditor.settledBooks() : null;
        const paused = target === 'relay-billing-paused' && billingPid !== undefined;
        if (paused) process.kill(billingPid, 'SIGSTOP');
        log(`${sc.id} → ${target}: warm-up ${opts.warmupMs / 1000} s`);
        await drive({ url: urlOf[target], requests, connections: sc.connections, rate: sc.rate, durationMs: opts.warmupMs, abortAfterBodyBytes: sc.abortAfterBodyBytes });
        const probe = target === 'relay' ? new LagProbe(ch, fx.userId) : null;
        const lagBefore = target === 'relay' && stack.billingMetricsUrl ? await scrapeHistogram(stack.billingMetricsUrl, 'gateway_billing_lag_seconds') : null;
        probe?.start();
        const sampler = new ProcSampler(w);
        sampler.start();
        const expectedRps = sc.rate || 1000;
        const r = await drive({
          url: urlOf[target], requests, connections: sc.connections, rate: sc.rate, durationMs: opts.durationMs,
          abortAfterBodyBytes: sc.abortAfterBodyBytes,
          captureHeader: target === 'relay' && !sc.abortAfterBodyBytes ? 'x-gateway-request-id' : undefined,
          captureEvery: Math.max(1, Math.round(expectedRps / 50)),
          onCapture: probe ? (value, endMs) => probe.add(value, endMs) : undefined,
        });
        const procs = sampler.stop();
        if (paused) process.kill(billingPid, 'SIGCONT');
        const mine = procs.find((p) => p.name === (isRelay(target) ? 'relay' : target === 'bare' ? 'bare proxy' : 'mock'));
        const handled = r.completed + r.aborted;
        const run: RunFigures = { target, offered: sc.rate, driver: r, procs, cpuUsPerReq: mine && handled ? (mine.cpuSec * 1e6) / handled : null };
        report.runs.push(run);
        log(`${sc.id} → ${target}: ${r.rps.toFixed(0)} req/s, p50 ${fmt(r.latency.p50)} ms, p99 ${fmt(r.latency.p99)} ms, ttfb p50 ${fmt(r.ttfb.p50)} ms` +
          `${r.aborted ? `, ${r.aborted} aborted` : ''}, status ${JSON.stringify(r.status)}, saturated: ${saturated(procs)}`);
        if (target === 'relay-billing-paused' && before) {
          report.auditPaused = await audit(before, r.status['200'] ?? 0);
          const a = report.auditPaused;
          log(`${sc.id} (billing paused) audit after the backlog drained: ${a.pass ? 'PASS' : 'FAIL'}${a.problems.length ? ` ${a.problems.join('; ')}` : ''}`);
          if (!a.pass) failed = true;
        }
        if (target === 'relay' && before) {
          report.lag = await probe!.finish();
          const clientComplete = sc.abortAfterBodyBytes ? 0 : (r.status['200'] ?? 0);
          report.audit = await audit(before, clientComplete);
          const lagAfter = stack.billingMetricsUrl ? await scrapeHistogram(stack.billingMetricsUrl, 'gateway_billing_lag_seconds') : null;
          if (lagAfter) {
            const p50 = histogramQuantile(lagBefore, lagAfter, 0.5), p99 = histogramQuantile(lagBefore, lagAfter, 0.99);
            report.lagMetric = { p50Ms: p50.value * 1000, p99Ms: p99.value * 1000, count: p50.count };
          }
          const a = report.audit;
          log(`${sc.id} audit: ${a.pass ? 'PASS' : 'FAIL'} — debit ${a.pgDebit}, ledger ${a.ledgerSum}, ClickHouse ${a.chSum}, Redis ${a.redisMovement}, formula ${a.formula}` +
            ` (${a.rows.complete} complete, ${a.rows.partial} partial, ${a.rows.error} error rows); billing lag p50 ${fmt(report.lag.lagMs.p50, 0)} ms p99 ${fmt(report.lag.lagMs.p99, 0)} ms` +
            `${a.problems.length ? `\n    ${a.problems.join('\n    ')}` : ''}`);
          if (!a.pass) failed = true;
        }
      }
      scenarios.push(report);
    }

    // --- saturation: closed loop, autocannon ---------------------------------------------------
    const saturation: Array<{ target: string; result: CannonResult; procs: ProcUsage[]; cpuUsPerReq: number | null }> = [];
    if (opts.saturation) {
      for (const target of ['mock', 'bare', 'relay'] as const) {
        log(`saturation (autocannon, 64 connections, closed loop) → ${target}`);
        const spec = { url: urlOf[target], connections: 64, durationSec: Math.max(1, opts.durationMs / 1000), headers: headersOf(target), requests: [{ path: '/v1/messages', body: bodyJson({ model: 'bench-small', maxTokens: 16, stream: false }) }] };
        await cannon({ ...spec, durationSec: Math.max(1, opts.warmupMs / 1000) });
        const before = target === 'relay' ? await auditor.settledBooks() : null;
        const sampler = new ProcSampler(w);
        sampler.start();
        const result = await cannon(spec);
        const procs = sampler.stop();
        const mine = procs.find((p) => p.name === (target === 'relay' ? 'relay' : target === 'bare' ? 'bare proxy' : 'mock'));
        saturation.push({ target, result, procs, cpuUsPerReq: mine && result.completed ? (mine.cpuSec * 1e6) / result.completed : null });
        log(`saturation → ${target}: ${result.rps.toFixed(0)} req/s, p50 ${fmt(result.latency.p50)} ms, p99 ${fmt(result.latency.p99)} ms, saturated: ${saturated(procs)}`);
        if (before) {
          const a = await audit(before, 0);
          log(`saturation audit: ${a.pass ? 'PASS' : 'FAIL'} (debit ${a.pgDebit}, formula ${a.formula}; ${a.rows.complete} complete, ${a.rows.partial} partial, ${a.rows.error} error rows — autocannon cuts in-flight requests at the end)${a.problems.length ? ` ${a.problems.join('; ')}` : ''}`);
          if (!a.pass) failed = true;
          scenarios.push({ id: 'saturation', title: 'closed loop (autocannon) audit', stream: false, rate: 0, connections: 64, runs: [], audit: a, auditPaused: null, lag: null, lagMetric: null });
        }
      }
    }

    // --- load curve ----------------------------------------------------------------------------
    const curve: CurvePoint[] = [];
    if (opts.curve) {
      const body = [{ model: 'bench-small', maxTokens: 16, stream: false }];
      for (const rate of opts.rates) {
        const connections = Math.max(16, Math.ceil(rate / 100));
        const point: Partial<CurvePoint> = { rate };
        for (const target of ['mock', 'relay'] as const) {
          const requests = requestsFor(target, body);
          await drive({ url: urlOf[target], requests, connections, rate, durationMs: Math.min(1000, opts.warmupMs) });
          const sampler = new ProcSampler(w);
          sampler.start();
          const r = await drive({ url: urlOf[target], requests, connections, rate, durationMs: opts.curveMs });
          const procs = sampler.stop();
          point[target] = { rps: r.rps, p50: r.latency.p50, p99: r.latency.p99 };
          if (target === 'relay') {
            point.relayCpuPct = procs.find((p) => p.name === 'relay')?.cpuPct ?? NaN;
            point.loadgenCpuPct = procs.find((p) => p.name === 'load generator')?.cpuPct ?? NaN;
          }
        }
        const p = point as CurvePoint;
        p.addedP50 = p.relay.p50 - p.mock.p50;
        p.addedP99 = p.relay.p99 - p.mock.p99;
        p.held = p.relay.rps >= rate * 0.95;
        curve.push(p);
        log(`curve ${rate} req/s: relay ${p.relay.rps.toFixed(0)} req/s p99 ${fmt(p.relay.p99)} ms, mock p99 ${fmt(p.mock.p99)} ms, added p99 ${fmt(p.addedP99)} ms, relay CPU ${fmt(p.relayCpuPct, 0)}%, load generator CPU ${fmt(p.loadgenCpuPct, 0)}%`);
        if (!p.held || p.relay.p99 > 100) break;
      }
    }

    // --- operator metrics, as scraped at the end of the load (absent until the hooks are applied) ----
    for (const [name, url] of [['relay', stack.relayMetricsUrl], ['billing', stack.billingMetricsUrl]] as const) {
      if (!url) {
        log(`${name} /metrics: no URL given`);
        continue;
      }
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
        if (res.ok) writeFileSync(join(outDir, `${name}-metrics.txt`), await res.text());
        log(`${name} /metrics: ${res.ok ? `saved to ${name}-metrics.txt` : `HTTP ${res.status}`}`);
      } catch {
        log(`${name} /metrics: not served`);
      }
    }

    // --- profile ---------------------------------------------------------------------------------
    let profiles: ProfileSummary[] = [];
    if (opts.cpuProf) {
      log('stopping the relay to write its CPU profile');
      await stack.stopRelay();
      profiles = summarizeProfileDir(profileDir);
    }

    // --- console at scale ------------------------------------------------------------------------
    let scale: ScaleResult | null = null;
    if (opts.scale && !stack.consoleUrl) notes.push('Console at scale skipped: no --console-url.');
    if (opts.scale && stack.consoleUrl) {
      log(`console scale: ensuring ${opts.scaleRows.toLocaleString('en')} generated log rows`);
      const sampler = new ProcSampler(w);
      scale = await runConsoleScale(sql, ch, stack.consoleUrl, { rows: opts.scaleRows, connections: 4, durationSec: opts.scaleDurationSec, log });
      void sampler;
    }

    // --- report ----------------------------------------------------------------------------------
    const target = { mode: stack.mode, relayUrl: stack.relayUrl, mockUrl: stack.mockUrl, consoleUrl: stack.consoleUrl || null, billingMetricsUrl: stack.billingMetricsUrl ?? null, relayMetricsUrl: stack.relayMetricsUrl ?? null,
      databaseUrl: opts.databaseUrl.replace(/\/\/[^@/]*@/, '//…@'), redisPrefix: stack.config.REDIS_PREFIX, clickhouse: `${stack.config.CLICKHOUSE_URL} ${stack.config.CLICKHOUSE_DATABASE}`,
      pids: Object.fromEntries(Object.entries(stack.foreignPids).map(([k, v]) => [k, v])), mockOutputCap: cap, groupRatio };
    const json = { stamp, options: { ...opts, resultsRoot: undefined, databaseUrl: target.databaseUrl }, target, notes, machine: { cores: cpus().length, node: process.version }, scenarios, saturation, curve, profiles, scale };
    const md = markdown(scenarios, saturation, curve, profiles, scale, target, notes);
    const dir = writeReport(opts.resultsRoot, stamp, json, md, svgChart(curve));
    process.stdout.write('\n' + md + '\n');
    log(`report written to ${dir} and ${join(opts.resultsRoot, 'latest')}`);
  } finally {
    await sql.end({ timeout: 5 }).catch(() => {});
    await dropOwnRedisKeys();
    redis.disconnect();
    await ch.close().catch(() => {});
    await stack.close();
  }
  if (failed) process.exitCode = 1;
}

// ------------------------------------------------------------------------------------------------
// Markdown

function markdown(
  scenarios: ScenarioReport[],
  saturation: Array<{ target: string; result: CannonResult; procs: ProcUsage[]; cpuUsPerReq: number | null }>,
  curve: CurvePoint[],
  profiles: ProfileSummary[],
  scale: ScaleResult | null,
  target: { mode: 'own' | 'attached'; relayUrl: string; mockUrl: string; databaseUrl: string; redisPrefix: string; clickhouse: string; pids: Record<string, { pids: number[]; how: string }> },
  notes: string[],
): string {
  const L: string[] = [];
  const run = (s: ScenarioReport, t: string): RunFigures | undefined => s.runs.find((r) => r.target === t);
  L.push(`# Gateway benchmark ${stamp}`, '');
  if (target.mode === 'attached') {
    const pids = Object.entries(target.pids).map(([k, v]) => `${k} ${v.pids.join(',')} (${v.how})`).join('; ');
    L.push(`Attached to a running stack: relay ${target.relayUrl}, mock ${target.mockUrl}, Postgres ${target.databaseUrl}, Redis prefix \`${target.redisPrefix}\`, ClickHouse ${target.clickhouse}. Processes watched: ${pids || 'none of the stack\'s'}.`, '');
  } else {
    L.push('Own stack: every service spawned by the bench on its own database, Redis prefix and ClickHouse database.', '');
  }
  if (notes.length) L.push(...notes.map((n) => `- ${n}`), '');
  L.push(`Machine: ${cpus().length} cores, Node ${process.version}, one host for load generator and every service. Durations: warm-up ${opts.warmupMs / 1000} s, measure ${opts.durationMs / 1000} s per run.`);
  L.push('Latencies in ms from the load generator (request written → last byte); "added" = relay − mock direct at the same offered load; TTFB = request written → first body byte.', '');
  L.push('## Scenarios', '');
  L.push('| scenario | offered req/s | relay req/s | mock p50 / p99 | bare p50 / p99 | relay p50 / p99 | added p50 / p99 | added p50 / p99, billing paused | TTFB added p50 / p99 | CPU µs/req relay / bare (×) | relay RSS MB start → max → end | saturated (relay run) | audit | billing lag p50 / p99 ms |');
  L.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const s of scenarios.filter((x) => x.runs.length)) {
    const m = run(s, 'mock'), b = run(s, 'bare'), r = run(s, 'relay');
    const lat = (x?: RunFigures): string => (x ? `${fmt(x.driver.latency.p50)} / ${fmt(x.driver.latency.p99)}` : '–');
    const added = r && m ? `${fmt(r.driver.latency.p50 - m.driver.latency.p50)} / ${fmt(r.driver.latency.p99 - m.driver.latency.p99)}` : '–';
    const rp0 = run(s, 'relay-billing-paused');
    const addedPaused = rp0 && m ? `${fmt(rp0.driver.latency.p50 - m.driver.latency.p50)} / ${fmt(rp0.driver.latency.p99 - m.driver.latency.p99)}` : '–';
    const stream = s.stream;
    const ttfb = stream && r && m && r.driver.ttfb.count && m.driver.ttfb.count ? `${fmt(r.driver.ttfb.p50 - m.driver.ttfb.p50)} / ${fmt(r.driver.ttfb.p99 - m.driver.ttfb.p99)}` : '–';
    const cpu = r?.cpuUsPerReq != null && b?.cpuUsPerReq != null ? `${fmt(r.cpuUsPerReq, 0)} / ${fmt(b.cpuUsPerReq, 0)} (${fmt(r.cpuUsPerReq / b.cpuUsPerReq, 2)}×)` : '–';
    const rp = r?.procs.find((p) => p.name === 'relay');
    const rss = rp ? `${fmt(rp.rssStartMb, 0)} → ${fmt(rp.rssMaxMb, 0)} → ${fmt(rp.rssEndMb, 0)}` : '–';
    const audit = s.audit ? (s.audit.pass ? 'PASS' : 'FAIL') : '–';
    const lag = (s.lag && s.lag.lagMs.count ? `${fmt(s.lag.lagMs.p50, 0)} / ${fmt(s.lag.lagMs.p99, 0)}` : '–') +
      (s.lagMetric ? ` (metric ≤ ${fmt(s.lagMetric.p50Ms, 0)} / ≤ ${fmt(s.lagMetric.p99Ms, 0)})` : '');
    L.push(`| ${s.id}: ${s.title} | ${s.rate || 'closed loop'} | ${r ? fmt(r.driver.rps, 0) : '–'} | ${lat(m)} | ${lat(b)} | ${lat(r)} | ${added} | ${addedPaused} | ${ttfb} | ${cpu} | ${rss} | ${r ? saturated(r.procs) : '–'} | ${audit} | ${lag} |`);
  }
  L.push('');
  L.push('## Money audit', '');
  L.push('After each relay run, once the usage stream is drained and no reservation is open: the Postgres debit (users.quota), Σ ledger.quota, Σ ClickHouse logs.quota FINAL, the Redis balance movement and the formula over the usage the mock returned must all be equal.', '');
  L.push('| run | result | users.quota debit | Σ ledger | Σ ClickHouse | Redis movement | formula | rows complete / partial / error | drain ms |');
  L.push('|---|---|---|---|---|---|---|---|---|');
  for (const s of scenarios) for (const [name, a] of [[s.id, s.audit], [`${s.id} (billing paused, then drained)`, s.auditPaused]] as const) {
    if (!a) continue;
    L.push(`| ${name} | ${a.pass ? 'PASS' : `FAIL: ${a.problems.join('; ')}`} | ${a.pgDebit} | ${a.ledgerSum} | ${a.chSum} | ${a.redisMovement ?? '–'} | ${a.formula} | ${a.rows.complete} / ${a.rows.partial} / ${a.rows.error} | ${a.drainMs} |`);
  }
  const allPass = scenarios.every((s) => (!s.audit || s.audit.pass) && (!s.auditPaused || s.auditPaused.pass));
  L.push('', `**Audit: ${allPass ? 'PASS' : 'FAIL'}**`, '');
  L.push('Billing lag = client saw the response end → its row is visible in ClickHouse (`logs`), polled every 50 ms (resolution: poll interval + one query; the polls themselves queue in ClickHouse with the worker\'s inserts). In parentheses, when the billing worker exposes /metrics: its gateway_billing_lag_seconds (stream entry time → ClickHouse insert done), as bucket upper bounds.', '');
  for (const s of scenarios) if (s.lag) L.push(`- ${s.id}: ${s.lag.lagMs.count} requests sampled, ${s.lag.missing} not found, poll query p50 ${fmt(s.lag.pollQueryMs.p50, 1)} ms / p99 ${fmt(s.lag.pollQueryMs.p99, 1)} ms`);
  L.push('');

  L.push(`## CPU per process during each run (% of one core; ${cpus().length} cores = ${cpus().length * 100}%)`, '', `"${OTHERS}" is whatever else ran on the host meanwhile (the machine's busy time from /proc/stat minus the processes listed).`, '');
  const names = [...new Set(scenarios.flatMap((s) => s.runs.flatMap((r) => r.procs.map((p) => p.name))))];
  L.push(`| run | ${names.join(' | ')} |`, `|---|${names.map(() => '---').join('|')}|`);
  for (const s of scenarios) for (const r of s.runs) {
    L.push(`| ${s.id} → ${r.target} | ${names.map((n) => fmt(r.procs.find((p) => p.name === n)?.cpuPct, 0)).join(' | ')} |`);
  }
  for (const r of saturation) {
    L.push(`| saturation → ${r.target} | ${names.map((n) => fmt(r.procs.find((p) => p.name === n)?.cpuPct, 0)).join(' | ')} |`);
  }
  L.push('');
  if (saturation.length) {
    L.push('## Saturation (autocannon, 64 connections, closed loop, non-streaming)', '');
    L.push('| target | req/s | p50 / p99 ms | CPU µs/req (own process) | saturated |', '|---|---|---|---|---|');
    for (const s of saturation) L.push(`| ${s.target} | ${fmt(s.result.rps, 0)} | ${fmt(s.result.latency.p50)} / ${fmt(s.result.latency.p99)} | ${fmt(s.cpuUsPerReq, 0)} | ${saturated(s.procs)} |`);
    L.push('');
  }
  if (curve.length) {
    L.push('## Load curve (non-streaming, paced)', '', '![latency vs load](latency-vs-load.svg)', '');
    L.push('| offered req/s | mock req/s | relay req/s | mock p50 / p99 | relay p50 / p99 | added p50 / p99 | relay CPU % | load generator CPU % | held |', '|---|---|---|---|---|---|---|---|---|');
    for (const p of curve) L.push(`| ${p.rate} | ${fmt(p.mock.rps, 0)} | ${fmt(p.relay.rps, 0)} | ${fmt(p.mock.p50)} / ${fmt(p.mock.p99)} | ${fmt(p.relay.p50)} / ${fmt(p.relay.p99)} | ${fmt(p.addedP50)} / ${fmt(p.addedP99)} | ${fmt(p.relayCpuPct, 0)} | ${fmt(p.loadgenCpuPct, 0)} | ${p.held ? 'yes' : 'no'} |`);
    const best = curve.filter((p) => p.held && p.addedP99 < 1).map((p) => p.rate);
    L.push('', `**Highest rate held with p99 added latency < 1 ms: ${best.length ? Math.max(...best) : 'none'} req/s.**`, '');
  }
  if (scale) {
    L.push(`## Console queries at ${scale.rows.toLocaleString('en')} log rows`, '');
    L.push(`Heaviest account: ${scale.heavyUserRows.toLocaleString('en')} rows. ${scale.loadSec !== null ? `Rows generated in ${scale.loadSec.toFixed(1)} s.` : 'Rows already present.'} 4 concurrent connections, ${opts.scaleDurationSec} s per query.`, '');
    L.push('| query | req/s | p50 ms | p99 ms | non-2xx |', '|---|---|---|---|---|');
    for (const q of scale.queries) {
      const non2xx = Object.entries(q.result.status).filter(([k]) => !k.startsWith('2')).reduce((a, [, v]) => a + v, 0);
      L.push(`| ${q.name} | ${fmt(q.result.rps, 1)} | ${fmt(q.result.latency.p50, 1)} | ${fmt(q.result.latency.p99, 1)} | ${non2xx} |`);
    }
    L.push('');
  }
  if (profiles.length) {
    L.push('## Relay CPU profile (self time)', '');
    for (const p of profiles) {
      L.push(`Busy ${fmt(p.busyMs / 1000, 1)} s of ${fmt(p.totalMs / 1000, 1)} s sampled.`, '');
      L.push('| area | self ms | % of busy |', '|---|---|---|');
      for (const a of p.byArea.slice(0, 12)) L.push(`| ${a.area} | ${fmt(a.selfMs, 0)} | ${fmt(a.pctOfBusy, 1)} |`);
      L.push('', '| function | location | self ms | % of busy |', '|---|---|---|---|');
      for (const t of p.top.slice(0, 20)) L.push(`| ${t.function} | ${t.location} | ${fmt(t.selfMs, 0)} | ${fmt(t.selfPct, 1)} |`);
      L.push('');
    }
  }
  // Targets of issue 5, reported (never asserted).
  const small = scenarios.find((s) => s.id === 'small');
  const sm = small && run(small, 'mock'), sr = small && run(small, 'relay'), sb = small && run(small, 'bare');
  const streamTtfb = scenarios.filter((s) => s.id === 'stream64' || s.id === 'long').map((s) => {
    const r = run(s, 'relay'), m = run(s, 'mock');
    return r && m ? r.driver.ttfb.p99 - m.driver.ttfb.p99 : NaN;
  });
  const long = scenarios.find((s) => s.id === 'long');
  const lr = long && run(long, 'relay')?.procs.find((p) => p.name === 'relay');
  const lags = scenarios.filter((s) => s.lag?.lagMs.count).map((s) => s.lag!.lagMs.p99);
  const maxQ = scale ? Math.max(...scale.queries.map((q) => q.result.latency.p99)) : NaN;
  const check = (ok: boolean | null): string => (ok === null ? '–' : ok ? 'met' : 'not met');
  L.push('## Targets (issue 5)', '', '| target | measured | |', '|---|---|---|');
  const addedP99 = sr && sm ? sr.driver.latency.p99 - sm.driver.latency.p99 : NaN;
  L.push(`| p99 added latency < 1 ms at 2,000 req/s (small) | ${fmt(addedP99)} ms | ${check(Number.isFinite(addedP99) ? addedP99 < 1 : null)} |`);
  const ttfbMax = Math.max(...streamTtfb.filter(Number.isFinite));
  L.push(`| TTFB added < 0.5 ms on streams (p99) | ${fmt(ttfbMax)} ms | ${check(Number.isFinite(ttfbMax) ? ttfbMax < 0.5 : null)} |`);
  const ratio = sr?.cpuUsPerReq != null && sb?.cpuUsPerReq != null ? sr.cpuUsPerReq / sb.cpuUsPerReq : NaN;
  L.push(`| relay CPU/request ≤ 2× bare proxy (small) | ${fmt(ratio)}× | ${check(Number.isFinite(ratio) ? ratio <= 2 : null)} |`);
  const growth = lr ? lr.rssEndMb - lr.rssStartMb : NaN;
  L.push(`| RSS flat during the long stream | ${lr ? `${fmt(lr.rssStartMb, 0)} → ${fmt(lr.rssEndMb, 0)} MB (max ${fmt(lr.rssMaxMb, 0)})` : '–'} | ${check(Number.isFinite(growth) ? growth < Math.max(20, lr!.rssStartMb * 0.1) : null)} |`);
  const lagMax = lags.length ? Math.max(...lags) : NaN;
  L.push(`| billing lag p99 < 1 s | ${fmt(lagMax, 0)} ms (worst scenario) | ${check(Number.isFinite(lagMax) ? lagMax < 1000 : null)} |`);
  L.push(`| log queries p99 < 50 ms at 10 M rows | ${fmt(maxQ, 1)} ms (worst query) | ${check(Number.isFinite(maxQ) ? maxQ < 50 : null)} |`);
  L.push('');
  return L.join('\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
