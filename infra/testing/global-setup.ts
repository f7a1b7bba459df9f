// Runs once before the test files: the test databases exist and are migrated, and a ClickHouse answers
// CLICKHOUSE_URL (the embedded one is started here when `make test` did not already start it).
import { isClickHouseReachable } from '../clickhouse/ensure.js';
import { startLocalClickHouse } from '../clickhouse/local-server.js';
import { migrateClickHouse } from '../clickhouse/migrate.js';
import { migratePostgres } from '../postgres/migrate.js';
import { availableParallelism } from 'node:os';
import { testConfig, testDatabases } from './test-config.js';
import { testWorkers } from './test-workers.js';

export default async function setup(): Promise<() => Promise<void>> {
  const config = testConfig();
  let local: { close(): Promise<void> | void } | undefined;
  if (!(await isClickHouseReachable(config.CLICKHOUSE_URL))) {
    const url = new URL(config.CLICKHOUSE_URL);
    const port = Number(url.port || 8123);
    // The engine locks its data directory: a second run on a port of its own (CLICKHOUSE_URL) gets a directory of its own.
    local = await startLocalClickHouse({ host: url.hostname, port, dataPath: port === 8123 ? '.data/clickhouse-test' : `.data/clickhouse-test-${port}` });
  }
  // The databases of each worker that may run a test file (test-config.ts testDatabases), and the
  // main pair, which tests started without a worker id use.
  const pools = [undefined, ...Array.from({ length: testWorkers(availableParallelism()) }, (_, i) => String(i + 1))];
  for (const pool of pools) {
    const own = testDatabases(pool);
    const c = { ...config, DATABASE_URL: own.url, CLICKHOUSE_DATABASE: own.clickhouse };
    await migratePostgres(c);
    await migrateClickHouse(c);
  }
  return async () => {
    await local?.close();
  };
}
