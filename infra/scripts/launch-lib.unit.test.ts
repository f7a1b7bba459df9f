// infra/scripts/launch-lib.sh (the start of `make run` and `make cluster-up`), on stand-in services
// under the real supervisor (dist/infra/launch/supervise-main.js) in a scratch checkout: a port
// another process holds stops the start, naming the port, its variable and the process; a service left
// down on its configuration fails the wait at once; one that exited after it started fails the check;
// and a failed start stops what it had started. Before (review operator, findings 2-4), `make run`
// printed "The gateway is up." with a foreign process on the relay's port, waited 10 s for a service
// its supervisor had left down, and left every supervisor it had started running after a failure.
// Runs the built supervisor (`npx tsc -p tsconfig.json`).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { projectRoot } from '../project-root.js';

let dir = '';
const procs: ChildProcess[] = [];

afterEach(() => {
  for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  procs.length = 0;
  if (!dir) return;
  // Whatever a failed assertion left running: the supervisors of .run/ (SIGTERM reaches their child).
  const run = join(dir, '.run');
  if (existsSync(run)) {
    for (const f of readdirSync(run).filter((n) => n.endsWith('.pid'))) {
      const pid = Number(readFileSync(join(run, f), 'utf8').trim());
      if (pid > 0) try { process.kill(pid, 'SIGTERM'); } catch { /* gone */ }
    }
  }
  rmSync(dir, { recursive: true, force: true });
  dir = '';
});

function scratchCheckout(): string {
  const root = mkdtempSync(join(tmpdir(), 'launch-lib-'));
  cpSync(join(projectRoot(), 'infra/scripts'), join(root, 'infra/scripts'), { recursive: true, filter: (src) => !src.endsWith('.ts') });
  symlinkSync(join(projectRoot(), 'dist'), join(root, 'dist'));
  mkdirSync(join(root, '.run'));
  return root;
}

/** A stand-in service's script: `body` runs at start; SIGTERM ends it. */
function service(name: string, body: string): string {
  const path = join(dir, `${name}.cjs`);
  writeFileSync(path, `process.on('SIGTERM', () => process.exit(0));\n${body}\n`);
  return path;
}
const STAYS_UP = 'setInterval(() => {}, 1000);';

/** bash with launch-lib.sh sourced, as start-stack.sh has it (set -euo pipefail), running `steps`. */
function launch(steps: string, env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string; ms: number }> {
  const started = Date.now();
  const script = `set -euo pipefail\ncd ${JSON.stringify(dir)}\nsource infra/scripts/launch-lib.sh\n${steps}\necho "start finished"\n`;
  return new Promise((resolve) => {
    execFile('bash', ['-c', script], { env: { ...process.env, ...env }, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr, ms: Date.now() - started });
    });
  });
}

function pidOf(name: string): number {
  return Number(readFileSync(join(dir, '.run', `${name}.pid`), 'utf8').trim());
}
function alive(pid: number): boolean {
  try { process.kill(pid, 0); return true; } catch { return false; }
}
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('launch-lib.sh', () => {
  it('refuses a port another process holds, naming the port, its variable and the process, and stops what it had started', async () => {
    dir = scratchCheckout();
    const port = await freePort();
    const holder = spawn(process.execPath, ['-e', `require('node:http').createServer((q, r) => r.end('{"status":"ok"}')).listen(${port}, '127.0.0.1', () => console.log('up'))`], { stdio: ['ignore', 'pipe', 'inherit'] });
    procs.push(holder);
    await new Promise((resolve) => holder.stdout!.once('data', resolve));
    const keeper = service('keeper', STAYS_UP);
    const relay = service('relay', STAYS_UP);

    const r = await launch(`start keeper ${keeper}\nPORTS="RELAY_PORT=127.0.0.1:${port} RELAY_METRICS_PORT=127.0.0.1:0" start relay ${relay}`);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).not.toContain('start finished');
    expect(r.stderr).toContain(`relay: not started: port ${port} (RELAY_PORT, on 127.0.0.1) is already in use by node (pid ${holder.pid}); stop that process or set RELAY_PORT to a free port`);
    expect(r.stderr).toContain('stopping what this start started: keeper');
    expect(existsSync(join(dir, '.run/relay.pid'))).toBe(false);
    expect(existsSync(join(dir, '.run/keeper.pid'))).toBe(false);
    expect(readFileSync(join(dir, '.run/keeper.log'), 'utf8')).not.toContain('starting it again');
  });

  // Before (review operator, 2026-11-30 seventh session): the ports were checked only once the
  // migration and the seed had run, and the seed of a second checkout re-sealed the shared database's
  // channel credentials and replaced the demo key under its own KEY_SECRET: the first checkout's
  // running stack answered 401 to the key it had printed. `make run` now checks first (run-ports).
  it('check-stack-ports.sh: a port of the stack held by another process fails before anything is written, naming it', async () => {
    dir = scratchCheckout();
    const port = await freePort();
    const holder = spawn(process.execPath, ['-e', `require('node:net').createServer().listen(${port}, '127.0.0.1', () => console.log('up'))`], { stdio: ['ignore', 'pipe', 'inherit'] });
    procs.push(holder);
    await new Promise((resolve) => holder.stdout!.once('data', resolve));
    // Every other port 0 (not checked), the mock provider's the one held.
    const zero = Object.fromEntries(['RELAY_PORT', 'RELAY_METRICS_PORT', 'CONSOLE_PORT', 'MOCK_OPENAI_PORT', 'BILLING_METRICS_PORT', 'EPAY_SANDBOX_PORT', 'CARDPAY_SANDBOX_PORT'].map((v) => [v, '0']));
    const run = (env: Record<string, string>) => new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile('bash', [join(dir, 'infra/scripts/check-stack-ports.sh')], { env: { ...process.env, ...zero, ...env }, timeout: 30_000 }, (err, _stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stderr });
      });
    });
    const held = await run({ MOCK_UPSTREAM_PORT: String(port) });
    expect(held.code, held.stderr).toBe(1);
    expect(held.stderr).toContain(`mock-upstream: not started: port ${port} (MOCK_UPSTREAM_PORT, on 127.0.0.1) is already in use by node (pid ${holder.pid})`);
    const free = await run({ MOCK_UPSTREAM_PORT: String(await freePort()) });
    expect(free.code, free.stderr).toBe(0);
  });

  it('fails the wait at once when the supervisor left the service down on its configuration (exit 78), and stops the rest', async () => {
    dir = scratchCheckout();
    const keeper = service('keeper', STAYS_UP);
    const bad = service('bad', `process.stderr.write('bad: invalid configuration: RELAY_PORT: expected a whole number\\n'); process.exit(78);`);
    const port = await freePort();
    const r = await launch(`start keeper ${keeper}\nstart bad ${bad}\nwait_http bad http://127.0.0.1:${port}/health`);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`bad did not come up at http://127.0.0.1:${port}/health; last lines of .run/bad.log:`);
    expect(r.stderr).toContain('bad: invalid configuration: RELAY_PORT: expected a whole number');
    expect(r.stderr).toContain('supervise: bad exited on its configuration (code 78); not restarted');
    expect(r.stderr).toContain('stopping what this start started: bad keeper');
    // Not the 10 s of a service that never answers (nor the supervisor's 5 restarts).
    expect(r.ms).toBeLessThan(8_000);
    expect(existsSync(join(dir, '.run/keeper.pid'))).toBe(false);
  }, 30_000);

  it('fails the check when a service it started exited after starting (its supervisor starting it again), and stops every one', async () => {
    dir = scratchCheckout();
    const keeper = service('keeper', STAYS_UP);
    const flaky = service('flaky', `setTimeout(() => process.exit(1), 100);`);
    const r = await launch(`start keeper ${keeper}\nstart flaky ${flaky}\ncheck_running keeper flaky`, { CHECK_RUNNING_AFTER_SEC: '1.5' });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/flaky failed: (it exited after starting and was started again|not running: its supervisor is waiting to start it again)/);
    expect(r.stderr).toContain('supervise: flaky exited (code 1); starting it again');
    expect(r.stderr).not.toContain('keeper failed');
    expect(r.stderr).toContain('stopping what this start started: flaky keeper');
    for (const name of ['keeper', 'flaky']) expect(existsSync(join(dir, `.run/${name}.pid`)), name).toBe(false);
  }, 30_000);

  it('starts on free ports and passes the check; a second start finds it running and starts nothing', async () => {
    dir = scratchCheckout();
    const port = await freePort();
    const web = service('web', `require('node:http').createServer((q, r) => r.end('ok')).listen(${port}, '127.0.0.1');`);
    const first = await launch(`PORTS="WEB_PORT=127.0.0.1:${port}" start web ${web}\nwait_http web http://127.0.0.1:${port}/\ncheck_running web`, { CHECK_RUNNING_AFTER_SEC: '0.5' });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain('start finished');
    const pid = pidOf('web');
    expect(alive(pid)).toBe(true);
    // Its own service holds the port now: already running, not a port taken.
    const second = await launch(`PORTS="WEB_PORT=127.0.0.1:${port}" start web ${web}\ncheck_running web`, { CHECK_RUNNING_AFTER_SEC: '0' });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain(`web: already running (pid ${pid})`);
  }, 30_000);
});
