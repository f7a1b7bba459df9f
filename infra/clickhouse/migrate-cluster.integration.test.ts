// The cluster migration set (infra/clickhouse/migrations-cluster, CLICKHOUSE_CLUSTER set) on the
// embedded ClickHouse (chdb), in a server of this file's own: its own data directory, port 18240, and
// a config file that gives it what chdb can have of a cluster (investigated here, chdb 26.7):
//   - remote_servers: a cluster of one shard whose one replica is this server (its tcp_port), so a
//     Distributed table works in-process: with prefer_localhost_replica (the default) the shard is
//     local and an insert into `logs` is written to logs_local by the Distributed engine itself;
//   - macros {shard}/{replica}, and a Keeper of ClickHouse's in-memory `testkeeper` implementation:
//     Replicated*MergeTree tables can be CREATED (their Keeper path and replica name are expanded and
//     checked) but stay read-only (no replication threads run in chdb): an insert waits forever;
//   - no ON CLUSTER: chdb runs no distributed-DDL worker ("Replicated DDL queries are disabled").
// So: (a) every statement is parsed by ClickHouse's parser as sent; (b) the set is created as written
// but for ON CLUSTER, to check the replicated engines; (c) the rehearsal runs the set through
// migrate.ts with the smallest rewrite that lets rows in (ON CLUSTER dropped, Replicated*MergeTree(path,
// replica) -> *MergeTree; Distributed kept; the replicated tables' default deduplication window given
// to their stand-ins) and compares it with the single-server set: the same columns and keys, the same
// console answers, exact statistics after a repeated insert.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queryDailyUsage } from '../../console-api/logs/daily-usage.js';
import { queryLogStat, queryLogs } from '../../console-api/logs/log-query.js';
import { testConfig } from '../testing/test-config.js';
import { createClient } from '@clickhouse/client';
import type { Config } from '../config.js';
import { type ClickHouseClient, clickHouseOptions, createClickHouse, createClickHouseAdmin } from './client.js';
import { type LocalClickHouse, startLocalClickHouse } from './local-server.js';
import { type ClickHouseReader, type ClickHouseReadSettings, createClickHouseReader } from './read-client.js';
import { bootstrapStatements, migrateClickHouse, migrationFiles, migrationStatements, migrationsDir } from './migrate.js';

const PORT = 18240;
// Only compared with the replica's port in remote_servers (that is what makes the replica local):
// chdb listens on no TCP port.
const TCP_PORT = 18241;
const CLUSTER = 'gw_rehearsal';
const URL = `http://127.0.0.1:${PORT}`;

const single = testConfig({ CLICKHOUSE_URL: URL, CLICKHOUSE_DATABASE: 'mig_single' });
const clustered = testConfig({ CLICKHOUSE_URL: URL, CLICKHOUSE_DATABASE: 'mig_cluster', CLICKHOUSE_CLUSTER: CLUSTER });
const keeper = testConfig({ CLICKHOUSE_URL: URL, CLICKHOUSE_DATABASE: 'mig_keeper', CLICKHOUSE_CLUSTER: CLUSTER });

const CONFIG_XML = `<clickhouse>
  <tcp_port>${TCP_PORT}</tcp_port>
  <remote_servers>
    <${CLUSTER}>
      <shard>
        <internal_replication>true</internal_replication>
        <replica><host>127.0.0.1</host><port>${TCP_PORT}</port></replica>
      </shard>
    </${CLUSTER}>
  </remote_servers>
  <macros><shard>01</shard><replica>r1</replica></macros>
  <zookeeper><implementation>testkeeper</implementation></zookeeper>
</clickhouse>
`;

/** What chdb cannot run: distributed DDL, and inserts into replicated tables (no replication threads). */
function rehearsalRewrite(statement: string): string {
  return statement
    .replace(/\s+ON CLUSTER '\w+'/g, '')
    .replace(/\bReplicated(\w*MergeTree)\('[^']*', '[^']*'\)/g, '$1');
}

// A replicated table drops a repeated insert by default (replicated_deduplication_window, checked on
// the keeper database below); a plain stand-in does only with a window of its own.
const STAND_INS_DEDUPLICATE = ['logs_local', 'log_stats_15m_local']
  .map((t) => `ALTER TABLE ${t} MODIFY SETTING non_replicated_deduplication_window = 1000`);

const clusterDir = migrationsDir(CLUSTER);
const clusterStatements = (config = clustered) => [
  ...Object.values(bootstrapStatements(config)),
  ...migrationFiles(clusterDir).flatMap((f) => migrationStatements(config, join(clusterDir, f))),
];

async function dropKeeperDatabase(): Promise<void> {
  const admin = createClickHouseAdmin(keeper);
  try {
    await admin.command({ query: 'DROP DATABASE IF EXISTS mig_keeper SYNC' });
  } finally {
    await admin.close();
  }
}

let dir: string;
let server: LocalClickHouse;
const clients: ClickHouseClient[] = [];
const readers: ClickHouseReader[] = [];
/** The console's reader (infra/clickhouse/read-client.ts) on `config`'s database, with extra settings. */
function reader(config: Config, settings?: ClickHouseReadSettings): ClickHouseReader {
  const r = createClickHouseReader(config, settings);
  readers.push(r);
  return r;
}
function client(config = single): ClickHouseClient {
  const ch = createClickHouse(config);
  clients.push(ch);
  return ch;
}
async function rows<T>(ch: ClickHouseClient, query: string, params: Record<string, unknown> = {}): Promise<T[]> {
  return (await ch.query({ query, query_params: params, format: 'JSONEachRow' })).json<T>();
}
/** 64-bit integers as numbers whether the server quotes them in JSON (a real one) or not (chdb). */
function numeric(rs: Record<string, unknown>[]): Record<string, unknown>[] {
  return rs.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v])));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ch-cluster-rehearsal-'));
  writeFileSync(join(dir, 'config.xml'), CONFIG_XML);
  server = await startLocalClickHouse({
    host: '127.0.0.1', port: PORT, dataPath: join(dir, 'data'), connectionArgs: [`--config-file=${join(dir, 'config.xml')}`],
  });
});
afterAll(async () => {
  // Read-only replicas keep chdb from closing (their Keeper session waits): dropped first, and the
  // test that made them drops them too.
  await dropKeeperDatabase().catch(() => {});
  for (const ch of clients) await ch.close();
  for (const r of readers) await r.close();
  await server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('CLICKHOUSE_CLUSTER', () => {
  it('is empty by default and must be an identifier', () => {
    expect(testConfig().CLICKHOUSE_CLUSTER).toBe('');
    expect(testConfig({ CLICKHOUSE_CLUSTER: 'prod_1' }).CLICKHOUSE_CLUSTER).toBe('prod_1');
    for (const bad of ["a'b", 'a b', 'a-b', '1a', "x' ON CLUSTER 'y"]) {
      expect(() => testConfig({ CLICKHOUSE_CLUSTER: bad }), bad).toThrow(/CLICKHOUSE_CLUSTER/);
    }
    expect(migrationsDir('')).toMatch(/infra\/clickhouse\/migrations$/);
    expect(migrationsDir(CLUSTER)).toMatch(/infra\/clickhouse\/migrations-cluster$/);
  });
});

describe('the cluster migration set', () => {
  it('is parsed by ClickHouse, every statement idempotent and ON CLUSTER the setting', async () => {
    const ch = createClickHouseAdmin(clustered);
    clients.push(ch);
    const statements = clusterStatements();
    // schema_migrations and the database, 001's two tables, 009's four tables and three views, 011's
    // setting, 012's three views dropped, one created and two tables dropped.
    expect(statements.length).toBe(2 + 2 + 7 + 1 + 6);
    for (const q of statements) {
      expect(q).not.toContain('{cluster}');
      // Idempotent: created only when missing, dropped only when there, or a setting set to a value.
      expect(q).toMatch(/^(CREATE (TABLE|DATABASE|MATERIALIZED VIEW) IF NOT EXISTS |DROP (TABLE|VIEW) IF EXISTS \w+ ON CLUSTER '\w+'$|ALTER TABLE \w+ ON CLUSTER '\w+' MODIFY SETTING )/);
      const [parsed] = await rows<{ f: string }>(ch, 'SELECT formatQuery({q:String}) AS f', { q });
      // The parser's own reading: the statement is distributed to the setting's cluster.
      expect(parsed?.f, q).toContain(`ON CLUSTER ${CLUSTER}`);
    }
  });

  it('creates the replicated tables as written (Keeper paths from the macros) but for ON CLUSTER', async () => {
    const ch = client(keeper);
    const admin = createClickHouseAdmin(keeper);
    clients.push(admin);
    // ON CLUSTER dropped only: chdb has no distributed-DDL worker. Not through migrate.ts: its
    // schema_migrations insert would wait forever on a read-only replica.
    for (const q of clusterStatements(keeper)) {
      await (q.startsWith('CREATE DATABASE') ? admin : ch).command({ query: q.replace(` ON CLUSTER '${CLUSTER}'`, '') });
    }
    const replicas = await rows<{ table: string; zookeeper_path: string; replica_name: string; is_readonly: number }>(ch,
      `SELECT table, zookeeper_path, replica_name, is_readonly FROM system.replicas WHERE database = 'mig_keeper' ORDER BY table`);
    expect(replicas).toEqual([
      { table: 'log_stats_15m_local', zookeeper_path: '/clickhouse/tables/01/mig_keeper/log_stats_15m_local', replica_name: 'r1', is_readonly: 1 },
      { table: 'logs_local', zookeeper_path: '/clickhouse/tables/01/mig_keeper/logs_local', replica_name: 'r1', is_readonly: 1 },
      // One table for the whole cluster: no {shard} in the path, the shard in the replica name.
      { table: 'schema_migrations', zookeeper_path: '/clickhouse/tables/all/mig_keeper/schema_migrations', replica_name: '01-r1', is_readonly: 1 },
    ]);
    const tables = await rows<{ name: string; engine: string; engine_full: string }>(ch,
      `SELECT name, engine, engine_full FROM system.tables WHERE database = 'mig_keeper' ORDER BY name`);
    expect(Object.fromEntries(tables.map((t) => [t.name, t.engine]))).toEqual({
      log_stats_15m: 'Distributed', log_stats_15m_local: 'ReplicatedSummingMergeTree', log_stats_15m_from_logs_mv: 'MaterializedView',
      logs: 'Distributed', logs_local: 'ReplicatedReplacingMergeTree', schema_migrations: 'ReplicatedReplacingMergeTree',
    });
    // What drops a repeated outbox batch on a cluster: the replicated tables' own window, by default.
    const windows = await rows<{ name: string; value: string }>(ch,
      `SELECT name, value FROM system.merge_tree_settings
       WHERE name IN ('replicated_deduplication_window', 'replicated_deduplication_window_seconds') ORDER BY name`);
    expect(windows.map((w) => [w.name, Number(w.value)])).toEqual([['replicated_deduplication_window', 10000], ['replicated_deduplication_window_seconds', 3600]]);
    expect(tables.find((t) => t.name === 'logs')!.engine_full).toBe(`Distributed('${CLUSTER}', 'mig_keeper', 'logs_local', user_id)`);
    await dropKeeperDatabase();
  });
});

// Rows of two accounts over two months and two quarter hours, as billing/log-outbox.ts inserts them.
const USERS = [3_100_000_001, 3_100_000_002];
const MARCH = Date.UTC(2003, 2, 10, 12) / 1000;
const APRIL = Date.UTC(2003, 3, 2, 12) / 1000;
function logRow(userId: number, n: number, createdAt: number) {
  return {
    id: userId * 100 + n, user_id: userId, created_at: createdAt, type: n === 5 ? 5 : 2, content: '', username: 'u',
    token_name: n % 2 ? 'k1' : 'k2', model_name: 'm1', quota: n === 5 ? 0 : 100 * n + userId % 10, prompt_tokens: n,
    completion_tokens: 1, cache_tokens: 0, cache_read_tokens: n, use_time: 1, is_stream: false, channel: 1, token_id: 1,
    group: 'default', request_id: `req-${n}`, upstream_request_id: '', protocol: 'openai',
  };
}
const LOG_ROWS = USERS.flatMap((u) => [
  logRow(u, 1, MARCH), logRow(u, 2, MARCH + 60), logRow(u, 3, MARCH + 1000), logRow(u, 4, APRIL), logRow(u, 5, APRIL + 1),
]);

describe('single-host rehearsal of the cluster set', () => {
  let singleCh: ClickHouseClient;
  let clusterCh: ClickHouseClient;

  beforeAll(async () => {
    expect(await migrateClickHouse(single)).toEqual(migrationFiles(migrationsDir()));
    expect(await migrateClickHouse(clustered, undefined, rehearsalRewrite)).toEqual(
      ['001_logs.sql', '009_log_stats.sql', '011_log_keys_write_batches.sql', '012_log_stats_from_logs.sql']);
    singleCh = client(single);
    for (const query of STAND_INS_DEDUPLICATE) await client(clustered).command({ query });
    // The gateway's client on a cluster sends the settings that route each shard's inserts to one
    // replica; the rehearsal's one replica is the embedded server itself, which serves no TCP, so it
    // is reached in-process (prefer_localhost_replica 1) and the rest is kept.
    const options = clickHouseOptions(clustered);
    expect(options.clickhouse_settings).toMatchObject({ distributed_foreground_insert: 1 });
    expect(clickHouseOptions(single).clickhouse_settings).not.toHaveProperty('distributed_foreground_insert');
    clusterCh = createClient({
      ...options, database: clustered.CLICKHOUSE_DATABASE, clickhouse_settings: { ...options.clickhouse_settings, prefer_localhost_replica: 1 },
    });
    clients.push(clusterCh);
  });

  it('records its migrations once, and refuses a database made by the other set', async () => {
    expect(await migrateClickHouse(clustered, undefined, rehearsalRewrite)).toEqual([]);
    await expect(migrateClickHouse({ ...clustered, CLICKHOUSE_CLUSTER: '' })).rejects.toThrow(
      /mig_cluster: its logs table is Distributed, made by the cluster migrations, but CLICKHOUSE_CLUSTER is empty/);
    await expect(migrateClickHouse({ ...single, CLICKHOUSE_CLUSTER: CLUSTER }, undefined, rehearsalRewrite)).rejects.toThrow(
      /mig_single: its logs table is ReplacingMergeTree, made by the single-server migrations/);
  });

  it('builds the schema of the single-server set', async () => {
    const columns = (db: string, table: string) => rows<Record<string, unknown>>(singleCh,
      `SELECT name, type, position, default_kind, default_expression, compression_codec,
              is_in_partition_key, is_in_sorting_key, is_in_primary_key
       FROM system.columns WHERE database = {db:String} AND table = {table:String} ORDER BY position`, { db, table });
    // A Distributed table has the columns without the keys.
    const unkeyed = (cols: Record<string, unknown>[]) =>
      cols.map((c) => ({ ...c, is_in_partition_key: 0, is_in_sorting_key: 0, is_in_primary_key: 0 }));
    const singleLogs = await columns('mig_single', 'logs');
    expect(singleLogs.map((c) => c.name)).toContain('protocol');
    expect(await columns('mig_cluster', 'logs_local')).toEqual(singleLogs);
    expect(await columns('mig_cluster', 'logs')).toEqual(unkeyed(singleLogs));
    const singleStats = await columns('mig_single', 'log_stats_15m');
    expect(await columns('mig_cluster', 'log_stats_15m_local')).toEqual(singleStats);
    expect(await columns('mig_cluster', 'log_stats_15m')).toEqual(unkeyed(singleStats));
    // 012 took the first-seen filter out of both.
    const gone = `SELECT name FROM system.tables WHERE database = {db:String} AND name IN ('log_keys', 'logs_first_seen', 'log_keys_mv', 'logs_first_seen_mv', 'log_stats_15m_mv')`;
    for (const db of ['mig_single', 'mig_cluster']) expect(await rows(singleCh, gone, { db }), db).toEqual([]);

    // Engines, partitioning, ordering and settings: the rewrite only took the replication out (and the
    // stand-ins were given the window a replicated table has), so the engine clauses must read the
    // same; and the same skip indexes.
    const engine = async (db: string, name: string) =>
      (await rows<{ e: string }>(singleCh, 'SELECT engine_full AS e FROM system.tables WHERE database = {db:String} AND name = {name:String}', { db, name }))[0]?.e;
    expect(await engine('mig_cluster', 'logs_local')).toBe(await engine('mig_single', 'logs'));
    expect(await engine('mig_single', 'logs')).toBe(
      'ReplacingMergeTree PARTITION BY toYYYYMM(created_at) ORDER BY (user_id, created_at, request_id) SETTINGS index_granularity = 8192, non_replicated_deduplication_window = 1000');
    expect(await engine('mig_single', 'log_stats_15m')).toMatch(/^SummingMergeTree .* SETTINGS .*non_replicated_deduplication_window = 1000/);
    expect(await engine('mig_cluster', 'log_stats_15m_local')).toBe(await engine('mig_single', 'log_stats_15m'));
    expect(await engine('mig_cluster', 'log_stats_15m')).toBe(`Distributed('${CLUSTER}', 'mig_cluster', 'log_stats_15m_local', user_id)`);
    const indexes = (db: string, table: string) => rows(singleCh,
      `SELECT name, type_full, expr, granularity FROM system.data_skipping_indices
       WHERE database = {db:String} AND table = {table:String} ORDER BY name`, { db, table });
    expect(await indexes('mig_cluster', 'logs_local')).toEqual(await indexes('mig_single', 'logs'));
    expect(await indexes('mig_single', 'logs')).toHaveLength(2);

    // The view hangs off the local table (a view on the Distributed `logs` would fire on whichever
    // host received the insert, not on the account's shard; one shard here could not tell).
    const dependents = async (db: string, name: string) => (await rows<{ d: string[] }>(singleCh,
      'SELECT dependencies_table AS d FROM system.tables WHERE database = {db:String} AND name = {name:String}', { db, name }))[0]?.d;
    expect(await dependents('mig_cluster', 'logs_local')).toEqual(['log_stats_15m_from_logs_mv']);
    expect(await dependents('mig_cluster', 'logs')).toEqual([]);
    expect(await dependents('mig_single', 'logs')).toEqual(['log_stats_15m_from_logs_mv']);
  });

  it('drops a repeated outbox batch whole: rows reach logs_local through `logs` once, log_stats_15m counts each once', async () => {
    // Two batches as billing/log-outbox.ts sends them, each with its token; both sent again with the
    // same token (a delete lost after ClickHouse took the insert), the second twice.
    const batches = [{ token: 'log-outbox-a', rows: LOG_ROWS.slice(0, 6) }, { token: 'log-outbox-b', rows: LOG_ROWS.slice(6) }];
    for (const ch of [singleCh, clusterCh]) {
      const send = (b: (typeof batches)[number]) => ch.insert({
        table: 'logs', values: b.rows, format: 'JSONEachRow', clickhouse_settings: { insert_deduplication_token: b.token },
      });
      for (const b of [...batches, ...batches, batches[1]!]) await send(b);
    }
    // Through the Distributed table into the local one: every row once, the repeats dropped on insert
    // (not merged away later), though each batch spans two months (two parts).
    for (const [ch, table] of [[clusterCh, 'logs_local'], [singleCh, 'logs']] as const) {
      const stored = await rows<Record<string, unknown>>(ch, `SELECT count() AS n, uniqExact(user_id, created_at, request_id) AS keys FROM ${table}`);
      expect(numeric(stored), table).toEqual([{ n: LOG_ROWS.length, keys: LOG_ROWS.length }]);
    }

    const statsSql = (table: string) => `SELECT user_id, toUnixTimestamp(bucket) AS bucket, type, token_name,
        sum(requests) AS requests, sum(quota) AS quota, sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens
      FROM ${table} GROUP BY user_id, bucket, type, token_name ORDER BY user_id, bucket, type, token_name`;
    const expected = USERS.flatMap((u) => [
      // req-1 and req-2 share MARCH's quarter hour but not their token (k1, k2).
      { user_id: u, bucket: MARCH, type: 2, token_name: 'k1', requests: 1, quota: 100 + u % 10, prompt_tokens: 1, completion_tokens: 1 },
      { user_id: u, bucket: MARCH, type: 2, token_name: 'k2', requests: 1, quota: 200 + u % 10, prompt_tokens: 2, completion_tokens: 1 },
      { user_id: u, bucket: MARCH + 900, type: 2, token_name: 'k1', requests: 1, quota: 300 + u % 10, prompt_tokens: 3, completion_tokens: 1 },
      { user_id: u, bucket: APRIL, type: 2, token_name: 'k2', requests: 1, quota: 400 + u % 10, prompt_tokens: 4, completion_tokens: 1 },
      { user_id: u, bucket: APRIL, type: 5, token_name: 'k1', requests: 1, quota: 0, prompt_tokens: 5, completion_tokens: 1 },
    ]);
    expect(numeric(await rows(singleCh, statsSql('log_stats_15m')))).toEqual(expected);
    expect(numeric(await rows(clusterCh, statsSql('log_stats_15m')))).toEqual(expected);
    expect(numeric(await rows(clusterCh, statsSql('log_stats_15m_local')))).toEqual(expected);
  });

  it("gives the console's queries the same answers as one server", async () => {
    const answers = async (logs: ClickHouseReader) => {
      const out: unknown[] = [];
      for (const userId of USERS) {
        out.push(await queryLogs(logs, { userId }, { page: 1, pageSize: 10 }));
        out.push(await queryLogs(logs, { userId, tokenName: 'k1' }, { page: 1, pageSize: 2 }));
        out.push(await queryLogStat(logs, { userId, startTimestamp: MARCH - 1, endTimestamp: APRIL + 10 }, APRIL + 30));
        out.push(await queryDailyUsage(logs, userId, 7, 0, APRIL + 3600));
        out.push(await queryDailyUsage(logs, userId, 30, 90, MARCH + 3 * 86400));
      }
      return out;
    };
    const fromSingle = await answers(reader(single));
    // As clusterCh: the rehearsal's one replica is reached in-process.
    expect(await answers(reader(clustered, { prefer_localhost_replica: 1 }))).toEqual(fromSingle);
    // And they are the exact figures, not two equal wrong ones.
    expect(fromSingle[0]).toMatchObject({ total: 5 });
    expect(fromSingle[2]).toMatchObject({ quota: 1000 + 4 * (USERS[0]! % 10) });
  });

  it('LOG_RETENTION_DAYS: a TTL ON CLUSTER on the replicated local tables, none on the Distributed ones', async () => {
    const engine = async (name: string) => (await rows<{ e: string }>(singleCh,
      "SELECT engine_full AS e FROM system.tables WHERE database = 'mig_cluster' AND name = {name:String}", { name }))[0]?.e;
    const distributed = [await engine('logs'), await engine('log_stats_15m')];
    const sent: string[] = [];
    const migrate = (days: number) => migrateClickHouse({ ...clustered, LOG_RETENTION_DAYS: days }, undefined, (s) => {
      sent.push(s);
      return rehearsalRewrite(s);
    });
    const alters = () => sent.splice(0).filter((s) => s.startsWith('ALTER'));

    expect(await migrate(30)).toEqual([]);
    const set = alters();
    expect(set).toHaveLength(4);
    for (const q of set) {
      const [parsed] = await rows<{ f: string }>(singleCh, 'SELECT formatQuery({q:String}) AS f', { q });
      expect(parsed?.f, q).toMatch(new RegExp(`^ALTER TABLE (logs|log_stats_15m)_local ON CLUSTER ${CLUSTER}\\s`));
    }
    expect(await engine('logs_local')).toContain(' TTL created_at + toIntervalDay(30) SETTINGS ');
    expect(await engine('log_stats_15m_local')).toContain(' TTL bucket + toIntervalDay(30) SETTINGS ');
    expect([await engine('logs'), await engine('log_stats_15m')]).toEqual(distributed);
    await migrate(30);
    expect(alters()).toEqual([]);

    // Back to the single set's tables.
    await migrate(0);
    expect(alters()).toHaveLength(4);
    expect(await engine('logs_local')).toBe((await rows<{ e: string }>(singleCh,
      "SELECT engine_full AS e FROM system.tables WHERE database = 'mig_single' AND name = 'logs'"))[0]?.e);
  });
});
