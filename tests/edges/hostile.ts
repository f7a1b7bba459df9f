// Hostile input for the edge fuzz: strings, numbers, JSON documents (deep, oversized, not UTF-8, with
// number literals JSON.stringify cannot write), path segments with malformed escapes, credentials and
// headers. Bodies follow a route's JSON schema part of the time, so that validation passes and the
// hostile values (NUL, 2^31, 2^63…) reach the handlers and the databases behind them.
import fc from 'fast-check';
import { randomBytes } from 'node:crypto';

const KEY_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** JSON text inserted verbatim where a value goes: literals no JS value serialises to. */
export class RawJson {
  readonly text: string;
  readonly label: string;
  constructor(text: string, label = text) {
    this.text = text;
    this.label = label;
  }
}

export type JValue = null | boolean | number | string | RawJson | JValue[] | { [k: string]: JValue };

/** Serialises a JValue; RawJson is inserted as is. Keys may be hostile too. */
export function toJson(v: JValue): string {
  if (v instanceof RawJson) return v.text;
  if (Array.isArray(v)) return `[${v.map(toJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}:${toJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** A short, readable rendering for failure reports: long strings and raw documents by their length. */
/** JSON.stringify, with DEL, C1 controls and everything past ASCII escaped so a report shows them. */
export function quote(s: string): string {
  return JSON.stringify(s).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export function describeValue(v: unknown, budget = 600): string {
  const seen = (x: unknown): string => {
    if (x instanceof RawJson) return x.label;
    if (typeof x === 'string') return x.length > 80 ? `${quote(x.slice(0, 40))}…(${x.length} chars)` : quote(x);
    if (Buffer.isBuffer(x)) return x.every((b) => b >= 0x20 && b < 0x7f) ? seen(x.toString('latin1')) : `<${x.length} bytes 0x${x.subarray(0, 40).toString('hex')}${x.length > 40 ? '…' : ''}>`;
    if (Array.isArray(x)) return `[${x.map(seen).join(',')}]`;
    if (x !== null && typeof x === 'object') return `{${Object.entries(x).map(([k, y]) => `${seen(k)}:${seen(y)}`).join(',')}}`;
    return String(x);
  };
  const s = seen(v);
  return s.length > budget ? `${s.slice(0, budget)}…` : s;
}

export const DEPTH = 10_000;
export const deepArray = new RawJson('['.repeat(DEPTH) + ']'.repeat(DEPTH), `<array nested ${DEPTH} deep>`);
export const deepObject = new RawJson('{"a":'.repeat(DEPTH) + '1' + '}'.repeat(DEPTH), `<object nested ${DEPTH} deep>`);
/** 2 MiB of text: over the console's 1 MiB body limit, under the relay's 8 MiB one. */
export const bigString = new RawJson(JSON.stringify('x'.repeat(2 * 1024 * 1024)), '<string of 2 MiB>');

const HOSTILE_NUMBER_LITERALS = [
  '2147483648', '-2147483649', '4294967296', '9007199254740993', '9223372036854775807', '9223372036854775808',
  '-9223372036854775809', '18446744073709551616', '1e308', '-1e308', '1e309', '-1e999', '5e-324', '1e-400', '-0',
  '0.5', '1.0000000000000002', '123456789012345678901234567890', '1E2',
].map((t) => new RawJson(t));

export const hostileNumber: fc.Arbitrary<JValue> = fc.oneof(
  fc.constantFrom(0, -1, 1, 2 ** 31 - 1, 2 ** 31, -(2 ** 31), -(2 ** 31) - 1, 2 ** 32, 2 ** 53 - 1, 2 ** 53, 2 ** 63, -(2 ** 63), 2 ** 64,
    Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 1e308, -1e308, Number.MIN_VALUE, 0.5, -0.5, 1.5, 99999999999),
  fc.constantFrom(...HOSTILE_NUMBER_LITERALS),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

const HOSTILE_STRINGS = [
  '', ' ', '\u0000', 'a\u0000b', '\u0000\u0000\u0000', '%00', '%', '%FF', '%E0%A4%A', '%C0%AF', '\uD800', '\uDFFF', 'a\uD800b',
  '\uFFFE', '\uFEFF', '\u202E', '\u0007\u001B[31m', '\r\n', '\r\nX-Injected: 1', "'; DROP TABLE users; --", '" OR 1=1 --', '\\',
  '%_%', '_', '../../../../etc/passwd', '__proto__', 'constructor', 'prototype', 'toString', 'NaN', '-NaN', 'Infinity',
  '-Infinity', 'null', 'undefined', 'true', '-1', '0', '1e308', '2147483648', '9223372036854775808', '0x7fffffff', '1_000',
  '{}', '[]', '{"a":1}', '${7*7}', '{{7*7}}', '<script>alert(1)</script>', 'ｆｕｌｌｗｉｄｔｈ', 'ß', '😀', 'e\u0301',
  'sk-', 'sk-' + 'A'.repeat(48), 'Bearer ', 'auto', 'default', 'admin', 'root',
];

/** Strings of the running system (model names, group names, option keys…) make deep paths reachable. */
export function hostileString(dictionary: readonly string[]): fc.Arbitrary<string> {
  const dict = dictionary.length ? fc.constantFrom(...dictionary) : fc.constant('default');
  return fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...HOSTILE_STRINGS) },
    { weight: 3, arbitrary: dict },
    // A known word with NUL or a control character spliced in: passes length checks, not Postgres.
    { weight: 3, arbitrary: fc.tuple(dict, fc.constantFrom('\u0000', '\u0001', '\u007f', '\uD800', '%00'), fc.nat(8)).map(([w, c, at]) => w.slice(0, at) + c + w.slice(at)) },
    { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom('a', '\u0000', 'é', '😀', '%'), fc.constantFrom(255, 256, 1000, 10_001, 100_000)).map(([c, n]) => c.repeat(n)) },
  );
}

/** Any JSON value of the wrong kind for whatever field it lands in. */
export function hostileValue(dictionary: readonly string[]): fc.Arbitrary<JValue> {
  const str = hostileString(dictionary);
  const leaf: fc.Arbitrary<JValue> = fc.oneof(str, hostileNumber, fc.boolean(), fc.constant(null));
  return fc.oneof(
    { weight: 6, arbitrary: leaf },
    { weight: 2, arbitrary: fc.array(leaf, { maxLength: 4 }) },
    { weight: 2, arbitrary: fc.dictionary(str, leaf, { maxKeys: 3 }) as fc.Arbitrary<JValue> },
    { weight: 1, arbitrary: fc.constantFrom<JValue>(deepArray, deepObject, [], {}, [[[]]], { __proto__: { admin: true } } as unknown as JValue) },
  );
}

/** The whole body: a JSON document built some hostile way, or bytes that are not JSON (or UTF-8) at all. */
export type BodySpec = { kind: 'json'; value: JValue } | { kind: 'bytes'; bytes: Buffer; label: string };

export function encodeBody(b: BodySpec): Buffer {
  return b.kind === 'json' ? Buffer.from(toJson(b.value), 'utf8') : b.bytes;
}

export function hostileBytes(): fc.Arbitrary<BodySpec> {
  return fc.oneof(
    fc.uint8Array({ maxLength: 200 }).map((a) => ({ kind: 'bytes' as const, bytes: Buffer.from(a), label: 'random bytes' })),
    fc.constantFrom<BodySpec>(
      { kind: 'bytes', bytes: Buffer.from([0xff, 0xfe, 0x7b, 0x00, 0x7d]), label: 'UTF-16 BOM and NUL' },
      { kind: 'bytes', bytes: Buffer.from('{"model":"\xff\xfe\xc0\xaf","max_tokens":1,"messages":[{"role":"user","content":"\xc3\x28"}]}', 'latin1'), label: 'invalid UTF-8 inside JSON strings' },
      { kind: 'bytes', bytes: Buffer.from('{"a":"\\ud800"}'), label: 'escaped lone surrogate' },
      { kind: 'bytes', bytes: Buffer.from('\u0000'.repeat(1000)), label: '1000 NUL bytes' },
      { kind: 'bytes', bytes: Buffer.from('{"a":1,"a":2,"__proto__":{"x":1},"constructor":{"prototype":{"y":1}}}'), label: 'duplicate and prototype keys' },
      { kind: 'bytes', bytes: Buffer.from('{'), label: 'truncated JSON' },
      { kind: 'bytes', bytes: Buffer.from(''), label: 'empty body' },
      { kind: 'bytes', bytes: Buffer.from('null'), label: 'null' },
      { kind: 'bytes', bytes: Buffer.from('"just a string"'), label: 'a JSON string' },
      { kind: 'bytes', bytes: Buffer.from('[' + '1,'.repeat(200_000) + '1]'), label: 'array of 200,001 numbers' },
      { kind: 'bytes', bytes: Buffer.from('{' + Array.from({ length: 50_000 }, (_, i) => `"k${i}":${i}`).join(',') + '}'), label: 'object of 50,000 keys' },
      { kind: 'bytes', bytes: Buffer.concat([Buffer.from('"'), Buffer.alloc(9 * 1024 * 1024, 0x61), Buffer.from('"')]), label: '9 MiB JSON string (over every body limit)' },
    ),
  );
}

// ---------------------------------------------------------------- JSON-schema-driven bodies

export type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  maxLength?: number;
  additionalProperties?: boolean | JsonSchema;
  format?: string;
};

export interface SchemaContext {
  dictionary: readonly string[];
  /** Integers for fields named id: the ids of objects this run may destroy, and hostile ones. */
  id: fc.Arbitrary<JValue>;
}

/**
 * A value that satisfies the schema where it can (with hostile content inside the rules: NUL in
 * strings, integers at the limits of INT and BIGINT), and with some probability of each field being
 * of the wrong type, missing, or joined by unknown fields.
 */
export function fromSchema(schema: JsonSchema | undefined, ctx: SchemaContext, name = '', depth = 0): fc.Arbitrary<JValue> {
  const wrong = hostileValue(ctx.dictionary);
  const conforming = conformingValue(schema, ctx, name, depth);
  return fc.oneof({ weight: 4, arbitrary: conforming }, { weight: 1, arbitrary: wrong });
}

function conformingValue(schema: JsonSchema | undefined, ctx: SchemaContext, name: string, depth: number): fc.Arbitrary<JValue> {
  if (!schema || depth > 6) return hostileValue(ctx.dictionary);
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives?.length) return fc.oneof(...alternatives.map((s) => conformingValue(s, ctx, name, depth + 1)));
  if (schema.allOf?.length) return conformingValue(Object.assign({}, ...schema.allOf) as JsonSchema, ctx, name, depth + 1);
  if (schema.const !== undefined) return fc.constant(schema.const as JValue);
  if (schema.enum?.length) return fc.constantFrom(...(schema.enum as JValue[]));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (name === 'id' && (type === 'integer' || type === 'number')) return ctx.id;
  switch (type) {
    case 'object': {
      const props = Object.entries(schema.properties ?? {});
      if (props.length === 0) return fc.dictionary(hostileString(ctx.dictionary), hostileValue(ctx.dictionary), { maxKeys: 3 }) as fc.Arbitrary<JValue>;
      const required = new Set(schema.required ?? []);
      const fields = props.map(([k, s]) =>
        fc.tuple(fc.constant(k), fromSchema(s, ctx, k, depth + 1), fc.integer({ min: 0, max: 9 })).map(([key, v, roll]) =>
          // Required fields are dropped 1 time in 10, optional ones half the time.
          (required.has(key) ? roll === 0 : roll < 5) ? null : ([key, v] as const)));
      const extra = fc.option(fc.tuple(fc.constantFrom('__proto__', 'constructor', 'extra', 'id', 'user_id', 'role', 'quota'), hostileValue(ctx.dictionary)), { freq: 5 });
      return fc.tuple(fc.tuple(...fields), extra).map(([entries, more]) => {
        const out: Record<string, JValue> = {};
        for (const e of entries) if (e) Object.defineProperty(out, e[0], { value: e[1], enumerable: true, writable: true, configurable: true });
        if (more) Object.defineProperty(out, more[0], { value: more[1], enumerable: true, writable: true, configurable: true });
        return out;
      });
    }
    case 'array':
      return fc.array(conformingValue(schema.items, ctx, name, depth + 1), { maxLength: 5 });
    case 'string': {
      const s = hostileString(ctx.dictionary);
      if (schema.format === 'uri') return fc.oneof(s, fc.constantFrom('http://127.0.0.1:1', 'http://[::1]:8123', 'http://169.254.169.254', 'https://a', 'http://x%00y', 'http://127.0.0.1:8123/?query=SELECT%201'));
      if (schema.format === 'email') return fc.oneof(s, fc.constantFrom('a@b.co', 'a\u0000@b.co', `${'a'.repeat(300)}@b.co`));
      return s;
    }
    case 'integer':
    case 'number': {
      const lo = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : undefined);
      const hi = schema.maximum ?? (schema.exclusiveMaximum !== undefined ? schema.exclusiveMaximum - 1 : undefined);
      const edges = [lo, hi, lo !== undefined ? lo + 1 : undefined, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 53 - 1, 1, 0]
        .filter((x): x is number => x !== undefined && Number.isFinite(x) && (lo === undefined || x >= lo) && (hi === undefined || x <= hi));
      return fc.oneof(fc.constantFrom(...(edges.length ? edges : [0])), hostileNumber);
    }
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    default:
      return hostileValue(ctx.dictionary);
  }
}

// ---------------------------------------------------------------- paths, queries, headers

/** A path segment as sent on the wire: malformed escapes, overlong UTF-8, raw bytes, long runs. */
export function hostileSegment(dictionary: readonly string[], ids: readonly number[], legal = false): fc.Arbitrary<string> {
  const encoded = hostileString(dictionary).map((s) => encodeURIComponent(s.replace(/[\uD800-\uDFFF]/g, '?')));
  return fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(
      '%FF', '%', '%%', '%E0%A4%A', '%E0%A4', '%C0%AF', '%C0%80', '%ED%A0%80', '%F8%88%80%80%80', '%00', '%0A', '%2F', '%2e%2e', '..', '.',
      '%FG', '%-1', 'a%', '%u0041', '-1', '0', '00', '1.5', '1e3', '0x10', '+1', '%201', '2147483648', '9007199254740993', '9223372036854775808',
      '1' + '0'.repeat(400), 'NaN', 'Infinity', 'null', 'undefined', '__proto__', 'constructor', '%5B%5D', '[]', '{}',
    ) },
    { weight: 2, arbitrary: encoded },
    { weight: 2, arbitrary: ids.length ? fc.constantFrom(...ids.map(String)) : fc.constant('1') },
    // Raw bytes above 0x7F and overlong forms, straight on the wire (uWebSockets.js takes them; Node's parser does not).
    { weight: legal ? 0 : 1, arbitrary: fc.constantFrom('\xff', '\xc0\xaf', '\xe0\x80\xaf', 'caf\xe9', '\x7f') },
    { weight: 1, arbitrary: fc.constantFrom(...(legal ? ['%FF'.repeat(2500), 'a'.repeat(7000)] : ['%FF'.repeat(3000), 'a'.repeat(60_000), '%41'.repeat(20_000)])) },
  );
}

export function hostileQuery(names: readonly string[], dictionary: readonly string[], legal = false): fc.Arbitrary<string> {
  const value = fc.oneof(
    hostileSegment(dictionary, [], legal),
    hostileString(dictionary).map((s) => encodeURIComponent(s.replace(/[\uD800-\uDFFF]/g, '?'))),
  );
  const name = fc.oneof({ weight: 4, arbitrary: names.length ? fc.constantFrom(...names) : fc.constant('q') }, { weight: 1, arbitrary: fc.constantFrom('__proto__', 'p[]', 'a%FF', '', '%') });
  return fc.array(fc.tuple(name, value, fc.boolean()), { maxLength: 4 }).map((pairs) =>
    pairs.length === 0 ? '' : '?' + pairs.map(([n, v, withValue]) => (withValue ? `${n}=${v}` : n)).join('&'));
}

/** A random key of our shape: `sk-` and 48 of the 62 alphanumerics (infra/secrets/api-key-crypto.ts). */
export function randomWellFormedKey(): string {
  let out = 'sk-';
  for (const b of randomBytes(48)) out += KEY_ALPHABET[b % 62];
  return out;
}

export const wellFormedKey: fc.Arbitrary<string> = fc.string({ unit: fc.constantFrom(...KEY_ALPHABET), minLength: 48, maxLength: 48 }).map((s) => 'sk-' + s);

const isCtl = (b: number) => (b < 0x20 && b !== 0x09) || b === 0x7f;

/**
 * Header values as bytes (Latin-1 text, or a Buffer of UTF-8). `legal` keeps to what HTTP/1.1 allows
 * (HTAB, visible ASCII, obs-text); otherwise control characters are in play too.
 */
export function hostileHeaderValue(dictionary: readonly string[], legal = false): fc.Arbitrary<string | Buffer> {
  const all = fc.oneof(
    { weight: 3, arbitrary: hostileString(dictionary).map((s) => Buffer.from(s, 'utf8')) },
    { weight: 2, arbitrary: fc.constantFrom('\x7f', 'a\x7fb', '2023-06-01\x7f', 'x\x01y', 'a\x00b', '\t', ' ', '\xff\xfe', 'tools-2024-04-04,\x7f', '\xe9t\xe9', 'caf\u00e9') },
    { weight: 1, arbitrary: fc.constantFrom(...(legal ? [1_000, 4_000] : [1_000, 8_000, 64_000])).map((n) => 'v'.repeat(n)) },
  );
  if (!legal) return all;
  return all.map((v) => {
    const b = typeof v === 'string' ? Buffer.from(v, 'latin1') : v;
    // Under Node's 16 KiB head limit with room for the rest of the request.
    return Buffer.from(b.filter((c) => !isCtl(c))).subarray(0, 4000);
  });
}

export function hostileHeaders(dictionary: readonly string[], legal = false): fc.Arbitrary<[string, string | Buffer][]> {
  const name = fc.oneof(
    fc.constantFrom('content-type', 'accept', 'accept-encoding', 'x-forwarded-for', 'x-real-ip', 'cookie',
      'origin', 'anthropic-version', 'anthropic-beta', 'x-api-key', 'authorization', 'range', 'user-agent', 'x-request-id'),
    // '_' only where the parser may refuse: uWebSockets.js never answers a header name with one.
    fc.string({ unit: fc.constantFrom(...(legal ? 'abcdefghijklmnopqrstuvwxyz-0123456789' : 'abcdefghijklmnopqrstuvwxyz-_0123456789')), minLength: 1, maxLength: 30 })
      // The mock provider's test knobs are not input to the product.
      .filter((n) => !n.startsWith('x-mock-')),
  );
  return fc.array(fc.tuple(name, hostileHeaderValue(dictionary, legal)), { maxLength: 4 });
}

/** Methods uWebSockets.js and Node parse; others (and lower case) are refused by the HTTP parser itself. */
export const STANDARD_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'];

/**
 * Whether the request is one an HTTP parser may refuse before any application code runs: a field
 * value with a control character (RFC 9110: none but HTAB), raw bytes or no leading slash in the
 * target, a method the parser does not know, a head past Node's 16 KiB, or a header name with '_'
 * (legal, but uWebSockets.js drops such a request unanswered after its 10 s idle timeout).
 */
export function breaksHttp(method: string, headers: [string, string | Buffer][], target: string): boolean {
  const size = headers.reduce((n, [k, v]) => n + k.length + v.length, target.length);
  return !STANDARD_METHODS.includes(method) || !target.startsWith('/') || /[\x00-\x20\x7f-\xff]/.test(target) || size > 16_000 ||
    headers.some(([n, v]) => /[^!#$%&'*+.^`|~0-9A-Za-z-]/.test(n) || (typeof v === 'string' ? Buffer.from(v, 'latin1') : v).some(isCtl));
}
