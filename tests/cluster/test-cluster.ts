// A Redis Cluster of a test file's own (3 masters, 3 replicas on six ports from basePort), started
// and stopped by infra/scripts/redis-cluster.sh in a temporary folder: each file of tests/cluster
// takes its own ports, so they run in parallel.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
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
