// infra/scripts/ensure-services.sh (`make infra`, under `make run`) in a scratch checkout: a refused
// configuration stops it before it starts anything, in the lines every entry point prints and exit 78;
// a DATABASE_URL or REDIS_URL it cannot read is one line naming the variable. Before (review operator,
// findings 4 and 5), RELAY_PORT=abc was reported after ~20 s as "clickhouse: local server did not
// start" (the embedded ClickHouse failing on it 6 times), and a malformed URL as Node's TypeError stack.
// Runs the built check (`npx tsc -p tsconfig.json`).
import { execFile, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { projectRoot } from '../project-root.js';

let dir = '';
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = '';
});

function scratchCheckout(withDist: boolean): string {
  const root = mkdtempSync(join(tmpdir(), 'ensure-services-'));
  cpSync(join(projectRoot(), 'infra/scripts'), join(root, 'infra/scripts'), { recursive: true, filter: (src) => !src.endsWith('.ts') });
  if (withDist) symlinkSync(join(projectRoot(), 'dist'), join(root, 'dist'));
  return root;
}

function ensureServices(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    // Every service skipped: nothing here may start one, whatever answers on this machine.
    execFile('bash', [join(dir, 'infra/scripts/ensure-services.sh')], { env: { ...process.env, SKIP_SERVICES: 'postgres redis clickhouse', ...env }, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr, ms: Date.now() - started });
    });
  });
}

describe('ensure-services.sh', () => {
  it('checks the configuration before starting anything: the refused variables, exit 78', async () => {
    dir = scratchCheckout(true);
    const r = await ensureServices({ RELAY_PORT: 'abc', CLICKHOUSE_URL: 'http://127.0.0.1:1' });
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toBe(
      'config: invalid configuration: RELAY_PORT: expected a whole number from 0 to 65535, in decimal digits; got "abc"\n' +
      'nothing was started: fix the variable(s) above (README.md, Configuration)\n');
    expect(r.stdout).toBe('');
    expect(existsSync(join(dir, '.run/clickhouse.pid'))).toBe(false);
    expect(r.ms).toBeLessThan(10_000);
  });

  // Before (review operator, 2026-11-30 seventh session): an embedded ClickHouse started with another
  // CLICKHOUSE_URL made a second start fail with chdb's stack, overwrite .run/clickhouse.pid, and leave
  // the first server out of make down's and make clean's reach (clean deleted its data under it).
  it('refuses to start a second embedded ClickHouse while the one this checkout started runs elsewhere, naming it; its pid file kept', async () => {
    dir = scratchCheckout(true);
    mkdirSync(join(dir, '.run'));
    const other = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    try {
      writeFileSync(join(dir, '.run/clickhouse.pid'), `${other.pid}\n`);
      const r = await ensureServices({ SKIP_SERVICES: 'postgres redis', CLICKHOUSE_URL: 'http://127.0.0.1:1' });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`clickhouse: the embedded server this checkout started (pid ${other.pid}) runs, but does not answer at http://127.0.0.1:1`);
      expect(readFileSync(join(dir, '.run/clickhouse.pid'), 'utf8').trim()).toBe(String(other.pid));
    } finally {
      other.kill('SIGKILL');
    }
  });

  it('passes an accepted configuration (the demo passwords make generates later count as given)', async () => {
    dir = scratchCheckout(true);
    const env: Record<string, string> = { SEED_DEMO: 'true', DEMO_PASSWORD: '', ADMIN_PASSWORD: '' };
    const r = await ensureServices(env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
  });

  it('a DATABASE_URL or REDIS_URL that is not a URL: one line naming it, without the value, exit 78', async () => {
    dir = scratchCheckout(false); // the URL helper itself, as when the configuration check is absent
    for (const [name, value] of [['DATABASE_URL', 'postgres//u:secret-pw@bad'], ['REDIS_URL', 'nope-secret-pw']] as const) {
      const r = await ensureServices({ [name]: value });
      expect(r.code, r.stderr).toBe(78);
      expect(r.stderr).toMatch(new RegExp(`^ensure-services: ${name}: not a URL with a host \\(expected [^)]*\\); value not shown \\(it may hold a credential\\)\\n$`));
      expect(r.stderr).not.toContain('secret-pw');
    }
  });
});
