// A Redis without persistence restarts empty while the billing worker holds a batch it read before
// (issue 15, item 5). The relay refills each mirror it needs from Postgres, which does not hold that
// batch yet; then the worker commits it. Postgres is debited, and the mirror, refilled before the
// commit, must be debited too: else the account can spend the batch's cost twice. A mirror refilled
// after the commit already holds it and must not be debited again. A dead-lettered event is the same
// case when it is replayed after the restart.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../infra/logger.js';
import { createSql, type Sql } from '../infra/postgres/client.js';
import { createRedis, type Redis } from '../infra/redis/client.js';
import { redisKeys, type RedisKeys } from '../infra/redis/keys.js';
import { testConfig } from '../infra/testing/test-config.js';
import type { Config } from '../infra/config.js';
import { postgresBalanceSource } from '../core/quota/postgres-balance-source.js';
import { QuotaStore } from '../core/quota/quota-store.js';
import { encodeUsageEvent, usageEvent } from '../core/usage/usage-event.js';
import { startRedisServer, type OwnRedisServer } from '../tests/chaos/redis-server.js';
import { startBilling, type RunningBilling } from './service.js';
import { replayDeadLetters } from './replay-dead-letters.js';

const REDIS_PORT = 6400;

let server: OwnRedisServer;
let config: Config;
let sql: Sql;
let redis: Redis;
let keys: RedisKeys;
let quota: QuotaStore;
let billing: RunningBilling | null = null;

interface Account {
  userId: number;
  tokenId: number;
}

async function account(funded: number, keyLimit: number): Promise<Account> {
  const name = `restart-${randomUUID().slice(0, 8)}`;
  const [u] = await sql`INSERT INTO users (username, password_hash, quota, aff_code) VALUES (${name}, 'x', ${funded}, ${name}) RETURNING id`;
  const [t] = await sql`INSERT INTO tokens (user_id, name, key_hash, key_ciphertext, key_mask, remain_quota)
                        VALUES (${u!.id}, 'k', ${Buffer.from(name)}, ${Buffer.from('x')}, 'sk-…', ${keyLimit}) RETURNING id`;
  return { userId: Number(u!.id), tokenId: Number(t!.id) };
}

async function reserve(a: Account, requestId: string, amount: number): Promise<void> {
  const outcome = await quota.reserve({ userId: a.userId, tokenId: a.tokenId, tokenLimited: true, requestId, amount, deadlineMs: Date.now() + 600_000 });
  expect(outcome).toBe('reserved');
}

/** What the relay's settlement does: the mirror moves and the event is appended, in one script. */
async function settle(a: Account, requestId: string, cost: number, eventJson?: string): Promise<void> {
  const event = usageEvent({
    type: 2, request_id: requestId, user_id: a.userId, token_id: a.tokenId, token_limited: true, quota: cost,
    created_at: Math.floor(Date.now() / 1000), content: 'test',
  });
  expect(await quota.settle({ userId: a.userId, tokenId: a.tokenId, requestId, cost, eventJson: eventJson ?? encodeUsageEvent(event) })).toBe(true);
}

async function books(a: Account): Promise<{ users: number; key: number; mirror: number | null; keyMirror: number | null }> {
  const [u] = await sql`SELECT quota FROM users WHERE id = ${a.userId}`;
  const [t] = await sql`SELECT remain_quota FROM tokens WHERE id = ${a.tokenId}`;
  return { users: Number(u!.quota), key: Number(t!.remain_quota), mirror: await quota.accountBalance(a.userId), keyMirror: await quota.tokenRemain(a.userId, a.tokenId) };
}

async function ledgerRows(requestIds: string[]): Promise<number> {
  const [r] = await sql`SELECT count(*)::int AS n FROM ledger WHERE request_id = ANY(${requestIds}::text[])`;
  return r!.n as number;
}

async function waitFor(what: string, check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Holds the account rows locked in a transaction of its own: the worker's commit waits behind it. */
async function holdRows(userIds: number[]): Promise<() => Promise<void>> {
  const conn = await sql.reserve();
  await conn`BEGIN`;
  await conn`SELECT id FROM users WHERE id = ANY(${userIds}::bigint[]) FOR UPDATE`;
  releaseRows = async () => {
    releaseRows = null;
    await conn`COMMIT`;
    conn.release();
  };
  return releaseRows;
}

/** Entries the worker has read and not acknowledged. */
async function pendingCount(): Promise<number> {
  const p = (await redis.xpending(keys.usageStream(), 'billing')) as [number, ...unknown[]];
  return Number(p[0]);
}

/** A worker started now reads every entry appended so far in its first batch. */
async function startWorker(): Promise<void> {
  billing = await startBilling(config, createLogger(config, 'restart-mirror-test'));
}

async function stopWorker(): Promise<void> {
  await billing?.close();
  billing = null;
}

let releaseRows: (() => Promise<void>) | null = null;

async function restartRedisEmpty(): Promise<void> {
  await server.kill();
  await server.start();
  await waitFor('the test connection back', async () => (await redis.ping()) === 'PONG');
}

beforeAll(async () => {
  server = await startRedisServer({ port: REDIS_PORT, aof: false });
  config = testConfig({ REDIS_URL: server.url, RESERVATION_REAP_INTERVAL_MS: '60000' });
  sql = createSql(config);
  redis = createRedis(config, 'restart-mirror-test');
  keys = redisKeys(config.REDIS_PREFIX);
  quota = new QuotaStore(redis, keys, postgresBalanceSource(sql));
});

afterAll(async () => {
  await releaseRows?.();
  await billing?.close().catch(() => undefined);
  redis?.disconnect();
  await sql?.end();
  await server?.close();
});

describe('a batch read before a Redis restart and committed after the mirror was refilled', () => {
  it('debits the refilled mirror once, and not a mirror refilled after the commit', async () => {
    const refilledEarly = await account(10_000, 5_000);
    const refilledLate = await account(10_000, 5_000);
    const [a1, b1, a2, b2] = ['a1', 'b1', 'a2', 'b2'].map((s) => `req-${s}-${randomUUID()}`) as [string, string, string, string];

    // Both accounts spend in the first Redis; the worker reads the batch and waits on the locked rows.
    const release = await holdRows([refilledEarly.userId, refilledLate.userId]);
    await reserve(refilledEarly, a1, 300);
    await settle(refilledEarly, a1, 100);
    await reserve(refilledLate, b1, 300);
    await settle(refilledLate, b1, 40);
    await startWorker();
    await waitFor('the worker to read the batch', async () => (await pendingCount()) === 2);

    await restartRedisEmpty();
    // The first account's mirrors are refilled from Postgres before the batch commits.
    await reserve(refilledEarly, a2, 200);
    expect(await books(refilledEarly)).toEqual({ users: 10_000, key: 5_000, mirror: 9_800, keyMirror: 4_800 });
    await release();
    await waitFor('the batch committed', async () => (await ledgerRows([a1, b1])) === 2);

    // The second account's mirrors are refilled after the commit.
    await reserve(refilledLate, b2, 200);
    await settle(refilledEarly, a2, 50);
    await settle(refilledLate, b2, 60);
    await waitFor('the second batch committed', async () => (await ledgerRows([a2, b2])) === 2);
    await waitFor('the stream drained', async () => (await pendingCount()) === 0 && (await redis.xlen(keys.usageStream())) === 0);

    // Postgres: funded − 100 − 50 and funded − 40 − 60; each mirror equal to its book.
    expect(await books(refilledEarly)).toEqual({ users: 9_850, key: 4_850, mirror: 9_850, keyMirror: 4_850 });
    expect(await books(refilledLate)).toEqual({ users: 9_900, key: 4_900, mirror: 9_900, keyMirror: 4_900 });
    await stopWorker();
  });

  it('debits the refilled mirror when an event dead-lettered across the restart is replayed', async () => {
    const a = await account(10_000, 5_000);
    const [good, bad, later] = ['good', 'bad', 'later'].map((s) => `req-${s}-${randomUUID()}`) as [string, string, string];

    const release = await holdRows([a.userId]);
    await reserve(a, good, 300);
    await settle(a, good, 100);
    // An event this worker cannot decode (say, written by a newer relay): the mirror moved all the same.
    const badEvent = usageEvent({ type: 2, request_id: bad, user_id: a.userId, token_id: a.tokenId, token_limited: true, quota: 70, created_at: Math.floor(Date.now() / 1000), content: 'test' });
    await reserve(a, bad, 300);
    await settle(a, bad, 70, JSON.stringify({ ...badEvent, quota: 'seventy' }));
    expect(await quota.accountBalance(a.userId)).toBe(10_000 - 170);
    await startWorker();
    await waitFor('the worker to read the batch', async () => (await pendingCount()) === 2);

    await restartRedisEmpty();
    await reserve(a, later, 200);
    await release();
    await waitFor('the good event committed', async () => (await ledgerRows([good])) === 1);
    await waitFor('the bad event dead-lettered', async () => (await redis.xlen(keys.usageDeadLetterStream())) === 1);

    // The worker is upgraded: the entry decodes now, and the operator replays it.
    const [[deadId, fields]] = (await redis.xrange(keys.usageDeadLetterStream(), '-', '+')) as [[string, string[]]];
    const fixed = fields.map((f, i) => (i > 0 && fields[i - 1] === 'e' ? encodeUsageEvent(badEvent) : f));
    await redis.multi().xdel(keys.usageDeadLetterStream(), deadId).xadd(keys.usageDeadLetterStream(), '*', ...fixed).exec();
    expect(await replayDeadLetters(redis, { stream: keys.usageStream(), deadLetterStream: keys.usageDeadLetterStream() })).toEqual({ replayed: 1, kept: [] });
    await waitFor('the replayed event committed', async () => (await ledgerRows([bad])) === 1);

    await settle(a, later, 30);
    await waitFor('the last event committed', async () => (await ledgerRows([later])) === 1);
    await waitFor('the stream drained', async () => (await pendingCount()) === 0 && (await redis.xlen(keys.usageStream())) === 0);
    expect(await books(a)).toEqual({ users: 9_800, key: 4_800, mirror: 9_800, keyMirror: 4_800 });
    await stopWorker();
  });
});
