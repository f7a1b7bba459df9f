// The billing worker against real Redis, Postgres and ClickHouse: replays change nothing, entries
// of a dead worker are claimed, bad entries are set aside.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClickHouse } from '../infra/clickhouse/client.js';
import { createLogger } from '../infra/logger.js';
import { createSql } from '../infra/postgres/client.js';
import { createRedis } from '../infra/redis/client.js';
import { redisKeys } from '../infra/redis/keys.js';
import { testConfig } from '../infra/testing/test-config.js';
import { BILLING_GROUP, BillingWorker, type BatchReport } from './billing-worker.js';
import { encodeUsageEvent, type UsageEvent } from '../core/usage/usage-event.js';

const config = testConfig({ BILLING_CLAIM_IDLE_MS: '200' });
const sql = createSql(config);
const redis = createRedis(config, 'billing-test', { blocking: true });
const ch = createClickHouse(config);
const keys = redisKeys(config.REDIS_PREFIX);
const log = createLogger(config, 'billing-test');
const stream = keys.usageStream();
let userId = 0;
let tokenId = 0;

function worker(consumer: string, claimIdleMs = 200, minBatchIntervalMs = 0) {
  return new BillingWorker(redis, sql, ch, log, {
    stream, deadLetterStream: stream + ':dead', consumer, batchSize: 100, blockMs: 20, claimIdleMs, minBatchIntervalMs,
  });
}

function usage(quota: number, extra: Partial<UsageEvent> = {}): UsageEvent {
  return {
    v: 1, type: 2, request_id: randomUUID(), upstream_request_id: 'req_x', user_id: userId, username: 'billing-test',
    token_id: tokenId, token_name: 'k', token_limited: true, channel: 0, model_name: 'claude-haiku-4-5', group: 'default',
    quota, prompt_tokens: 10, completion_tokens: 20, is_stream: false, use_time_ms: 1200,
    created_at: Math.floor(Date.now() / 1000), content: 'test', ...extra,
  };
}

async function account() {
  const [u] = await sql`SELECT quota, used_quota, request_count FROM users WHERE id = ${userId}`;
  const [t] = await sql`SELECT remain_quota, used_quota FROM tokens WHERE id = ${tokenId}`;
  return { quota: u!.quota as number, used_quota: u!.used_quota as number, request_count: u!.request_count as number, token_remain: t!.remain_quota as number, token_used: t!.used_quota as number };
}

async function loggedQuota(): Promise<{ n: number; q: number }> {
  const rs = await ch.query({
    query: 'SELECT count() AS n, sum(quota) AS q FROM logs FINAL WHERE user_id = {u:UInt64}',
    query_params: { u: userId }, format: 'JSONEachRow',
  });
  const [row] = await rs.json<{ n: string | number; q: string | number }>();
  return { n: Number(row!.n), q: Number(row!.q) };
}

async function waitFor(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A worker of its own settles every entry in the stream and drains its log rows; its batch reports. */
async function settleAllWith(consumer: string): Promise<BatchReport[]> {
  const w = worker(consumer);
  const reports: BatchReport[] = [];
  w.onBatch = (r) => reports.push(r);
  await w.start();
  await waitFor(async () => (await redis.xlen(stream)) === 0);
  await w.drainOutbox();
  await w.stop();
  return reports;
}

/** Since `before`: the account debited, and logged, exactly these requests and this quota. */
async function expectBilled(before: Awaited<ReturnType<typeof account>>, beforeLogged: { n: number; q: number }, billed: { requests: number; quota: number }) {
  const after = await account();
  expect(after.quota).toBe(before.quota - billed.quota);
  expect(after.request_count).toBe(before.request_count + billed.requests);
  expect(await loggedQuota()).toEqual({ n: beforeLogged.n + billed.requests, q: beforeLogged.q + billed.quota });
}

async function deadLetters(): Promise<string[][]> {
  return ((await redis.xrange(stream + ':dead', '-', '+')) as [string, string[]][]).map(([, f]) => f);
}

beforeAll(async () => {
  const name = `billing-${randomUUID().slice(0, 8)}`;
  const [u] = await sql`INSERT INTO users (username, password_hash, quota, aff_code) VALUES (${name}, 'x', 10000, ${name}) RETURNING id`;
  userId = u!.id as number;
  const [t] = await sql`INSERT INTO tokens (user_id, name, key_hash, key_ciphertext, key_mask, remain_quota)
                        VALUES (${userId}, 'k', ${Buffer.from(name)}, ${Buffer.from('x')}, 'sk-…', 5000) RETURNING id`;
  tokenId = t!.id as number;
});

afterAll(async () => {
  const left = await redis.keys(`${config.REDIS_PREFIX}:*`);
  if (left.length) await redis.del(...left);
  redis.disconnect();
  await sql.end();
  await ch.close();
});

describe('BillingWorker', () => {
  it('applies a batch once: a replayed request id moves no money and logs no second row', async () => {
    const a = usage(100);
    const b = usage(250, { token_limited: false });
    for (const e of [a, b, a]) await redis.xadd(stream, '*', 'e', encodeUsageEvent(e));
    const w = worker('w1');
    await w.start();
    await waitFor(async () => (await redis.xlen(stream)) === 0);
    // The same event arriving again later (a replay after a crash before XACK).
    await redis.xadd(stream, '*', 'e', encodeUsageEvent(a));
    await waitFor(async () => (await redis.xlen(stream)) === 0);
    await w.stop();

    expect(await account()).toEqual({ quota: 10000 - 350, used_quota: 350, request_count: 2, token_remain: 5000 - 100, token_used: 350 });
    const [ledger] = await sql`SELECT COUNT(*)::int AS n, SUM(quota)::bigint AS q FROM ledger WHERE user_id = ${userId}`;
    expect({ n: ledger!.n, q: Number(ledger!.q) }).toEqual({ n: 2, q: 350 });
    expect(await loggedQuota()).toEqual({ n: 2, q: 350 });
  });

  it('claims the entries a dead worker left pending', async () => {
    const before = await account();
    const e = usage(40);
    await redis.xadd(stream, '*', 'e', encodeUsageEvent(e));
    // A worker that read the entry and died: it is pending under its name, never acknowledged.
    await redis.xreadgroup('GROUP', BILLING_GROUP, 'dead-worker', 'COUNT', 10, 'STREAMS', stream, '>');
    const pending = (await redis.xpending(stream, BILLING_GROUP)) as [number, ...unknown[]];
    expect(pending[0]).toBe(1);
    const w = worker('w2', 200);
    await w.start();
    await waitFor(async () => (await redis.xlen(stream)) === 0);
    await w.stop();
    expect((await account()).quota).toBe(before.quota - 40);
    expect(((await redis.xpending(stream, BILLING_GROUP)) as [number])[0]).toBe(0);
  });

  it('moves an undecodable entry to the dead-letter stream and keeps going', async () => {
    const before = await account();
    await redis.xadd(stream, '*', 'e', '{"v":1,"type":"nonsense"}');
    await redis.xadd(stream, '*', 'e', encodeUsageEvent(usage(5)));
    const w = worker('w3');
    await w.start();
    await waitFor(async () => (await redis.xlen(stream)) === 0);
    await w.stop();
    expect((await account()).quota).toBe(before.quota - 5);
    const dead = (await redis.xrange(stream + ':dead', '-', '+')) as [string, string[]][];
    expect(dead).toHaveLength(1);
    expect(dead[0]![1]).toContain('{"v":1,"type":"nonsense"}');
  });

  it('settles each event of an entry holding several (a relay\'s settlement call), dead-lettering only the one that does not decode', async () => {
    const before = await account();
    const beforeLogged = await loggedQuota();
    await redis.del(stream + ':dead');
    const [a, b] = [usage(11), usage(13)];
    const bad = '{"v":1,"type":"nonsense"}';
    const id = await redis.xadd(stream, '*', 'e', [encodeUsageEvent(a), bad, encodeUsageEvent(b)].join('\n'));
    expect(await settleAllWith('w5')).toEqual([{ entries: 1, events: 3, applied: 2, replayed: 0, rejected: 1 }]);
    await expectBilled(before, beforeLogged, { requests: 2, quota: 24 });
    // The dead letter holds the bad event alone, under its entry's id: replaying it cannot repeat the others.
    expect(await deadLetters()).toEqual([['source_id', id, 'e', bad]]);
  });

  // An event that decodes but that Postgres refuses (a token count past the ledger's integer, text
  // with a NUL) failed its whole batch, read again and again: billing stopped for every event behind
  // it. It is set aside alone; the events around it, in its entry and in the others, are billed.
  it('dead-letters an event Postgres refuses, alone, and bills the rest of its batch', async () => {
    const before = await account();
    const beforeLogged = await loggedQuota();
    await redis.del(stream + ':dead');
    const [a, b, c] = [usage(3), usage(7), usage(19)];
    const tooMany = encodeUsageEvent(usage(5, { prompt_tokens: 3_000_000_000 }));
    const nul = encodeUsageEvent(usage(2, { model_name: 'claude\u0000haiku' }));
    const first = await redis.xadd(stream, '*', 'e', [encodeUsageEvent(a), tooMany, encodeUsageEvent(b)].join('\n'));
    const second = await redis.xadd(stream, '*', 'e', nul);
    await redis.xadd(stream, '*', 'e', encodeUsageEvent(c));
    expect(await settleAllWith('w7')).toEqual([{ entries: 3, events: 5, applied: 3, replayed: 0, rejected: 2 }]);
    await expectBilled(before, beforeLogged, { requests: 3, quota: 29 });
    expect(await deadLetters()).toEqual([['source_id', first, 'e', tooMany], ['source_id', second, 'e', nul]]);
  });

  it('reads about batchSize events a batch when each entry holds many', async () => {
    const before = await account();
    // A backlog of 12 relay entries of 25 events each, read with batchSize 50.
    for (let i = 0; i < 12; i++) await redis.xadd(stream, '*', 'e', Array.from({ length: 25 }, () => encodeUsageEvent(usage(1))).join('\n'));
    const w = new BillingWorker(redis, sql, ch, log, {
      stream, deadLetterStream: stream + ':dead', consumer: 'w6', batchSize: 50, blockMs: 20, claimIdleMs: 200, minBatchIntervalMs: 0,
    });
    const reports: BatchReport[] = [];
    w.onBatch = (r) => reports.push(r);
    await w.start();
    await waitFor(async () => (await redis.xlen(stream)) === 0);
    await w.stop();
    expect(reports.reduce((n, r) => n + r.events, 0)).toBe(300);
    // The first read guesses 16 events an entry (3 entries); from then on, 2 entries of 25.
    expect(reports.map((r) => r.events)).toEqual([75, 50, 50, 50, 50, 25]);
    expect((await account()).quota).toBe(before.quota - 300);
  });

  it('gathers events arriving during the minimum batch interval into one batch', async () => {
    const before = await account();
    const w = worker('w4', 200, 400);
    const sizes: number[] = [];
    w.onBatch = (r) => sizes.push(r.entries);
    await w.start();
    await redis.xadd(stream, '*', 'e', encodeUsageEvent(usage(1)));
    await waitFor(async () => sizes.length === 1);
    for (let i = 0; i < 5; i++) await redis.xadd(stream, '*', 'e', encodeUsageEvent(usage(1)));
    await waitFor(async () => (await redis.xlen(stream)) === 0);
    await w.stop();
    expect(sizes).toEqual([1, 5]);
    expect((await account()).quota).toBe(before.quota - 6);
  });
});
