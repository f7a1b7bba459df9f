// The bench's cluster mode for the Redis tier: the Redis work of one relay request (reserveQuota-8.lua,
// settleReservations-9n.lua with its XADD) and of its billing (XREADGROUP, XACK + XDEL), driven through
// QuotaStore as the relay does, on one Redis or on a Redis Cluster, with accounts spread over the
// virtual shards. It reports requests/s and, per master, the Redis CPU (INFO cpu, user + sys) spent
// per request that master served: the figure docs/scaling.md sizes Redis shards from. Postgres,
// ClickHouse and the provider are left out on purpose; `make bench` measures the relay and billing
// whole.
//
//   node dist/bench/redis-shards.js [--nodes 127.0.0.1:7100,...] [--redis-url redis://127.0.0.1:6379/0]
//       [--shards 64] [--accounts 512] [--concurrency 128] [--duration 10] [--start-cluster 7100]
//       [--out bench/results/redis-shards]
//
// --start-cluster BASE starts a 3-master, 3-replica cluster on BASE..BASE+5 (infra/scripts/redis-cluster.sh)
// for the run and stops it after; --start-single PORT one Redis (AOF everysec, as make run's) for a
// comparison on equal terms. Results: <out>/report.md and report.json.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../infra/config.js';
import { projectRoot } from '../infra/project-root.js';
import { createRedis, deleteKeysWithPrefix, type Redis } from '../infra/redis/client.js';
import { redisKeys } from '../infra/redis/keys.js';
import { QuotaStore } from '../core/quota/quota-store.js';
import { encodeUsageEvent, usageEvent, LOG_TYPE } from '../core/usage/usage-event.js';

const { values: args } = parseArgs({
  options: {
    nodes: { type: 'string' }, 'redis-url': { type: 'string' }, shards: { type: 'string' }, accounts: { type: 'string' },
    concurrency: { type: 'string' }, duration: { type: 'string' }, 'start-cluster': { type: 'string' }, 'start-single': { type: 'string' },
    out: { type: 'string' },
  },
  strict: true,
});

const started = args['start-cluster'] !== undefined ? Number(args['start-cluster']) : null;
let clusterDir = '';
const script = join(projectRoot(), 'infra/scripts/redis-cluster.sh');
let nodes = args.nodes;
if (started !== null) {
  clusterDir = mkdtempSync(join(tmpdir(), 'redis-shards-bench-'));
  execFileSync('bash', [script, 'start', String(started), clusterDir], { stdio: 'inherit' });
  nodes = execFileSync('bash', [script, 'nodes', String(started)], { encoding: 'utf8' }).trim();
}
const single = args['start-single'] !== undefined ? Number(args['start-single']) : null;
let singleProc: import('node:child_process').ChildProcess | null = null;
if (single !== null) {
  clusterDir = mkdtempSync(join(tmpdir(), 'redis-single-bench-'));
  const { spawn } = await import('node:child_process');
  singleProc = spawn('redis-server', ['--port', String(single), '--bind', '127.0.0.1', '--dir', clusterDir, '--appendonly', 'yes', '--appendfsync', 'everysec', '--save', ''], { stdio: 'ignore' });
  for (let i = 0; i < 100; i++) {
    try {
      execFileSync('redis-cli', ['-p', String(single), 'ping'], { stdio: 'ignore' });
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  args['redis-url'] = `redis://127.0.0.1:${single}/0`;
}
const cluster = nodes !== undefined;
const shards = Number(args.shards ?? (cluster ? 64 : 0));
const accounts = Number(args.accounts ?? 512);
const concurrency = Number(args.concurrency ?? 128);
const durationMs = Number(args.duration ?? 10) * 1000;
const prefix = `bench-shards-${Date.now().toString(36)}`;
const config = loadConfig({
  ...process.env, LOG_LEVEL: 'silent', REDIS_PREFIX: prefix, REDIS_SHARDS: String(shards),
  REDIS_URL: args['redis-url'] ?? process.env.REDIS_URL, REDIS_CLUSTER_NODES: nodes,
});
const redis = createRedis(config, 'bench-shards');
const consumer = createRedis(config, 'bench-shards-billing');
const keys = redisKeys(prefix, shards);
const FUNDS = 1e15;
const quota = new QuotaStore(redis, keys, {
  accountQuota: async () => FUNDS, tokenRemainQuota: async () => FUNDS,
});
// A usage event of the size the relay writes (one text request).
const eventJson = encodeUsageEvent(usageEvent({
  type: LOG_TYPE.consume, request_id: '00000000-0000-4000-8000-000000000000', upstream_request_id: 'msg_01XFDUDYJgAACzvnptvVoYEL',
  user_id: 1, username: 'bench-load', token_id: 1, token_name: 'bench', token_limited: false, channel: 1, model_name: 'claude-sonnet-4-5',
  group: 'default', quota: 123, prompt_tokens: 250, completion_tokens: 64, is_stream: true, use_time_ms: 850,
  created_at: Math.floor(Date.now() / 1000), content: 'model ratio 1.5, completion ratio 5, group ratio 1',
}));

/** Masters as host:port with their Redis client (the single Redis: itself). */
function masters(): { name: string; node: Redis }[] {
  if (!redis.isCluster) return [{ name: 'single', node: redis }];
  return (redis as unknown as { nodes(role: 'master'): Redis[] }).nodes('master')
    .map((node) => ({ name: `${node.options.host}:${node.options.port}`, node }));
}

async function cpuSeconds(node: Redis): Promise<number> {
  const info = await node.info('cpu');
  const num = (f: string) => Number(new RegExp(`${f}:([\\d.]+)`).exec(info)?.[1] ?? 0);
  return num('used_cpu_user') + num('used_cpu_sys');
}

/** The master serving each shard now (by its stream's slot). */
async function masterOfShard(): Promise<Map<number, string>> {
  const out = new Map<number, string>();
  if (!redis.isCluster) {
    for (let s = 0; s < keys.streamShards; s++) out.set(s, 'single');
    return out;
  }
  const ranges = (await redis.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
  const { createRequire } = await import('node:module');
  const slotOf = createRequire(import.meta.url)('cluster-key-slot') as (k: string) => number;
  for (let s = 0; s < keys.streamShards; s++) {
    const slot = slotOf(keys.usageStream(s));
    const r = ranges.find(([a, b]) => slot >= a && slot <= b)!;
    out.set(s, `${r[2][0]}:${r[2][1]}`);
  }
  return out;
}

async function billingLoop(stop: () => boolean): Promise<number> {
  for (let s = 0; s < keys.streamShards; s++) await consumer.xgroup('CREATE', keys.usageStream(s), 'billing', '0', 'MKSTREAM').catch(() => undefined);
  let billed = 0;
  while (!stop()) {
    const batches = await Promise.all(Array.from({ length: keys.streamShards }, async (_, s) => {
      const stream = keys.usageStream(s);
      const res = (await consumer.xreadgroup('GROUP', 'billing', 'bench', 'COUNT', 1000, 'STREAMS', stream, '>')) as [string, [string, string[]][]][] | null;
      const ids = res?.[0]?.[1].map((e) => e[0]) ?? [];
      if (ids.length) await consumer.multi().xack(stream, 'billing', ...ids).xdel(stream, ...ids).exec();
      return ids.length;
    }));
    const n = batches.reduce((a, b) => a + b, 0);
    billed += n;
    // The worker's pace between batches (BILLING_MIN_BATCH_INTERVAL_MS defaults to 200): batches of
    // many entries, as in production, rather than a read per entry.
    await new Promise((r) => setTimeout(r, 200));
  }
  return billed;
}

async function main(): Promise<void> {
  for (let u = 1; u <= accounts; u++) await quota.seedAccount(u);
  const shardMaster = await masterOfShard();
  const perMaster = new Map<string, number>();
  const list = masters();
  // Background CPU (cron, cluster bus, replication pings) at rest, subtracted from the load's: what
  // remains is the work of the requests.
  const IDLE_MS = 3000;
  const idleFrom = await Promise.all(list.map((m) => cpuSeconds(m.node)));
  await new Promise((r) => setTimeout(r, IDLE_MS));
  const idleTo = await Promise.all(list.map((m) => cpuSeconds(m.node)));
  const idlePerSec = idleTo.map((c, i) => (c - idleFrom[i]!) / (IDLE_MS / 1000));
  const cpuBefore = await Promise.all(list.map((m) => cpuSeconds(m.node)));
  let stopped = false;
  const billing = billingLoop(() => stopped);
  const t0 = Date.now();
  let n = 0;
  await Promise.all(Array.from({ length: concurrency }, async (_, w) => {
    for (let i = w; Date.now() - t0 < durationMs; i += concurrency) {
      const userId = 1 + (i % accounts);
      const requestId = `r${w}-${i}`;
      const outcome = await quota.reserve({ userId, tokenId: userId, tokenLimited: false, requestId, amount: 1000, deadlineMs: Date.now() + 900_000 });
      if (outcome !== 'reserved') throw new Error(`reserve: ${outcome}`);
      await quota.settle({ userId, tokenId: userId, requestId, cost: 600, eventJson, tokens: 314 });
      const master = shardMaster.get(keys.shardOf(userId))!;
      perMaster.set(master, (perMaster.get(master) ?? 0) + 1);
      n++;
    }
  }));
  const elapsed = (Date.now() - t0) / 1000;
  // Billing catches up on what the load appended, then the CPU is read: every request's Redis work done.
  for (let left = 1; left > 0;) {
    left = 0;
    for (let s = 0; s < keys.streamShards; s++) left += await redis.xlen(keys.usageStream(s));
    if (left) await new Promise((r) => setTimeout(r, 50));
  }
  stopped = true;
  const billed = await billing;
  const cpuAfter = await Promise.all(list.map((m) => cpuSeconds(m.node)));
  const measuredSec = (Date.now() - t0) / 1000;
  const rows = list.map((m, i) => {
    const total = cpuAfter[i]! - cpuBefore[i]!;
    const cpu = Math.max(0, total - idlePerSec[i]! * measuredSec);
    const requests = perMaster.get(m.name) ?? 0;
    return {
      master: m.name, requests, cpuSeconds: +total.toFixed(3), idleCpuPerSec: +idlePerSec[i]!.toFixed(4),
      cpuMicrosPerRequest: requests ? +(cpu * 1e6 / requests).toFixed(1) : null, cpuBusy: +(total / measuredSec).toFixed(3),
    };
  });
  const report = {
    mode: cluster ? 'cluster' : 'single', nodes: nodes ?? config.REDIS_URL, shards, accounts, concurrency,
    durationSec: +elapsed.toFixed(2), requests: n, billed, requestsPerSec: Math.round(n / elapsed), masters: rows,
  };
  const out = args.out ?? join(projectRoot(), 'bench/results/redis-shards', cluster ? 'cluster' : 'single');
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'report.json'), JSON.stringify(report, null, 2) + '\n');
  const md = [
    `# Redis work per request: ${report.mode} (${report.nodes}, ${shards} shards)`, '',
    `${n} requests (reserve + settle + billing read/ack) in ${report.durationSec} s: **${report.requestsPerSec} req/s** from one client process, ${concurrency} in flight, ${accounts} accounts.`, '',
    'Redis CPU is INFO cpu (user + sys) over the load and until billing caught up, less the rate measured at rest for 3 s before.', '',
    '| master | requests | Redis CPU s | at rest, CPU s/s | CPU µs / request | CPU busy |', '|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.master} | ${r.requests} | ${r.cpuSeconds} | ${r.idleCpuPerSec} | ${r.cpuMicrosPerRequest ?? '-'} | ${(r.cpuBusy * 100).toFixed(0)} % |`), '',
  ].join('\n');
  writeFileSync(join(out, 'report.md'), md);
  process.stdout.write(md + '\n');
}

try {
  await main();
} finally {
  await deleteKeysWithPrefix(redis, prefix).catch(() => undefined);
  redis.disconnect();
  consumer.disconnect();
  if (started !== null) execFileSync('bash', [script, 'stop', String(started), clusterDir], { stdio: 'inherit' });
  if (singleProc !== null) {
    singleProc.kill('SIGTERM');
    await new Promise((r) => singleProc!.once('exit', r));
  }
  if (clusterDir) rmSync(clusterDir, { recursive: true, force: true });
}
