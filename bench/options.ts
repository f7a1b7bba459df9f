// The bench's command line (flags in run-bench.ts' header and bench/README.md): parsed, checked
// (a bad combination exits 2 before anything starts) and resolved against the environment and the
// defaults of the mode (own stack or attached).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { projectRoot } from '../infra/project-root.js';

/** What --help prints; run-bench.ts' header and bench/README.md say what each flag does. */
export const BENCH_USAGE = `usage: node dist/bench/run-bench.js [flags]   (make bench runs it with none)
  own stack:  [--duration S] [--warmup S] [--jit-warmup S] [--quick] [--rates R,R,...] [--scenarios small,stream64,long,mix,agent,chat,chat-stream64,
              oai-stream64,oai-chat,oai-chat-stream64,abort]
              [--skip-curve] [--skip-saturation] [--skip-scale] [--scale-rows N] [--out DIR]
              [--database-url URL] [--redis-url URL] [--clickhouse-url URL] [--clickhouse-database DB] [--own-clickhouse]
              [--relay-entry JS] [--billing-entry JS] [--console-entry JS] [--redis-prefix P]
  attached:   --relay-url URL --mock-url URL [--console-url URL] [--relay-metrics-url URL] [--billing-metrics-url URL]
              [--mock-key K] [--key-secret-file F | --key-secret S] [--relay-pid N] [--billing-pid N] [--mock-pid N]
              [--console-pid N] [--scale]
  BENCH_CPU_PROF=1 profiles the relay and the bare hop. Details: bench/README.md.
`;

/** Positive seconds, counts and rates; exits 2 naming the flag on anything else. */
function positive(flag: string, v: string | undefined): void {
  if (v === undefined) return;
  if (v.split(',').some((x) => !(Number(x) > 0) || !Number.isFinite(Number(x)))) {
    process.stderr.write(`--${flag} takes positive numbers, not "${v}"\n`);
    process.exit(2);
  }
}

/** Seconds that may be 0 (off); exits 2 naming the flag on anything else. */
function nonNegative(flag: string, v: string | undefined): void {
  if (v === undefined) return;
  if (!(Number(v) >= 0) || !Number.isFinite(Number(v)) || v.trim() === '') {
    process.stderr.write(`--${flag} takes a number of seconds, 0 or more, not "${v}"\n`);
    process.exit(2);
  }
}

export function parseBenchOptions() {
  let parsed;
  try {
    parsed = parseBenchArgs();
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${BENCH_USAGE}`);
    process.exit(2);
  }
  const { values: args } = parsed;
  if (args.help) {
    process.stdout.write(BENCH_USAGE);
    process.exit(0);
  }
  for (const f of ['duration', 'warmup', 'rates', 'scale-rows'] as const) positive(f, args[f]);
  nonNegative('jit-warmup', args['jit-warmup']);
  return resolveBenchOptions(args);
}

function parseBenchArgs() {
  return parseArgs({
    options: {
      help: { type: 'boolean', short: 'h' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      'jit-warmup': { type: 'string' },
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
      'console-entry': { type: 'string' },
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
}

function resolveBenchOptions(args: ReturnType<typeof parseBenchArgs>['values']) {
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
  const keySecret = args['key-secret-file'] !== undefined ? readFileSync(args['key-secret-file'], 'utf8').trim() : (args['key-secret'] ?? process.env.KEY_SECRET);

  const quick = args.quick === true;
  const opts = {
    durationMs: Number(args.duration ?? (quick ? 1.5 : 6)) * 1000,
    warmupMs: Number(args.warmup ?? (quick ? 0.5 : 2)) * 1000,
    // Once, before the first run: every target serves the scenarios' requests while V8 compiles its
    // hot path (the first 3-5 s under load cost the relay and the bare hop 20-40% more CPU a request).
    jitWarmupMs: Number(args['jit-warmup'] ?? 4) * 1000,
    rates: (args.rates ?? (quick ? '500,1000' : '500,1000,2000,3000,4000,6000,8000,10000')).split(',').map(Number),
    curveMs: quick ? 1000 : 4000,
    // The oai-* (the OpenAI-format channel's) need the bench's own stack: run-bench.ts leaves them out of an attached run's defaults.
    scenarios: (args.scenarios ?? 'small,stream64,long,mix,agent,chat,chat-stream64,oai-stream64,oai-chat,oai-chat-stream64,abort').split(','),
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
  return { args, opts, attached, keySecret };
}

export type BenchArgs = ReturnType<typeof parseBenchArgs>['values'];
/** What report.json records under `options`, in this key order. */
export type BenchOptions = ReturnType<typeof parseBenchOptions>['opts'];

/** A comma list of PIDs; exits 2 on anything else. */
export function pidList(v: string | undefined): number[] | undefined {
  if (v === undefined) return undefined;
  const pids = v.split(',').map(Number);
  if (pids.some((p) => !Number.isInteger(p) || p <= 0)) {
    process.stderr.write(`invalid PID list: ${v}\n`);
    process.exit(2);
  }
  return pids;
}
