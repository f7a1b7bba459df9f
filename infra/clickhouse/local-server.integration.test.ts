// The embedded server must behave like ClickHouse for everything the services do through
// @clickhouse/client: a test here that passes locally and fails against a real server is a bug.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { type ClickHouseClient, ClickHouseError, ClickHouseLogLevel, createClient } from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../config.js';
import { createClickHouse } from './client.js';
import { isClickHouseReachable } from './ensure.js';
import { type LocalClickHouse, quoteString, startLocalClickHouse } from './local-server.js';
import { migrateClickHouse, migrationsDir, splitStatements } from './migrate.js';

let server: LocalClickHouse;
let dataPath: string;
let url: string;
const clients: ClickHouseClient[] = [];

function client(options: Parameters<typeof createClient>[0] = {}): ClickHouseClient {
  const c = createClient({ url, log: { level: ClickHouseLogLevel.OFF }, ...options });
  clients.push(c);
  return c;
}

async function createDatabase(name: string): Promise<ClickHouseClient> {
  await client().command({ query: `CREATE DATABASE IF NOT EXISTS ${name}` });
  return client({ database: name });
}

async function thrown(p: Promise<unknown>): Promise<ClickHouseError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ClickHouseError);
  return err as ClickHouseError;
}

beforeAll(async () => {
  dataPath = mkdtempSync(join(tmpdir(), 'chdb-local-test-'));
  server = await startLocalClickHouse({ host: '127.0.0.1', port: 0, dataPath });
  url = `http://127.0.0.1:${server.port}`;
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await server?.close();
  rmSync(dataPath, { recursive: true, force: true });
});

describe('local ClickHouse server', () => {
  it('answers ping like ClickHouse', async () => {
    expect(await client().ping()).toEqual({ success: true });
    const res = await fetch(`${url}/ping`);
    expect(await res.text()).toBe('Ok.\n');
    expect(await isClickHouseReachable(url)).toBe(true);
    expect(await isClickHouseReachable('http://127.0.0.1:1')).toBe(false);
  });

  it('runs commands and inserts many JSONEachRow rows', async () => {
    const db = await createDatabase('t_insert');
    await db.command({ query: 'CREATE TABLE events (id UInt64, name String, at DateTime) ENGINE = MergeTree ORDER BY id' });
    const values = Array.from({ length: 5000 }, (_, i) => ({ id: i, name: `n${i}`, at: '2024-05-01 12:00:00' }));
    const res = await db.insert({ table: 'events', values, format: 'JSONEachRow' });
    expect(res.executed).toBe(true);
    expect(res.summary?.written_rows).toBe('5000');
    const [row] = await (await db.query({ query: 'SELECT count() AS n, sum(id) AS s FROM events', format: 'JSONEachRow' }))
      .json<{ n: number | string; s: number | string }>();
    expect(Number(row!.n)).toBe(5000);
    expect(Number(row!.s)).toBe((4999 * 5000) / 2);

    await db.command({ query: 'CREATE TABLE cols (a UInt32, `group` String, d UInt8 DEFAULT 7) ENGINE = Memory' });
    await db.insert({ table: 'cols', values: [{ a: 1, group: 'g' }], columns: ['a', '`group`'], format: 'JSONEachRow' });
    await db.insert({ table: 'cols', values: [{ a: 2, group: 'h' }], columns: { except: ['d'] }, format: 'JSONEachRow' });
    expect(await (await db.query({ query: 'SELECT * FROM cols ORDER BY a', format: 'JSONEachRow' })).json()).toEqual([
      { a: 1, group: 'g', d: 7 },
      { a: 2, group: 'h', d: 7 },
    ]);
  });

  it('binds String, UInt64, Int64 and DateTime params server-side', async () => {
    const db = await createDatabase('t_params');
    await db.command({ query: 'CREATE TABLE kv (k String, v Int64) ENGINE = MergeTree ORDER BY k' });
    await db.insert({ table: 'kv', values: [{ k: 'a', v: 1 }, { k: "x' OR 1=1 --", v: 2 }], format: 'JSONEachRow' });

    const tricky = `it's a \\ back\\slash, a "quote", a tab\t, a newline\n and unicode ✓`;
    const rs = await db.query({
      query: `SELECT {s:String} AS s, {u:UInt64} AS u, {i:Int64} AS i, {d:DateTime} AS d,
                     toUnixTimestamp({d:DateTime}) AS ts`,
      query_params: { s: tricky, u: '18446744073709551615', i: -42, d: new Date('2024-05-01T12:34:56Z') },
      format: 'JSONEachRow',
      // Since 25.8 ClickHouse writes 64-bit integers unquoted by default (JSON.parse then rounds them).
      clickhouse_settings: { output_format_json_quote_64bit_integers: 1 },
    });
    const [row] = await rs.json<{ s: string; u: string; i: string; d: string; ts: string }>();
    expect(row!.s).toBe(tricky);
    expect(row!.u).toBe('18446744073709551615');
    expect(row!.i).toBe('-42');
    expect(Number(row!.ts)).toBe(Date.UTC(2024, 4, 1, 12, 34, 56) / 1000);

    // An injection attempt stays one literal value: it matches only the row whose key is exactly it.
    const injected = await (await db.query({
      query: 'SELECT v FROM kv WHERE k = {k:String} ORDER BY v',
      query_params: { k: "x' OR 1=1 --" },
      format: 'JSONEachRow',
    })).json<{ v: number }>();
    expect(injected).toEqual([{ v: 2 }]);
    const none = await (await db.query({
      query: 'SELECT v FROM kv WHERE k = {k:String}',
      query_params: { k: "a'; DROP TABLE kv; --" },
      format: 'JSONEachRow',
    })).json();
    expect(none).toEqual([]);
    expect(await (await db.query({ query: 'EXISTS TABLE kv', format: 'JSONEachRow' })).json()).toEqual([{ result: 1 }]);

    const arrays = await (await db.query({
      query: 'SELECT {names:Array(String)} AS names, {ids:Array(UInt64)} AS ids, {n:Nullable(String)} AS n',
      query_params: { names: ["o'neil", 'back\\slash', 'plain'], ids: [1, 2, 3], n: null },
      format: 'JSONEachRow',
    })).json<{ names: string[]; ids: (number | string)[]; n: null }>();
    expect(arrays[0]!.names).toEqual(["o'neil", 'back\\slash', 'plain']);
    expect(arrays[0]!.ids.map(Number)).toEqual([1, 2, 3]);
    expect(arrays[0]!.n).toBeNull();
  });

  it('speaks JSONEachRow, JSON (meta, rows) and JSONCompactEachRow', async () => {
    const c = client();
    const q = 'SELECT number AS n, toString(number) AS s FROM system.numbers LIMIT 3';
    expect(await (await c.query({ query: q, format: 'JSONEachRow' })).json()).toEqual([
      { n: 0, s: '0' }, { n: 1, s: '1' }, { n: 2, s: '2' },
    ].map((r) => expect.objectContaining({ s: r.s })));
    const json = await (await c.query({ query: q, format: 'JSON' })).json<{ n: number; s: string }>();
    expect(json.meta).toEqual([{ name: 'n', type: 'UInt64' }, { name: 's', type: 'String' }]);
    expect(json.rows).toBe(3);
    expect(json.data.map((r) => r.s)).toEqual(['0', '1', '2']);
    const compact = await (await c.query({ query: q, format: 'JSONCompactEachRow' })).json<[unknown, string]>();
    expect(compact.map((r) => r[1])).toEqual(['0', '1', '2']);
    // query() without a format is JSON; exec() returns whatever FORMAT the query asks for.
    const text = await (await c.exec({ query: 'SELECT 1 AS a FORMAT CSVWithNames' })).stream.toArray();
    expect(Buffer.concat(text).toString()).toBe('"a"\n1\n');
  });

  it('streams rows with queryStream-style reads', async () => {
    const rs = await client().query({ query: 'SELECT number AS n FROM numbers(20000)', format: 'JSONEachRow' });
    let count = 0;
    for await (const rows of rs.stream()) count += rows.length;
    expect(count).toBe(20000);
  });

  it('uses the database setting per request, also under concurrency', async () => {
    const a = await createDatabase('t_db_a');
    const b = await createDatabase('t_db_b');
    await a.command({ query: 'CREATE TABLE which (v String) ENGINE = Memory' });
    await b.command({ query: 'CREATE TABLE which (v String) ENGINE = Memory' });
    await a.insert({ table: 'which', values: [{ v: 'a' }], format: 'JSONEachRow' });
    await b.insert({ table: 'which', values: [{ v: 'b' }], format: 'JSONEachRow' });
    const reads = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b)
        .query({ query: 'SELECT v, currentDatabase() AS db FROM which', format: 'JSONEachRow' })
        .then((r) => r.json<{ v: string; db: string }>())),
    );
    reads.forEach((rows, i) => expect(rows).toEqual([i % 2 ? { v: 'a', db: 't_db_a' } : { v: 'b', db: 't_db_b' }]));
    const plain = await (await client().query({ query: 'SELECT currentDatabase() AS db', format: 'JSONEachRow' })).json();
    expect(plain).toEqual([{ db: 'default' }]);
  });

  it('runs a short read beside a long one, on another engine connection', async () => {
    const c = client();
    const order: string[] = [];
    const long = c.query({ query: 'SELECT sum(sleepEachRow(0.25)) AS s FROM numbers(6)', format: 'JSONEachRow' })
      .then((r) => r.json()).then(() => order.push('long'));
    await new Promise((r) => setTimeout(r, 100));
    const short = await (await c.query({ query: 'SELECT 42 AS answer', format: 'JSONEachRow' })).json();
    order.push('short');
    expect(short).toEqual([{ answer: 42 }]);
    await long;
    expect(order).toEqual(['short', 'long']);
  });

  it('keeps each statement its own parameters while statements run at once', async () => {
    const db = await createDatabase('t_params_parallel');
    await db.command({ query: 'CREATE TABLE n (k UInt64) ENGINE = MergeTree ORDER BY k' });
    await db.command({ query: 'INSERT INTO n SELECT number FROM numbers(100000)' });
    const results = await Promise.all(Array.from({ length: 64 }, async (_, i) => {
      const tag = `q${i} it's \\ "${i}"\t✓`;
      const [row] = await (await db.query({
        query: `SELECT {tag:String} AS tag, {ids:Array(UInt64)} AS ids, sum(k) AS s, count() AS c
                FROM n WHERE k >= {from:UInt64} AND k < {from:UInt64} + {len:UInt32}`,
        query_params: { tag, ids: [i, i + 1], from: i * 1000, len: 100 + i },
        format: 'JSONEachRow',
        clickhouse_settings: { output_format_json_quote_64bit_integers: 0 },
      })).json<{ tag: string; ids: number[]; s: number; c: number }>();
      return { i, tag, row: row! };
    }));
    for (const { i, tag, row } of results) {
      const len = 100 + i;
      expect(row).toEqual({ tag, ids: [i, i + 1], s: len * i * 1000 + (len * (len - 1)) / 2, c: len });
    }
  });

  it('refuses a placeholder given no value, also on a connection where an earlier statement set it', async () => {
    const c = client();
    const query = 'SELECT {stale:String} AS v';
    // One round of statements on every connection with the value, then the same statement without it.
    await Promise.all(Array.from({ length: 8 }, () => c.query({ query, query_params: { stale: 'old' }, format: 'JSONEachRow' }).then((r) => r.json())));
    const errors = await Promise.all(Array.from({ length: 8 }, () => thrown(c.query({ query, format: 'JSONEachRow' }))));
    for (const err of errors) {
      expect(err.code).toBe('456');
      expect(err.type).toBe('UNKNOWN_QUERY_PARAMETER');
    }
  });

  it('runs one write at a time, and reads beside them', async () => {
    const db = await createDatabase('t_writes');
    await db.command({ query: 'CREATE TABLE w (step String, n UInt64) ENGINE = MergeTree ORDER BY step' });
    const order: string[] = [];
    const slow = db.command({
      query: "INSERT INTO w SELECT 'slow', number FROM numbers(4) WHERE sleepEachRow(0.25) = 0",
    }).then(() => order.push('slow write'));
    await new Promise((r) => setTimeout(r, 100));
    const quick = db.insert({ table: 'w', values: [{ step: 'quick', n: 0 }], format: 'JSONEachRow' })
      .then(() => order.push('quick write'));
    const read = db.query({ query: 'SELECT count() AS n FROM w', format: 'JSONEachRow' })
      .then((r) => r.json()).then(() => order.push('read'));
    await Promise.all([slow, quick, read]);
    expect(order).toEqual(['read', 'slow write', 'quick write']);
    const rows = await (await db.query({ query: 'SELECT step, count() AS n FROM w GROUP BY step ORDER BY step', format: 'JSONEachRow' }))
      .json<{ step: string; n: number | string }>();
    expect(rows.map((r) => [r.step, Number(r.n)])).toEqual([['quick', 1], ['slow', 4]]);
  });

  it('keeps a cache of decompressed blocks for the reads that ask for it', async () => {
    const [row] = await (await client().query({
      query: "SELECT value FROM system.server_settings WHERE name = 'uncompressed_cache_size'", format: 'JSONEachRow',
    })).json<{ value: string }>();
    expect(Number(row!.value)).toBe(256 * 1024 * 1024);
  });

  it('applies clickhouse_settings to that request only', async () => {
    const c = client();
    const err = await thrown(c.query({
      query: 'SELECT number FROM numbers(100)',
      format: 'JSONEachRow',
      clickhouse_settings: { max_result_rows: '10', result_overflow_mode: 'throw' },
    }));
    expect(err.code).toBe('396');
    expect(err.type).toBe('TOO_MANY_ROWS_OR_BYTES');
    const after = await (await c.query({ query: "SELECT getSetting('max_result_rows') AS v", format: 'JSONEachRow' })).json();
    expect(after).toEqual([{ v: 0 }]);

    const db = await createDatabase('t_async');
    await db.command({ query: 'CREATE TABLE t (v UInt32) ENGINE = MergeTree ORDER BY v' });
    await db.insert({
      table: 't',
      values: [{ v: 1 }, { v: 2 }],
      format: 'JSONEachRow',
      clickhouse_settings: { async_insert: 1, wait_for_async_insert: 1 },
    });
    expect(await (await db.query({ query: 'SELECT count() AS n FROM t', format: 'JSONEachRow' })).json())
      .toEqual([{ n: 2 }]);
    const unknown = await thrown(c.query({
      query: 'SELECT 1',
      clickhouse_settings: { max_result_rows: '1', no_such_setting: 1 } as never,
    }));
    expect(unknown.code).toBe('115');
    expect(unknown.type).toBe('UNKNOWN_SETTING');
    const reset = await (await c.query({ query: "SELECT getSetting('max_result_rows') AS v", format: 'JSONEachRow' })).json();
    expect(reset).toEqual([{ v: 0 }]);
  });

  it('collapses duplicates with ReplacingMergeTree FINAL and handles LowCardinality', async () => {
    const db = await createDatabase('t_replacing');
    await db.command({
      query: `CREATE TABLE r (k UInt64, model LowCardinality(String), v Int64)
              ENGINE = ReplacingMergeTree ORDER BY k`,
    });
    // Separate inserts make separate parts, so only FINAL (not a merge) can collapse them.
    await db.insert({ table: 'r', values: [{ k: 1, model: 'gpt', v: 10 }], format: 'JSONEachRow' });
    await db.insert({ table: 'r', values: [{ k: 1, model: 'gpt', v: 10 }, { k: 2, model: 'claude', v: 5 }], format: 'JSONEachRow' });
    const raw = await (await db.query({ query: 'SELECT count() AS n FROM r', format: 'JSONEachRow' })).json();
    expect(raw).toEqual([{ n: 3 }]);
    const final = await (await db.query({
      query: 'SELECT model, sum(v) AS v, toTypeName(model) AS t FROM r FINAL GROUP BY model ORDER BY model',
      format: 'JSONEachRow',
    })).json();
    expect(final).toEqual([
      { model: 'claude', v: 5, t: 'LowCardinality(String)' },
      { model: 'gpt', v: 10, t: 'LowCardinality(String)' },
    ]);
  });

  it('reports errors as ClickHouse does', async () => {
    const c = client();
    const unknownTable = await thrown(c.query({ query: 'SELECT * FROM no_such_table' }));
    expect(unknownTable.code).toBe('60');
    expect(unknownTable.type).toBe('UNKNOWN_TABLE');
    expect(unknownTable.message).toMatch(/no_such_table/);

    const syntax = await thrown(c.query({ query: 'SELEC 1' }));
    expect(syntax.code).toBe('62');
    expect(syntax.type).toBe('SYNTAX_ERROR');

    const noDb = await thrown(client({ database: 'no_such_db' }).query({ query: 'SELECT 1' }));
    expect(noDb.code).toBe('81');

    const missingParam = await thrown(c.query({ query: 'SELECT {x:UInt8}' }));
    expect(missingParam.code).toBe('456');

    const res = await fetch(`${url}/?query=${encodeURIComponent('SELECT * FROM no_such_table')}`);
    expect(res.status).toBe(404);
    expect(res.headers.get('x-clickhouse-exception-code')).toBe('60');
    expect(await res.text()).toMatch(/^Code: 60\. DB::Exception: .* \(UNKNOWN_TABLE\) \(version 26\.[\d.]+ \(official build\)\)\n$/s);
    const bad = await fetch(url, { method: 'POST', body: 'SELEC 1' });
    expect(bad.status).toBe(400);
  });

  it('authenticates the configured user', async () => {
    const locked = await startLocalClickHouse({ host: '127.0.0.1', port: 0, dataPath, user: 'gw', password: 's3cret' });
    try {
      const u = `http://127.0.0.1:${locked.port}`;
      const ok = client({ url: u, username: 'gw', password: 's3cret' });
      expect(await (await ok.query({ query: 'SELECT 1 AS a', format: 'JSONEachRow' })).json()).toEqual([{ a: 1 }]);
      const wrong = client({ url: u, username: 'gw', password: 'nope' });
      const err = await thrown(wrong.query({ query: 'SELECT 1' }));
      expect(err.code).toBe('516');
      expect(err.type).toBe('AUTHENTICATION_FAILED');
      const res = await fetch(`${u}/?query=SELECT%201`, { headers: { 'X-ClickHouse-User': 'gw', 'X-ClickHouse-Key': 'x' } });
      expect(res.status).toBe(403);
      const viaHeaders = await fetch(`${u}/?query=SELECT%201`, { headers: { 'X-ClickHouse-User': 'gw', 'X-ClickHouse-Key': 's3cret' } });
      expect(await viaHeaders.text()).toBe('1\n');
    } finally {
      await locked.close();
    }
  });

  it('handles gzip request and response bodies', async () => {
    const c = client({ compression: { request: true, response: true } });
    await c.command({ query: 'CREATE DATABASE t_gzip' });
    await c.command({ query: 'CREATE TABLE t_gzip.t (v String) ENGINE = Memory' });
    await c.insert({ table: 't_gzip.t', values: [{ v: 'zipped' }], format: 'JSONEachRow' });
    expect(await (await c.query({ query: 'SELECT v FROM t_gzip.t', format: 'JSONEachRow' })).json()).toEqual([{ v: 'zipped' }]);
    const err = await thrown(c.query({ query: 'SELECT * FROM t_gzip.missing' }));
    expect(err.code).toBe('60');
    const res = await fetch(`${url}/?enable_http_compression=1&database=t_gzip`, {
      method: 'POST',
      headers: { 'Content-Encoding': 'gzip', 'Accept-Encoding': 'gzip' },
      body: gzipSync('SELECT v FROM t'),
    });
    expect(await res.text()).toBe('zipped\n'); // fetch gunzips transparently
    expect(res.headers.get('x-clickhouse-format')).toBe('TabSeparated');
    expect(JSON.parse(res.headers.get('x-clickhouse-summary')!)).toHaveProperty('read_rows');
  });

  it('accepts query params sent as multipart/form-data', async () => {
    const c = client({ use_multipart_params: true } as never);
    const rows = await (await c.query({
      query: 'SELECT {s:String} AS s, {ids:Array(UInt32)} AS ids',
      query_params: { s: "multi'part", ids: [1, 2] },
      format: 'JSONEachRow',
    })).json();
    expect(rows).toEqual([{ s: "multi'part", ids: [1, 2] }]);
  });

  it('migrates once, and a second run is a no-op', async () => {
    const config = loadConfig({ CLICKHOUSE_URL: url, CLICKHOUSE_DATABASE: 't_migrate', LOG_LEVEL: 'silent' });
    const first = await migrateClickHouse(config);
    // Every file of the migrations folder, in order.
    expect(first).toEqual(readdirSync(migrationsDir()).filter((f) => /^\d+_.*\.sql$/.test(f)).sort());
    expect(await migrateClickHouse(config)).toEqual([]);
    const ch = createClickHouse(config);
    clients.push(ch);
    const tables = await (await ch.query({ query: 'SHOW TABLES', format: 'JSONEachRow' })).json<{ name: string }>();
    expect(tables.map((t) => t.name).sort()).toEqual([
      'log_stats_15m', 'log_stats_15m_from_logs_mv', 'logs', 'schema_migrations',
    ]);
    const applied = await (await ch.query({ query: 'SELECT name FROM schema_migrations FINAL', format: 'JSONEachRow' })).json();
    expect((applied as { name: string }[]).map((r) => r.name).sort()).toEqual(first);

    // The request log as the services write and read it: a replayed request counts once.
    const row = {
      id: 1, user_id: 7, created_at: '2024-05-01T12:00:00Z', type: 2, content: '', username: 'u', token_name: 't',
      model_name: 'claude', quota: 1500, prompt_tokens: 10, completion_tokens: 20, use_time: 3, is_stream: true,
      channel: 1, token_id: 9, group: 'default', request_id: 'req-1', upstream_request_id: 'up-1',
    };
    await ch.insert({ table: 'logs', values: [row], format: 'JSONEachRow' });
    await ch.insert({ table: 'logs', values: [row], format: 'JSONEachRow' });
    const sum = await (await ch.query({
      query: `SELECT count() AS n, sum(quota) AS q FROM logs FINAL
              WHERE user_id = {user:UInt64} AND created_at >= {from:DateTime}`,
      query_params: { user: 7, from: '2024-05-01 00:00:00' },
      format: 'JSONEachRow',
    })).json<{ n: number; q: number }>();
    expect(sum.map((r) => ({ n: Number(r.n), q: Number(r.q) }))).toEqual([{ n: 1, q: 1500 }]);
  });
});

describe('helpers', () => {
  it('splits migration files into statements', () => {
    expect(splitStatements("-- a; comment\nCREATE TABLE a (s String DEFAULT ';');\n/* ; */ SELECT 1;\n")).toEqual([
      "CREATE TABLE a (s String DEFAULT ';')",
      'SELECT 1',
    ]);
  });

  it('quotes any string as one SQL string literal', () => {
    expect(quoteString("it's")).toBe("'it\\'s'");
    expect(quoteString('a\\b')).toBe("'a\\\\b'");
    expect(quoteString('tab\there\nnul\0')).toBe("'tab\\x09here\\x0anul\\x00'");
    expect(quoteString("'; DROP TABLE t; --")).toBe("'\\'; DROP TABLE t; --'");
  });
});
