// The console's reader against the test ClickHouse: every value reaches the server as
// @clickhouse/client would send it (the same statements answered alike by both), the server's errors
// come back as ClickHouseError with their code, and a server that stalls or breaks off its answer
// fails the read instead of hanging it or passing a truncated result.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ClickHouseError, type ClickHouseClient } from '@clickhouse/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testConfig } from '../testing/test-config.js';
import { createClickHouse } from './client.js';
import { freePort } from '../testing/free-port.js';
import { ClickHouseReader, ClickHouseUnavailableError, createClickHouseReader } from './read-client.js';

const config = testConfig();
let ch: ClickHouseClient;
let reader: ClickHouseReader;
const stubs: Server[] = [];

async function stub(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const server = createServer(handler);
  stubs.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

beforeAll(() => {
  ch = createClickHouse(config);
  reader = createClickHouseReader(config);
});

afterAll(async () => {
  await ch?.close();
  await reader?.close();
  for (const s of stubs) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

describe('ClickHouseReader', () => {
  it('sends every kind of value the console binds exactly as @clickhouse/client does', async () => {
    const awkward = [
      "it's", 'back\\slash', 'tab\there', 'new\nline', 'carriage\rreturn', 'null\0byte', '{brace}', '%41&x=1#h',
      'naïve café 漢字 🙂', "'; DROP TABLE logs; --", '', ' ',
    ];
    const query = `
      SELECT {s:String} AS s, {u:UInt64} AS u, {i:Int32} AS i, {ts:UInt32} AS ts,
             {ids:Array(String)} AS ids, length({s:String}) AS len`;
    for (const s of awkward) {
      const query_params = { s, u: 18_446_744_073_709_551_615n.toString(), i: -2_147_483_648, ts: 4_294_967_295, ids: [s, 'plain', s.toUpperCase()] };
      const viaClient = await (await ch.query({ query, query_params, format: 'JSONEachRow' })).json();
      const viaReader = await reader.rows({ query, query_params, format: 'JSONEachRow' });
      expect(viaReader, JSON.stringify(s)).toEqual(viaClient);
      expect(viaReader).toHaveLength(1);
      expect((viaReader[0] as { s: string }).s).toBe(s);
    }
  });

  it('reads the database it was given, both row formats, and an empty answer', async () => {
    expect(await reader.rows({ query: 'SELECT currentDatabase() AS db', format: 'JSONEachRow' })).toEqual([{ db: config.CLICKHOUSE_DATABASE }]);
    const compact = await reader.rows<[number | string, string]>({ query: 'SELECT number, toString(number) FROM numbers(3)', format: 'JSONCompactEachRow' });
    expect(compact.map(([n, s]) => [Number(n), s])).toEqual([[0, '0'], [1, '1'], [2, '2']]);
    expect(await reader.rows({ query: 'SELECT 1 AS x WHERE 0', format: 'JSONEachRow' })).toEqual([]);
  });

  it('applies the settings of the statement over the reader\'s own', async () => {
    const r = new ClickHouseReader({ url: config.CLICKHOUSE_URL, database: config.CLICKHOUSE_DATABASE, settings: { max_threads: 3 } });
    try {
      const setting = (extra = {}) => r.rows<{ value: string }>({
        query: "SELECT value FROM system.settings WHERE name = 'max_threads'", format: 'JSONEachRow', clickhouse_settings: extra,
      });
      expect((await setting())[0]!.value).toMatch(/3/);
      expect((await setting({ max_threads: 1 }))[0]!.value).toMatch(/1/);
    } finally {
      await r.close();
    }
  });

  it("rejects with the server's error, code and type parsed", async () => {
    const failures: Array<[() => Promise<unknown>, string]> = [
      [() => reader.rows({ query: 'SELECT * FROM no_such_table_here', format: 'JSONEachRow' }), 'UNKNOWN_TABLE'],
      [() => reader.rows({ query: 'SELECT {x:UInt8} AS x', query_params: { x: 'not a number' }, format: 'JSONEachRow' }), ''],
      [() => reader.rows({ query: 'SELECT {missing:String} AS x', format: 'JSONEachRow' }), ''],
      [() => reader.rows({ query: 'SELECT 1', format: 'JSONEachRow', clickhouse_settings: { no_such_setting_at_all: 1 } }), 'UNKNOWN_SETTING'],
      [() => reader.rows({ query: 'SELECT throwIf(number = 3, \'stop\') FROM numbers(10)', format: 'JSONEachRow' }), 'FUNCTION_THROW_IF_VALUE_IS_NON_ZERO'],
    ];
    for (const [read, type] of failures) {
      const err = await read().then((rows) => rows, (e: unknown) => e);
      expect(err, read.toString()).toBeInstanceOf(ClickHouseError);
      expect(Number((err as ClickHouseError).code)).toBeGreaterThan(0);
      if (type) expect((err as ClickHouseError).type).toBe(type);
    }
    // The reader is still usable after its errors.
    expect(await reader.rows({ query: 'SELECT 2 AS two', format: 'JSONEachRow' })).toEqual([{ two: 2 }]);
  });

  it('fails an answer that breaks off into an exception after its first rows (HTTP 200)', async () => {
    const url = await stub((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.end('{"a":1}\n{"a":2}\nCode: 6. DB::Exception: Cannot parse string \'x\' as UInt8. (CANNOT_PARSE_TEXT) (version 25.8.1.1)\n');
    });
    const r = new ClickHouseReader({ url, database: 'default' });
    try {
      const err = await r.rows({ query: 'SELECT a FROM t', format: 'JSONEachRow' }).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(ClickHouseError);
      expect((err as ClickHouseError).type).toBe('CANNOT_PARSE_TEXT');
    } finally {
      await r.close();
    }
  });

  it('tells "not now" (unreachable, overloaded, 503) from a fault of the statement', async () => {
    const unavailable = async (r: ClickHouseReader) => {
      try {
        const err = await r.rows({ query: 'SELECT 1', format: 'JSONEachRow' }).then(() => null, (e: unknown) => e);
        expect(err).toBeInstanceOf(ClickHouseUnavailableError);
        return (err as ClickHouseUnavailableError).cause;
      } finally {
        await r.close();
      }
    };
    // Nothing listens.
    expect(await unavailable(new ClickHouseReader({ url: `http://127.0.0.1:${await freePort()}`, database: 'default' }))).toMatchObject({ code: 'ECONNREFUSED' });
    // Overloaded, in the middle of a result and as an error status.
    const overloaded = await stub((req, res) => {
      if (req.url?.includes('mid=1')) {
        res.writeHead(200);
        res.end('{"a":1}\nCode: 241. DB::Exception: Memory limit (total) exceeded. (MEMORY_LIMIT_EXCEEDED) (version 25.8.1.1)\n');
      } else {
        res.writeHead(500, { 'x-clickhouse-exception-code': '202' });
        res.end('Code: 202. DB::Exception: Too many simultaneous queries. Maximum: 100. (TOO_MANY_SIMULTANEOUS_QUERIES) (version 25.8.1.1)\n');
      }
    });
    expect(await unavailable(new ClickHouseReader({ url: overloaded, database: 'default' }))).toMatchObject({ type: 'TOO_MANY_SIMULTANEOUS_QUERIES' });
    expect(await unavailable(new ClickHouseReader({ url: overloaded, database: 'default', settings: { mid: 1 } }))).toMatchObject({ type: 'MEMORY_LIMIT_EXCEEDED' });
    const behindProxy = await stub((_req, res) => { res.writeHead(503); res.end('no healthy upstream'); });
    expect(await unavailable(new ClickHouseReader({ url: behindProxy, database: 'default' }))).toBeInstanceOf(Error);
    // A statement's own fault is not "not now".
    await expect(reader.rows({ query: 'SELECT * FROM no_such_table_here', format: 'JSONEachRow' })).rejects.not.toBeInstanceOf(ClickHouseUnavailableError);
  });

  it('refuses an answer larger than it may hold, sent chunked, without waiting for its end', async () => {
    const url = await stub((_req, res) => {
      res.writeHead(200);
      const row = `${JSON.stringify({ pad: 'x'.repeat(1000) })}\n`;
      for (let i = 0; i < 200; i++) res.write(row);
      // Never ended: the reader stops at its limit, not at the answer's end.
    });
    const r = new ClickHouseReader({ url, database: 'default', maxAnswerBytes: 50_000 });
    try {
      const err = await r.rows({ query: 'SELECT pad FROM t', format: 'JSONEachRow' }).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect(err).not.toBeInstanceOf(ClickHouseUnavailableError);
      expect((err as Error).message).toMatch(/larger than a read may hold \(50000 bytes\)/);
    } finally {
      await r.close();
    }
  });

  it('gives up on a server that does not answer within its timeout', async () => {
    const url = await stub(() => { /* never answers */ });
    const r = new ClickHouseReader({ url, database: 'default', requestTimeoutMs: 300 });
    try {
      const err = await r.rows({ query: 'SELECT 1', format: 'JSONEachRow' }).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(ClickHouseUnavailableError);
      expect((err as Error).message).toMatch(/timeout/i);
    } finally {
      await r.close();
    }
  });

  it('sends its credentials, and a wrong password is refused by the server', async () => {
    const seen: string[] = [];
    const url = await stub((req, res) => {
      seen.push(req.headers.authorization ?? '');
      res.writeHead(516, { 'x-clickhouse-exception-code': '516' });
      res.end('Code: 516. DB::Exception: wrong: Authentication failed: password is incorrect, or there is no user with such name. (AUTHENTICATION_FAILED) (version 25.8.1.1)\n');
    });
    const r = new ClickHouseReader({ url, database: 'default', username: 'console', password: 'p:w' });
    try {
      const err = await r.rows({ query: 'SELECT 1', format: 'JSONEachRow' }).then(() => null, (e: unknown) => e);
      expect((err as ClickHouseError).type).toBe('AUTHENTICATION_FAILED');
      expect(seen).toEqual([`Basic ${Buffer.from('console:p:w').toString('base64')}`]);
    } finally {
      await r.close();
    }
  });
});
