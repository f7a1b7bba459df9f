// The console's log queries at scale: 10 million generated rows in the bench's ClickHouse database,
// spread over 1000 accounts (Zipf-like: account 0 holds about 10% of the rows, a million) and the last
// 30 days, then GET /api/log/self (first page, filtered, deep page) and /api/log/self/stat under
// concurrent load, logged in as the heaviest account. The accounts exist in Postgres too (the console
// checks its session against them). Generated server-side in chunks (INSERT … SELECT FROM numbers),
// once per database: a later run finds the rows (ids from 10^12 up) and skips the load.
import type { ClickHouseClient } from '@clickhouse/client';
import { hashPassword } from '../../console-api/auth/password.js';
import type { Sql } from '../../infra/postgres/client.js';
import { cannon, type CannonResult } from './cannon.js';
import { MACHINE, ProcSampler, type Watched } from './proc.js';

export const SCALE_USERS = 1000;
export const SCALE_PASSWORD = 'bench-logs-password';
const ID_BASE = 1_000_000_000_000;
const MODELS = ['claude-sonnet-4-5', 'claude-haiku-4-5', 'claude-opus-4-5', 'claude-opus-4-1', 'claude-3-5-haiku-20241022'];

export interface ScaleOptions {
  rows: number;
  connections: number;
  durationSec: number;
  log: (line: string) => void;
  /** Processes whose CPU is measured around each query's concurrent run. */
  watched?: Watched[];
}

export interface ScaleQuery {
  name: string;
  path: string;
  /** The one request sent before the runs, answered whatever it takes: whether the query works at all. */
  probe: { status: number; success: boolean; message: string };
  result: CannonResult;
  /** The same query from one connection: its own latency, without the wait behind the others. */
  single: CannonResult;
  /**
   * CPU ms per request of the concurrent run, by process (console-api, clickhouse, postgres, load
   * generator) and for the whole machine (MACHINE): what each request costs the shared cores.
   */
  cpuMsPerRequest?: Record<string, number>;
}

export interface ScaleResult {
  rows: number;
  heavyUserRows: number;
  loadSec: number | null;
  queries: ScaleQuery[];
}

/** The processes whose CPU per request the report gives for each query, besides the whole machine. */
export const SCALE_CPU_PROCESSES = ['clickhouse', 'console-api', 'postgres', 'load generator'] as const;

const username = (i: number): string => `bench-logs-${String(i).padStart(4, '0')}`;

async function ensureAccounts(sql: Sql): Promise<number[]> {
  const [{ n }] = (await sql`SELECT COUNT(*)::int AS n FROM users WHERE username LIKE 'bench-logs-%'`) as unknown as [{ n: number }];
  if (n < SCALE_USERS) {
    const hash = await hashPassword(SCALE_PASSWORD);
    await sql`
      INSERT INTO users (username, display_name, password_hash, aff_code)
      SELECT 'bench-logs-' || lpad(i::text, 4, '0'), 'Bench logs ' || i, ${hash}, 'BL' || lpad(i::text, 4, '0')
      FROM generate_series(0, ${SCALE_USERS - 1}) AS i
      ON CONFLICT DO NOTHING`;
  }
  const rows = await sql`SELECT id, username FROM users WHERE username LIKE 'bench-logs-%' ORDER BY username`;
  return (rows as unknown as Array<{ id: number }>).map((r) => Number(r.id));
}

async function loadRows(ch: ClickHouseClient, ids: number[], rows: number, log: (l: string) => void): Promise<number | null> {
  const have = await ch.query({ query: `SELECT count() AS n FROM logs WHERE id >= ${ID_BASE}`, format: 'JSONEachRow' })
    .then((r) => r.json<{ n: string }>());
  const existing = Number(have[0]?.n ?? 0);
  if (existing >= rows) {
    log(`console scale: ${existing.toLocaleString('en')} generated rows already in ClickHouse`);
    return null;
  }
  const t0 = performance.now();
  const now = Math.floor(Date.now() / 1000);
  // 500k rows per statement: a 2M-row chunk outlasted the client's 30 s timeout on a busy machine.
  const chunk = 500_000;
  for (let offset = existing; offset < rows; offset += chunk) {
    const size = Math.min(chunk, rows - offset);
    await ch.command({
      query: `
        INSERT INTO logs (id, user_id, created_at, type, content, username, token_name, model_name, quota,
                          prompt_tokens, completion_tokens, cache_tokens, use_time, is_stream, channel, token_id,
                          \`group\`, request_id, upstream_request_id, ip)
        WITH [${ids.join(',')}] AS u_ids, [${MODELS.map((m) => `'${m}'`).join(',')}] AS models
        SELECT ${ID_BASE} + number,
               u_ids[u_idx + 1],
               toDateTime(${now} - (cityHash64(number, 1) % ${30 * 86400})),
               if(cityHash64(number, 2) % 50 = 0, 5, 2) AS t,
               'model ratio 1.5, completion ratio 5, group ratio 1',
               concat('bench-logs-', leftPad(toString(u_idx), 4, '0')),
               concat('key-', toString(cityHash64(number, 3) % 5)),
               models[(cityHash64(number, 4) % 5) + 1],
               if(t = 5, 0, 200 + cityHash64(number, 5) % 20000),
               50 + cityHash64(number, 6) % 4000,
               if(t = 5, 0, 10 + cityHash64(number, 7) % 1000),
               0,
               1 + cityHash64(number, 8) % 30,
               cityHash64(number, 9) % 3 != 0,
               1,
               100000 + u_idx * 5 + cityHash64(number, 3) % 5,
               'default',
               concat('bench-', toString(number)),
               concat('req_', hex(cityHash64(number, 10))),
               '127.0.0.1'
        FROM (SELECT number, toUInt32(floor(${SCALE_USERS} * pow((cityHash64(number, 0) % 1000000) / 1000000.0, 3))) AS u_idx
              FROM numbers(${offset}, ${size}))`,
      clickhouse_settings: { max_insert_block_size: '1048576' },
    });
    log(`console scale: ${(offset + size).toLocaleString('en')} / ${rows.toLocaleString('en')} rows generated (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  }
  return (performance.now() - t0) / 1000;
}

export async function runConsoleScale(sql: Sql, ch: ClickHouseClient, consoleUrl: string, o: ScaleOptions): Promise<ScaleResult> {
  const ids = await ensureAccounts(sql);
  const loadSec = await loadRows(ch, ids, o.rows, o.log);
  // Measure a settled table, as background merges leave a bulk load after a while. The queries do not
  // depend on it (they read no FINAL, docs/log-query-plans.md), but fewer parts are fewer read streams.
  const settleStart = Date.now();
  // Partitions already in one part are left alone (a 10M-row rewrite costs minutes of a core).
  // The quarter-hour table too: the load leaves it in a part per chunk, which a live table's
  // background merges fold together (SummingMergeTree sums them).
  for (const table of ['logs', 'log_stats_15m']) {
    await ch.command({ query: `OPTIMIZE TABLE ${table} FINAL`, clickhouse_settings: { optimize_throw_if_noop: 0, optimize_skip_merged_partitions: 1 } });
  }
  o.log(`log tables merged in ${((Date.now() - settleStart) / 1000).toFixed(1)} s`);
  const heavyId = ids[0]!;
  const [{ n: heavyRows }] = await ch.query({
    query: 'SELECT count() AS n FROM logs FINAL WHERE user_id = {u:UInt64}', query_params: { u: heavyId }, format: 'JSONEachRow',
  }).then((r) => r.json<{ n: string }>()) as [{ n: string }];

  const login = await fetch(`${consoleUrl}/api/user/login`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: username(0), password: SCALE_PASSWORD }),
  });
  const session = (await login.json()) as { success: boolean; message: string; data?: { token: string } };
  if (!session.success || !session.data) throw new Error(`console login as ${username(0)} failed: ${session.message}`);
  const headers = { authorization: `Bearer ${session.data.token}` };

  const now = Math.floor(Date.now() / 1000);
  const weekAgo = now - 7 * 86400;
  const monthAgo = now - 31 * 86400;
  const deepPage = Math.max(1, Math.floor(Number(heavyRows) / 100 / 2));
  const queries: Array<{ name: string; path: string }> = [
    { name: 'list, first page', path: '/api/log/self?p=1&page_size=10' },
    { name: 'list, filtered (model, type, 7 days)', path: `/api/log/self?p=1&page_size=10&type=2&model_name=claude-opus-4-5&start_timestamp=${weekAgo}&end_timestamp=${now}` },
    { name: 'list, filtered (token name)', path: '/api/log/self?p=3&page_size=50&token_name=key-1' },
    { name: `list, deep page (p=${deepPage}, 100 rows)`, path: `/api/log/self?p=${deepPage}&page_size=100` },
    { name: 'stat, 30 days', path: `/api/log/self/stat?start_timestamp=${monthAgo}&end_timestamp=${now}` },
    { name: 'stat, filtered (model, token)', path: `/api/log/self/stat?start_timestamp=${monthAgo}&end_timestamp=${now}&model_name=claude-sonnet-4-5&token_name=key-2` },
  ];
  const out: ScaleQuery[] = [];
  for (const q of queries) {
    // One request first: a failing endpoint is reported, not measured.
    const probe = await fetch(consoleUrl + q.path, { headers });
    const body = (await probe.json()) as { success: boolean; message: string };
    if (!body.success) o.log(`console scale: ${q.name} answered ${probe.status} ${body.message}`);
    const probed = { status: probe.status, success: body.success === true, message: body.success ? '' : String(body.message) };
    // One connection, then the configured concurrency: the second adds the wait for the shared cores.
    const single = await cannon({ url: consoleUrl, method: 'GET', connections: 1, durationSec: o.durationSec, headers, requests: [{ path: q.path }], timeoutSec: 60 });
    const sampler = o.watched ? new ProcSampler(o.watched) : undefined;
    sampler?.start();
    const result = await cannon({ url: consoleUrl, method: 'GET', connections: o.connections, durationSec: o.durationSec, headers, requests: [{ path: q.path }], timeoutSec: 60 });
    const usage = sampler?.stop();
    const cpuMsPerRequest = usage && result.completed > 0
      ? Object.fromEntries(usage.filter((u) => u.name === MACHINE || (SCALE_CPU_PROCESSES as readonly string[]).includes(u.name))
        .map((u) => [u.name, (u.cpuSec * 1000) / result.completed]))
      : undefined;
    o.log(`console scale: ${q.name}: p50 ${result.latency.p50.toFixed(1)} ms, p99 ${result.latency.p99.toFixed(1)} ms, ${result.rps.toFixed(1)} req/s (1 connection: p50 ${single.latency.p50.toFixed(1)} ms, p99 ${single.latency.p99.toFixed(1)} ms)`);
    out.push({ name: q.name, path: q.path, probe: probed, result, single, ...(cpuMsPerRequest ? { cpuMsPerRequest } : {}) });
  }
  return { rows: o.rows, heavyUserRows: Number(heavyRows), loadSec, queries: out };
}
