// The billing worker against real Redis, Postgres and ClickHouse: replays change nothing, entries
// of a dead worker are claimed, bad entries are set aside.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClickHouse } from '../infra/clickhouse/client.js';
import { createLogger } from '../infra/logger.js';
import { createSql, type Sql } from '../infra/postgres/client.js';
import { createRedis } from '../infra/redis/client.js';
import { redisKeys } from '../infra/redis/keys.js';
import { testConfig } from '../infra/testing/test-config.js';
import { postgresBalanceSource } from '../core/quota/postgres-balance-source.js';
import { QuotaStore } from '../core/quota/quota-store.js';
import { BILLING_GROUP, BillingWorker, type BatchReport, type BillingWorkerOptions } from './billing-worker.js';
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

async function deadLetters(of = stream): Promise<string[][]> {
  return ((await redis.xrange(of + ':dead', '-', '+')) as [string, string[]][]).map(([, f]) => f);
}

/**
 * A worker on a stream of its own (`stream` + suffix): an event that stalls it in a failing run
 * holds back none of the other tests.
 */
function workerOn(own: string, consumer: string, opts: Partial<BillingWorkerOptions> = {}, db: Sql = sql) {
  return new BillingWorker(redis, db, ch, log, {
    stream: own, deadLetterStream: own + ':dead', consumer, batchSize: 100, blockMs: 20, claimIdleMs: 200, minBatchIntervalMs: 0, ...opts,
  });
}

/** Whether the stream emptied within `ms` (false instead of throwing, so the test shows what was left). */
async function drained(own: string, ms = 5_000): Promise<boolean> {
  return waitFor(async () => (await redis.xlen(own)) === 0, ms).then(() => true, () => false);
}

/** A Postgres error as postgres.js throws it: what the worker classifies by its SQLSTATE. */
function postgresError(code: string): Error {
  return Object.assign(new Error(`injected SQLSTATE ${code}`), { name: 'PostgresError', code, severity: 'ERROR' });
}

/**
 * The worker's Postgres client with a fault: a transaction whose ledger insert holds the request id
 * `poison` fails with what `fault` returns (nothing: it runs), as Postgres would fail it.
 */
function faultySql(poison: string, fault: () => Error | undefined): Sql {
  const inTx = (tx: Sql) => new Proxy(tx, {
    apply(target, self, args: unknown[]) {
      const [strings, ...values] = args as [TemplateStringsArray, ...unknown[]];
      if (Array.isArray(strings) && strings[0]?.includes('INSERT INTO ledger') && Array.isArray(values[0]) && values[0].includes(poison)) {
        const err = fault();
        if (err) throw err;
      }
      return Reflect.apply(target as unknown as (...a: unknown[]) => unknown, self, args);
    },
  });
  return new Proxy(sql, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (prop !== 'begin') return value;
      return (...args: unknown[]) => {
        const fn = args.pop() as (tx: Sql) => unknown;
        return (value as (...a: unknown[]) => unknown).apply(target, [...args, (tx: Sql) => fn(inTx(tx))]);
      };
    },
  });
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
  // An event Postgres refused outside classes 22/23 was not dead-lettered: a request id too long for
  // the ledger's unique btree index (54000 program_limit_exceeded, "index row size 8016 exceeds btree
  // version 4 maximum 2704") failed its batch at every read, and billing of its stream stopped for
  // good behind it (before: 2 entries left, nothing debited, "billing batch failed" in a loop). Such
  // an id is now refused at decode (MAX_REQUEST_ID_LENGTH, core/usage/usage-event.ts).
  it('dead-letters at decode an event whose request id is longer than any real one, and bills the events behind it', async () => {
    const own = stream + ':long-id';
    const before = await account();
    const long = encodeUsageEvent(usage(1, { request_id: randomBytes(6000).toString('base64') }));
    const id = await redis.xadd(own, '*', 'e', long);
    await redis.xadd(own, '*', 'e', encodeUsageEvent(usage(100, { token_limited: false })));
    const w = workerOn(own, 'w-long-id');
    await w.start();
    const emptied = await drained(own);
    await w.stop();
    expect({ emptied, debited: before.quota - (await account()).quota }).toEqual({ emptied: true, debited: 100 });
    expect(await deadLetters(own)).toEqual([['source_id', id, 'e', long]]);
  });

  // The same in depth, past the decoder: Postgres refusing an event with class 54 (program limit
  // exceeded) is the event's fault, as 22 and 23 are: it is set aside alone and the rest is billed.
  // Before, the batch failed at every read (class 54 was retried as if Postgres were away).
  it.each(['54000', '54001'])('dead-letters an event Postgres refuses with %s alone, and bills the rest of its batch', async (code) => {
    const own = `${stream}:refused-${code}`;
    const before = await account();
    const poison = usage(5, { token_limited: false });
    let faults = 0;
    const db = faultySql(poison.request_id, () => (faults++, postgresError(code)));
    const [a, b] = [usage(3, { token_limited: false }), usage(7, { token_limited: false })];
    const first = await redis.xadd(own, '*', 'e', [encodeUsageEvent(a), encodeUsageEvent(poison)].join('\n'));
    await redis.xadd(own, '*', 'e', encodeUsageEvent(b));
    const w = workerOn(own, `w-refused-${code}`, {}, db);
    const reports: BatchReport[] = [];
    w.onBatch = (r) => reports.push(r);
    await w.start();
    const emptied = await drained(own);
    await w.stop();
    expect({ emptied, debited: before.quota - (await account()).quota }).toEqual({ emptied: true, debited: 10 });
    expect(reports).toEqual([{ entries: 2, events: 3, applied: 2, replayed: 0, rejected: 1 }]);
    expect(await deadLetters(own)).toEqual([['source_id', first, 'e', encodeUsageEvent(poison)]]);
    expect(faults).toBeGreaterThan(1); // the batch whole, then halves down to the event alone
  });

  // A failure that is the database's or the moment's, not the event's, is never a reason to
  // dead-letter: the batch is read again and billed whole once Postgres answers.
  it.each([
    ['08006', 'connection failure'], ['08003', 'connection does not exist'], ['57P01', 'admin shutdown'],
    ['57P02', 'crash shutdown'], ['57P03', 'cannot connect now'], ['40001', 'serialization failure'],
    ['40P01', 'deadlock detected'], ['53100', 'disk full'], ['53200', 'out of memory'],
    ['53300', 'too many connections'], ['57014', 'statement timeout / query canceled'], ['55P03', 'lock not available'],
    ['25006', 'read-only transaction (a standby)'], ['42P01', 'undefined table (not migrated)'], ['XX000', 'internal error'],
    ['CONNECTION_CLOSED', 'postgres.js: connection closed'],
  ])('retries, and never dead-letters, a batch Postgres fails with %s (%s)', async (code) => {
    const own = `${stream}:transient-${code}`;
    const before = await account();
    const poison = usage(5, { token_limited: false });
    let faults = 0;
    // Twice, then Postgres answers again.
    const db = faultySql(poison.request_id, () => (faults < 2 ? (faults++, postgresError(code)) : undefined));
    await redis.xadd(own, '*', 'e', [encodeUsageEvent(usage(3, { token_limited: false })), encodeUsageEvent(poison)].join('\n'));
    await redis.xadd(own, '*', 'e', encodeUsageEvent(usage(7, { token_limited: false })));
    const w = workerOn(own, `w-transient-${code}`, {}, db);
    const reports: BatchReport[] = [];
    w.onBatch = (r) => reports.push(r);
    await w.start();
    const emptied = await drained(own);
    await w.stop();
    expect({ emptied, debited: before.quota - (await account()).quota, faults }).toEqual({ emptied: true, debited: 15, faults: 2 });
    expect(reports).toEqual([{ entries: 2, events: 3, applied: 3, replayed: 0, rejected: 0 }]);
    expect(await redis.xlen(own + ':dead')).toBe(0);
  });

  // A pending entry deleted from the stream without its XACK (an operator's XDEL of a bad entry)
  // comes back from XREADGROUP ... 0 as [id, null]. Only the claim path dropped those: settling it
  // threw "TypeError: Cannot read properties of null (reading 'length')" at every round, and the
  // worker that held it, or a restart under the same BILLING_CONSUMER, billed nothing again (before:
  // 2 entries left, nothing debited). Each read path: the plain one, with mirrors (billing/service.ts
  // configures them: the read script), and the sharded layout's.
  it.each(['plain', 'mirrors', 'sharded'] as const)('acknowledges and skips a pending entry deleted from the stream (%s read path) and bills the rest', async (layout) => {
    const shardedKeys = layout === 'sharded' ? redisKeys(`${config.REDIS_PREFIX}:xdel-${layout}`, 2) : redisKeys(`${config.REDIS_PREFIX}:xdel-${layout}`);
    const ordinary = createRedis(config, 'billing-test-xdel');
    try {
      const own = layout === 'sharded' ? shardedKeys.usageStream(shardedKeys.shardOf(userId)) : `${stream}:xdel-${layout}`;
      const consumer = `w-xdel-${layout}`;
      const before = await account();
      await redis.xgroup('CREATE', own, BILLING_GROUP, '0', 'MKSTREAM');
      const gone = await redis.xadd(own, '*', 'e', encodeUsageEvent(usage(1, { token_limited: false })));
      await redis.xadd(own, '*', 'e', encodeUsageEvent(usage(10, { token_limited: false })));
      // Read under this consumer name before (the worker's previous life under the same BILLING_CONSUMER).
      await redis.xreadgroup('GROUP', BILLING_GROUP, consumer, 'COUNT', 10, 'STREAMS', own, '>');
      await redis.xdel(own, gone!);
      await redis.xadd(own, '*', 'e', encodeUsageEvent(usage(100, { token_limited: false })));
      const quota = new QuotaStore(ordinary, shardedKeys, postgresBalanceSource(sql));
      const w = layout === 'sharded'
        ? new BillingWorker(ordinary, sql, ch, log, {
          stream: shardedKeys.usageStream(), deadLetterStream: shardedKeys.usageDeadLetterStream(), consumer, batchSize: 100, blockMs: 20,
          claimIdleMs: 60_000, minBatchIntervalMs: 0, sharded: { keys: shardedKeys, leaseMs: 5000 }, mirrors: { keys: shardedKeys, quota },
        })
        // A claim would not help: only this consumer's own pending list holds the entries.
        : workerOn(own, consumer, { claimIdleMs: 60_000, ...(layout === 'mirrors' ? { mirrors: { keys: shardedKeys, quota } } : {}) });
      await w.start();
      const emptied = await drained(own);
      await w.stop();
      expect({ emptied, debited: before.quota - (await account()).quota }).toEqual({ emptied: true, debited: 110 });
      // Nothing left pending, the deleted entry included; no dead letter (there is no event to keep).
      expect(((await redis.xpending(own, BILLING_GROUP)) as [number])[0]).toBe(0);
      expect(await redis.xlen(layout === 'sharded' ? shardedKeys.usageDeadLetterStream(shardedKeys.shardOf(userId)) : own + ':dead')).toBe(0);
    } finally {
      ordinary.disconnect();
    }
  });

  // Σ ledger = Σ debits: an event for an account with no users row (forged, or a row deleted by
  // hand; the console only soft-deletes) was written to the ledger and the log as billed and
  // acknowledged, yet nobody was debited (before: ledger 777, no dead letter). It is dead-lettered
  // alone; a soft-deleted account is still debited, as before.
  it('dead-letters an event for an account that does not exist, and still bills a soft-deleted account', async () => {
    const own = stream + ':no-account';
    const ghost = 2_000_000_000 + Math.floor(Math.random() * 1_000_000);
    const name = `billing-gone-${randomUUID().slice(0, 8)}`;
    const [g] = await sql`INSERT INTO users (username, password_hash, quota, aff_code, deleted_at)
                          VALUES (${name}, 'x', 1000, ${name}, ${Math.floor(Date.now() / 1000)}) RETURNING id`;
    const softDeleted = Number(g!.id);
    const before = await account();
    const nobody = encodeUsageEvent(usage(777, { user_id: ghost, token_id: 0, token_limited: false }));
    await redis.xadd(own, '*', 'e', encodeUsageEvent(usage(3, { token_limited: false })));
    const id = await redis.xadd(own, '*', 'e', [encodeUsageEvent(usage(5, { token_limited: false })), nobody].join('\n'));
    await redis.xadd(own, '*', 'e', encodeUsageEvent(usage(40, { user_id: softDeleted, token_id: 0, token_limited: false })));
    const w = workerOn(own, 'w-no-account');
    const reports: BatchReport[] = [];
    w.onBatch = (r) => reports.push(r);
    await w.start();
    const emptied = await drained(own);
    await w.drainOutbox();
    await w.stop();
    const [l] = await sql`SELECT COUNT(*)::int AS n FROM ledger WHERE user_id = ${ghost}`;
    const rs = await ch.query({ query: 'SELECT count() AS n FROM logs FINAL WHERE user_id = {u:UInt64}', query_params: { u: ghost }, format: 'JSONEachRow' });
    const [c] = await rs.json<{ n: string | number }>();
    const [s] = await sql`SELECT quota FROM users WHERE id = ${softDeleted}`;
    expect({ emptied, ghostLedgerRows: l!.n, ghostLogRows: Number(c!.n), debited: before.quota - (await account()).quota, softDeletedQuota: Number(s!.quota) })
      .toEqual({ emptied: true, ghostLedgerRows: 0, ghostLogRows: 0, debited: 8, softDeletedQuota: 960 });
    expect(reports).toEqual([{ entries: 3, events: 4, applied: 3, replayed: 0, rejected: 1 }]);
    expect(await deadLetters(own)).toEqual([['source_id', id, 'e', nobody]]);
  });
});
