// The relay's last resort for what no handler caught, decided rather than left to Node's defaults:
//
//   - unhandledRejection: a promise nobody awaited failed. The request it belonged to has been
//     answered or timed out on its own; the process state is intact. Log it, count it
//     (gateway_relay_unhandled_rejections_total) and keep serving: exiting would cut every other
//     user's streams for one request's bug.
//   - uncaughtException: a synchronous throw escaped to the event loop, so some state may be half
//     updated. Log it as fatal, stop accepting connections, give the exchanges in progress
//     FATAL_DRAIN_MS to finish (their settlements are what keep the money exact; any left open are
//     released by the reaper at their deadline), then exit 1 so the supervisor starts a clean process.
import type { Logger } from '../infra/logger.js';
import type { RelayMetrics } from './metrics/relay-metrics.js';

export const FATAL_DRAIN_MS = 5_000;

export interface ProcessGuardDeps {
  log: Logger;
  metrics: Pick<RelayMetrics, 'unhandledRejection'>;
  /** Closes the listening socket (RunningRelay.stopAccepting). */
  stopAccepting(): void;
  /** Releases connections and pools after the drain (RunningRelay.close). */
  close(): Promise<void>;
  exit(code: number): void;
  drainMs?: number;
}

export interface ProcessGuards {
  onUnhandledRejection(reason: unknown): void;
  onUncaughtException(err: Error): void;
}

export function processGuards(deps: ProcessGuardDeps): ProcessGuards {
  let dying = false;
  return {
    onUnhandledRejection(reason) {
      deps.metrics.unhandledRejection();
      deps.log.error({ err: reason }, 'unhandled promise rejection; still serving');
    },
    onUncaughtException(err) {
      deps.log.fatal({ err }, 'uncaught exception; no longer accepting connections, exiting after the drain');
      if (dying) return;
      dying = true;
      try {
        deps.stopAccepting();
      } catch {
        // The socket may be what failed; exit anyway.
      }
      const drainMs = deps.drainMs ?? FATAL_DRAIN_MS;
      const hardExit = setTimeout(() => deps.exit(1), drainMs + 2_000);
      hardExit.unref();
      setTimeout(() => {
        deps.close().finally(() => deps.exit(1));
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
