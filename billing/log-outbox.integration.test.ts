// The log outbox's exactly-once insert (billing/log-outbox.ts, ClickHouse migration 012): every log
// row reaches `logs` and log_stats_15m once, whatever fails between ClickHouse taking an insert and
// Postgres deleting what it took. Real Postgres (a database of this file's own, so that no other
// file's worker drains it) and the real ClickHouse; `logs` is read without FINAL, so a repeat would
// show even before a merge could hide it.
import { randomInt, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClickHouseClient, createClickHouse } from '../infra/clickhouse/client.js';
import { createSql, type Sql } from '../infra/postgres/client.js';
import { testConfig } from '../infra/testing/test-config.js';
import { createTestDatabase, type TestDatabase } from '../infra/testing/test-database.js';
import type { UsageEvent } from '../core/usage/usage-event.js';
import { DRAIN_BUSY, claimLogBatch, drainLogOutbox, sendLogBatch } from './log-outbox.js';
import { settleBatch } from './settle-batch.js';

let db: TestDatabase;
let sql: Sql;
let ch: ClickHouseClient;
const T0 = Math.floor(Date.UTC(2004, 1, 3, 10, 0, 0) / 1000);

/** An account of its own: ClickHouse is shared with other files (and other runs). */
async function account(): Promise<number> {
  const id = randomInt(6_000_000_000, 7_000_000_000);
  const name = `outbox-${randomUUID().slice(0, 8)}`;
  await sql`INSERT INTO users (id, username, password_hash, quota, aff_code) VALUES (${id}, ${name}, 'x', 10000000, ${name})`;
  return id;
}

function events(userId: number, n: number, from = 0): UsageEvent[] {
  return Array.from({ length: n }, (_, k) => {
    const i = from + k;
    return {
      v: 1, type: 2, request_id: randomUUID(), upstream_request_id: 'req_x', user_id: userId, username: 'outbox', token_id: 0,
      token_name: `k${i % 2}`, token_limited: false, channel: 0, model_name: 'claude-haiku-4-5', group: 'default',
      quota: 100 + i, prompt_tokens: 10 + i, completion_tokens: 3, is_stream: false, use_time_ms: 200,
      // Over three quarter hours, so that a batch is more than one block of the view.
      created_at: T0 + i * 37, content: 'outbox',
    };
  });
}

interface Figures { rows: number; quota: number; statRequests: number; statQuota: number; ledger: number; debited: number }

async function figures(userId: number): Promise<Figures> {
  const one = async (query: string) => {
    const [r] = await (await ch.query({ query, query_params: { u: userId }, format: 'JSONEachRow' })).json<Record<string, string | number>>();
    return Object.values(r!).map(Number);
  };
  const [rows, quota] = await one('SELECT count() AS n, sum(quota) AS q FROM logs WHERE user_id = {u:UInt64}');
  const [statRequests, statQuota] = await one('SELECT sum(requests) AS n, sum(quota) AS q FROM log_stats_15m WHERE user_id = {u:UInt64}');
  const [l] = await sql`SELECT COALESCE(SUM(quota), 0)::bigint AS q FROM ledger WHERE user_id = ${userId}`;
  const [u] = await sql`SELECT 10000000 - quota AS d FROM users WHERE id = ${userId}`;
  return { rows: rows!, quota: quota!, statRequests: statRequests!, statQuota: statQuota!, ledger: Number(l!.q), debited: Number(u!.d) };
}

/** Events 0..n-1 of events(): in `logs` and log_stats_15m once each, equal to the ledger and the debits. */
async function expectEachOnce(userId: number, n: number): Promise<void> {
  const quota = n * 100 + (n * (n - 1)) / 2;
  expect(await figures(userId)).toEqual({ rows: n, quota, statRequests: n, statQuota: quota, ledger: quota, debited: quota });
}

async function queued(): Promise<{ rows: number; batches: number }> {
  const [r] = await sql`SELECT (SELECT COUNT(*) FROM log_outbox)::int AS rows, (SELECT COUNT(*) FROM log_outbox_batches)::int AS batches`;
  return { rows: r!.rows as number, batches: r!.batches as number };
}

/** ClickHouse takes the insert, and its answer is lost on the way back. */
function answerLost(real: ClickHouseClient): ClickHouseClient {
  return new Proxy(real, {
    get(target, prop, receiver) {
      if (prop !== 'exec') return Reflect.get(target, prop, receiver);
      return async (...args: Parameters<ClickHouseClient['exec']>) => {
        const { stream } = await target.exec(...args);
        stream.resume();
        throw new Error('socket hang up (answer lost)');
      };
    },
  });
}

beforeAll(async () => {
  db = await createTestDatabase('outbox');
  const config = testConfig({ DATABASE_URL: db.url });
  sql = createSql(config);
  ch = createClickHouse(config);
});

afterAll(async () => {
  await sql?.end();
  await ch?.close();
  await db?.drop();
});

describe('the log outbox', () => {
  it('sends a batch whose delete was lost again with its token: each row once in logs and in log_stats_15m', async () => {
    const user = await account();
    await settleBatch(sql, events(user, 60));
    expect(await claimLogBatch(sql, 1000)).toBe(true);
    await expect(sendLogBatch(sql, answerLost(ch))).rejects.toThrow(/answer lost/);
    // ClickHouse has the rows; Postgres still has them and the batch.
    expect((await figures(user)).rows).toBe(60);
    expect(await queued()).toEqual({ rows: 60, batches: 1 });

    // The next pass sends the open batch, whole, with its token: ClickHouse drops the repeat.
    expect(await drainLogOutbox(sql, ch, 1000)).toBe(60);
    expect(await queued()).toEqual({ rows: 0, batches: 0 });
    await expectEachOnce(user, 60);
  });

  it('sends the batch a dead worker claimed before any newer row, in order', async () => {
    const user = await account();
    await settleBatch(sql, events(user, 10));
    // A worker fixed a batch and died before sending it.
    expect(await claimLogBatch(sql, 6)).toBe(true);
    await settleBatch(sql, events(user, 5, 10));
    // No second batch while one is open: batches never overlap.
    expect(await claimLogBatch(sql, 6)).toBe(true);
    expect(await queued()).toEqual({ rows: 15, batches: 1 });

    // The open batch first (6 of the first 10), then new ones of up to 6.
    const sent: number[] = [];
    for (let n; (n = await drainLogOutbox(sql, ch, 6)) > 0;) sent.push(n);
    expect(sent).toEqual([6, 6, 3]);
    expect(await queued()).toEqual({ rows: 0, batches: 0 });
    await expectEachOnce(user, 15);
  });

  it('keeps a batch ClickHouse refused, and sends it once ClickHouse takes it', async () => {
    const user = await account();
    await settleBatch(sql, events(user, 8));
    const refusing = new Proxy(ch, {
      get: (target, prop, receiver) => (prop === 'exec' ? async () => { throw new Error('Connection refused'); } : Reflect.get(target, prop, receiver)),
    });
    await expect(drainLogOutbox(sql, refusing, 1000)).rejects.toThrow(/refused/);
    expect(await queued()).toEqual({ rows: 8, batches: 1 });
    expect((await figures(user)).rows).toBe(0);
    expect(await drainLogOutbox(sql, ch, 1000)).toBe(8);
    await expectEachOnce(user, 8);
  });

  it('writes no second log row for a replayed usage event, before or after the first was sent', async () => {
    const user = await account();
    const batch = events(user, 12);
    await settleBatch(sql, batch);
    // Delivered again while its row is still queued, then again after it was sent.
    await settleBatch(sql, batch.slice(0, 5));
    expect(await queued()).toEqual({ rows: 12, batches: 0 });
    expect(await drainLogOutbox(sql, ch, 1000)).toBe(12);
    const settled = await settleBatch(sql, [...batch.slice(3), ...events(user, 1, 12)]);
    expect(settled.filter((s) => s.applied)).toHaveLength(1);
    expect(await queued()).toEqual({ rows: 1, batches: 0 });
    expect(await drainLogOutbox(sql, ch, 1000)).toBe(1);
    await expectEachOnce(user, 13);
  });

  it('lets one worker drain at a time: another finds it taken, or waits for it when asked', async () => {
    const user = await account();
    await settleBatch(sql, events(user, 30));
    expect(await claimLogBatch(sql, 20)).toBe(true);
    // A drain held inside its ClickHouse insert until the gate opens.
    let open!: () => void;
    const gate = new Promise<void>((r) => { open = r; });
    let inserting!: () => void;
    const started = new Promise<void>((r) => { inserting = r; });
    const slow = new Proxy(ch, {
      get: (target, prop, receiver) => (prop === 'exec'
        ? async (...args: Parameters<ClickHouseClient['exec']>) => { inserting(); await gate; return target.exec(...args); }
        : Reflect.get(target, prop, receiver)),
    });
    const held = sendLogBatch(sql, slow);
    await started;
    expect(await drainLogOutbox(sql, ch, 20)).toBe(DRAIN_BUSY);
    let waited: number | undefined;
    const waiting = drainLogOutbox(sql, ch, 20, { wait: true }).then((n) => { waited = n; });
    await new Promise((r) => setTimeout(r, 100));
    expect(waited).toBeUndefined();
    open();
    expect(await held).toBe(20);
    await waiting;
    expect(waited).toBe(10);
    await expectEachOnce(user, 30);
  });

  it('sends every row once with four workers draining at once', async () => {
    const user = await account();
    for (let i = 0; i < 6; i++) await settleBatch(sql, events(user, 50, i * 50));
    const worker = async (wait: boolean) => {
      while ((await queued()).rows > 0) {
        await drainLogOutbox(sql, ch, 40, { wait });
        await new Promise((r) => setImmediate(r));
      }
    };
    await Promise.all([worker(false), worker(false), worker(false), worker(true)]);
    expect(await queued()).toEqual({ rows: 0, batches: 0 });
    await expectEachOnce(user, 300);
  });

  // The outbox keeps each row as its JSON text, one per line of the settlement's parameter, split in
  // Postgres (billing/settle-batch.ts): a value holding a line break, or anything else JSON escapes,
  // must reach ClickHouse exactly, in the row it belongs to.
  it('carries values with line breaks, quotes, backslashes and non-ASCII text to ClickHouse exactly', async () => {
    const user = await account();
    const awkward = ['two\nlines', 'cr\r\nlf', 'tab\there', 'quote " and \\ backslash', '{"json":"inside"}', 'line\u2028separator\u2029para',
      'emoji 🦜 and ünïcödé', 'control \u0001\u001f', '', ' leading and trailing '];
    const batch = events(user, awkward.length).map((e, i) => ({ ...e, content: awkward[i]!, token_name: awkward[(i + 1) % awkward.length]! }));
    await settleBatch(sql, batch);
    while ((await drainLogOutbox(sql, ch, 1000)) > 0);
    const rows = await (await ch.query({
      query: 'SELECT request_id, content, token_name FROM logs WHERE user_id = {u:UInt64} ORDER BY created_at',
      query_params: { u: user }, format: 'JSONEachRow',
    })).json<{ request_id: string; content: string; token_name: string }>();
    expect(rows).toEqual(batch.map((e) => ({ request_id: e.request_id, content: e.content, token_name: e.token_name })));
    await expectEachOnce(user, awkward.length);
  });

  // JSON.stringify writes a lone surrogate (text a client's JSON can carry: "\ud800") as its escape,
  // which ClickHouse refuses: one such row would stop the outbox's drain for every row behind it.
  // The row carries U+FFFD in its place, as Postgres keeps the same text in the ledger.
  it('drains a row whose text holds lone surrogates, with U+FFFD in their place', async () => {
    const user = await account();
    const [event] = events(user, 1);
    const odd = { ...event!, content: 'lone \ud800 high and \udc00 low, pair \ud83e\udd9c kept', token_name: 'key\udfff' };
    await settleBatch(sql, [odd]);
    while ((await drainLogOutbox(sql, ch, 1000)) > 0);
    expect(await queued()).toEqual({ rows: 0, batches: 0 });
    const rows = await (await ch.query({
      query: 'SELECT content, token_name FROM logs WHERE user_id = {u:UInt64}', query_params: { u: user }, format: 'JSONEachRow',
    })).json<{ content: string; token_name: string }>();
    expect(rows).toEqual([{ content: 'lone \ufffd high and \ufffd low, pair 🦜 kept', token_name: 'key\ufffd' }]);
  });

  // A worker from before migration 016 inserts JSONB values; Postgres stores them in the text column by
  // its assignment cast, and the new drain sends them as they are.
  it('sends a row an older worker wrote as JSONB', async () => {
    const user = await account();
    const [first, second] = events(user, 2);
    const [settled] = await settleBatch(sql, [first!]);
    const old = { id: settled!.id + 1_000_000_000, user_id: user, created_at: second!.created_at, type: 2, content: 'written as jsonb',
      username: 'outbox', token_name: 'k1', model_name: 'claude-haiku-4-5', quota: 101, prompt_tokens: 11, completion_tokens: 3,
      use_time: 0, is_stream: false, channel: 0, token_id: 0, group: 'default', request_id: second!.request_id };
    await sql`INSERT INTO log_outbox (id, row) SELECT (r->>'id')::bigint, r FROM jsonb_array_elements(${JSON.stringify([old])}::text::jsonb) AS r`;
    while ((await drainLogOutbox(sql, ch, 1000)) > 0);
    const rows = await (await ch.query({
      query: 'SELECT content, quota FROM logs WHERE user_id = {u:UInt64} ORDER BY created_at',
      query_params: { u: user }, format: 'JSONEachRow',
    })).json<{ content: string; quota: string }>();
    expect(rows.map((r) => [r.content, Number(r.quota)])).toEqual([['outbox', 100], ['written as jsonb', 101]]);
  });
});
