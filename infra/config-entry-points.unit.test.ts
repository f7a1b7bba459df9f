// Every entry point refuses a bad configuration the same way: one line per variable on stderr, the
// value shown unless secret, exit 78 (CONFIG_ERROR_EXIT_CODE: the local supervisor does not start it
// again), no stack. Runs the built files (`npx tsc -p tsconfig.json`); each
// exits before connecting to anything, so no service is needed.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONFIG_ERROR_EXIT_CODE, loadConfig } from './config.js';
import { projectRoot } from './project-root.js';

const ENTRY_POINTS: [file: string, processName: string][] = [
  ['dist/relay/main.js', 'relay'],
  ['dist/billing/main.js', 'billing'],
  ['dist/console-api/main.js', 'console-api'],
  ['dist/infra/migrate-main.js', 'migrate'],
  ['dist/infra/clickhouse/migrate-main.js', 'clickhouse-migrate'],
  ['dist/infra/clickhouse/local-server-main.js', 'clickhouse-local'],
  ['dist/console-api/seed/seed-main.js', 'seed'],
  ['dist/console-api/seed/print-demo-key.js', 'print-demo-key'],
  ['dist/billing/replay-dead-letters.js', 'replay-dead-letters'],
  ['dist/bench/mock-upstream/main.js', 'mock-upstream'],
  ['dist/bench/mock-upstream-openai/main.js', 'mock-openai'],
  // The check `make infra` runs before it starts anything (infra/scripts/ensure-services.sh).
  ['dist/infra/launch/check-config-main.js', 'config'],
];

/** The environment without any configuration variable of the caller's, so that only the test's count. */
function baseEnv(): Record<string, string | undefined> {
  const names = new Set([...Object.keys(loadConfig({})), 'REDIS_CLUSTER_NODES', 'REDIS_SHARDS', 'REDIS_SETTLE_WAIT_REPLICAS', 'ROOT_PASSWORD', 'ROOT_PASSWORD_FILE', 'DEMO_PASSWORD', 'ADMIN_PASSWORD']);
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !names.has(name)));
}

function run(file: string, env: Record<string, string | undefined>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [join(projectRoot(), file)], { cwd: projectRoot(), env, timeout: 20_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr });
    });
  });
}

describe('a refused configuration at start-up', () => {
  it('is one line per variable on stderr, its value unless secret, and exit 78, from every entry point', async () => {
    const env = { ...baseEnv(), RELAY_PORT: '0x10', KEY_SECRET: 'short-secret-1', RESERVATION_REAP_INTERVAL_MS: '3000000000', REDIS_URL: 'redis://:hunter2@127.0.0.1:6379/db', RELAY_HOST: '', DATABASE_URL: ' ' };
    const runs = await Promise.all(ENTRY_POINTS.map(([file]) => run(file, env)));
    ENTRY_POINTS.forEach(([file, name], i) => {
      const { code, stdout, stderr } = runs[i]!;
      expect(stderr.split('\n'), `${file}\n${stderr}`).toEqual([
        `${name}: invalid configuration: RELAY_PORT: expected a whole number from 0 to 65535, in decimal digits; got "0x10"`,
        `${name}: invalid configuration: REDIS_URL: the path is the database index, a whole number in decimal digits (expected redis://host:port/db, rediss://host:port/db or redis+cluster://host:port,host:port); value not shown (it may hold a credential)`,
        `${name}: invalid configuration: KEY_SECRET: must be at least 16 characters (make generates 32 random bytes); value not shown (a secret)`,
        `${name}: invalid configuration: RESERVATION_REAP_INTERVAL_MS: expected a whole number of milliseconds from 1 to 2147483647, in decimal digits; got "3000000000"`,
        '',
      ]);
      expect(stdout, file).toBe('');
      expect(code, file).toBe(CONFIG_ERROR_EXIT_CODE);
    });
  });
});
