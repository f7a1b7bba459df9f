// `make bench`: the gateway's benchmark suite. Starts its own stack (or uses one given by URL), runs
// the scenarios against the mock directly, through the bare proxy and through the relay, audits the
// money after each relay run, draws the load curve, measures the console's log queries at 10 million
// rows, and writes bench/results/<timestamp>/ (report.md, report.json, latency-vs-load.svg, logs/,
// profiles/) and bench/results/latest/.
//
//   node dist/bench/run-bench.js [--duration 6] [--warmup 2] [--jit-warmup 4] [--quick] [--rates 500,1000,...]
//        [--scenarios small,stream64,long,mix,agent,chat,chat-stream64,oai-stream64,oai-chat,oai-chat-stream64,abort]
//        [--skip-curve] [--skip-scale] [--scale-rows N]
//        [--out DIR] [--database-url URL] [--redis-url URL] [--clickhouse-url URL]
//        [--clickhouse-database DB] [--own-clickhouse] [--relay-entry dist/relay/main.js]
//        [--billing-entry dist/billing/main.js] [--console-entry dist/console-api/main.js] [--skip-saturation]
//   BENCH_CPU_PROF=1   runs the relay and the bare hop with --cpu-prof: the relay's hottest functions, and
//                      its event loop against the bare hop's.
//
// Attached mode, against a stack that is already running (nothing spawned but the bare proxy):
//   node dist/bench/run-bench.js --relay-url URL --mock-url URL [--console-url URL]
//        [--relay-metrics-url URL] [--billing-metrics-url URL] [--mock-key K] [--key-secret-file F | --key-secret S]
//        [--database-url URL] [--redis-url URL] [--redis-prefix P] [--clickhouse-url URL]
//        [--clickhouse-database DB] [--relay-pid N] [--billing-pid N] [--mock-pid N] [--scale] ...
// bench/README.md describes what it writes to the target databases and what it skips (the oai-*
// scenarios need the bench's own OpenAI-format mock: left out of an attached run's defaults, refused
// when asked for).
//
// Every figure is relative to a baseline measured in the same run on the same machine: the relay's
// added latency is relay minus mock-direct at the same offered load, its CPU per request is compared
// with the bare proxy's. Nothing here asserts wall-clock bounds; the targets are reported.
//
// Where things are: options.ts (the flags), setup.ts (the stack and the bench account on it),
// scenarios.ts (what is run and how), lib/report.ts (report.md, report.json, the chart).
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { createClickHouse } from '../infra/clickhouse/client.js';
import { createSql } from '../infra/postgres/client.js';
import { createRedis, redisKeysFor } from '../infra/redis/client.js';
import { runConsoleScale, type ScaleResult } from './lib/console-scale.js';
import { compareProfiles, monotonicMicros, summarizeProfileDir, type CpuProfiles } from './lib/cpu-profile.js';
import { ProcSampler } from './lib/proc.js';
import { reportMarkdown, svgChart, writeReport, type CurvePoint } from './lib/report.js';
import { measureRedisRoundTripFloor } from './lib/redis-floor.js';
import { parseBenchOptions } from './options.js';
import { runLoadCurve, runSaturation, runScenarios, scenarioUpstream, SCENARIOS, warmUpTargets } from './scenarios.js';
import { openStack, prepareTarget } from './setup.js';

const parsed = parseBenchOptions();
const { args, opts, attached } = parsed;
const unknownScenarios = opts.scenarios.filter((id) => !SCENARIOS.some((sc) => sc.id === id));
if (unknownScenarios.length) {
  process.stderr.write(`--scenarios: no scenario ${unknownScenarios.map((id) => `"${id}"`).join(', ')}; there are ${SCENARIOS.map((sc) => sc.id).join(', ')}\n`);
  process.exit(2);
}
// The OpenAI-format channel's scenarios run against the bench's own OpenAI-format mock, which a running
// stack given by URL does not have: asked for, refused; in the default list, left out with a note.
const openaiScenarios = SCENARIOS.filter((sc) => scenarioUpstream(sc) === 'openai' && opts.scenarios.includes(sc.id)).map((sc) => sc.id);
let openaiSkippedNote: string | null = null;
if (attached && openaiScenarios.length) {
  if (args.scenarios !== undefined) {
    process.stderr.write(`--scenarios: ${openaiScenarios.join(', ')} need the bench's own stack (its OpenAI-format mock and the channel of type 1 to it); attached to a running stack (--relay-url) they cannot run\n`);
    process.exit(2);
  }
  opts.scenarios = opts.scenarios.filter((id) => !openaiScenarios.includes(id));
  openaiSkippedNote = `Skipped: ${openaiScenarios.join(', ')} (the OpenAI-format channel's scenarios need the bench's own OpenAI-format mock; a running stack has none).`;
}

const stamp = new Date().toISOString().replace(/[:.]/g, '-').replace(/Z$/, '');
const outDir = join(opts.resultsRoot, stamp);
mkdirSync(outDir, { recursive: true });
const t0 = Date.now();
const log = (line: string): void => {
  process.stdout.write(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)} s] ${line}\n`);
};

async function main(): Promise<void> {
  log(`bench: results in ${outDir}`);
  const profileDir = join(outDir, 'profiles');
  const stack = await openStack(parsed, outDir, profileDir, log);
  const sql = createSql(stack.config, { max: 4 });
  const redis = createRedis(stack.config, 'bench');
  const ch = createClickHouse(stack.config);
  // The layout of the stack's Redis: --redis-url redis+cluster://... runs the whole bench on a cluster.
  const keys = redisKeysFor(stack.config);
  const notes = [...stack.notes];
  // Figures taken on a busy machine measure the contention too: the report says how busy it was.
  notes.push(`Load average (1, 5, 15 min) at the start: ${loadavg().map((l) => l.toFixed(2)).join(', ')} on ${cpus().length} cores.`);
  if (process.env.BENCH_CPU_PROF === '1' && attached) notes.push('BENCH_CPU_PROF ignored: the relay is not the bench\'s to restart with --cpu-prof.');
  if (openaiSkippedNote) notes.push(openaiSkippedNote);
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
    const ctx = await prepareTarget({ opts, log, stack, sql, redis, ch, keys, notes });
    const { mockOutputCap: cap, groupRatio, mockMediaTokens, mockOpenAIUsage } = ctx;

    await warmUpTargets(ctx);
    // The profiles are weighed from here on: the runs, not start-up and the warm-up's compiling.
    const profiledFromUs = monotonicMicros();
    if (opts.jitWarmupMs > 0) notes.push(`Before the first run each target served the scenarios' paced requests for ${opts.jitWarmupMs / 1000} s (--jit-warmup), so that no run measures V8 compiling the target's hot path.`);
    const { scenarios, failed: scenarioAuditFailed } = await runScenarios(ctx);
    const { saturation, audits: saturationAudits, failed: saturationAuditFailed } = opts.saturation
      ? await runSaturation(ctx)
      : { saturation: [], audits: [], failed: false };
    scenarios.push(...saturationAudits);
    failed = scenarioAuditFailed || saturationAuditFailed;
    const curve: CurvePoint[] = opts.curve ? await runLoadCurve(ctx) : [];
    // The floor under "Redis CPU per request": one round trip per request at the scenarios' rate.
    const redisFloor = stack.config.REDIS_CLUSTER_NODES ? null : await measureRedisRoundTripFloor(stack.config.REDIS_URL, 2000, 2000);
    if (redisFloor) log(`Redis round-trip floor: ${redisFloor.cpuUsPerRoundTrip.toFixed(1)} µs of Redis CPU per PING at ${redisFloor.rate}/s`);

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
    let profiles: CpuProfiles = { relay: [], comparison: null };
    if (opts.cpuProf) {
      log('stopping the relay and the bare hop to write their CPU profiles');
      await stack.stopRelay();
      await stack.stopBare();
      const relay = summarizeProfileDir(profileDir, profiledFromUs);
      const [bare] = summarizeProfileDir(join(profileDir, 'bare'), profiledFromUs);
      const relayMain = relay.find((p) => p.thread === 'main');
      profiles = { relay, comparison: relayMain && bare ? compareProfiles(relayMain, bare) : null };
      if (!profiles.comparison) notes.push('The bare hop wrote no CPU profile: the relay is profiled alone.');
    }

    // --- console at scale ------------------------------------------------------------------------
    let scale: ScaleResult | null = null;
    if (opts.scale && !stack.consoleUrl) notes.push('Console at scale skipped: no --console-url.');
    if (opts.scale && stack.consoleUrl) {
      log(`console scale: ensuring ${opts.scaleRows.toLocaleString('en')} generated log rows`);
      scale = await runConsoleScale(sql, ch, stack.consoleUrl, { rows: opts.scaleRows, connections: 4, durationSec: opts.scaleDurationSec, log, watched: ctx.watched });
    }

    // --- report ----------------------------------------------------------------------------------
    const target = { mode: stack.mode, relayUrl: stack.relayUrl, mockUrl: stack.mockUrl, consoleUrl: stack.consoleUrl || null, billingMetricsUrl: stack.billingMetricsUrl ?? null, relayMetricsUrl: stack.relayMetricsUrl ?? null,
      databaseUrl: opts.databaseUrl.replace(/\/\/[^@/]*@/, '//…@'), redisPrefix: stack.config.REDIS_PREFIX, clickhouse: `${stack.config.CLICKHOUSE_URL} ${stack.config.CLICKHOUSE_DATABASE}`,
      pids: Object.fromEntries(Object.entries(stack.foreignPids).map(([k, v]) => [k, v])), mockOutputCap: cap, groupRatio, mockMediaTokens, mockOpenAIUsage, peerVersion: stack.peerVersion ?? null, redisFloor };
    const json = { stamp, options: { ...opts, resultsRoot: undefined, databaseUrl: target.databaseUrl }, target, notes, machine: { cores: cpus().length, node: process.version }, scenarios, saturation, curve, profiles, scale };
    const md = reportMarkdown({ stamp, warmupMs: opts.warmupMs, durationMs: opts.durationMs, scaleDurationSec: opts.scaleDurationSec }, scenarios, saturation, curve, profiles, scale, target, notes);
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

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
