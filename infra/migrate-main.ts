// `make migrate`: Postgres, then ClickHouse, each safe to run again. A failure is one line on stderr
// and exit 1, not Node's dump of the error (pg's DatabaseError printed some 20 fields and a stack):
//   migrate: cannot connect to Postgres at 127.0.0.1:5432 (DATABASE_URL): connect ECONNREFUSED 127.0.0.1:5432
//   migrate: Postgres migration failed: migration 012_x.sql failed: <Postgres's message>
// The address is the URL's host and port only, never its user information (a password).
import { loadConfigOrExit, type Config } from './config.js';
import { migrateClickHouse } from './clickhouse/migrate.js';
import { migratePostgres } from './postgres/migrate.js';
import { serverAddress } from './server-address.js';

/** Errors of reaching the server (Node's socket errors), not of a migration's statements. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'ENOENT', 'EACCES']);

function codeOf(err: unknown): string | undefined {
  const e = err as { code?: unknown; errors?: unknown[] } | null;
  if (typeof e?.code === 'string') return e.code;
  // Node's connect to a host name with several addresses fails with an AggregateError of each attempt.
  return Array.isArray(e?.errors) && e.errors.length > 0 ? codeOf(e.errors[0]) : undefined;
}

/** The error's message on one line (an AggregateError's own message is empty: its attempts'). */
function messageOf(err: unknown): string {
  const e = err as { message?: unknown; errors?: unknown[] } | null;
  let text = typeof e?.message === 'string' ? e.message : '';
  if (!text && Array.isArray(e?.errors)) text = e.errors.map(messageOf).filter(Boolean).join('; ');
  text ||= codeOf(err) ?? String(err);
  return text.split('\n').map((l) => l.trim()).filter(Boolean).join(' ');
}

/**
 * Whether the server could not be reached or refused the session: a socket error, or Postgres's
 * SQLSTATE of a connection exception (08), an authorization refused (28: no such role, a wrong
 * password), no such database (3D000), too many connections (53300) or a server starting up or
 * shutting down (57P01-57P03).
 */
function unreachable(err: unknown): boolean {
  const code = codeOf(err);
  if (code !== undefined && (NETWORK_CODES.has(code) || /^(08|28|3D)[0-9A-Z]{3}$/.test(code) || ['53300', '57P01', '57P02', '57P03'].includes(code))) return true;
  return /Connection terminated|connection timeout|timeout expired|socket hang up/i.test(messageOf(err));
}

/** One store's migrations, its outcome printed; a failure is one line on stderr and exit 1. */
async function migrate(store: { name: string; variable: string; url: string; port: number }, run: () => Promise<string[]>): Promise<void> {
  try {
    const applied = await run();
    console.log(`${store.name.toLowerCase()}: ${applied.length ? `applied ${applied.join(', ')}` : 'up to date'}`);
  } catch (err) {
    process.stderr.write(`migrate: ${unreachable(err)
      ? `cannot connect to ${store.name} at ${serverAddress(store.url, store.port)} (${store.variable}): ${messageOf(err)}`
      : `${store.name} migration failed: ${messageOf(err)}`}\n`);
    process.exit(1);
  }
}

const config: Config = loadConfigOrExit('migrate');
await migrate({ name: 'Postgres', variable: 'DATABASE_URL', url: config.DATABASE_URL, port: 5432 }, () => migratePostgres(config));
await migrate({ name: 'ClickHouse', variable: 'CLICKHOUSE_URL', url: config.CLICKHOUSE_URL, port: 8123 }, () => migrateClickHouse(config));
