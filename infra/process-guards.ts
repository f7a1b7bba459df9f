// A process's last resort for what no handler caught, decided rather than left to Node's defaults
// (Node 20 exits on an unhandled rejection). Shared by the relay (relay/process-guards.ts), the billing
// worker and the console-api:
//
//   - unhandledRejection: a promise nobody awaited failed (a library's own, such as postgres.js's
//     per-connection queries, or one of ours). The work it belonged to has failed or been answered on
//     its own; the process state is intact. Log it, count it and keep running: exiting would cut every
//     other request in progress (the relay's streams, a billing batch, the console's requests) for one
//     promise's failure, and a supervisor restarting the process would meet the same fault again.
//   - uncaughtException: a synchronous throw escaped to the event loop, so some state may be half
//     updated. Log it as fatal, stop taking new work, give the work in progress `drainMs` to finish,
//     close, then exit 1 so the supervisor starts a clean process; if closing hangs, exit 1 anyway
//     `closeMs` later. A ConfigError (a setting a server refused) exits 78 instead, not restarted.
import { CONFIG_ERROR_EXIT_CODE, ConfigError } from './config.js';
import type { Logger } from './logger.js';

export const FATAL_DRAIN_MS = 5_000;
/** How long close() may take before the process exits without it. */
export const FATAL_CLOSE_MS = 2_000;

export interface ProcessGuardDeps {
  log: Pick<Logger, 'error' | 'fatal'>;
  /** Counts one unhandled rejection (the process's metric). */
  countUnhandledRejection(): void;
  /** Stops taking new work at once (a listening socket closed, a consumer loop told to stop). */
  stopAccepting(): void;
  /** Releases connections and pools after the drain. */
  close(): Promise<void>;
  exit(code: number): void;
  /** Time the work in progress gets before close(); FATAL_DRAIN_MS by default. */
  drainMs?: number;
  /** Time close() gets before the exit; FATAL_CLOSE_MS by default. */
  closeMs?: number;
  /** The log lines' messages; each process says what "running" and "stopping" mean for it. */
  messages?: { unhandledRejection?: string; uncaughtException?: string };
}

export interface ProcessGuards {
  onUnhandledRejection(reason: unknown): void;
  onUncaughtException(err: Error): void;
  /** Unhandled rejections seen so far. */
  readonly unhandledRejections: number;
}

export function processGuards(deps: ProcessGuardDeps): ProcessGuards {
  let dying = false;
  let unhandledRejections = 0;
  const rejectionMessage = deps.messages?.unhandledRejection ?? 'unhandled promise rejection; still running';
  const fatalMessage = deps.messages?.uncaughtException ?? 'uncaught exception; stopping, exiting after the drain';
  return {
    get unhandledRejections() {
      return unhandledRejections;
    },
    onUnhandledRejection(reason) {
      unhandledRejections++;
      try {
        deps.countUnhandledRejection();
      } catch {
        // A metric that throws must not turn a logged rejection into an uncaught exception.
      }
      deps.log.error({ err: reason, unhandledRejections }, rejectionMessage);
    },
    onUncaughtException(err) {
      // A configuration found wrong only once a server answered (REDIS_URL's database refused,
      // infra/redis/client.ts) exits as loadConfigOrExit does, 78, which the supervisor does not
      // restart: started again it would only fail the same way (it exited 1 and was restarted 6 times).
      const code = err instanceof ConfigError ? CONFIG_ERROR_EXIT_CODE : 1;
      deps.log.fatal({ err }, code === 1 ? fatalMessage : 'invalid configuration; stopping, exiting after the drain');
      if (dying) return;
      dying = true;
      try {
        deps.stopAccepting();
      } catch {
        // The socket may be what failed; exit anyway.
      }
      const drainMs = deps.drainMs ?? FATAL_DRAIN_MS;
      let exited = false;
      const exit = () => {
        if (exited) return;
        exited = true;
        clearTimeout(hardExit);
        deps.exit(code);
      };
      const hardExit = setTimeout(exit, drainMs + (deps.closeMs ?? FATAL_CLOSE_MS));
      hardExit.unref();
      setTimeout(() => {
        let closing: Promise<void>;
        try {
          closing = deps.close();
        } catch (closeErr) {
          closing = Promise.reject(closeErr);
        }
        closing.then(exit, (closeErr: unknown) => {
          deps.log.error({ err: closeErr }, 'closing after an uncaught exception failed; exiting');
          exit();
        });
      }, drainMs).unref();
    },
  };
}

/** Installs the guards on `process`. */
export function installProcessGuards(deps: ProcessGuardDeps): ProcessGuards {
  const guards = processGuards(deps);
  process.on('unhandledRejection', guards.onUnhandledRejection);
  process.on('uncaughtException', guards.onUncaughtException);
  return guards;
}
