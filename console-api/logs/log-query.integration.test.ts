// The log queries against the migrated `logs` table, before and after a merge: rows in two batches
// (parts in both partitions), each batch sent again with its token as the outbox does after a lost
// delete (dropped on insert, billing/log-outbox.ts), and the merged partitions give exactly the same
// answers. No query reads FINAL, so nothing forces merges any more (migration 010 undid 002's).
import { randomInt, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClickHouseClient, createClickHouse } from '../../infra/clickhouse/client.js';
import { type ClickHouseReader, createClickHouseReader } from '../../infra/clickhouse/read-client.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { queryLogStat, queryLogs } from './log-query.js';

let ch: ClickHouseClient;
let reader: ClickHouseReader;
const userId = randomInt(3_000_000_000, 4_000_000_000);
// Months nobody else writes: partitions of this file's own.
const MARCH = Date.UTC(2003, 2, 10, 12) / 1000;
const APRIL = Date.UTC(2003, 3, 2, 12) / 1000;

function row(n: number, createdAt: number, over: Record<string, unknown> = {}) {
  return {
    id: userId * 100 + n, user_id: userId, created_at: createdAt, type: 2, content: '', username: 'u',
    token_name: n % 2 ? 'k1' : 'k2', model_name: 'm1', quota: 100 * n, prompt_tokens: n, completion_tokens: 1,
    use_time: 1, is_stream: false, channel: 1, token_id: 1, group: 'default', request_id: `merge-${n}`,
    upstream_request_id: '', ...over,
  };
}

const rows = [row(1, MARCH), row(2, MARCH + 60), row(3, MARCH + 120), row(4, APRIL), row(5, APRIL + 1, { type: 5, quota: 0 })];

async function snapshot() {
  const all = await queryLogs(reader, { userId }, { page: 1, pageSize: 10 });
  const page2 = await queryLogs(reader, { userId }, { page: 2, pageSize: 2 });
  const k1 = await queryLogs(reader, { userId, tokenName: 'k1' }, { page: 1, pageSize: 10 });
  const march = await queryLogs(reader, { userId, startTimestamp: MARCH, endTimestamp: MARCH + 86400 }, { page: 1, pageSize: 10 });
  const stat = await queryLogStat(reader, { userId, startTimestamp: MARCH - 1, endTimestamp: APRIL + 10 }, APRIL + 30);
  const statK1 = await queryLogStat(reader, { userId, tokenName: 'k1', startTimestamp: MARCH - 1, endTimestamp: APRIL + 10 }, APRIL + 30);
  const ids = (p: { items: { request_id: string }[] }) => p.items.map((i) => i.request_id);
  return {
    all: { total: all.total, ids: ids(all) }, page2: { total: page2.total, ids: ids(page2) },
    k1: { total: k1.total, ids: ids(k1) }, march: { total: march.total, ids: ids(march) }, stat, statK1,
  };
}

const EXPECTED = {
  all: { total: 5, ids: ['merge-5', 'merge-4', 'merge-3', 'merge-2', 'merge-1'] },
  page2: { total: 5, ids: ['merge-3', 'merge-2'] },
  k1: { total: 3, ids: ['merge-5', 'merge-3', 'merge-1'] },
  march: { total: 3, ids: ['merge-3', 'merge-2', 'merge-1'] },
  // Consumption only (type 2): 100 + 200 + 300 + 400; the last minute before APRIL + 30 holds merge-4.
  stat: { quota: 1000, rpm: 1, tpm: 5 },
  statK1: { quota: 400, rpm: 0, tpm: 0 },
};

beforeAll(async () => {
  ch = createClickHouse(testConfig());
  reader = createClickHouseReader(testConfig());
  const run = randomUUID();
  const send = (values: object[], batch: string) =>
    ch.insert({ table: 'logs', values, format: 'JSONEachRow', clickhouse_settings: { insert_deduplication_token: `log-outbox-${run}-${batch}` } });
  const batches = { a: [rows[0]!, rows[3]!], b: [rows[1]!, rows[2]!, rows[4]!] };
  for (const [name, values] of Object.entries(batches)) await send(values, name);
  for (const [name, values] of Object.entries(batches)) await send(values, name);
});
afterAll(async () => {
  await ch?.close();
  await reader?.close();
});

describe('log queries before and after a merge', () => {
  it('the logs table is merged by the ordinary policy (010 reset 002\'s forced merge)', async () => {
    const [t] = await (await ch.query({
      query: "SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = 'logs'",
      format: 'JSONEachRow',
    })).json<{ engine_full: string }>();
    expect(t?.engine_full).toMatch(/^ReplacingMergeTree/);
    expect(t?.engine_full).not.toMatch(/min_age_to_force_merge/);
  });

  it('counts every request once while its batches are in parts of their own, and identically once the partitions are merged', async () => {
    expect(await snapshot()).toEqual(EXPECTED);
    // What a merge does, now: one part per partition, the duplicates gone.
    for (const partition of ['200303', '200304']) {
      await ch.command({ query: `OPTIMIZE TABLE logs PARTITION ${partition} FINAL` });
    }
    const [{ parts, rows: stored }] = await (await ch.query({
      query: `SELECT count() AS parts, sum(rows) AS rows FROM system.parts
              WHERE database = currentDatabase() AND table = 'logs' AND active AND partition IN ('200303', '200304')`,
      format: 'JSONEachRow',
    })).json<{ parts: string; rows: string }>() as [{ parts: string; rows: string }];
    expect(Number(parts)).toBe(2);
    expect(Number(stored)).toBeGreaterThanOrEqual(5);
    expect(await snapshot()).toEqual(EXPECTED);
  });
});

// The quarter-hour table (migration 009) and the deep-page skip against the reference answer: the same
// question asked of `logs FINAL` row by row, on an account with 3,000 requests over 30 hours, some
// batches sent again with their token (the outbox's lost delete), some requests sharing a second.
describe('log_stats_15m and deep pages give the reference answers', () => {
  const user = randomInt(4_000_000_000, 5_000_000_000);
  const T0 = Date.UTC(2003, 5, 1, 0, 7, 13) / 1000;
  const mk = (n: number) => ({
    id: n, user_id: user, created_at: T0 + Math.floor(n * 36.1), type: n % 17 === 0 ? 5 : 2, content: '', username: 'u',
    token_name: `k${n % 3}`, model_name: n % 2 ? 'm1' : 'm2', quota: 10 + (n % 97), prompt_tokens: n % 50, completion_tokens: 3,
    use_time: 1, is_stream: false, channel: 1 + (n % 2), token_id: 1, group: 'default', request_id: `deep-${n}`, upstream_request_id: '',
  });
  const all = Array.from({ length: 3000 }, (_, n) => mk(n));
  const reference = async (where: string, params: Record<string, unknown>) => {
    const [r] = await (await ch.query({
      query: `SELECT count() AS n, sum(quota) AS q FROM logs FINAL WHERE user_id = {u:UInt64} AND ${where}`,
      query_params: { u: user, ...params }, format: 'JSONEachRow',
    })).json<{ n: string; q: string }>();
    return { n: Number(r!.n), q: Number(r!.q) };
  };

  beforeAll(async () => {
    const run = randomUUID();
    const send = (values: object[], batch: string) =>
      ch.insert({ table: 'logs', values, format: 'JSONEachRow', clickhouse_settings: { insert_deduplication_token: `log-outbox-${run}-${batch}` } });
    await send(all.slice(0, 2000), 'a');
    await send(all.slice(2000), 'b');
    await send(all.slice(2000), 'b');
    await send(all.slice(0, 2000), 'a');
  });

  it('counts each replay once in the quarter-hour table', async () => {
    const [s] = await (await ch.query({
      query: 'SELECT sum(requests) AS n, sum(quota) AS q FROM log_stats_15m WHERE user_id = {u:UInt64}', query_params: { u: user }, format: 'JSONEachRow',
    })).json<{ n: string; q: string }>();
    const ref = await reference('1', {});
    expect(ref.n).toBe(3000);
    expect({ n: Number(s!.n), q: Number(s!.q) }).toEqual(ref);
  });

  it('stat over ranges cutting quarter hours, with filters, equals the row-by-row sum', async () => {
    const ranges: Array<[number | undefined, number | undefined]> = [
      [undefined, undefined], [T0 + 1, T0 + 30 * 3600], [T0 + 899, T0 + 900 * 7 + 13], [T0 + 450, T0 + 460], [T0 + 3 * 3600, undefined], [undefined, T0 + 5000],
    ];
    for (const [start, end] of ranges) {
      for (const extra of [{}, { tokenName: 'k1' }, { modelName: 'm2', channel: 1 }, { type: 5 }]) {
        const stat = await queryLogStat(reader, { userId: user, startTimestamp: start, endTimestamp: end, ...extra }, T0 + 100 * 86400);
        const where = [`type = ${(extra as { type?: number }).type ?? 2}`];
        if (start) where.push(`created_at >= toDateTime(${start})`);
        if (end) where.push(`created_at <= toDateTime(${end})`);
        if ('tokenName' in extra) where.push(`token_name = '${extra.tokenName}'`);
        if ('modelName' in extra) where.push(`model_name = '${extra.modelName}' AND channel = ${extra.channel}`);
        const ref = await reference(where.join(' AND '), {});
        expect({ start, end, extra, quota: stat.quota }).toEqual({ start, end, extra, quota: ref.q });
        const list = await queryLogs(reader, { userId: user, startTimestamp: start, endTimestamp: end, ...extra }, { page: 1, pageSize: 5 });
        if (!('type' in extra)) {
          const refAll = await reference(where.slice(1).join(' AND ') || '1', {});
          expect(list.total).toBe(refAll.n);
        }
      }
    }
  });

  it('deep pages (skipped by bucket counts) and shallow pages equal the reference order', async () => {
    const refPage = async (where: string, offset: number, limit: number) => (await (await ch.query({
      query: `SELECT request_id FROM logs FINAL WHERE user_id = {u:UInt64} AND ${where} ORDER BY created_at DESC, request_id DESC LIMIT ${limit} OFFSET ${offset}`,
      query_params: { u: user }, format: 'JSONEachRow',
    })).json<{ request_id: string }>()).map((r) => r.request_id);
    const cases: Array<[Parameters<typeof queryLogs>[1], string]> = [
      [{ userId: user }, '1'],
      [{ userId: user, tokenName: 'k2' }, "token_name = 'k2'"],
      [{ userId: user, startTimestamp: T0 + 1000, endTimestamp: T0 + 100_000 }, `created_at >= toDateTime(${T0 + 1000}) AND created_at <= toDateTime(${T0 + 100_000})`],
    ];
    for (const [filters, where] of cases) {
      // Pages read whole (up to WHOLE_ROWS_UP_TO rows), by keys then rows (p=8, 100), after a bucket skip.
      for (const [page, pageSize] of [[1, 10], [3, 50], [8, 100], [21, 100], [29, 100], [30, 100], [41, 50], [2950, 1]]) {
        const got = await queryLogs(reader, filters, { page: page!, pageSize: pageSize! });
        // The total too: a deep page takes it from the bucket counts (with the range's raw edges).
        expect({ filters, page, ids: got.items.map((i) => i.request_id), total: got.total })
          .toEqual({ filters, page, ids: await refPage(where, (page! - 1) * pageSize!, pageSize!), total: (await reference(where, {})).n });
      }
    }
  });

  it('a page past the end has no items and still the total', async () => {
    const past = await queryLogs(reader, { userId: user, tokenName: 'k0' }, { page: 500, pageSize: 100 });
    expect(past.items).toEqual([]);
    expect(past.total).toBe((await reference("token_name = 'k0'", {})).n);
  });

  it('per-day sums from the quarter-hour table (whole-hour and quarter-hour offsets) and from logs (other offsets) agree', async () => {
    const { queryDailyUsage } = await import('./daily-usage.js');
    const now = T0 + 2 * 86400;
    for (const offset of [0, 330, -45, 7]) {
      const days = await queryDailyUsage(reader, user, 5, offset, now);
      const total = days.reduce((a, d) => a + d.quota, 0);
      const ref = await reference(`type = 2 AND created_at >= toDateTime(${days[0]!.day})`, {});
      expect({ offset, total, requests: days.reduce((a, d) => a + d.requests, 0) }).toEqual({ offset, total: ref.q, requests: ref.n });
    }
  });
});
