// The console's log reads run without ClickHouse's JIT: it compiles an expression the third time it
// sees it, on the query's own thread, and a console request that hit a compile took 40-65 ms longer
// (log-query.ts, LOG_READ_SETTINGS). Checked on an embedded server of this file's own, whose
// system.events counts every compile: the shared test server's counters move with other files' queries.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, type ClickHouseClient } from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalClickHouse, startLocalClickHouse } from '../../infra/clickhouse/local-server.js';
import { migrateClickHouse } from '../../infra/clickhouse/migrate.js';
import { type ClickHouseRead, type ClickHouseReader, createClickHouseReader } from '../../infra/clickhouse/read-client.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { queryDailyUsage } from './daily-usage.js';
import { queryLogStat, queryLogs } from './log-query.js';

let server: LocalClickHouse;
let ch: ClickHouseClient;
let reader: ClickHouseReader;
let dataPath: string;
const USER = 7;
const NOW = Date.UTC(2026, 10, 20, 12, 7, 30) / 1000;

async function compiles(): Promise<number> {
  const rows = await (await ch.query({
    query: "SELECT value FROM system.events WHERE event = 'CompileFunction'", format: 'JSONEachRow',
  })).json<{ value: string | number }>();
  return Number(rows[0]?.value ?? 0);
}

beforeAll(async () => {
  dataPath = mkdtempSync(join(tmpdir(), 'chdb-log-read-'));
  server = await startLocalClickHouse({ host: '127.0.0.1', port: 0, dataPath });
  const config = testConfig({ CLICKHOUSE_URL: `http://127.0.0.1:${server.port}`, CLICKHOUSE_DATABASE: 'log_read_settings' });
  await migrateClickHouse(config);
  ch = createClient({ url: config.CLICKHOUSE_URL, database: config.CLICKHOUSE_DATABASE });
  reader = createClickHouseReader(config);
  // Two days of an account's requests, a few a minute, so that every query has rows to read.
  await ch.command({
    query: `
      INSERT INTO logs (id, user_id, created_at, type, content, username, token_name, model_name, quota,
                        prompt_tokens, completion_tokens, use_time, is_stream, channel, token_id, \`group\`, request_id)
      SELECT number, ${USER}, toDateTime(${NOW} - number * 17), 2, '', 'u', concat('k', toString(number % 3)),
             'm1', 100 + number % 7, 10, 5, 1, 0, 1, 1, 'default', concat('r', toString(number))
      FROM numbers(10000)`,
  });
}, 120_000);

afterAll(async () => {
  await ch?.close();
  await reader?.close();
  await server?.close();
  if (dataPath) rmSync(dataPath, { recursive: true, force: true });
});

describe('console log reads', () => {
  it('compile no expressions however often they run, where the same statement with the JIT does', async () => {
    const before = await compiles();
    for (let i = 0; i < 6; i++) {
      // A request a second apart: its time bounds change, as the console's do.
      const now = NOW + i;
      await queryLogStat(reader, { userId: USER, startTimestamp: now - 86400, endTimestamp: now }, now);
      await queryLogStat(reader, { userId: USER, tokenName: 'k1', startTimestamp: now - 86400 - 450, endTimestamp: now }, now);
      await queryLogs(reader, { userId: USER }, { page: 1, pageSize: 10 });
      await queryLogs(reader, { userId: USER, startTimestamp: now - 7200 + 13, endTimestamp: now }, { page: 30, pageSize: 100 });
      await queryDailyUsage(reader, USER, 7, 0, now);
    }
    expect(await compiles()).toBe(before);

    // The control: the stat statement with ClickHouse's default settings compiles by its third run,
    // so the check above would see a compile if a read left the JIT on.
    const jitReader = {
      rows: <T>(read: ClickHouseRead) => reader.rows<T>({
        ...read,
        clickhouse_settings: { ...read.clickhouse_settings, compile_expressions: 1, compile_aggregate_expressions: 1, min_count_to_compile_expression: '3' },
      }),
    } as ClickHouseReader;
    for (let i = 0; i < 4; i++) await queryLogStat(jitReader, { userId: USER, startTimestamp: NOW - 86400, endTimestamp: NOW }, NOW);
    expect(await compiles()).toBeGreaterThan(before);
  });
});
