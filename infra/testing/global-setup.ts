// Runs once before the test files: the test databases exist and are migrated, and a ClickHouse answers
// CLICKHOUSE_URL (the embedded one is started here when `make test` did not already start it).
import { isClickHouseReachable } from '../clickhouse/ensure.js';
import { startLocalClickHouse } from '../clickhouse/local-server.js';
import { migrateClickHouse } from '../clickhouse/migrate.js';
import { migratePostgres } from '../postgres/migrate.js';
import { testConfig } from './test-config.js';

export default async function setup(): Promise<() => Promise<void>> {
  const config = testConfig();
  let local: { close(): Promise<void> | void } | undefined;
  if (!(await isClickHouseReachable(config.CLICKHOUSE_URL))) {
    const url = new URL(config.CLICKHOUSE_URL);
    local = await startLocalClickHouse({ host: url.hostname, port: Number(url.port || 8123), dataPath: '.data/clickhouse-test' });
  }
  await migratePostgres(config);
  await migrateClickHouse(config);
  return async () => {
    await local?.close();
  };
}
