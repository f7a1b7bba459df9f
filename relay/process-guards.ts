// The relay's last resort for what no handler caught: infra/process-guards.ts (shared with the billing
// worker and the console-api), with what each case means for the relay:
//
//   - unhandledRejection: the request it belonged to has been answered or timed out on its own. It is
//     logged, counted (gateway_relay_unhandled_rejections_total) and the relay keeps serving: exiting
//     would cut every other user's streams for one request's bug.
//   - uncaughtException: logged as fatal; the relay stops accepting connections, gives the exchanges
//     in progress FATAL_DRAIN_MS to finish (their settlements are what keep the money exact; any left
//     open are released by the reaper at their deadline), then exits 1 so the supervisor starts a
//     clean process.
import type { Logger } from '../infra/logger.js';
import { FATAL_DRAIN_MS, installProcessGuards as installShared, processGuards as sharedGuards, type ProcessGuards } from '../infra/process-guards.js';
import type { RelayMetrics } from './metrics/relay-metrics.js';

export { FATAL_DRAIN_MS, type ProcessGuards };

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

const MESSAGES = {
  unhandledRejection: 'unhandled promise rejection; still serving',
  uncaughtException: 'uncaught exception; no longer accepting connections, exiting after the drain',
};

function shared(deps: ProcessGuardDeps) {
  return {
    log: deps.log,
    countUnhandledRejection: () => deps.metrics.unhandledRejection(),
    stopAccepting: () => deps.stopAccepting(),
    close: () => deps.close(),
    exit: (code: number) => deps.exit(code),
    ...(deps.drainMs !== undefined ? { drainMs: deps.drainMs } : {}),
    messages: MESSAGES,
  };
}

export function processGuards(deps: ProcessGuardDeps): ProcessGuards {
  return sharedGuards(shared(deps));
}

/** Installs the guards on `process`. */
export function installProcessGuards(deps: ProcessGuardDeps): ProcessGuards {
  return installShared(shared(deps));
}
