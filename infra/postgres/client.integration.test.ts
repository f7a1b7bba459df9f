// createSql's connections run no array-type query of their own (postgres.js fetch_types): that query's
// promise is awaited by nothing, so an error answer to it (a connection terminated as it opened, a
// statement timeout) was an unhandled rejection, and Node 20 exits on one: the billing worker and the
// console-api died of it. The array types are registered up front instead (array-types.ts), and every
// array parameter and array column the gateway uses must still work.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testConfig, TEST_DATABASE_URL } from '../testing/test-config.js';
import { startPostgresFaultProxy, type PostgresFaultProxy } from '../testing/postgres-fault-proxy.js';
import { createSql, type Sql } from './client.js';

const config = testConfig();
let direct: Sql;
let proxy: PostgresFaultProxy;
let unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => void unhandled.push(reason);

beforeAll(async () => {
  direct = createSql(config);
  const url = new URL(TEST_DATABASE_URL);
  proxy = await startPostgresFaultProxy({ host: url.hostname, port: Number(url.port || 5432) }, { failQueriesContaining: ['typarray'] });
  process.on('unhandledRejection', onUnhandled);
});
afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  await direct?.end({ timeout: 5 });
  await proxy?.close();
});

function viaProxy(max = 2): Sql {
  const url = new URL(TEST_DATABASE_URL);
  url.port = String(proxy.port);
  return createSql({ ...config, DATABASE_URL: url.toString() }, { max });
}

describe('createSql', () => {
  it('opens connections without the array-type query, so its failure cannot become an unhandled rejection', async () => {
    unhandled = [];
    // Each round on a pool of its own: every connection opened is a chance for that query to fail.
    for (let round = 0; round < 5; round++) {
      const sql = viaProxy();
      try {
        const rows = await Promise.all([1, 2].map((n) => sql`SELECT ${n}::int AS n, pg_sleep(0.01)`));
        expect(rows.map((r) => r[0]!.n)).toEqual([1, 2]);
      } finally {
        await sql.end({ timeout: 5 }).catch(() => undefined);
      }
    }
    const again = viaProxy(4);
    try {
      const [r] = await again`SELECT sum(x)::int AS s FROM unnest(${[1, 2, 3]}::bigint[]) AS x`;
      expect(r!.s).toBe(6);
    } finally {
      await again.end({ timeout: 5 });
    }
    await new Promise((r) => setTimeout(r, 50));
    expect(proxy.connections).toBeGreaterThan(0);
    expect(proxy.failedQueries).toBe(0);
    expect(unhandled).toEqual([]);
  });

  it('writes and reads every registered array type without fetched types', async () => {
    const [r] = await direct`
      SELECT ${[1, 2, null]}::int[] AS i4, ${[1, 9_007_199_254_740_991]}::bigint[] AS i8, ${[3, 4]}::smallint[] AS i2,
             ${['a', 'b c', 'd"e', 'f\\g', '', 'NULL', null, 'ü,}{']}::text[] AS t, ${['x', 'y']}::varchar[] AS vc,
             ${direct.array([true, false], 1000)} AS b, ARRAY[false, NULL]::boolean[] AS b2, ${[1.5, -2]}::float8[] AS f8, ${[0.5]}::real[] AS f4,
             ${['1.50', '2']}::numeric[] AS num, ${['6c1c1c3e-8f55-4d6e-9a39-1c5d8d0e0b8a']}::uuid[] AS u,
             ${[]}::bigint[] AS empty, ARRAY[[1, 2], [3, 4]]::int[] AS nested`;
    expect(r).toEqual({
      i4: [1, 2, null], i8: [1, 9_007_199_254_740_991], i2: [3, 4],
      t: ['a', 'b c', 'd"e', 'f\\g', '', 'NULL', null, 'ü,}{'], vc: ['x', 'y'],
      b: [true, false], b2: [false, null], f8: [1.5, -2], f4: [0.5], num: ['1.50', '2'], u: ['6c1c1c3e-8f55-4d6e-9a39-1c5d8d0e0b8a'],
      empty: [], nested: [[1, 2], [3, 4]],
    });
    // Without a cast: the type Postgres infers from the column.
    const [one] = await direct`SELECT count(*)::int AS n FROM (VALUES (1::bigint), (5), (9)) AS v(id) WHERE id = ANY(${[1, 9]})`;
    expect(one!.n).toBe(2);
    const [txt] = await direct`SELECT count(*)::int AS n FROM (VALUES ('a'::text), ('b')) AS v(s) WHERE s = ANY(${['b', 'c']})`;
    expect(txt!.n).toBe(1);
    // unnest of several arrays, as billing/settle-batch.ts writes a batch.
    const rows = await direct`SELECT * FROM unnest(${['r1', 'r2']}::text[], ${[7, 8]}::bigint[], ${[1, 2]}::int[]) AS d(id, q, n) ORDER BY id`;
    expect(rows.map((x) => ({ ...x }))).toEqual([{ id: 'r1', q: 7, n: 1 }, { id: 'r2', q: 8, n: 2 }]);
  });
});
