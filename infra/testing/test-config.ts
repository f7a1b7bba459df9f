// Config for tests: the real services on their local defaults, a database of its own, and a Redis key
// prefix of its own per caller so that test files running in parallel never see each other's keys.
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Config, loadConfig } from '../config.js';

const BASE_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/gateway_test';
const BASE_CLICKHOUSE_DATABASE = process.env.TEST_CLICKHOUSE_DATABASE ?? 'gateway_test';

/**
 * The Postgres URL and ClickHouse database of vitest worker `pool` (its VITEST_POOL_ID, 1 to
 * maxWorkers), or of the run's main process (undefined: the global setup). Two test files run at once
 * (vitest.config.ts maxWorkers) each on the databases of their worker, as one file at a time ran on
 * one pair: a file's billing worker drains the shared log outbox whoever's rows they are, and files
 * count and read rows of the whole database.
 */
export function testDatabases(pool: string | undefined): { url: string; clickhouse: string } {
  if (!pool) return { url: BASE_DATABASE_URL, clickhouse: BASE_CLICKHOUSE_DATABASE };
  const url = new URL(BASE_DATABASE_URL);
  url.pathname = `${url.pathname}_w${pool}`;
  return { url: url.toString(), clickhouse: `${BASE_CLICKHOUSE_DATABASE}_w${pool}` };
}

const OWN = testDatabases(process.env.VITEST_POOL_ID);
export const TEST_DATABASE_URL = OWN.url;
export const TEST_CLICKHOUSE_DATABASE = OWN.clickhouse;

/** Where test relays spool their settlements (each stack in a directory of its own REDIS_PREFIX). */
export const TEST_SPOOL_DIR = join(tmpdir(), 'gateway-test-spool');

export function testConfig(overrides: Record<string, string> = {}): Config {
  return loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    DATABASE_URL: TEST_DATABASE_URL,
    REDIS_URL: process.env.REDIS_URL,
    CLICKHOUSE_URL: process.env.CLICKHOUSE_URL,
    CLICKHOUSE_DATABASE: TEST_CLICKHOUSE_DATABASE,
    REDIS_PREFIX: `test-${randomBytes(4).toString('hex')}`,
    KEY_SECRET: 'test-secret-0123456789abcdef',
    RELAY_PORT: '0',
    // Out of the checkout: a test stack closed with settlements still spooled (Redis down) left its
    // files in .data/relay-spool, where `make clean` kept them as a make-run relay's to replay.
    RELAY_SPOOL_DIR: TEST_SPOOL_DIR,
    CONSOLE_PORT: '0',
    BILLING_BLOCK_MS: '20',
    BILLING_MIN_BATCH_INTERVAL_MS: '0',
    // Several billing workers per machine: each metrics server on a free port.
    BILLING_METRICS_PORT: '0',
    RELAY_METRICS_PORT: '0',
    // scrypt at 2^10 rather than 2^15: every registration and login of the suite cost ~0.3 s of a core
    // at 2^15, a third of some console files' time (209 hashes in two files' 56 s).
    PASSWORD_SCRYPT_LOG2N: '10',
    ...overrides,
  });
}

/** A name no other test run uses: `prefix` and ten hex digits. */
export function uniqueName(prefix = 'u'): string {
  return `${prefix}${randomBytes(5).toString('hex')}`;
}
