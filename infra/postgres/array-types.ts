// Array types registered up front, so that no connection has to fetch them (infra/postgres/client.ts).
//
// postgres.js learns how to write an array parameter and read an array column from a query it runs on
// every new connection (fetch_types), with a promise nothing awaits: an error answer to it (the
// connection terminated, a statement timeout) escaped as an unhandled rejection and Node exited. The
// built-in types' OIDs are fixed in every Postgres version (pg_type.dat), so the array types the
// gateway uses are registered here instead, for every process. A parameter whose type Postgres
// describes as one of these (`${ids}::bigint[]`, `= ANY(${ids})` on a BIGINT column) is written as an
// array literal; an array column of one is read back as a JS array. An array of another element type
// would reach Postgres as `String(value)` and be refused: add its entry here. (postgres.js types a JS
// array of booleans, Dates or bigints by its first element, a scalar type Postgres will not cast to an
// array: pass one as `sql.array(values, <array OID>)`.)

/** One element type: its array type's OID and how to write and read one element. */
export interface ArrayTypeDef {
  /** The key under which postgres.js registers it (`sql.types.<name>`). */
  name: string;
  /** OID of the array type (pg_type.typarray of the element type). */
  oid: number;
  serialize(x: unknown): string;
  parse(text: string): unknown;
}

const asText = (x: unknown): string => String(x);
const text = (s: string): string => s;

export const ARRAY_TYPES: readonly ArrayTypeDef[] = [
  { name: 'bool_array', oid: 1000, serialize: (x) => (x === true || x === 't' ? 't' : 'f'), parse: (s) => s === 't' },
  { name: 'int2_array', oid: 1005, serialize: asText, parse: Number },
  { name: 'int4_array', oid: 1007, serialize: asText, parse: Number },
  { name: 'text_array', oid: 1009, serialize: asText, parse: text },
  { name: 'varchar_array', oid: 1015, serialize: asText, parse: text },
  // BIGINT as a JS number, as the scalar (client.ts): every quota and id fits well inside 2^53.
  { name: 'int8_array', oid: 1016, serialize: asText, parse: Number },
  { name: 'float4_array', oid: 1021, serialize: asText, parse: Number },
  { name: 'float8_array', oid: 1022, serialize: asText, parse: Number },
  // NUMERIC stays a string, as postgres.js gives the scalar (money columns: NUMERIC(14,2)).
  { name: 'numeric_array', oid: 1231, serialize: asText, parse: text },
  { name: 'uuid_array', oid: 2951, serialize: asText, parse: text },
];

/** The `types` option of postgres.js for ARRAY_TYPES: a serializer and a parser under each array OID. */
export function arrayTypes(): Record<string, { to: number; from: number[]; serialize(xs: unknown): string; parse(s: string): unknown }> {
  const out: Record<string, { to: number; from: number[]; serialize(xs: unknown): string; parse(s: string): unknown }> = {};
  for (const t of ARRAY_TYPES) {
    out[t.name] = {
      to: t.oid,
      from: [t.oid],
      // A value that is not an array (a literal the caller wrote itself) passes as it is.
      serialize: (xs) => (Array.isArray(xs) ? serializeArray(xs, t.serialize) : String(xs)),
      parse: (s) => parseArrayLiteral(s, t.parse),
    };
  }
  return out;
}

/**
 * An array literal: every element quoted (so no element needs the unquoted form's rules), NULL for null.
 * Built by one join, not by `+=` per element: the billing worker writes 16 arrays of ~500 elements a
 * batch, and the per-element concatenation and escaping regex were a third of everything it allocated
 * (docs/performance.md, "A larger first old generation, and the billing worker's array parameters").
 */
export function serializeArray(xs: readonly unknown[], element: (x: unknown) => string): string {
  const n = xs.length;
  if (n === 0) return '{}';
  let flat = true;
  for (let i = 0; i < n; i++) {
    const x = xs[i];
    if (x === null || x === undefined || Array.isArray(x)) {
      flat = false;
      break;
    }
  }
  const parts = new Array<string>(n);
  if (flat) {
    // Every element quoted: the quotes go in the join's separator, not around each element.
    for (let i = 0; i < n; i++) parts[i] = escapeElement(element(xs[i]));
    return '{"' + parts.join('","') + '"}';
  }
  for (let i = 0; i < n; i++) {
    const x = xs[i];
    parts[i] = x === null || x === undefined ? 'NULL' : Array.isArray(x) ? serializeArray(x, element) : '"' + escapeElement(element(x)) + '"';
  }
  return '{' + parts.join(',') + '}';
}

const QUOTE_OR_BACKSLASH = /[\\"]/g;

/** A quoted element's text: a backslash before each quote and backslash (most have none: no copy). */
function escapeElement(s: string): string {
  return s.indexOf('"') < 0 && s.indexOf('\\') < 0 ? s : s.replace(QUOTE_OR_BACKSLASH, (c) => '\\' + c);
}

/**
 * Parses the text form of an array as Postgres writes it (array_out): elements bare or in double
 * quotes with backslash escapes, NULL unquoted for null, nested braces for more dimensions, and an
 * optional `[lo:hi]=` bounds prefix (dropped: JS arrays start at 0).
 */
export function parseArrayLiteral(s: string, element: (text: string) => unknown): unknown[] {
  let i = s.startsWith('[') ? s.indexOf('=') + 1 : 0;
  const fail = (): never => {
    throw new Error(`malformed array literal: ${s.slice(0, 100)}`);
  };
  const parseLevel = (): unknown[] => {
    if (s[i] !== '{') fail();
    i++;
    const out: unknown[] = [];
    if (s[i] === '}') {
      i++;
      return out;
    }
    for (;;) {
      if (s[i] === '{') {
        out.push(parseLevel());
      } else if (s[i] === '"') {
        i++;
        let v = '';
        while (i < s.length && s[i] !== '"') {
          if (s[i] === '\\') i++;
          v += s[i++] ?? '';
        }
        if (i >= s.length) fail();
        i++;
        out.push(element(v));
      } else {
        const start = i;
        while (i < s.length && s[i] !== ',' && s[i] !== '}') i++;
        const v = s.slice(start, i).trim();
        out.push(v.toUpperCase() === 'NULL' ? null : element(v));
      }
      if (s[i] === ',') {
        i++;
        continue;
      }
      if (s[i] === '}') {
        i++;
        return out;
      }
      fail();
    }
  };
  return parseLevel();
}
