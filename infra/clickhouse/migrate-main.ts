import { loadConfigOrExit } from '../config.js';
import { createLogger } from '../logger.js';
import { migrateClickHouse } from './migrate.js';

const config = loadConfigOrExit('clickhouse-migrate');
const logger = createLogger(config, 'clickhouse-migrate');
try {
  const applied = await migrateClickHouse(config);
  logger.info({ database: config.CLICKHOUSE_DATABASE, applied }, 'clickhouse migrated');
} catch (err) {
  logger.error({ err }, 'clickhouse migration failed');
  process.exitCode = 1;
}
