// LOG_RETENTION_DAYS: the migrator gives `logs` and log_stats_15m a TTL of that many days (none with 0)
// on every run, changing nothing when they already have it, and ClickHouse then drops the rows past it.
// On the shared test server (CLICKHOUSE_URL), in a database of this file's own, dropped after.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testConfig, uniqueName } from '../testing/test-config.js';
import { type ClickHouseClient, createClickHouse, createClickHouseAdmin } from './client.js';
import { migrateClickHouse, migrationFiles, migrationsDir, retentionStatements } from './migrate.js';

const DATABASE = uniqueName('log_retention_');
const config = (days: number) => testConfig({ CLICKHOUSE_DATABASE: DATABASE, LOG_RETENTION_DAYS: String(days) });

const DAY = 86_400;
const NOW = Math.floor(Date.now() / 1000);
// Two rows past a 30-day TTL, each alone in its month (a partition of its own: whole parts to drop
// whatever the merges did), and two within it.
const AGES_DAYS = { expired: [400, 200], kept: [10, 1] };

function logRow(n: number, ageDays: number) {
  return {
    id: n, user_id: 42, created_at: NOW - ageDays * DAY, type: 2, content: '', username: 'u', token_name: 'k',
    model_name: 'm', quota: 100, prompt_tokens: 1, completion_tokens: 1, use_time: 1, is_stream: false,
    channel: 1, token_id: 1, group: 'default', request_id: `req-${n}`, upstream_request_id: '',
  };
}

let ch: ClickHouseClient;

/** Migrates with `days`, returning the files applied and every statement sent. */
async function migrate(days: number): Promise<{ applied: string[]; sent: string[] }> {
  const sent: string[] = [];
  const applied = await migrateClickHouse(config(days), undefined, (s) => {
    sent.push(s);
    return s;
  });
  return { applied, sent };
}

async function showCreate(table: string): Promise<string> {
  const [row] = await (await ch.query({ query: `SHOW CREATE TABLE ${table}`, format: 'JSONEachRow' })).json<{ statement: string }>();
  return row!.statement;
}

async function ages(query: string): Promise<number[]> {
  const rows = await (await ch.query({ query, format: 'JSONEachRow' })).json<{ t: number | string }>();
  return rows.map((r) => Math.round((NOW - Number(r.t)) / DAY));
}
const logAges = () => ages('SELECT toUnixTimestamp(created_at) AS t FROM logs ORDER BY t');
// A bucket starts up to 15 minutes before its row: rounded to the same whole days.
const statAges = () => ages('SELECT toUnixTimestamp(bucket) AS t FROM log_stats_15m ORDER BY t');

beforeAll(async () => {
  expect((await migrate(0)).applied).toEqual(migrationFiles(migrationsDir()));
  ch = createClickHouse(config(0));
  // Rows logged before retention was switched on: the TTL must reach the parts already written.
  await ch.insert({
    table: 'logs', format: 'JSONEachRow',
    values: [...AGES_DAYS.expired, ...AGES_DAYS.kept].map((age, i) => logRow(i + 1, age)),
  });
});

afterAll(async () => {
  await ch?.close();
  const admin = createClickHouseAdmin(config(0));
  try {
    await admin.command({ query: `DROP DATABASE IF EXISTS ${DATABASE} SYNC` });
  } finally {
    await admin.close();
  }
});

describe('LOG_RETENTION_DAYS', () => {
  it('is a whole number of days, 0 (keep forever) by default, at most ten years', () => {
    expect(testConfig().LOG_RETENTION_DAYS).toBe(0);
    expect(testConfig({ LOG_RETENTION_DAYS: '30' }).LOG_RETENTION_DAYS).toBe(30);
    for (const bad of ['-1', '1.5', 'month', '3651']) {
      expect(() => testConfig({ LOG_RETENTION_DAYS: bad }), bad).toThrow(/LOG_RETENTION_DAYS/);
    }
  });

  it('is applied ON CLUSTER to the replicated local tables on a cluster (the Distributed ones hold no rows)', () => {
    const cluster = testConfig({ LOG_RETENTION_DAYS: '7', CLICKHOUSE_CLUSTER: 'c1' });
    const none = { logs_local: 'ReplicatedReplacingMergeTree(...) ORDER BY x', log_stats_15m_local: 'ReplicatedSummingMergeTree(...) ORDER BY x' };
    expect(retentionStatements(cluster, none)).toEqual([
      "ALTER TABLE logs_local ON CLUSTER 'c1' MODIFY SETTING ttl_only_drop_parts = 1, materialize_ttl_recalculate_only = 1",
      "ALTER TABLE logs_local ON CLUSTER 'c1' MODIFY TTL created_at + INTERVAL 7 DAY",
      "ALTER TABLE log_stats_15m_local ON CLUSTER 'c1' MODIFY SETTING ttl_only_drop_parts = 1, materialize_ttl_recalculate_only = 1",
      "ALTER TABLE log_stats_15m_local ON CLUSTER 'c1' MODIFY TTL bucket + INTERVAL 7 DAY",
    ]);
    expect(() => retentionStatements(cluster, { logs_local: 'x' })).toThrow(/log_stats_15m_local/);
  });

  it('0: no TTL, and nothing sent for it', async () => {
    expect(await showCreate('logs')).not.toMatch(/TTL|ttl_only_drop_parts/);
    expect(await showCreate('log_stats_15m')).not.toMatch(/TTL|ttl_only_drop_parts/);
    const again = await migrate(0);
    expect(again.applied).toEqual([]);
    expect(again.sent.filter((s) => s.startsWith('ALTER'))).toEqual([]);
  });

  it('30: both tables get the TTL and drop whole parts; running again sends nothing', async () => {
    const first = await migrate(30);
    expect(first.applied).toEqual([]);
    expect(first.sent.filter((s) => s.startsWith('ALTER'))).toHaveLength(4);
    const logs = await showCreate('logs');
    expect(logs).toMatch(/\nTTL created_at \+ toIntervalDay\(30\)\n/);
    expect(logs).toMatch(/SETTINGS .*ttl_only_drop_parts = 1/);
    const stats = await showCreate('log_stats_15m');
    expect(stats).toMatch(/\nTTL bucket \+ toIntervalDay\(30\)\n/);
    expect(stats).toMatch(/SETTINGS .*ttl_only_drop_parts = 1/);

    const again = await migrate(30);
    expect(again.applied).toEqual([]);
    expect(again.sent.filter((s) => s.startsWith('ALTER'))).toEqual([]);
    expect(await showCreate('logs')).toBe(logs);
    expect(await showCreate('log_stats_15m')).toBe(stats);
  });

  it('30: rows past it are gone after OPTIMIZE FINAL, the others stay', async () => {
    for (const table of ['logs', 'log_stats_15m']) await ch.command({ query: `OPTIMIZE TABLE ${table} FINAL` });
    expect(await logAges()).toEqual([...AGES_DAYS.kept]);
    expect(await statAges()).toEqual([...AGES_DAYS.kept]);
  });

  it('back to 0: the TTL and its settings removed, once', async () => {
    const first = await migrate(0);
    expect(first.sent.filter((s) => s.startsWith('ALTER'))).toHaveLength(4);
    for (const table of ['logs', 'log_stats_15m']) expect(await showCreate(table)).not.toMatch(/TTL|ttl_only_drop_parts|materialize_ttl/);
    expect((await migrate(0)).sent.filter((s) => s.startsWith('ALTER'))).toEqual([]);
    expect(await logAges()).toEqual([...AGES_DAYS.kept]);
  });
});
