import { loadConfigOrExit } from '../infra/config.js';
import { createLogger } from '../infra/logger.js';
import { installProcessGuards } from '../infra/process-guards.js';
import { describeStartFailure, startFailureExitCode } from '../infra/start-failure.js';
import { billingMetrics } from './metrics/billing-metrics.js';
import { startBilling, type RunningBilling } from './service.js';

const config = loadConfigOrExit('billing', process.env, ['KEY_SECRET']);
/** The longest a stop (SIGTERM, SIGINT) waits for the worker to drain: under `make down`'s 45 s. */
const CLOSE_DEADLINE_MS = 40_000;
const log = createLogger(config, 'billing');
let billing: RunningBilling | null = null;
// Installed before anything starts: a promise nothing awaits (postgres.js's own, on a connection
// terminated as it opened) failing during start-up must not end the worker either. An uncaught
// exception still ends it: the read and settle loops stop at once, what was read and not acknowledged
// stays pending in Redis for the next worker (a replay moves no money twice), and it exits 1.
installProcessGuards({
  log,
  countUnhandledRejection: () => billingMetrics.unhandledRejection(),
  stopAccepting: () => {},
  close: () => billing?.close() ?? Promise.resolve(),
  exit: (code) => process.exit(code),
  drainMs: 0,
  closeMs: 10_000,
  messages: {
    unhandledRejection: 'unhandled promise rejection; the billing worker keeps running',
    uncaughtException: 'uncaught exception; the billing worker stops and exits',
  },
});
try {
  billing = await startBilling(config, log);
  const running = billing;
  const stop = () => {
    log.info('billing worker draining');
    // Bounded: a batch inside a transaction whose database accepts connections and resets them (a
    // proxy before a dead Postgres) waited for as long as that lasted, and the stop with it (review
    // faults). What the worker read and did not acknowledge stays pending for the next one, which
    // settles it once; `make down` waits 45 s for it.
    setTimeout(() => {
      log.error(`billing worker did not finish draining within ${CLOSE_DEADLINE_MS / 1000} s; exiting, its unacknowledged entries left to the next worker`);
      process.exit(1);
    }, CLOSE_DEADLINE_MS).unref();
    running.close().then(() => process.exit(0), () => process.exit(1));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
} catch (err) {
  const failure = describeStartFailure(err, config);
  if (failure.known) log.fatal(`billing worker failed to start: ${failure.line}`);
  else log.fatal({ err }, 'billing worker failed to start');
  process.exit(startFailureExitCode(err));
}
