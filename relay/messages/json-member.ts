// A member taken out of a JSON object's bytes, the rest left byte for byte. JSON.parse and
// JSON.stringify would write the whole body again: an integer above 2^53 in a tool's input
// (9007199254740993, a snowflake id) reached the provider changed (…992), `1.10` as `1.1`. Used on
// bodies the raw scan (raw-json-guard.ts) passed: valid JSON, no key named twice in one object.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;

/** Where a top-level member lies in an object's bytes. */
interface MemberAt {
  keyStart: number;
  valueStart: number;
  valueEnd: number;
  /** The index of the comma after the value, or -1 (the last member). */
  commaAfter: number;
  /** The index of the comma before the key, or -1 (the first member). */
  commaBefore: number;
}

/**
 * Where `raw` (a JSON object) holds its top-level member `name`, or null when it names none (or `raw`
 * is not an object). A key spelled with escapes (`"diagn\u006fstics"`) is the name it decodes to.
 */
function topLevelMember(raw: Uint8Array, name: string): MemberAt | null {
  let i = skipBlanks(raw, 0);
  if (raw[i] !== 0x7b) return null;
  i = skipBlanks(raw, i + 1);
  if (raw[i] === 0x7d) return null;
  let commaBefore = -1;
  for (;;) {
    const keyStart = i;
    const keyEnd = endOfString(raw, i);
    i = skipBlanks(raw, keyEnd);
    if (raw[i] !== COLON) return null;
    const valueStart = skipBlanks(raw, i + 1);
    const valueEnd = endOfValue(raw, valueStart);
    i = skipBlanks(raw, valueEnd);
    const separator = raw[i];
    if (keyIs(raw, keyStart, keyEnd, name)) return { keyStart, valueStart, valueEnd, commaAfter: separator === COMMA ? i : -1, commaBefore };
    if (separator !== COMMA) return null;
    commaBefore = i;
    i = skipBlanks(raw, i + 1);
  }
}

/** `raw` (a JSON object) without its top-level member `name`, or null when it names none (or `raw` is not an object). */
export function withoutTopLevelMember(raw: Uint8Array, name: string): Buffer | null {
  const at = topLevelMember(raw, name);
  if (at === null) return null;
  const buf = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  // Followed by another member: it goes with its comma; the last one: with the comma before it.
  if (at.commaAfter >= 0) return Buffer.concat([buf.subarray(0, at.keyStart), buf.subarray(skipBlanks(raw, at.commaAfter + 1))]);
  return Buffer.concat([buf.subarray(0, at.commaBefore >= 0 ? at.commaBefore : at.keyStart), buf.subarray(at.valueEnd)]);
}

/**
 * `raw` (a JSON object) with the value of its top-level member `name` replaced by `json` (a JSON
 * text), the rest byte for byte; null when it names none (or `raw` is not an object).
 */
export function withTopLevelMember(raw: Uint8Array, name: string, json: string): Buffer | null {
  const at = topLevelMember(raw, name);
  if (at === null) return null;
  const buf = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  return Buffer.concat([buf.subarray(0, at.valueStart), Buffer.from(json), buf.subarray(at.valueEnd)]);
}

/**
 * `raw` (a JSON object) with its top-level member `name` set to `json` (a JSON text): replaced where
 * it is, else added first; the rest byte for byte. null when `raw` is not an object.
 */
export function withMemberSet(raw: Uint8Array, name: string, json: string): Buffer | null {
  const replaced = withTopLevelMember(raw, name, json);
  if (replaced !== null) return replaced;
  const open = skipBlanks(raw, 0);
  if (raw[open] !== 0x7b) return null;
  const buf = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  const empty = raw[skipBlanks(raw, open + 1)] === 0x7d;
  return Buffer.concat([buf.subarray(0, open + 1), Buffer.from(`${JSON.stringify(name)}:${json}${empty ? '' : ','}`), buf.subarray(open + 1)]);
}

function keyIs(raw: Uint8Array, start: number, end: number, name: string): boolean {
  const text = Buffer.from(raw.buffer, raw.byteOffset + start, end - start).toString('utf8');
  if (!text.includes('\\')) return text.length === name.length + 2 && text.slice(1, -1) === name;
  return JSON.parse(text) === name;
}

function skipBlanks(raw: Uint8Array, i: number): number {
  while (i < raw.length && (raw[i] === 0x20 || raw[i] === 0x0a || raw[i] === 0x0d || raw[i] === 0x09)) i++;
  return i;
}

/** The index after the string that opens at `i` (a quote). */
function endOfString(raw: Uint8Array, i: number): number {
  for (let j = i + 1; j < raw.length; j++) {
    if (raw[j] === BACKSLASH) j++;
    else if (raw[j] === QUOTE) return j + 1;
  }
  return raw.length;
}

/** The index after the value that starts at `i`. */
function endOfValue(raw: Uint8Array, i: number): number {
  const c = raw[i];
  if (c === QUOTE) return endOfString(raw, i);
  if (c === 0x7b || c === 0x5b) {
    let depth = 0;
    for (let j = i; j < raw.length; j++) {
      const b = raw[j];
      if (b === QUOTE) j = endOfString(raw, j) - 1;
      else if (b === 0x7b || b === 0x5b) depth++;
      else if ((b === 0x7d || b === 0x5d) && --depth === 0) return j + 1;
    }
    return raw.length;
  }
  let j = i;
  while (j < raw.length && raw[j] !== COMMA && raw[j] !== 0x7d && raw[j] !== 0x5d && raw[j] !== 0x20 && raw[j] !== 0x0a && raw[j] !== 0x0d && raw[j] !== 0x09) j++;
  return j;
}
