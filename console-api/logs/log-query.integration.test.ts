// The log queries against the migrated `logs` table, before and after the background merge that
// migration 002 forces: a replayed request counts once while it sits in a second part, and the merged
// partition (one part, read without FINAL's merge) gives exactly the same answers.
import { randomInt } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClickHouseClient, createClickHouse } from '../../infra/clickhouse/client.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { queryLogStat, queryLogs } from './log-query.js';

let ch: ClickHouseClient;
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
  const all = await queryLogs(ch, { userId }, { page: 1, pageSize: 10 });
  const page2 = await queryLogs(ch, { userId }, { page: 2, pageSize: 2 });
  const k1 = await queryLogs(ch, { userId, tokenName: 'k1' }, { page: 1, pageSize: 10 });
  const march = await queryLogs(ch, { userId, startTimestamp: MARCH, endTimestamp: MARCH + 86400 }, { page: 1, pageSize: 10 });
  const stat = await queryLogStat(ch, { userId, startTimestamp: MARCH - 1, endTimestamp: APRIL + 10 }, APRIL + 30);
  const statK1 = await queryLogStat(ch, { userId, tokenName: 'k1', startTimestamp: MARCH - 1, endTimestamp: APRIL + 10 }, APRIL + 30);
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
  const insert = (values: object[]) => ch.insert({ table: 'logs', values, format: 'JSONEachRow' });
  await insert(rows);
  // Replays, each in a part of its own, in both partitions.
  await insert([rows[0]!, rows[3]!]);
  await insert([rows[0]!, rows[2]!]);
});
afterAll(async () => {
  await ch?.close();
});

describe('log queries and the forced merge of migration 002', () => {
  it('the logs table merges a partition whose parts are all older than a minute', async () => {
    const [t] = await (await ch.query({
      query: "SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = 'logs'",
      format: 'JSONEachRow',
    })).json<{ engine_full: string }>();
    expect(t?.engine_full).toMatch(/min_age_to_force_merge_seconds = 60\b/);
    expect(t?.engine_full).toMatch(/min_age_to_force_merge_on_partition_only = 1\b/);
  });

  it('counts every replay once while it is in another part, and identically once the partitions are merged', async () => {
    expect(await snapshot()).toEqual(EXPECTED);
    // What the forced merge does a minute later, now: one part per partition, the duplicates gone.
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
