// A redis-server of a test's own (ports 6400-6409 belong to the chaos tests), which the test can kill
// with SIGKILL, pause with SIGSTOP, resume and start again on the same port and directory: with
// `aof` the data survives a restart as it would in production, without it a restart comes back empty
// (the machine's shared Redis on 6379 runs that way, but must never be killed).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RedisServerOptions {
  port: number;
  /** appendonly yes, appendfsync everysec (the project's own Redis); false: no persistence at all. */
  aof: boolean;
  /** The data directory (another server's, to start on its data: a restore); a new one by default. */
  dir?: string;
}

export interface OwnRedisServer {
  readonly port: number;
  readonly url: string;
  /** Its data directory. */
  readonly dir: string;
  readonly pid: number | undefined;
  readonly running: boolean;
  /** SIGKILL, waits for the exit. */
  kill(): Promise<void>;
  /** Starts redis-server again on the same port and directory; resolves once it answers PING. */
  start(): Promise<void>;
  pause(): void;
  resume(): void;
  /** Kills it (if running) and removes its directory. */
  close(): Promise<void>;
}

/** Whether something answers PING with PONG on the port within `timeoutMs`. */
export function pingRedis(port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (d) => done(d.toString().startsWith('+PONG')));
    socket.once('error', () => done(false));
  });
}

export async function startRedisServer(opts: RedisServerOptions): Promise<OwnRedisServer> {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), `chaos-redis-${opts.port}-`));
  const args = ['--port', String(opts.port), '--bind', '127.0.0.1', '--save', '', '--dir', dir, '--daemonize', 'no',
    ...(opts.aof ? ['--appendonly', 'yes', '--appendfsync', 'everysec'] : ['--appendonly', 'no'])];
  let proc: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();

  async function start(): Promise<void> {
    if (await pingRedis(opts.port)) throw new Error(`port ${opts.port} already has a Redis: not ours to use`);
    const p = spawn('redis-server', args, { stdio: 'ignore' });
    proc = p;
    // A test process that dies (a hook timed out) must not leave its Redis holding the port.
    const onExit = () => p.kill('SIGKILL');
    process.once('exit', onExit);
    p.once('exit', () => process.removeListener('exit', onExit));
    exited = new Promise((resolve) => p.once('exit', () => resolve()));
    const deadline = Date.now() + 10_000;
    while (!(await pingRedis(opts.port))) {
      if (p.exitCode !== null) throw new Error(`redis-server on ${opts.port} exited with ${p.exitCode}`);
      if (Date.now() > deadline) throw new Error(`redis-server on ${opts.port} did not start`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  async function kill(): Promise<void> {
    const p = proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    p.kill('SIGCONT'); // a paused process must be able to die
    p.kill('SIGKILL');
    await exited;
    proc = null;
  }

  await start();
  return {
    port: opts.port,
    url: `redis://127.0.0.1:${opts.port}`,
    dir,
    get pid() {
      return proc?.pid;
    },
    get running() {
      return proc !== null && proc.exitCode === null && proc.signalCode === null;
    },
    kill,
    start,
    pause: () => void proc?.kill('SIGSTOP'),
    resume: () => void proc?.kill('SIGCONT'),
    async close() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
