// The checks that keep hostile input a 4xx: nesting depth on the raw bytes, header values as HTTP
// (and undici) allow them.
import { describe, expect, it } from 'vitest';
import { isHttpFieldValue } from './header-values.js';
import { jsonNestingExceeds, MAX_JSON_DEPTH } from './json-depth.js';

const b = (s: string) => Buffer.from(s);

describe('jsonNestingExceeds', () => {
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

describe('isHttpFieldValue', () => {
  it('allows HTAB, SP, visible ASCII and obs-text, nothing else', () => {
    for (const ok of ['', '2023-06-01', 'prompt-caching-2024-07-31,token-efficient-tools-2025-02-19', 'a\tb', 'caf\u00e9']) expect(isHttpFieldValue(ok)).toBe(true);
    for (const bad of ['a\x00b', 'a\x01', '\x1f', 'x\x7f', 'a\r\nb', 'a\nb', '\u20ac']) expect(isHttpFieldValue(bad)).toBe(false);
  });
});
