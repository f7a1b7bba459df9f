// A Redis Cluster of a test file's own (3 masters, 3 replicas on six ports from basePort), started
// and stopped by infra/scripts/redis-cluster.sh in a temporary folder: each file of tests/cluster
// takes its own ports, so they run in parallel.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { projectRoot } from '../../infra/project-root.js';

/** make test sets TEST_REDIS_CLUSTER=start; without it the cluster tests skip themselves. */
export const CLUSTER_TESTS_ENABLED = process.env.TEST_REDIS_CLUSTER === 'start';

/** The hash slot of a key, as the cluster computes it (ioredis' own dependency). */
export const keySlot = createRequire(import.meta.url)('cluster-key-slot') as (key: string) => number;

/** `f` with a plain connection to one node (not the cluster client): what that node itself answers. */
export async function withNode<T>(port: number, f: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, lazyConnect: true });
  try {
    await r.connect();
    return await f(r);
  } finally {
    r.disconnect();
  }
}

/** The port of the master serving `key`'s slot now, as the cluster client `redis` is told (CLUSTER SLOTS). */
export async function masterPortOf(redis: Redis, key: string): Promise<number> {
  const slot = keySlot(key);
  const ranges = (await redis.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, ...unknown[]], ...unknown[]][];
  const range = ranges.find(([from, to]) => slot >= from && slot <= to);
  if (!range) throw new Error(`no master serves slot ${slot}`);
  return Number(range[2][1]);
}

export class TestCluster {
  /** The nodes as REDIS_CLUSTER_NODES takes them. */
  readonly nodes: string;
  #dir = '';

  constructor(readonly basePort: number, readonly label: string) {
    this.nodes = Array.from({ length: 6 }, (_, i) => `127.0.0.1:${basePort + i}`).join(',');
  }

  /** Starts the cluster; called again, restarts the nodes that are missing (the script's start). */
  start(): void {
    if (!this.#dir) this.#dir = mkdtempSync(join(tmpdir(), `redis-cluster-${this.label}-`));
    this.#script('start');
  }

  /** Stops every node and removes the folder; nothing when it was never started. */
  stop(): void {
    if (!this.#dir) return;
    this.#script('stop');
    rmSync(this.#dir, { recursive: true, force: true });
    this.#dir = '';
  }

  /** The pid of the node on `port`, for the tests that pause or kill one. */
  pidOf(port: number): number {
    return Number(readFileSync(join(this.#dir, String(port), 'redis.pid'), 'utf8'));
  }

  #script(cmd: 'start' | 'stop'): void {
    execFileSync('bash', [join(projectRoot(), 'infra/scripts/redis-cluster.sh'), cmd, String(this.basePort), this.#dir], { stdio: 'pipe', timeout: 60_000 });
  }
}

/**
 * A Redis Cluster of 3 masters and no replicas, without persistence (ports basePort..basePort+2, in a
 * temporary folder): a master killed and started again comes back with its slots (its nodes.conf is
 * kept) and none of its data, as a node of a cluster run without replicas or AOF does.
 */
export class MastersOnlyCluster {
  readonly ports: number[];
  readonly nodes: string;
  #dir = '';

  constructor(readonly basePort: number, readonly label: string) {
    this.ports = [basePort, basePort + 1, basePort + 2];
    this.nodes = this.ports.map((p) => `127.0.0.1:${p}`).join(',');
  }

  async start(): Promise<void> {
    this.#dir = mkdtempSync(join(tmpdir(), `redis-cluster-${this.label}-`));
    for (const p of this.ports) this.startNode(p);
    execFileSync('redis-cli', ['--cluster', 'create', ...this.ports.map((p) => `127.0.0.1:${p}`), '--cluster-yes'], { stdio: 'pipe', timeout: 30_000 });
    await this.waitOk();
  }

  /** Starts the node on `port` (again: with its nodes.conf, no data). */
  startNode(port: number): void {
    const dir = join(this.#dir, String(port));
    mkdirSync(dir, { recursive: true });
    execFileSync('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--daemonize', 'yes', '--dir', dir,
      '--pidfile', join(dir, 'redis.pid'), '--logfile', join(dir, 'redis.log'), '--cluster-enabled', 'yes',
      '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000', '--appendonly', 'no', '--save', ''], { stdio: 'pipe' });
    waitUntil(() => answers(port), `redis node ${port} did not start`);
  }

  /** SIGKILLs the node on `port` and waits until it no longer answers. */
  killNode(port: number): void {
    const pidFile = join(this.#dir, String(port), 'redis.pid');
    if (!existsSync(pidFile)) return;
    try {
      process.kill(Number(readFileSync(pidFile, 'utf8')), 'SIGKILL');
    } catch { /* gone already */ }
    waitUntil(() => !answers(port), `redis node ${port} still answers`);
    rmSync(pidFile, { force: true });
  }

  /** Until every node reports cluster_state:ok. */
  async waitOk(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (const p of this.ports) {
      while (!clusterOk(p)) {
        if (Date.now() > deadline) throw new Error(`redis node ${p}: cluster not ok`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  stop(): void {
    if (!this.#dir) return;
    for (const p of this.ports) this.killNode(p);
    rmSync(this.#dir, { recursive: true, force: true });
    this.#dir = '';
  }
}

function answers(port: number): boolean {
  try {
    execFileSync('redis-cli', ['-p', String(port), 'ping'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}

function clusterOk(port: number): boolean {
  try {
    return /cluster_state:ok/.test(execFileSync('redis-cli', ['-p', String(port), 'cluster', 'info'], { stdio: 'pipe' }).toString());
  } catch {
    return false;
  }
}

function waitUntil(done: () => boolean, failure: string): void {
  for (let i = 0; i < 100; i++) {
    if (done()) return;
    execFileSync('sleep', ['0.05']);
  }
  throw new Error(failure);
}
