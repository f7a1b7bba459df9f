// The checks that keep hostile input a 4xx: nesting depth and repeated keys on the raw bytes, header
// values as HTTP (and undici) allow them.
import { describe, expect, it } from 'vitest';
import { isHttpFieldValue } from './header-values.js';
import { MAX_JSON_DEPTH, MAX_JSON_KEYS, MAX_JSON_VALUES, rawJsonProblem, rawJsonRefusal } from './raw-json-guard.js';

const b = (s: string) => Buffer.from(s);

const jsonNestingExceeds = (buf: Uint8Array, depth?: number) => rawJsonProblem(buf, depth)?.kind === 'too_deep';

describe('rawJsonProblem: depth', () => {
  it('counts objects and arrays inside one another, not brackets inside strings', () => {
    const nested = (n: number) => '['.repeat(n) + ']'.repeat(n);
    expect(jsonNestingExceeds(b(nested(MAX_JSON_DEPTH)))).toBe(false);
    expect(jsonNestingExceeds(b(nested(MAX_JSON_DEPTH + 1)))).toBe(true);
    expect(jsonNestingExceeds(b(nested(100_000)))).toBe(true);
    expect(jsonNestingExceeds(b(JSON.stringify({ a: '[[[[[[[[[[', b: '{{{{{{' })), 2)).toBe(false);
    expect(jsonNestingExceeds(b(JSON.stringify({ a: 'x\\"[[[[["' })), 2)).toBe(false);
    expect(jsonNestingExceeds(b('{"a":"\\\\"}'), 1)).toBe(false);
    expect(jsonNestingExceeds(b('{"a":"\\\\",   "b":[[[1]]]}'), 2)).toBe(true);
    expect(jsonNestingExceeds(b('[{"a":[{"b":[]}]}]'), 5)).toBe(false);
    expect(jsonNestingExceeds(b('[{"a":[{"b":[]}]}]'), 4)).toBe(true);
    // Sequential, not nested.
    expect(jsonNestingExceeds(b('[' + '[],'.repeat(10_000) + '[]]'), 2)).toBe(false);
    // An unterminated string ends the scan.
    expect(jsonNestingExceeds(b('["abc'), 1)).toBe(false);
  });
});

describe('rawJsonProblem: values', () => {
  it(`refuses more than ${MAX_JSON_VALUES} objects, arrays and commas, with no key at all`, () => {
    const items = (n: number, item: string) => `{"a":[${Array.from({ length: n }, () => item).join(',')}]}`;
    // The top object, the array, and per item its comma (all but the first) and its own container.
    expect(rawJsonProblem(b(items(MAX_JSON_VALUES / 2 - 1, '{}')))).toBeNull();
    expect(rawJsonProblem(b(items(MAX_JSON_VALUES / 2, '{}')))?.kind).toBe('too_many_values');
    expect(rawJsonProblem(b(items(MAX_JSON_VALUES + 1, '1')))?.kind).toBe('too_many_values');
    const nested = '['.repeat(126) + ']'.repeat(126);
    expect(rawJsonProblem(b(items(Math.ceil(MAX_JSON_VALUES / 126), nested)))?.kind).toBe('too_many_values');
    // Commas and brackets inside strings are text.
    expect(rawJsonProblem(b(JSON.stringify({ text: '[{},'.repeat(MAX_JSON_VALUES) })))).toBeNull();
    expect(rawJsonRefusal(b(items(MAX_JSON_VALUES + 1, '1')))!.message).toMatch(/more than 200,000 JSON values/);
  });
});

describe('isHttpFieldValue', () => {
  it('allows HTAB, SP, visible ASCII and obs-text, nothing else', () => {
    for (const ok of ['', '2023-06-01', 'prompt-caching-2024-07-31,token-efficient-tools-2025-02-19', 'a\tb', 'caf\u00e9']) expect(isHttpFieldValue(ok)).toBe(true);
    for (const bad of ['a\x00b', 'a\x01', '\x1f', 'x\x7f', 'a\r\nb', 'a\nb', '\u20ac']) expect(isHttpFieldValue(bad)).toBe(false);
  });
});

const repeated = (text: string) => {
  const p = rawJsonProblem(b(text));
  return p?.kind === 'repeated_key' ? p.key : p === null ? null : p.kind;
};

describe('rawJsonProblem: a key named twice in one object', () => {
  it('finds it at the top level and in nested objects, as JSON.parse decodes keys', () => {
    expect(repeated('{"model":"claude-haiku-4-5","max_tokens":1,"messages":[],"max_tokens":100000}')).toBe('max_tokens');
    expect(repeated('{"model":"a","mod\\u0065l":"b"}')).toBe('model');
    expect(repeated('{"messages":[{"role":"user","content":[{"type":"image","source":{},"type":"text"}]}]}')).toBe('type');
    expect(repeated('{"a":{"b":1,"c":{"d":1,"d":2}}}')).toBe('d');
    expect(repeated('{"caf\u00e9":1,"caf\\u00e9":2}')).toBe('caf\u00e9');
    expect(repeated('{"\\"":1,"\\u0022":2}')).toBe('"');
    expect(repeated('{"a\\/b":1,"a/b":2}')).toBe('a/b');
  });

  it('leaves equal keys in different objects, keys inside strings and values equal to keys alone', () => {
    expect(repeated('[{"a":1},{"a":2}]')).toBeNull();
    expect(repeated('{"a":{"a":{"a":1}},"b":{"a":2}}')).toBeNull();
    expect(repeated('{"a":"\\",\\"a\\":1","b":"a"}')).toBeNull();
    expect(repeated('{"a":["a","a"],"b":"a","c":{"d":"a"}}')).toBeNull();
    expect(repeated('{"ab":1,"a":2,"b":3,"abc":4}')).toBeNull();
    expect(repeated('{"a\\u0062":1,"a":2,"abc":3}')).toBeNull();
  });

  it('compares through a set once an object has many keys, and is not quadratic in them', () => {
    const many = (n: number, extra = '') => `{${Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(',')}${extra}}`;
    expect(repeated(many(17))).toBeNull();
    expect(repeated(many(17, ',"k3":0'))).toBe('k3');
    expect(repeated(many(17, ',"k16":0'))).toBe('k16');
    expect(repeated(many(MAX_JSON_KEYS - 1))).toBeNull();
    expect(repeated(many(MAX_JSON_KEYS - 1, `,"k${MAX_JSON_KEYS - 2}":1`))).toBe(`k${MAX_JSON_KEYS - 2}`);
  });

  it('decodes every escape in the compared keys as JSON.parse does', () => {
    const keys = ['a\\nb', 'tab\\there', 'sl\\/ash', 'q\\"uote', 'back\\\\slash', '\\b\\f\\r', 'caf\\u00e9', 'smile \\ud83d\\ude00', 'lone \\ud800', 'x'];
    const decoded = keys.map((k) => JSON.parse(`"${k}"`) as string);
    // Every character \u-escaped, in capitals: the same key to JSON.parse.
    const escaped = decoded.map((k) => [...k].flatMap((ch) => ch.length === 2 ? [ch[0]!, ch[1]!] : [ch]).map((ch) => `\\u${ch.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`).join(''));
    const filler = Array.from({ length: 20 }, (_, i) => `"f${i}":0`).join(',');
    for (let i = 0; i < keys.length; i++) {
      const text = `{${filler},"${keys[i]}":1,"${escaped[i]}":2}`;
      expect(Object.keys(JSON.parse(text) as object)).toHaveLength(21);
      expect(repeated(text), keys[i]).toBe(decoded[i]);
      expect(repeated(`{${filler},"${keys[i]}":1,"${escaped[(i + 1) % keys.length]}":2}`), keys[i]).toBeNull();
    }
  });

  it(`refuses a body of more than ${MAX_JSON_KEYS} keys in all, however they are spread, before any is parsed`, () => {
    const inOne = (n: number) => `{"metadata":{${Array.from({ length: n }, (_, i) => `"\\u0061${i}":0`).join(',')}}}`;
    expect(rawJsonProblem(b(inOne(MAX_JSON_KEYS - 1)))).toBeNull();
    expect(rawJsonProblem(b(inOne(MAX_JSON_KEYS)))?.kind).toBe('too_many_keys');
    const spread = `[${Array.from({ length: MAX_JSON_KEYS / 10 + 1 }, (_, i) => `{${Array.from({ length: 10 }, (__, j) => `"k${i}_${j}":0`).join(',')}}`).join(',')}]`;
    expect(rawJsonProblem(b(spread))?.kind).toBe('too_many_keys');
    // A key's text in a string is no key.
    expect(rawJsonProblem(b(JSON.stringify({ text: inOne(MAX_JSON_KEYS * 2) })))).toBeNull();
    expect(rawJsonRefusal(b(spread))!.message).toMatch(/more than 50,000 object keys/);
  });

  // Before: 50,000 keys whatever the body's size refused a long agent conversation on a 1M-token
  // model (3,900 tool round trips, 1.7 MB, ~400k tokens) with a 400. A larger body may hold more keys
  // and values, at a density no conversation reaches (a key per ~34 bytes, a value per ~26), up to a
  // ceiling, and no more distinct key names than before: what makes JSON.parse slow is names (a hidden
  // class each) and density, not a conversation's repeated `type`, `id` and `content`.
  it('lets a long conversation of a large body through, and still refuses a body dense with keys, values or names', () => {
    const messages: unknown[] = [{ role: 'user', content: 'Fix the failing tests in this repository.' }];
    for (let i = 0; i < 3900; i++) {
      const id = `toolu_${String(i).padStart(20, '0')}`;
      messages.push({ role: 'assistant', content: [{ type: 'tool_use', id, name: 'Bash', input: { command: `sed -n ${i},${i + 40}p src/f${i % 50}.ts`, description: 'Read it' } }] });
      messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: 'const x = f(y); '.repeat(10) }] });
    }
    const conversation = JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 5, messages });
    expect(rawJsonProblem(b(conversation))).toBeNull();
    // As many keys again, packed (a comma before each is a value too): refused, the refusal naming the body's own limit.
    const dense = `[${Array.from({ length: 200_000 }, () => '{"a":0}').join(',')}]`;
    expect(rawJsonProblem(b(dense))?.kind).toBe('too_many_values');
    expect(rawJsonRefusal(b(dense))!.message).toMatch(/more than 200,000 JSON values \(objects, arrays and array items: 200,000, or one per 16 bytes of a larger body, up to 500,000\)/);
    // Past the keys' ceiling (200,000) within the values' limit of its size (6.6 MB: 412,000).
    const keysDense = `{"k":[${Array.from({ length: 110_000 }, (_, i) => `{"a${i % 1000}":"${'x'.repeat(22)}","b":"${'x'.repeat(22)}"}`).join(',')}]}`;
    expect(rawJsonProblem(b(keysDense))?.kind).toBe('too_many_keys');
    expect(rawJsonRefusal(b(keysDense))!.message).toMatch(/more than [\d,]+ object keys \(50,000, or one per 16 bytes of a larger body, up to 200,000\)/);
    // 60,000 distinct names spread over a body sparse enough for its keys: refused for its names.
    const names = `[${Array.from({ length: 60_000 }, (_, i) => `{"name${i}":"${'x'.repeat(40)}"}`).join(',')}]`;
    expect(rawJsonProblem(b(names))?.kind).toBe('too_many_names');
    expect(rawJsonRefusal(b(names))!.message).toMatch(/more than 50,000 distinct object key names/);
    // Values: as dense as empty arrays, refused.
    expect(rawJsonProblem(b(`[${'[],'.repeat(1_000_000)}[]]`))?.kind).toBe('too_many_values');
  });

  it('finds none in random bodies without a repeat, and the one put into a random object of each', () => {
    let seed = 42;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const names = ['a', 'b', 'type', 'text', 'é', 'k"q', 'x\\y', 'id', 'ab'];
    // A key written as JSON.stringify would, or with every character \u-escaped: both decode alike.
    const writeKey = (k: string) => (rand(3) === 0 ? `"${[...k].map((ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"` : JSON.stringify(k));
    type Node = { obj: [string, Node][] } | { arr: Node[] } | { leaf: string };
    const gen = (depth: number): Node => {
      const r = rand(depth > 4 ? 2 : 5);
      if (r === 0) return { leaf: JSON.stringify(names[rand(names.length)]) };
      if (r === 1) return { leaf: String(rand(1000)) };
      if (r === 2) return { arr: Array.from({ length: rand(4) }, () => gen(depth + 1)) };
      return genObject(depth);
    };
    const genObject = (depth: number): { obj: [string, Node][] } => {
      const keys = [...new Set(Array.from({ length: rand(25) }, () => (rand(2) === 0 ? names[rand(names.length)]! : `n${rand(40)}`)))];
      return { obj: keys.map((k) => [k, gen(depth + 1)]) };
    };
    const objects: { obj: [string, Node][] }[] = [];
    const collect = (n: Node) => {
      if ('obj' in n) { objects.push(n); n.obj.forEach(([, v]) => collect(v)); }
      if ('arr' in n) n.arr.forEach(collect);
    };
    const write = (n: Node): string => 'leaf' in n ? n.leaf : 'arr' in n ? `[${n.arr.map(write).join(',')}]`
      : `{${n.obj.map(([k, v]) => `${writeKey(k)}:${write(v)}`).join(',')}}`;
    for (let round = 0; round < 400; round++) {
      const root = genObject(0);
      const text = write(root);
      expect(JSON.parse(text)).toBeTypeOf('object');
      expect(repeated(text)).toBeNull();
      objects.length = 0;
      collect(root);
      const target = objects[rand(objects.length)]!;
      if (target.obj.length === 0) continue;
      const [key] = target.obj[rand(target.obj.length)]!;
      target.obj.splice(rand(target.obj.length + 1), 0, [key, { leaf: 'null' }]);
      expect(repeated(write(root))).toBe(key);
    }
  });

  it('never throws on bytes that are not JSON', () => {
    for (const junk of ['}}}}', ']]]{', '{"a', '{"a":1,,,"a"', ',,,', '{"\\', '{"\\u12":1,"\\u12":2}', '\xff{"\xfe":1,"\xfd":2}']) {
      expect(() => rawJsonProblem(b(junk))).not.toThrow();
    }
  });

  it('words the refusal as a 400 invalid_request naming the key', () => {
    const err = rawJsonRefusal(b('{"model":"a","model":"b"}'))!;
    expect(err.status).toBe(400);
    expect(err.message).toMatch(/"model" twice/);
    expect(rawJsonRefusal(b('{"model":"a"}'))).toBeNull();
    expect(rawJsonRefusal(b('['.repeat(MAX_JSON_DEPTH + 1)))!.message).toMatch(/levels deep/);
  });
});
