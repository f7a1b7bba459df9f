// Applies infra/clickhouse/migrations/NNN_name.sql in order, each once. ClickHouse has no transactions
// and accepts one statement per request, so a file is split into statements which should each be
// idempotent (IF NOT EXISTS): a file interrupted half-way is simply run again from the start.
//
// With CLICKHOUSE_CLUSTER set, the set applied is infra/clickhouse/migrations-cluster/ instead, every
// `{cluster}` in it replaced by the setting (checked to be an identifier by infra/config.ts, so it
// can be spliced into the quoted name). A separate set rather than the single-server files run
// through a rewrite: the single set is a history (columns added by ALTERs, a setting set by 002 and
// reset by 010, a backfill INSERT that cannot run ON CLUSTER) while a cluster starts from the end
// state, and each table there is two (a replicated local table and a Distributed one over it) with
// the views on the local one. A rewrite producing that would be harder to review than the DDL itself.
// The two sets are kept in step by infra/clickhouse/migrate-cluster.integration.test.ts, which
// compares the columns they produce: a new migration needs its counterpart in both directories.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config.js';
import { projectRoot } from '../project-root.js';
import { type ClickHouseClient, createClickHouse, createClickHouseAdmin } from './client.js';

/** The migrations for one server (`cluster` empty) or for the cluster set. */
export function migrationsDir(cluster = ''): string {
  return join(projectRoot(), cluster ? 'infra/clickhouse/migrations-cluster' : 'infra/clickhouse/migrations');
}

export function migrationFiles(dir: string): string[] {
  return readdirSync(dir).filter((f) => /^\d+_.*\.sql$/.test(f)).sort();
}

/** The statements of one migration file as sent: on a cluster, `{cluster}` replaced by its name. */
export function migrationStatements(config: Config, path: string): string[] {
  const statements = splitStatements(readFileSync(path, 'utf8'));
  const cluster = config.CLICKHOUSE_CLUSTER;
  return cluster ? statements.map((s) => s.replaceAll('{cluster}', cluster)) : statements;
}

/**
 * What exists before the first migration: the database and the table recording applied migrations.
 * On a cluster both are created on every host, and schema_migrations is ONE replicated table for the
 * whole cluster (a Keeper path without {shard}; the replica name with it, unique even where the
 * servers number their replicas per shard): migrate may be run against any host, and every host must
 * see what was applied, including after the host that ran it is gone.
 */
export function bootstrapStatements(config: Config): { database: string; migrationsTable: string } {
  const cluster = config.CLICKHOUSE_CLUSTER;
  const onCluster = cluster ? ` ON CLUSTER '${cluster}'` : '';
  // ReplacingMergeTree on name: two processes migrating at once leave one row per file.
  const engine = cluster
    ? "ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/schema_migrations', '{shard}-{replica}')"
    : 'ReplacingMergeTree';
  return {
    database: `CREATE DATABASE IF NOT EXISTS \`${config.CLICKHOUSE_DATABASE}\`${onCluster}`,
    migrationsTable: `CREATE TABLE IF NOT EXISTS schema_migrations${onCluster} (name String, applied_at DateTime DEFAULT now())
        ENGINE = ${engine} ORDER BY name`,
  };
}

/**
 * `rewrite` is applied to every statement sent, after the `{cluster}` substitution: the single-host
 * rehearsal of the cluster set (migrate-cluster.integration.test.ts) uses it to take out what needs
 * Keeper. Identity otherwise.
 */
export async function migrateClickHouse(
  config: Config,
  dir = migrationsDir(config.CLICKHOUSE_CLUSTER),
  rewrite: (statement: string) => string = (s) => s,
): Promise<string[]> {
  const bootstrap = bootstrapStatements(config);
  const admin = createClickHouseAdmin(config);
  try {
    await admin.command({ query: rewrite(bootstrap.database) });
  } finally {
    await admin.close();
  }
  const files = migrationFiles(dir);
  // A migration may backfill a table from `logs` (009: 10 M rows take about a minute on the embedded
  // server): far longer than a service's 30 s request timeout.
  const ch = createClickHouse(config, 15 * 60_000);
  const applied: string[] = [];
  try {
    await refuseOtherSet(ch, config);
    await ch.command({ query: rewrite(bootstrap.migrationsTable) });
    const rows = await (await ch.query({ query: 'SELECT name FROM schema_migrations FINAL', format: 'JSONEachRow' }))
      .json<{ name: string }>();
    const done = new Set(rows.map((r) => r.name));
    for (const file of files) {
      if (done.has(file)) continue;
      try {
        for (const statement of migrationStatements(config, join(dir, file))) {
          await ch.command({ query: rewrite(statement) });
        }
      } catch (err) {
        throw new Error(`clickhouse migration ${file} failed: ${(err as Error).message}`, { cause: err });
      }
      await ch.insert({ table: 'schema_migrations', values: [{ name: file }], format: 'JSONEachRow' });
      applied.push(file);
    }
    await applyLogRetention(ch, config, rewrite);
  } finally {
    await ch.close();
  }
  return applied;
}

/**
 * The tables LOG_RETENTION_DAYS bounds and the DateTime column a row's age is read from: on a cluster
 * the replicated local tables (a Distributed table holds no rows and takes no TTL).
 */
function retainedTables(config: Config): { table: string; column: string }[] {
  const suffix = config.CLICKHOUSE_CLUSTER ? '_local' : '';
  return [{ table: `logs${suffix}`, column: 'created_at' }, { table: `log_stats_15m${suffix}`, column: 'bucket' }];
}

// ttl_only_drop_parts: expired rows go by whole parts (and with the merges that happen anyway), never by
// a merge that rewrites a part only to delete rows: at ~6 GB a day that would be a steady rewrite of
// the oldest data, on the cores the relay shares with the embedded server. A part goes once its
// newest row has expired, so the disk holds at most N days plus one monthly partition.
// materialize_ttl_recalculate_only: MODIFY TTL then only computes each existing part's TTL bounds
// (reading the time column) instead of rewriting every part of the table; without those bounds the
// parts written before the TTL would never be dropped.
const RETENTION_SETTINGS = ['ttl_only_drop_parts', 'materialize_ttl_recalculate_only'];

/**
 * The ALTERs that bring the retained tables to LOG_RETENTION_DAYS from `engineFull` (system.tables'
 * engine_full of each): none when they are there already, so that a migration run changes nothing;
 * with 0, the TTL and its settings removed. The setting owns these tables' TTL: one set by hand is
 * replaced. Settings before the TTL, so that its materialization only recalculates.
 */
export function retentionStatements(config: Config, engineFull: Record<string, string>): string[] {
  const days = config.LOG_RETENTION_DAYS;
  const onCluster = config.CLICKHOUSE_CLUSTER ? ` ON CLUSTER '${config.CLICKHOUSE_CLUSTER}'` : '';
  const statements: string[] = [];
  for (const { table, column } of retainedTables(config)) {
    const engine = engineFull[table];
    if (engine === undefined) throw new Error(`clickhouse table ${table} is missing: LOG_RETENTION_DAYS cannot be applied`);
    const ttl = / TTL (.+?)(?: SETTINGS |$)/.exec(engine)?.[1];
    const settings = new Map(
      (/ SETTINGS (.*)$/.exec(engine)?.[1] ?? '').split(', ').map((kv) => {
        const [name = '', value = ''] = kv.split(' = ');
        return [name, value] as const;
      }),
    );
    const alter = `ALTER TABLE ${table}${onCluster}`;
    if (days > 0) {
      if (RETENTION_SETTINGS.some((name) => settings.get(name) !== '1')) {
        statements.push(`${alter} MODIFY SETTING ${RETENTION_SETTINGS.map((name) => `${name} = 1`).join(', ')}`);
      }
      // ClickHouse shows `INTERVAL 30 DAY` as toIntervalDay(30); either reading is the same TTL.
      const current = ttl && new RegExp(`^\`?${column}\`? \\+ (?:toIntervalDay\\((\\d+)\\)|INTERVAL (\\d+) DAY)$`).exec(ttl);
      if (!current || Number(current[1] ?? current[2]) !== days) statements.push(`${alter} MODIFY TTL ${column} + INTERVAL ${days} DAY`);
    } else {
      if (ttl) statements.push(`${alter} REMOVE TTL`);
      const set = RETENTION_SETTINGS.filter((name) => settings.has(name));
      if (set.length) statements.push(`${alter} RESET SETTING ${set.join(', ')}`);
    }
  }
  return statements;
}

// Applied on every run, not as a migration file: the number of days is configuration, and a changed
// setting must reach a database migrated long ago. On a cluster the tables of the host migrate talks
// to stand for all (every statement here is ON CLUSTER). The TTL's materialization is a mutation: the
// embedded server runs it before answering, a real server in the background; either way it reads the
// time column and rewrites nothing (materialize_ttl_recalculate_only).
async function applyLogRetention(ch: ClickHouseClient, config: Config, rewrite: (statement: string) => string): Promise<void> {
  const rows = await (await ch.query({
    query: 'SELECT name, engine_full FROM system.tables WHERE database = currentDatabase() AND name IN {names:Array(String)}',
    query_params: { names: retainedTables(config).map((t) => t.table) },
    format: 'JSONEachRow',
  })).json<{ name: string; engine_full: string }>();
  const engineFull = Object.fromEntries(rows.map((r) => [r.name, r.engine_full]));
  for (const statement of retentionStatements(config, engineFull)) {
    try {
      await ch.command({ query: rewrite(statement) });
    } catch (err) {
      throw new Error(`clickhouse LOG_RETENTION_DAYS=${config.LOG_RETENTION_DAYS}: ${statement} failed: ${(err as Error).message}`, { cause: err });
    }
  }
}

// Both sets name their files alike (001_logs.sql, 009_log_stats.sql), so a database migrated with one
// set would look up to date to the other, which would then create nothing (IF NOT EXISTS) while the
// services expect the other layout. `logs` tells them apart: Distributed only on a cluster.
async function refuseOtherSet(ch: ClickHouseClient, config: Config): Promise<void> {
  const rows = await (await ch.query({
    query: "SELECT engine FROM system.tables WHERE database = currentDatabase() AND name = 'logs'",
    format: 'JSONEachRow',
  })).json<{ engine: string }>();
  const engine = rows[0]?.engine;
  if (engine === undefined || (engine === 'Distributed') === Boolean(config.CLICKHOUSE_CLUSTER)) return;
  throw new Error(
    `clickhouse database ${config.CLICKHOUSE_DATABASE}: its logs table is ${engine}, made by the `
    + `${engine === 'Distributed' ? 'cluster' : 'single-server'} migrations, but CLICKHOUSE_CLUSTER is `
    + `${config.CLICKHOUSE_CLUSTER ? `'${config.CLICKHOUSE_CLUSTER}'` : 'empty'}: set it as when the database was created`,
  );
}

/** Splits SQL on the `;` that end statements (not those in strings, quoted names or comments). */
export function splitStatements(sql: string): string[] {
  const statements: string[] = [];
  let current = '';
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i]!;
    if (c === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      i = end < 0 ? sql.length : end;
      current += '\n';
    } else if (c === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2);
      i = end < 0 ? sql.length : end + 1;
      current += ' ';
    } else if (c === "'" || c === '"' || c === '`') {
      let j = i + 1;
      while (j < sql.length && sql[j] !== c) j += sql[j] === '\\' ? 2 : 1;
      current += sql.slice(i, j + 1);
      i = j;
    } else if (c === ';') {
      if (current.trim()) statements.push(current.trim());
      current = '';
    } else {
      current += c;
    }
  }
  if (current.trim()) statements.push(current.trim());
  return statements;
}
