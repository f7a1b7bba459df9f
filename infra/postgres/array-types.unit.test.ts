// Array parameters and array columns without postgres.js's per-connection type query: the text form
// Postgres reads and writes (the array literal), for the element types the gateway passes.
import { describe, expect, it } from 'vitest';
import { ARRAY_TYPES, arrayTypes, parseArrayLiteral, serializeArray } from './array-types.js';

describe('array literals', () => {
  it('writes each element quoted, escapes quotes and backslashes, NULL for null, nested arrays nested', () => {
    expect(serializeArray([1, 2, 3], String)).toBe('{"1","2","3"}');
    expect(serializeArray([], String)).toBe('{}');
    expect(serializeArray(['a b', 'c"d', 'e\\f', '', 'NULL', null, undefined], String)).toBe('{"a b","c\\"d","e\\\\f","","NULL",NULL,NULL}');
    expect(serializeArray([[1, 2], [3, 4]], String)).toBe('{{"1","2"},{"3","4"}}');
    expect(serializeArray([true, false], (b) => (b ? 't' : 'f'))).toBe('{"t","f"}');
  });

  it('writes what the element-by-element form writes, for any mix of elements (a flat array joined once)', () => {
    // The literal built one element at a time, as the rule reads: the reference for the joined form.
    const reference = (xs: readonly unknown[]): string => `{${xs.map((x) => (x === null || x === undefined ? 'NULL'
      : Array.isArray(x) ? reference(x) : `"${String(x).replace(/[\\"]/g, (c) => `\\${c}`)}"`)).join(',')}}`;
    const pieces = ['', 'a', '"', '\\', ',', '{', '}', ' ', 'NULL', 'é', '✓', '\\"'];
    let seed = 7;
    const next = (n: number): number => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
    const element = (depth: number): unknown => {
      const kind = next(10);
      if (kind === 0) return null;
      if (kind === 1 && depth < 2) return Array.from({ length: next(4) }, () => element(depth + 1));
      if (kind === 2) return next(1_000_000) - 500_000;
      return Array.from({ length: next(4) }, () => pieces[next(pieces.length)]).join('');
    };
    for (let round = 0; round < 500; round++) {
      const xs = Array.from({ length: next(8) }, () => element(round % 3 === 0 ? 2 : 0));
      expect(serializeArray(xs, String)).toBe(reference(xs));
    }
    const flat = ['plain', 'with"quote', 'back\\slash', '', 'NULL'];
    expect(serializeArray(flat, String)).toBe(reference(flat));
    expect(parseArrayLiteral(serializeArray(flat, String), (s) => s)).toEqual(flat);
  });

  it('reads what Postgres writes: bare and quoted elements, escapes, NULL, nesting, bounds', () => {
    expect(parseArrayLiteral('{1,2,3}', Number)).toEqual([1, 2, 3]);
    expect(parseArrayLiteral('{}', Number)).toEqual([]);
    expect(parseArrayLiteral('{"a b","c\\"d","e\\\\f","",NULL,"NULL",null,x}', (s) => s)).toEqual(['a b', 'c"d', 'e\\f', '', null, 'NULL', null, 'x']);
    expect(parseArrayLiteral('{{1,2},{3,4}}', Number)).toEqual([[1, 2], [3, 4]]);
    expect(parseArrayLiteral('{{}}', Number)).toEqual([[]]);
    expect(parseArrayLiteral('[0:1]={7,8}', Number)).toEqual([7, 8]);
    expect(parseArrayLiteral('{"{",",","}"}', (s) => s)).toEqual(['{', ',', '}']);
  });

  it('round-trips', () => {
    const values = ['', ' ', 'plain', 'with,comma', 'with"quote', 'back\\slash', '{braces}', 'NULL', 'é ✓', null];
    expect(parseArrayLiteral(serializeArray(values, String), (s) => s)).toEqual(values);
  });

  it('registers a parser and a serializer per array type, under its fixed built-in OID', () => {
    const types = arrayTypes();
    const byOid = new Map(Object.values(types).map((t) => [t.to, t]));
    for (const t of ARRAY_TYPES) {
      const entry = byOid.get(t.oid)!;
      expect(entry.from).toEqual([t.oid]);
    }
    const int8 = byOid.get(1016)!;
    expect(int8.serialize([1, 2])).toBe('{"1","2"}');
    // BIGINT elements come back as numbers, as the scalar BIGINT does (infra/postgres/client.ts).
    expect(int8.parse('{1,9007199254740991}')).toEqual([1, 9007199254740991]);
    expect(byOid.get(1007)!.parse('{1,NULL}')).toEqual([1, null]);
    expect(byOid.get(1000)!.parse('{t,f}')).toEqual([true, false]);
    expect(byOid.get(1000)!.serialize([true, false])).toBe('{"t","f"}');
    expect(byOid.get(1009)!.parse('{a,"b c"}')).toEqual(['a', 'b c']);
    // NUMERIC elements stay strings, as postgres.js gives the scalar.
    expect(byOid.get(1231)!.parse('{1.50,2}')).toEqual(['1.50', '2']);
  });
});
