import { loadConfig } from '../infra/config.js';
import { createLogger } from '../infra/logger.js';
import { startBilling } from './service.js';

const config = loadConfig();
const log = createLogger(config, 'billing');
try {
  const billing = await startBilling(config, log);
  const stop = () => {
    log.info('billing worker draining');
    billing.close().then(() => process.exit(0), () => process.exit(1));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
} catch (err) {
  log.fatal({ err }, 'billing worker failed to start');
  process.exit(1);
}
