import { loadConfigOrExit } from '../infra/config.js';
import { createLogger } from '../infra/logger.js';
import { describeStartFailure, startFailureExitCode } from '../infra/start-failure.js';
import { relayMetrics } from './metrics/relay-metrics.js';
import { installProcessGuards } from './process-guards.js';
import { startRelay, type RunningRelay } from './server.js';

const config = loadConfigOrExit('relay', process.env, ['KEY_SECRET']);
const log = createLogger(config, 'relay');
let running: RunningRelay | null = null;
// Installed before the start, as in the billing worker and the console: what fails uncaught while the
// relay starts (a Redis that refuses REDIS_URL's database: infra/redis/client.ts) is the relay's own
// fatal log line and exit 1 (78 for the refused database, a configuration), as it is once the relay runs.
installProcessGuards({
  log,
  metrics: relayMetrics,
  stopAccepting: () => running?.stopAccepting(),
  close: () => running?.close() ?? Promise.resolve(),
  exit: (code) => process.exit(code),
});
try {
  const relay = await startRelay(config, log);
  running = relay;
  // A deploy's SIGTERM must not cut the streams in progress nor lose their settlements: the relay
  // stops accepting and drains for RELAY_SHUTDOWN_GRACE_MS at most; a second signal ends it at once
  // (the handlers are once: the default action). What is still open after the grace is cut and
  // settled for what it delivered (relay.close); what cannot settle then is left to the reaper
  // (reservations) and to the spool (settlements).
  const stop = (signal: NodeJS.Signals) => {
    log.info({ signal, graceMs: config.RELAY_SHUTDOWN_GRACE_MS }, 'relay stopping: draining the exchanges in progress');
    relay.drain(config.RELAY_SHUTDOWN_GRACE_MS)
      .then((drained) => {
        if (!drained) log.warn({ inFlight: relayMetrics.inFlight.value }, 'shutdown grace over; closing with exchanges still in progress');
        return relay.close();
      })
      .then(() => process.exit(0), (err: unknown) => {
        log.error({ err }, 'relay close failed');
        process.exit(1);
      });
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
} catch (err) {
  const failure = describeStartFailure(err, config);
  if (failure.known) log.fatal(`relay failed to start: ${failure.line}`);
  else log.fatal({ err }, 'relay failed to start');
  process.exit(startFailureExitCode(err));
}
