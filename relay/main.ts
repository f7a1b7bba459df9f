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
  const stop = () => {
    log.info('relay stopping');
    relay.close().then(() => process.exit(0), () => process.exit(1));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
} catch (err) {
  log.fatal({ err }, 'relay failed to start');
  process.exit(1);
}
