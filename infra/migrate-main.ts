// `make migrate`: Postgres, then ClickHouse, each safe to run again.
import { loadConfigOrExit } from './config.js';
import { migrateClickHouse } from './clickhouse/migrate.js';
import { migratePostgres } from './postgres/migrate.js';

const config = loadConfigOrExit('migrate');
const pg = await migratePostgres(config);
console.log(`postgres: ${pg.length ? `applied ${pg.join(', ')}` : 'up to date'}`);
const ch = await migrateClickHouse(config);
console.log(`clickhouse: ${ch.length ? `applied ${ch.join(', ')}` : 'up to date'}`);
