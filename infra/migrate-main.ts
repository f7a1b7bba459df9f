// `make migrate`: Postgres, then ClickHouse, each safe to run again.
import { loadConfig } from './config.js';
import { migrateClickHouse } from './clickhouse/migrate.js';
import { migratePostgres } from './postgres/migrate.js';

const config = loadConfig();
const pg = await migratePostgres(config);
console.log(`postgres: ${pg.length ? `applied ${pg.join(', ')}` : 'up to date'}`);
const ch = await migrateClickHouse(config);
console.log(`clickhouse: ${ch.length ? `applied ${ch.join(', ')}` : 'up to date'}`);
