// Applies infra/postgres/migrations/NNN_name.sql in order, each once, each in its own transaction
// (with its prepare step, if it has one: migration-steps.ts), under an advisory lock so that two
// processes starting together do not race.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import type { Config } from '../config.js';
import { projectRoot } from '../project-root.js';
import { PREPARE_STEPS } from './migration-steps.js';

const LOCK_ID = 727_001;

export async function ensureDatabase(config: Config): Promise<void> {
  const url = new URL(config.DATABASE_URL);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await client.query(`CREATE DATABASE "${name.replaceAll('"', '""')}"`);
  } catch (err) {
    // Another process created it between our check and our CREATE.
    if ((err as { code?: string }).code !== '42P04') throw err;
  } finally {
    await client.end();
  }
}

export interface MigrateOptions {
  /** Only the files whose name sorts before this one: a test of a data migration starts from the schema it converts. */
  before?: string;
}

export async function migratePostgres(config: Config, options: MigrateOptions = {}): Promise<string[]> {
  await ensureDatabase(config);
  const dir = join(projectRoot(), 'infra/postgres/migrations');
  const files = readdirSync(dir).filter((f) => /^\d+_.*\.sql$/.test(f) && (options.before === undefined || f < options.before)).sort();
  // pg (not postgres.js) because a migration file is several statements: pg sends it with the simple
  // query protocol in one round trip.
  const client = new pg.Client({ connectionString: config.DATABASE_URL });
  await client.connect();
  const applied: string[] = [];
  try {
    await client.query('SELECT pg_advisory_lock($1)', [LOCK_ID]);
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`);
    const done = new Set((await client.query('SELECT name FROM schema_migrations')).rows.map((r) => r.name));
    for (const file of files) {
      if (done.has(file)) continue;
      await client.query('BEGIN');
      try {
        await PREPARE_STEPS[file]?.(client, config);
        await client.query(readFileSync(join(dir, file), 'utf8'));
        await client.query('INSERT INTO schema_migrations (name) VALUES ($1)', [file]);
        await client.query('COMMIT');
        applied.push(file);
      } catch (err) {
        await client.query('ROLLBACK');
        throw new Error(`migration ${file} failed: ${(err as Error).message}`);
      }
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [LOCK_ID]).catch(() => {});
    await client.end();
  }
  return applied;
}
