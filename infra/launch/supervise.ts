// A process supervisor for the local stack (`make run`, `make cluster-up`), doing what systemd's
// `Restart=on-failure` or Kubernetes does for a deployment: the relay and the billing worker exit on
// purpose when they cannot go on safely (process-guards.ts: an uncaught exception, e.g. postgres.js's
// TypeError on a connection cut, porsager/postgres #1154), and before this the stack stayed without a
// billing worker, usage piling up in the stream, until someone restarted it by hand.
//
// The child is started again when it exits with a code other than 0 or is killed by a signal nobody
// sent through the supervisor, after a delay that doubles from RESTART_MIN_MS to RESTART_MAX_MS
// while it keeps failing within HEALTHY_AFTER_MS of its start; after GIVE_UP_AFTER failures in a row
// (a port taken, a service that cannot reach what it needs) the supervisor gives up and exits with
// the child's code, as systemd's StartLimitBurst does. A clean exit (0) ends the supervisor too: the
// service chose to stop. So does a refused configuration (exit CONFIG_ERROR_EXIT_CODE, 78, from
// loadConfigOrExit in infra/config.ts), at once and with that code, as systemd's
// RestartPreventExitStatus does: started again it would only fail the same way. SIGTERM and SIGINT are
// passed to the child, whose own graceful shutdown runs; the supervisor exits with it.
import { spawn, type ChildProcess } from 'node:child_process';
import { CONFIG_ERROR_EXIT_CODE } from '../config.js';

export const RESTART_MIN_MS = 500;
export const RESTART_MAX_MS = 30_000;
/** A child that ran this long before failing starts again after RESTART_MIN_MS (its failures are not in a row). */
export const HEALTHY_AFTER_MS = 60_000;
/** Failures in a row after which the child is left down. */
export const GIVE_UP_AFTER = 6;

export interface SuperviseOptions {
  /** Name in the supervisor's lines of the log. */
  name: string;
  /** The command and its arguments (`node <flags> <script>`). */
  command: string;
  args: readonly string[];
  /** Where the supervisor's own lines go (the child's output is inherited). */
  log?: (line: string) => void;
}

export interface Supervisor {
  /** The child running now, if any. */
  readonly child: ChildProcess | null;
  /** Times the child was started again after failing. */
  readonly restarts: number;
  /** Passes the signal to the child; the supervisor ends when the child does. */
  stop(signal?: NodeJS.Signals): void;
  /** Settles with the child's last exit code once the supervisor has ended. */
  readonly ended: Promise<number>;
}

/** The delay before the next start, after `failuresInARow` failures (1 for the first). */
export function restartDelay(failuresInARow: number): number {
  return Math.min(RESTART_MAX_MS, RESTART_MIN_MS * 2 ** Math.max(0, failuresInARow - 1));
}

export function supervise(options: SuperviseOptions): Supervisor {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  let child: ChildProcess | null = null;
  let stopping: NodeJS.Signals | null = null;
  let restarts = 0;
  let failuresInARow = 0;
  let timer: NodeJS.Timeout | null = null;
  let resolveEnded!: (code: number) => void;
  const ended = new Promise<number>((resolve) => { resolveEnded = resolve; });

  const start = (): void => {
    timer = null;
    const startedAt = Date.now();
    const c = spawn(options.command, options.args, { stdio: 'inherit' });
    child = c;
    c.on('error', (err) => log(`supervise: ${options.name} could not be started: ${err.message}`));
    c.on('exit', (code, signal) => {
      child = null;
      if (stopping !== null) return resolveEnded(code ?? 0);
      if (code === 0) {
        log(`supervise: ${options.name} exited cleanly; not restarted`);
        return resolveEnded(0);
      }
      if (code === CONFIG_ERROR_EXIT_CODE) {
        log(`supervise: ${options.name} exited on its configuration (code ${code}); not restarted: fix the variables it names above`);
        return resolveEnded(code);
      }
      failuresInARow = Date.now() - startedAt >= HEALTHY_AFTER_MS ? 1 : failuresInARow + 1;
      if (failuresInARow >= GIVE_UP_AFTER) {
        log(`supervise: ${options.name} exited (${signal ? `signal ${signal}` : `code ${code}`}), ${failuresInARow} failures in a row; left down`);
        return resolveEnded(code ?? 1);
      }
      const delay = restartDelay(failuresInARow);
      log(`supervise: ${options.name} exited (${signal ? `signal ${signal}` : `code ${code}`}); starting it again in ${delay} ms`);
      restarts++;
      timer = setTimeout(start, delay);
    });
  };

  start();
  return {
    get child() { return child; },
    get restarts() { return restarts; },
    stop(signal: NodeJS.Signals = 'SIGTERM') {
      stopping = signal;
      if (timer !== null) {
        clearTimeout(timer);
        timer = null;
        resolveEnded(0);
      } else child?.kill(signal);
    },
    ended,
  };
}
