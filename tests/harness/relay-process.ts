// A relay as deployed (node dist/relay/main.js, or under its supervisor as `make run` starts it), in a
// process of its own on a test stack's database, Redis prefix and key secret: for the tests of what a
// signal, a stop script or an exit does to it. make build first.
import { spawn, type ChildProcess } from 'node:child_process';
import type { Config } from '../../infra/config.js';

export interface RelayProcess {
  proc: ChildProcess;
  url: string;
  output(): string;
  exited: Promise<number | null>;
}

/** The environment of a relay process on the stack of `c`, listening on a free port; `extra` on top. */
export function relayProcessEnv(c: Config, extra: Record<string, string>): Record<string, string> {
  return {
    ...process.env as Record<string, string>,
    NODE_ENV: 'test', LOG_LEVEL: 'info',
    DATABASE_URL: c.DATABASE_URL, REDIS_URL: c.REDIS_URL, REDIS_PREFIX: c.REDIS_PREFIX, KEY_SECRET: c.KEY_SECRET,
    CLICKHOUSE_URL: c.CLICKHOUSE_URL, CLICKHOUSE_DATABASE: c.CLICKHOUSE_DATABASE,
    RELAY_HOST: '127.0.0.1', RELAY_PORT: '0', RELAY_METRICS_PORT: 'off',
    // The stack's Redis Cluster, when the relay set runs on one (tests/harness/gateway-stack.ts).
    ...(c.REDIS_CLUSTER_NODES ? { REDIS_CLUSTER_NODES: c.REDIS_CLUSTER_NODES, REDIS_SHARDS: String(c.REDIS_SHARDS ?? '') } : {}),
    ...extra,
  };
}

/** Runs `args` (node and its arguments) and waits for the relay's "listening" line: its URL, or the output it died with. */
export async function spawnRelayProcess(args: string[], env: Record<string, string>, cwd?: string): Promise<RelayProcess> {
  const proc = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'], ...(cwd !== undefined ? { cwd } : {}) });
  let output = '';
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the relay did not start:\n${output}`)), 10_000);
    proc.stdout!.on('data', (d: Buffer) => {
      output += d.toString();
      const m = /"port":(\d+)[^\n]*relay listening|relay listening[^\n]*"port":(\d+)/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1] ?? m[2]));
      }
    });
    proc.stderr!.on('data', (d: Buffer) => { output += d.toString(); });
    void exited.then((code) => reject(new Error(`the relay exited (${code}) before listening:\n${output}`)));
  });
  return { proc, url: `http://127.0.0.1:${port}`, output: () => output, exited };
}

/**
 * Runs a test's `body` on a relay process: a failure carries the end of the relay's output, and the
 * process is killed afterwards if it is still up (a test that failed before its signal).
 */
export async function withRelayProcess<T>(relay: RelayProcess, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (err) {
    throw new Error(`${(err as Error).message}\nrelay output:\n${relay.output().slice(-3000)}`);
  } finally {
    if (relay.proc.exitCode === null) relay.proc.kill('SIGKILL');
  }
}
