// A single pass over a JSON text's raw bytes, before JSON.parse, for what JSON.parse accepts and a
// service should not: nesting deeper than a limit, more object keys than a limit, a key named twice
// in one object. The relay (relay/messages/raw-json-guard.ts) and the console API (console-api/app.ts)
// check every request body with it, each with limits of its own.
//
// Depth: V8's JSON.parse accepts any depth, but what walks the value afterwards recurses (JSON.stringify,
// schema checks): a body nested a few thousand levels deep throws RangeError there.
//
// Keys and values: what a body costs to scan and parse grows with its keys and values, not its bytes.
// An 8 MB body of ~390,000 keys in one object took 0.7 s to scan and 0.5 s to JSON.parse (V8 turns
// the object into a dictionary); 700,000 keys of distinct names over small objects took JSON.parse
// 2.7 s (a hidden class per name); 2.7 million empty objects, with no key at all, 0.7-1.2 s. So keys
// are counted, and values too (each object or array, and each comma, which starts one more); the scan
// stops at the first past its limit. A caller that lets a large body hold more keys than a small one
// (a conversation repeats a few names: `type`, `id`, `content`) bounds its distinct names instead
// (`maxNames`), counted by a hash of their raw bytes (a name escaped two ways counts twice), seeded at
// random per process so that no body can be made of names that collide into few.
//
// Repeated keys: JSON.parse keeps the last of two equal keys, other parsers (gjson, simdjson) the
// first; RFC 8259 says names SHOULD be unique. Keys are compared as JSON.parse decodes them:
// `"mod\u0065l"` repeats `"model"`.

import { randomInt } from 'node:crypto';

/** The bytes the scan looks for. */
const enum Byte {
  QUOTE = 0x22,
  COMMA = 0x2c,
  LBRACKET = 0x5b,
  BACKSLASH = 0x5c,
  RBRACKET = 0x5d,
  LBRACE = 0x7b,
  RBRACE = 0x7d,
}

/** The deepest nesting a scan can be asked to allow. */
export const SCAN_DEPTH_MAX = 128;

export type RawJsonProblem = { kind: 'too_deep' } | { kind: 'too_many_keys' } | { kind: 'too_many_values' } | { kind: 'too_many_names' } | { kind: 'repeated_key'; key: string };

/** Above this many keys an object's keys are compared through a Set, not pairwise (a body may hold an object of a million keys). */
const PAIRWISE_KEYS = 16;

const TOO_DEEP: RawJsonProblem = { kind: 'too_deep' };
const TOO_MANY_KEYS: RawJsonProblem = { kind: 'too_many_keys' };
const TOO_MANY_VALUES: RawJsonProblem = { kind: 'too_many_values' };
const TOO_MANY_NAMES: RawJsonProblem = { kind: 'too_many_names' };

// One scan at a time (the event loop is single-threaded and the scan never yields), so its stacks
// are module state: no allocation per request. keyStart/keyEnd hold the keys of every object still
// open, innermost last; frameKeys[d] is where the keys of the object at depth d begin (-1: an array).
const KEPT_KEYS = 1024;
let keyStart = new Int32Array(KEPT_KEYS);
let keyEnd = new Int32Array(KEPT_KEYS);
const frameKeys = new Int32Array(SCAN_DEPTH_MAX + 2);
/** The decoded keys of an object that outgrew pairwise comparison, or holds a key with escapes or non-ASCII bytes. */
const frameSets: (Set<string> | null)[] = new Array<Set<string> | null>(SCAN_DEPTH_MAX + 2).fill(null);

/**
 * The first problem of the JSON text in `buf`, or null: more than `maxDepth` objects/arrays inside one
 * another, more than `maxKeys` object keys in all, more than `maxValues` objects, arrays and commas
 * in all, more than `maxNames` distinct key names (when given), or a key that an object already holds.
 * A single pass; brackets and commas inside strings do not count. Invalid JSON gets some answer and is
 * then refused by JSON.parse.
 */
export function rawJsonProblem(buf: Uint8Array, maxDepth: number, maxKeys: number, maxValues: number, maxNames = Infinity): RawJsonProblem | null {
  const limit = Math.min(maxDepth, SCAN_DEPTH_MAX);
  // Only a caller that bounds names pays for hashing each key.
  const countNames = maxNames < Infinity;
  // Stamp 0 is every slot's first value: never a scan's own.
  if (countNames) nameScan = (nameScan + 1) | 0 || 1;
  let names = 0;
  let depth = 0;
  let keys = 0;
  let keysSeen = 0;
  let values = 0;
  let expectKey = false;
  try {
    const n = buf.length;
    for (let i = 0; i < n; i++) {
      const c = buf[i]!;
      if (c === Byte.QUOTE) {
        const start = i + 1;
        // Skip the string with a native search for its closing quote (bodies are mostly string
        // content): a quote preceded by an odd run of backslashes is escaped.
        for (;;) {
          const q = buf.indexOf(Byte.QUOTE, i + 1);
          if (q < 0) return null;
          let b = q - 1;
          while (buf[b] === Byte.BACKSLASH) b--;
          i = q;
          if ((q - 1 - b) % 2 === 0) break;
        }
        if (!expectKey) continue;
        expectKey = false;
        if (++keysSeen > maxKeys) return TOO_MANY_KEYS;
        if (countNames && addName(buf, start, i) && ++names > maxNames) return TOO_MANY_NAMES;
        const repeated = addKey(buf, depth, start, i, keys);
        if (repeated !== null) return { kind: 'repeated_key', key: repeated };
        keys++;
      } else if (c === Byte.LBRACE || c === Byte.LBRACKET) {
        if (++depth > limit) return TOO_DEEP;
        if (++values > maxValues) return TOO_MANY_VALUES;
        if (c === Byte.LBRACE) {
          frameKeys[depth] = keys;
          expectKey = true;
        } else {
          frameKeys[depth] = -1;
          expectKey = false;
        }
      } else if (c === Byte.RBRACE || c === Byte.RBRACKET) {
        if (depth > 0) {
          const first = frameKeys[depth]!;
          if (first >= 0) {
            keys = first;
            frameSets[depth] = null;
          }
          depth--;
        }
        expectKey = false;
      } else if (c === Byte.COMMA) {
        if (++values > maxValues) return TOO_MANY_VALUES;
        expectKey = depth > 0 && frameKeys[depth]! >= 0;
      }
    }
    return null;
  } finally {
    for (let d = 1; d <= depth && d < frameSets.length; d++) frameSets[d] = null;
    // A body of a million keys grew the stacks to megabytes: not kept for the next request.
    if (keyStart.length > KEPT_KEYS) {
      keyStart = new Int32Array(KEPT_KEYS);
      keyEnd = new Int32Array(KEPT_KEYS);
    }
  }
}

// The distinct key names of a scan, as hashes in an open-addressed table whose slots count for the
// scan that stamped them (no clearing per request). Sized for the most names a caller bounds (the
// relay: 50,000) at under half full; past its slots, every key counts as a new name.
const NAME_SLOTS = 1 << 17;
const nameHashes = new Int32Array(NAME_SLOTS);
const nameStamps = new Int32Array(NAME_SLOTS);
let nameScan = 0;
let namesHeld = 0;
let namesHeldScan = -1;
const NAME_SEED = randomInt(1, 0x7fffffff);

/** Whether buf[start, end) is a name this scan has not seen yet (then it is recorded). */
function addName(buf: Uint8Array, start: number, end: number): boolean {
  if (namesHeldScan !== nameScan) {
    namesHeldScan = nameScan;
    namesHeld = 0;
  }
  if (namesHeld >= NAME_SLOTS >> 1) return true;
  let h = NAME_SEED ^ 0x811c9dc5;
  for (let j = start; j < end; j++) h = Math.imul(h ^ buf[j]!, 0x01000193);
  if (h === 0) h = 1;
  let slot = (h ^ (h >>> 16)) & (NAME_SLOTS - 1);
  for (;;) {
    if (nameStamps[slot] !== nameScan) {
      nameStamps[slot] = nameScan;
      nameHashes[slot] = h;
      namesHeld++;
      return true;
    }
    if (nameHashes[slot] === h) return false;
    slot = (slot + 1) & (NAME_SLOTS - 1);
  }
}

/** Records the key buf[start, end) of the object at `depth` (the keys' stack holds `count`); returns it decoded if the object already had it. */
function addKey(buf: Uint8Array, depth: number, start: number, end: number, count: number): string | null {
  if (count === keyStart.length) grow(count * 2);
  keyStart[count] = start;
  keyEnd[count] = end;
  const first = frameKeys[depth]!;
  let set = frameSets[depth]!;
  if (set === null && (count - first >= PAIRWISE_KEYS || !plainAscii(buf, start, end))) {
    // From here on this object's keys are compared decoded, as JSON.parse would read them.
    set = new Set<string>();
    for (let k = first; k < count; k++) set.add(decodeKey(buf, keyStart[k]!, keyEnd[k]!));
    frameSets[depth] = set;
  }
  if (set !== null) {
    const key = decodeKey(buf, start, end);
    if (set.has(key)) return key;
    set.add(key);
    return null;
  }
  const len = end - start;
  for (let k = first; k < count; k++) {
    const s = keyStart[k]!;
    if (keyEnd[k]! - s !== len) continue;
    let j = 0;
    while (j < len && buf[s + j] === buf[start + j]) j++;
    if (j === len) return decodeKey(buf, start, end);
  }
  return null;
}

function grow(size: number): void {
  const grownStart = new Int32Array(size);
  grownStart.set(keyStart);
  keyStart = grownStart;
  const grownEnd = new Int32Array(size);
  grownEnd.set(keyEnd);
  keyEnd = grownEnd;
}

/** Printable ASCII without a backslash: the key's bytes are its decoded text, compared byte for byte. */
function plainAscii(buf: Uint8Array, start: number, end: number): boolean {
  for (let j = start; j < end; j++) {
    const b = buf[j]!;
    if (b === Byte.BACKSLASH || b < 0x20 || b > 0x7e) return false;
  }
  return true;
}

/** Longest key decoded here byte by byte; a longer one goes through JSON.parse. */
const DECODED_KEY_MAX = 256;
const keyCodes: number[] = [];

/**
 * The key buf[start, end) as JSON.parse reads it. ASCII keys, escaped or not (what a body of many keys
 * is made of), are decoded here without a string per escape or a JSON.parse per key: an object of
 * 50,000 `"\u0061…"` keys took 150 ms that way, now a few.
 */
function decodeKey(buf: Uint8Array, start: number, end: number): string {
  if (end - start <= DECODED_KEY_MAX) {
    keyCodes.length = 0;
    let ascii = true;
    for (let j = start; j < end && ascii; j++) {
      const b = buf[j]!;
      if (b > 0x7e || b < 0x20) ascii = false;
      else if (b !== Byte.BACKSLASH) keyCodes.push(b);
      else {
        const e = buf[++j];
        if (e === 0x75 /* u */ && j + 4 < end) {
          const code = hex4(buf, j + 1);
          if (code < 0) ascii = false;
          else {
            keyCodes.push(code);
            j += 4;
          }
        } else {
          const code = e === undefined ? -1 : SHORT_ESCAPES[e] ?? -1;
          if (code < 0) ascii = false;
          else keyCodes.push(code);
        }
      }
    }
    // Surrogate pairs written as two \u escapes come out as the pair, as JSON.parse gives them.
    if (ascii) return String.fromCharCode(...keyCodes);
  }
  const text = Buffer.from(buf.buffer, buf.byteOffset + start, end - start).toString('utf8');
  if (!text.includes('\\')) return text;
  try {
    return JSON.parse(`"${text}"`) as string;
  } catch {
    // Not a valid JSON string: JSON.parse refuses the body anyway.
    return text;
  }
}

/** The escapes of one letter after a backslash, by that letter's byte. */
const SHORT_ESCAPES: Readonly<Record<number, number>> = {
  0x22: 0x22, 0x5c: 0x5c, 0x2f: 0x2f, 0x62: 0x08, 0x66: 0x0c, 0x6e: 0x0a, 0x72: 0x0d, 0x74: 0x09,
};

/** The four hex digits at buf[at], or -1. */
function hex4(buf: Uint8Array, at: number): number {
  let code = 0;
  for (let k = 0; k < 4; k++) {
    const h = buf[at + k]!;
    const v = h >= 0x30 && h <= 0x39 ? h - 0x30 : h >= 0x61 && h <= 0x66 ? h - 0x57 : h >= 0x41 && h <= 0x46 ? h - 0x37 : -1;
    if (v < 0) return -1;
    code = code * 16 + v;
  }
  return code;
}
