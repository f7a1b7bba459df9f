// A console request whose Postgres connection is lost, or cannot be made, is answered 503 in the
// envelope with Retry-After, not 500 "internal server error" (the web console read that as a bug):
// seen with pg_terminate_backend over the console's connections under load (16 of 1,200 requests).
//
// The console reaches its scratch database through a proxy that answers the session lookup, whenever
// it is sent, the way a terminated backend does (ErrorResponse FATAL 57P01, then the close); and a
// second console is given a port where nothing listens. The session lookup, which every signed-in
// request runs first, is tried again once on a new connection (auth/sessions.ts).
import { createServer, type AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClickHouseReader } from '../../infra/clickhouse/read-client.js';
import { createSql, type Sql } from '../../infra/postgres/client.js';
import { createRedis, type Redis } from '../../infra/redis/client.js';
import { redisKeys } from '../../infra/redis/keys.js';
import { startPostgresFaultProxy, type PostgresFaultProxy } from '../../infra/testing/postgres-fault-proxy.js';
import { createTestDatabase, type TestDatabase } from '../../infra/testing/test-database.js';
import { testConfig, uniqueName } from '../../infra/testing/test-config.js';
import { QuotaStore } from '../../core/quota/quota-store.js';
import { postgresBalanceSource } from '../../core/quota/postgres-balance-source.js';
import { insertAccount } from '../accounts/account-store.js';
import { hashPassword } from '../auth/password.js';
import { buildConsoleApp } from '../app.js';

const FAST_SCRYPT = { log2N: 10, r: 8, p: 1 };

let db: TestDatabase;
let proxy: PostgresFaultProxy;
let redis: Redis;
const apps: FastifyInstance[] = [];
const pools: Sql[] = [];

function consoleOn(databaseUrl: string): FastifyInstance {
  const config = testConfig({ DATABASE_URL: databaseUrl, LOGIN_IP_RATE_LIMIT: '1000000' });
  const sql = createSql(config, { max: 2 });
  pools.push(sql);
  const quotaStore = new QuotaStore(redis, redisKeys(config.REDIS_PREFIX), postgresBalanceSource(sql));
  const app = buildConsoleApp({ config, sql, redis, logReader: createClickHouseReader(config), quotaStore });
  apps.push(app);
  return app;
}

beforeAll(async () => {
  db = await createTestDatabase('pgdown');
  const target = new URL(db.url);
  // The session lookup (auth/sessions.ts, resolveSession) is the statement every signed-in request runs.
  proxy = await startPostgresFaultProxy({ host: target.hostname, port: Number(target.port || 5432) }, { failQueriesContaining: ['FROM access_tokens t JOIN users u'] });
  redis = createRedis(testConfig(), 'pgdown-test');
});
afterAll(async () => {
  await Promise.allSettled(apps.map((a) => a.close()));
  await Promise.allSettled(pools.map((p) => p.end({ timeout: 5 })));
  redis?.disconnect();
  await proxy?.close();
  await db?.drop();
});

describe('the console without its database', () => {
  it('answers 503 DATABASE_UNAVAILABLE with Retry-After when the connection is lost under a query', async () => {
    const url = new URL(db.url);
    url.port = String(proxy.port);
    const app = consoleOn(url.toString());
    await app.ready();
    const password = 'pw-database-unavailable';
    const user = await insertAccount(pools[0]!, { username: uniqueName(), passwordHash: await hashPassword(password, FAST_SCRYPT), role: 1, group: 'default' });
    const login = await app.inject({ method: 'POST', url: '/api/user/login', payload: { username: user.username, password } });
    expect(login.statusCode).toBe(200);
    const token = (login.json() as { data: { token: string } }).data.token;

    const before = proxy.failedQueries;
    const res = await app.inject({ method: 'GET', url: '/api/user/self', headers: { authorization: `Bearer ${token}` } });
    expect(proxy.failedQueries).toBeGreaterThan(before);
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.json()).toEqual({ success: false, message: 'the console cannot reach its database right now; retry shortly' });
  });

  it('looks the session up again, once, on a new connection: one lost connection costs no request', async () => {
    const target = new URL(db.url);
    const once = await startPostgresFaultProxy({ host: target.hostname, port: Number(target.port || 5432) }, { failQueriesContaining: ['FROM access_tokens t JOIN users u'], failAtMost: 1 });
    try {
      const url = new URL(db.url);
      url.port = String(once.port);
      const app = consoleOn(url.toString());
      await app.ready();
      const password = 'pw-database-retried';
      const user = await insertAccount(pools.at(-1)!, { username: uniqueName(), passwordHash: await hashPassword(password, FAST_SCRYPT), role: 1, group: 'default' });
      const login = await app.inject({ method: 'POST', url: '/api/user/login', payload: { username: user.username, password } });
      const token = (login.json() as { data: { token: string } }).data.token;
      const res = await app.inject({ method: 'GET', url: '/api/user/self', headers: { authorization: `Bearer ${token}` } });
      expect(once.failedQueries).toBe(1);
      expect(res.statusCode).toBe(200);
      expect((res.json() as { data: { username: string } }).data.username).toBe(user.username);
    } finally {
      await once.close();
    }
  });

  it('answers 503 DATABASE_UNAVAILABLE when no connection can be made', async () => {
    // A port that refuses: listened on, then closed.
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const url = new URL(db.url);
    url.host = `127.0.0.1:${port}`;
    const app = consoleOn(url.toString());
    await app.ready();
    const res = await app.inject({ method: 'POST', url: '/api/user/login', payload: { username: 'nobody-here', password: 'whatever-1234' } });
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect((res.json() as { success: boolean }).success).toBe(false);
  });
});
