// Writes console-web/src/api/schema.gen.ts from the console API's OpenAPI document, built from the
// registered endpoints without any connection (postgres.js connects on its first query, which this
// never makes). Run by `make build` before the web console's build.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ClickHouseReader } from '../../infra/clickhouse/read-client.js';
import { loadConfig } from '../../infra/config.js';
import { createSql } from '../../infra/postgres/client.js';
import type { Redis } from '../../infra/redis/client.js';
import { projectRoot } from '../../infra/project-root.js';
import type { QuotaStore } from '../../core/quota/quota-store.js';
import { buildConsoleApp } from '../app.js';
import { buildOpenApiDocument } from './openapi.js';
import { openApiToTypeScript } from './openapi-typescript.js';

// Neither key sealing nor Redis is reached: only the route declarations are read.
const config = loadConfig({ KEY_SECRET: 'openapi-types-only-never-seals-a-key', LOG_LEVEL: 'silent' });
const sql = createSql(config);
const app = buildConsoleApp({
  config, sql, redis: {} as Redis, logReader: {} as ClickHouseReader, quotaStore: {} as QuotaStore,
});
const doc = buildOpenApiDocument(app.consoleApi.endpoints) as Parameters<typeof openApiToTypeScript>[0];
const target = join(projectRoot(), 'console-web', 'src', 'api', 'schema.gen.ts');
writeFileSync(target, openApiToTypeScript(doc));
process.stdout.write(`wrote ${target} (${Object.keys(doc.paths).length} paths)\n`);
// Whatever the app set up besides its routes (timers, lazy clients) is of no use here: done.
await sql.end({ timeout: 1 });
process.exit(0);
