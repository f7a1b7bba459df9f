// A Postgres database of one test file's own, migrated, and dropped at the end, so that rows one
// file creates (channels above all: routing sees every channel) never reach another file.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migratePostgres } from '../postgres/migrate.js';
import { TEST_DATABASE_URL, testConfig } from './test-config.js';

export interface TestDatabase {
  /** Database name, usable as a ClickHouse database name too. */
  name: string;
  url: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(label = 'file'): Promise<TestDatabase> {
  const url = new URL(TEST_DATABASE_URL);
  const name = `gateway_test_${label}_${randomBytes(5).toString('hex')}`;
  url.pathname = `/${name}`;
  await migratePostgres(testConfig({ DATABASE_URL: url.toString() }));
  return {
    name,
    url: url.toString(),
    async drop() {
      const admin = new URL(TEST_DATABASE_URL);
      admin.pathname = '/postgres';
      const client = new pg.Client({ connectionString: admin.toString() });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
