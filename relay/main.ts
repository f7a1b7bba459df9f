import { loadConfig } from '../infra/config.js';
import { createLogger } from '../infra/logger.js';
import { relayMetrics } from './metrics/relay-metrics.js';
import { installProcessGuards } from './process-guards.js';
import { startRelay } from './server.js';

const config = loadConfig();
const log = createLogger(config, 'relay');
try {
  const relay = await startRelay(config, log);
  installProcessGuards({
    log,
    metrics: relayMetrics,
    stopAccepting: () => relay.stopAccepting(),
    close: () => relay.close(),
    exit: (code) => process.exit(code),
  });
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
  log.fatal({ err }, 'relay failed to start');
  process.exit(1);
}
