// A console request that needs Redis while Redis cannot be reached (a restart, a failover, a network
// cut): 503 QUOTA_STORE_UNAVAILABLE with Retry-After, as a Postgres outage is answered. Before: 500
// "internal server error", logged as an unhandled console error, which the web console reads as a bug
// (review operator, finding 6). Redis is cut here by closing the console's own connection, which
// fails every command as a connection ioredis has given up on does.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { freePort } from '../../infra/testing/free-port.js';
import { isRedisUnavailable } from '../../infra/redis/unavailable.js';
import { type ConsoleHarness, startConsoleHarness } from '../../tests/harness/console-harness.js';

const KEY = { name: 'k', remain_quota: 0, unlimited_quota: true, expired_time: -1 };
const UNAVAILABLE = { success: false, message: 'the console cannot reach its quota store (Redis) right now; retry shortly' };

let h: ConsoleHarness;
beforeAll(async () => {
  h = await startConsoleHarness();
});
afterAll(async () => {
  if (h && h.redis.status !== 'ready') await h.redis.connect().catch(() => undefined);
  await h?.close();
});

describe('Redis unreachable', () => {
  it('ioredis\' own error of a server it cannot reach is taken for an outage', async () => {
    const port = await freePort();
    const r = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, retryStrategy: () => 100, lazyConnect: false });
    r.on('error', () => undefined);
    const err = await r.get('x').then(() => null, (e: unknown) => e);
    r.disconnect();
    expect((err as Error).name).toBe('MaxRetriesPerRequestError');
    expect(isRedisUnavailable(err)).toBe(true);
  });

  it('a login and an administrator\'s debit are 503 with Retry-After, and pass once Redis is back', async () => {
    const user = await h.account({ quota: 1000 });
    const admin = await h.account({ role: 10 });
    h.redis.disconnect();
    const login = await h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username: user.user.username, password: user.password } });
    expect(login.statusCode, login.body).toBe(503);
    expect(login.headers['retry-after']).toBe('1');
    expect(login.json()).toEqual(UNAVAILABLE);
    // An administrator's debit takes its hold on the mirror inside its transaction: refused whole.
    const debit = await h.app.inject({ method: 'POST', url: '/api/user/manage', headers: admin.auth, payload: { id: user.user.id, action: 'add_quota', value: -100 } });
    expect(debit.statusCode, debit.body).toBe(503);
    expect(debit.json()).toEqual(UNAVAILABLE);
    expect((await h.sql`SELECT 1 FROM ledger WHERE user_id = ${user.user.id}`).length).toBe(0);
    expect((await h.sql<{ quota: number }[]>`SELECT quota FROM users WHERE id = ${user.user.id}`)[0]!.quota).toBe(1000);
    // What needs no Redis goes on (a key write's rate slot is skipped while Redis is away, by design).
    expect((await h.app.inject({ method: 'GET', url: '/api/user/self', headers: user.auth })).statusCode).toBe(200);
    expect((await h.app.inject({ method: 'POST', url: '/api/token/', headers: user.auth, payload: KEY })).statusCode).toBe(200);

    await h.redis.connect();
    const again = await h.app.inject({ method: 'POST', url: '/api/user/login', payload: { username: user.user.username, password: user.password } });
    expect(again.statusCode, again.body).toBe(200);
    const debited = await h.app.inject({ method: 'POST', url: '/api/user/manage', headers: admin.auth, payload: { id: user.user.id, action: 'add_quota', value: -100 } });
    expect(debited.statusCode, debited.body).toBe(200);
    expect((await h.sql<{ quota: number }[]>`SELECT quota FROM users WHERE id = ${user.user.id}`)[0]!.quota).toBe(900);
  });
});
