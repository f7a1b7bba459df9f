// Applies infra/clickhouse/migrations/NNN_name.sql in order, each once. ClickHouse has no transactions
// and accepts one statement per request, so a file is split into statements which should each be
// idempotent (IF NOT EXISTS): a file interrupted half-way is simply run again from the start.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config.js';
import { projectRoot } from '../project-root.js';
import { createClickHouse, createClickHouseAdmin } from './client.js';

export function migrationsDir(): string {
  return join(projectRoot(), 'infra/clickhouse/migrations');
}

export async function migrateClickHouse(config: Config, dir = migrationsDir()): Promise<string[]> {
  const admin = createClickHouseAdmin(config);
  try {
    await admin.command({ query: `CREATE DATABASE IF NOT EXISTS \`${config.CLICKHOUSE_DATABASE}\`` });
  } finally {
    await admin.close();
  }
  const files = readdirSync(dir).filter((f) => /^\d+_.*\.sql$/.test(f)).sort();
  // A migration may backfill a table from `logs` (009: 10 M rows take about a minute on the embedded
  // server): far longer than a service's 30 s request timeout.
  const ch = createClickHouse(config, 15 * 60_000);
  const applied: string[] = [];
  try {
    // ReplacingMergeTree on name: two processes migrating at once leave one row per file.
    await ch.command({
      query: `CREATE TABLE IF NOT EXISTS schema_migrations (name String, applied_at DateTime DEFAULT now())
        ENGINE = ReplacingMergeTree ORDER BY name`,
    });
    const rows = await (await ch.query({ query: 'SELECT name FROM schema_migrations FINAL', format: 'JSONEachRow' }))
      .json<{ name: string }>();
    const done = new Set(rows.map((r) => r.name));
    for (const file of files) {
      if (done.has(file)) continue;
      try {
        for (const statement of splitStatements(readFileSync(join(dir, file), 'utf8'))) {
          await ch.command({ query: statement });
        }
      } catch (err) {
        throw new Error(`clickhouse migration ${file} failed: ${(err as Error).message}`, { cause: err });
      }
      await ch.insert({ table: 'schema_migrations', values: [{ name: file }], format: 'JSONEachRow' });
      applied.push(file);
    }
  } finally {
    await ch.close();
  }
  return applied;
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
