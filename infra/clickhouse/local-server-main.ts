// Serves ClickHouse's HTTP interface on CLICKHOUSE_URL from the embedded engine (chdb), with its data
// in CLICKHOUSE_LOCAL_PATH. One process owns the data directory: chdb allows no second one (it opens
// CLICKHOUSE_LOCAL_CONNECTIONS engine connections to it, so that reads run in parallel).
import { loadConfigOrExit } from '../config.js';
import { createLogger } from '../logger.js';
import { startLocalClickHouse } from './local-server.js';

const config = loadConfigOrExit('clickhouse-local');
const logger = createLogger(config, 'clickhouse-local');
const url = new URL(config.CLICKHOUSE_URL);
const server = await startLocalClickHouse({
  host: url.hostname,
  port: Number(url.port || 8123),
  dataPath: config.CLICKHOUSE_LOCAL_PATH,
  connections: config.CLICKHOUSE_LOCAL_CONNECTIONS,
  uncompressedCacheMb: config.CLICKHOUSE_LOCAL_UNCOMPRESSED_CACHE_MB,
  user: config.CLICKHOUSE_USER,
  password: config.CLICKHOUSE_PASSWORD,
  logger,
});

let stopping = false;
async function stop(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'stopping');
  // Lets the running query finish and closes the chdb session, so that the data directory is left clean.
  await server.close();
  logger.info('stopped');
  process.exit(0);
}
process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));
