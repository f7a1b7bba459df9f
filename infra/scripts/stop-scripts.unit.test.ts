// infra/scripts/stop-all.sh (make down, cluster-down.sh) and clean.sh (make clean), on stand-in
// processes in a scratch checkout: how long each service is given before SIGKILL (a relay its drain,
// read from its own environment), and that `make clean` stops what `make cluster-up` started before
// deleting, keeping the secrets and an unreplayed relay spool. The drain itself, on a real relay:
// tests/processes/stop-drain.integration.test.ts.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { projectRoot } from '../project-root.js';

const run = promisify(execFile);
let dir = '';
const procs: ChildProcess[] = [];
afterEach(() => {
  for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  procs.length = 0;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = '';
});

function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of ['RELAY_SHUTDOWN_GRACE_MS', 'KEY_SECRET', 'DEMO_PASSWORD', 'ADMIN_PASSWORD', 'MAKEFLAGS', 'MAKELEVEL', 'MFLAGS']) delete env[name];
  return { ...env, ...extra };
}

function scratchCheckout(): string {
  const root = mkdtempSync(join(tmpdir(), 'stop-scripts-'));
  cpSync(join(projectRoot(), 'Makefile'), join(root, 'Makefile'));
  cpSync(join(projectRoot(), 'infra/scripts'), join(root, 'infra/scripts'), { recursive: true, filter: (src) => !src.endsWith('.ts') });
  // What make's rules name as prerequisites, so that `make -n run` can plan (nothing is installed).
  for (const f of ['package.json', 'package-lock.json']) writeFileSync(join(root, f), '{}\n');
  mkdirSync(join(root, '.run'));
  return root;
}

/** A stand-in service (it ends on SIGTERM), its PID written to `pidFile` under the checkout. */
function standIn(pidFile: string, env: Record<string, string> = {}): ChildProcess {
  const p = spawn('sleep', ['60'], { env: cleanEnv(env), stdio: 'ignore' });
  procs.push(p);
  mkdirSync(join(dir, pidFile, '..'), { recursive: true });
  writeFileSync(join(dir, pidFile), `${p.pid}\n`);
  return p;
}

const alive = (p: ChildProcess) => p.exitCode === null && p.signalCode === null;
const settle = () => new Promise((r) => setTimeout(r, 100));

describe('stop-all.sh', () => {
  it('gives a relay its drain (RELAY_SHUTDOWN_GRACE_MS as the relay has it, plus its close), a billing worker its shutdown, others 5 s', async () => {
    dir = scratchCheckout();
    const relay = standIn('.run/relay.pid', { RELAY_SHUTDOWN_GRACE_MS: ' 60000 ' });
    const relay2 = standIn('.run/relay-2.pid'); // started without it: the default, 30000
    const relay3 = standIn('.run/relay-3.pid', { RELAY_SHUTDOWN_GRACE_MS: '1e5' });
    const billing = standIn('.run/billing.pid');
    const mock = standIn('.run/mock-upstream.pid');
    // This shell's value does not count where the relay's own environment can be read.
    const { stdout, stderr } = await run('bash', [join(dir, 'infra/scripts/stop-all.sh'), 'relay', 'relay-2', 'relay-3', 'billing', 'mock-upstream'],
      { env: cleanEnv({ RELAY_SHUTDOWN_GRACE_MS: '1000' }) });
    expect(stdout).toContain(`relay (${relay.pid}): stopping; waiting up to 75 s for its drain`);
    expect(stdout).toContain('RELAY_SHUTDOWN_GRACE_MS=60000');
    expect(stdout).toContain(`relay-2 (${relay2.pid}): stopping; waiting up to 45 s for its drain`);
    expect(stdout).toContain(`relay-3 (${relay3.pid}): stopping; waiting up to 45 s`);
    expect(stderr).toContain("RELAY_SHUTDOWN_GRACE_MS='1e5' is not a whole number of milliseconds: waiting as for 30000");
    expect(stdout).toContain(`billing (${billing.pid}): stopping; waiting up to 45 s for its shutdown`);
    expect(stdout).toMatch(new RegExp(`^stopped mock-upstream \\(${mock.pid}\\)$`, 'm'));
    for (const name of ['relay', 'relay-2', 'relay-3', 'billing']) expect(stdout).toMatch(new RegExp(`^stopped ${name} \\(\\d+\\) after \\d+ s$`, 'm'));
    // The relays were signalled together, before the billing worker and the mock provider.
    expect(stdout.indexOf('relay-3 (')).toBeLessThan(stdout.indexOf('stopped relay ('));
    expect(stdout.lastIndexOf('stopped relay')).toBeLessThan(stdout.indexOf('billing ('));
    await settle();
    for (const p of [relay, relay2, relay3, billing, mock]) expect(alive(p)).toBe(false);
    expect(existsSync(join(dir, '.run/relay.pid'))).toBe(false);
  });

  it('make down names what only make cluster-down stops', async () => {
    dir = scratchCheckout();
    const relay = standIn('.run/relay.pid');
    const relay2 = standIn('.run/relay-2.pid');
    const { stderr } = await run('make', ['-s', 'down'], { cwd: dir, env: cleanEnv() });
    expect(stderr).toContain('still running, started by make cluster-up: relay-2; make cluster-down stops them');
    await settle();
    expect(alive(relay)).toBe(false);
    expect(alive(relay2)).toBe(true);
  });
});

describe('make clean', () => {
  it('stops what make cluster-up started before deleting, and keeps the secrets and an unreplayed spool', async () => {
    dir = scratchCheckout();
    const services = ['relay', 'relay-2', 'billing', 'billing-2', 'console-api'].map((name) => standIn(`.run/${name}.pid`));
    const nodes = [7000, 7003].map((port) => standIn(`.data/redis-cluster/${port}/redis.pid`));
    const secrets = { 'key-secret': 'kept-key-secret-0123456789abcdef', 'demo-password': 'demo-pw-1234', 'admin-password': 'admin-pw-1234', 'root-password': 'root-pw-1234' };
    for (const [name, value] of Object.entries(secrets)) writeFileSync(join(dir, '.data', name), `${value}\n`, { mode: 0o600 });
    mkdirSync(join(dir, '.data/clickhouse'));
    writeFileSync(join(dir, '.data/clickhouse/part'), 'x');
    mkdirSync(join(dir, '.data/relay-spool/gw'), { recursive: true });
    writeFileSync(join(dir, '.data/relay-spool/gw/relay-12345-abcd.spool'), 'S\t{}\t{}\n');
    mkdirSync(join(dir, 'dist'));

    const { stdout, stderr } = await run('make', ['-s', 'clean'], { cwd: dir, env: cleanEnv() });
    await settle();
    for (const p of [...services, ...nodes]) expect(alive(p)).toBe(false);
    expect(stdout).toContain('redis cluster stopped (nodes 7000 7003)');
    for (const gone of ['dist', '.run', '.data/clickhouse']) expect(existsSync(join(dir, gone)), gone).toBe(false);
    for (const [name, value] of Object.entries(secrets)) expect(readFileSync(join(dir, '.data', name), 'utf8'), name).toBe(`${value}\n`);
    expect(stdout).toMatch(/kept \.data\/key-secret .*open only with them/);
    expect(existsSync(join(dir, '.data/relay-spool/gw/relay-12345-abcd.spool'))).toBe(true);
    expect(stderr).toContain('kept .data/relay-spool: 1 spool file(s)');
    // With the spool, the cluster's data its settlements settle against (the nodes stopped, their PID files gone).
    expect(existsSync(join(dir, '.data/redis-cluster/7000'))).toBe(true);
    expect(existsSync(join(dir, '.data/redis-cluster/7000/redis.pid'))).toBe(false);
    expect(stderr).toContain('kept .data/redis-cluster as well');
  });

  it('with a spool kept, keeps the Redis data of .data/redis it settles against; without one, deletes it', async () => {
    // Before, .data/redis went and the next relay's replay found no reservation: the spooled request
    // was counted "replayed" and never billed (review operator, finding 1).
    dir = scratchCheckout();
    mkdirSync(join(dir, '.data/redis'), { recursive: true });
    writeFileSync(join(dir, '.data/redis/appendonly.aof'), '*1\r\n$4\r\nPING\r\n');
    mkdirSync(join(dir, '.data/relay-spool/gw'), { recursive: true });
    writeFileSync(join(dir, '.data/relay-spool/gw/relay-999-abcd.claimed'), 'S\t{}\t{}\n');
    const kept = await run('make', ['-s', 'clean'], { cwd: dir, env: cleanEnv() });
    expect(readFileSync(join(dir, '.data/redis/appendonly.aof'), 'utf8')).toBe('*1\r\n$4\r\nPING\r\n');
    expect(kept.stderr).toContain('kept .data/relay-spool: 1 spool file(s)');
    // Only .data/redis: there is no .data/redis-cluster here.
    expect(kept.stderr).toMatch(/^kept \.data\/redis as well: the Redis data the spooled settlements settle against/m);

    // The spool replayed: the next clean deletes both, an empty file left behind and a test stack's
    // files (a test-* prefix: review run, 13 kept for good with the message that a relay would replay them) included.
    rmSync(join(dir, '.data/relay-spool/gw/relay-999-abcd.claimed'));
    writeFileSync(join(dir, '.data/relay-spool/gw/relay-998-abcd.spool'), '');
    mkdirSync(join(dir, '.data/relay-spool/test-0a1b2c3d'), { recursive: true });
    writeFileSync(join(dir, '.data/relay-spool/test-0a1b2c3d/relay-997-abcd.spool'), 'S\t{}\t{}\n');
    const deleted = await run('make', ['-s', 'clean'], { cwd: dir, env: cleanEnv() });
    for (const gone of ['.data/redis', '.data/relay-spool']) expect(existsSync(join(dir, gone)), gone).toBe(false);
    expect(deleted.stderr).not.toContain('kept');
  });

  it('deletes an empty relay spool, and deletes nothing it did not stop', async () => {
    dir = scratchCheckout();
    mkdirSync(join(dir, '.data/relay-spool/gw'), { recursive: true });
    await run('make', ['-s', 'clean'], { cwd: dir, env: cleanEnv() });
    expect(existsSync(join(dir, '.data/relay-spool'))).toBe(false);

    // A Postgres of .data/postgres running under no PID file of .run/: its data stays.
    mkdirSync(join(dir, '.data/postgres'), { recursive: true });
    const postgres = standIn('.data/postgres/postmaster.pid');
    await expect(run('make', ['-s', 'clean'], { cwd: dir, env: cleanEnv() })).rejects.toThrow(/still running, so nothing was deleted/);
    expect(alive(postgres)).toBe(true);
    expect(existsSync(join(dir, '.data/postgres/postmaster.pid'))).toBe(true);
  });
});
