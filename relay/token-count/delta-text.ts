// The delivered text of content_block_delta payloads:
//   text_delta → text, thinking_delta → thinking, input_json_delta → partial_json
// (all three are output tokens the provider bills). signature_delta (an opaque signature of the
// thinking, not model output), citations_delta and unknown deltas add nothing; so does a payload that
// is not a JSON object with a `delta` object.
//
// On the event loop (findDeltaText): the payload is scanned byte-wise, without decoding or parsing,
// for the raw bytes of that string value, escapes and all (a view: "tok " is 4 bytes of a 90-byte
// payload). DeliveredTextCounter keeps those pieces, one per line: a raw newline cannot occur inside a
// JSON string, so the separator is unambiguous. In the worker (decodePieces) the pieces are decoded as
// JSON strings. A piece never ends inside an escape (it ends before an unescaped quote), so decoding
// the pieces joined equals joining the pieces decoded, \uXXXX surrogate halves in separate deltas
// included: one JSON.parse per batch, and one per piece only when some piece is not a valid string.

import { Byte, closingQuote, rangeEquals, startsWith } from '../stream/sse-bytes.js';


const K_DELTA = Buffer.from('delta');
const K_TYPE = Buffer.from('type');
const K_TEXT = Buffer.from('text');
const K_THINKING = Buffer.from('thinking');
const K_PARTIAL_JSON = Buffer.from('partial_json');
const T_TEXT = Buffer.from('text_delta');
const T_THINKING = Buffer.from('thinking_delta');
const T_INPUT_JSON = Buffer.from('input_json_delta');

/** Where findDeltaText found the text: buf[start, end) are the raw bytes between the quotes. */
export interface TextRange {
  start: number;
  end: number;
}

function isWs(c: number): boolean {
  return c === Byte.SPACE || c === Byte.NL || c === Byte.CR || c === Byte.TAB;
}

function skipWs(b: Buffer, i: number, end: number): number {
  while (i < end && isWs(b[i]!)) i++;
  return i;
}

/** `i` at the start of a value: the index just after it, or -1. */
function skipValue(b: Buffer, i: number, end: number): number {
  const c = b[i];
  if (c === Byte.QUOTE) {
    const q = closingQuote(b, i + 1, end);
    return q < 0 ? -1 : q + 1;
  }
  if (c === Byte.LBRACE || c === Byte.LBRACKET) {
    let depth = 0;
    for (; i < end; i++) {
      const d = b[i]!;
      if (d === Byte.QUOTE) {
        i = closingQuote(b, i + 1, end);
        if (i < 0) return -1;
      } else if (d === Byte.LBRACE || d === Byte.LBRACKET) depth++;
      else if (d === Byte.RBRACE || d === Byte.RBRACKET) {
        if (--depth === 0) return i + 1;
      }
    }
    return -1;
  }
  // number, true, false, null
  for (; i < end; i++) {
    const d = b[i]!;
    if (d === Byte.COMMA || d === Byte.RBRACE || d === Byte.RBRACKET || isWs(d)) return i;
  }
  return i;
}

// The members of the object being walked (walkObject), found by key.
let typeStart = -1;
let typeEnd = -1;
let textStart = -1;
let textEnd = -1;
let thinkingStart = -1;
let thinkingEnd = -1;
let jsonStart = -1;
let jsonEnd = -1;
let deltaAt = -1;

/**
 * Walks the object at b[i] ('{'), member by member. top: note where the `delta` object starts;
 * otherwise note the string members type, text, thinking and partial_json. False when malformed.
 */
function walkObject(b: Buffer, i: number, end: number, top: boolean): boolean {
  i = skipWs(b, i + 1, end);
  if (b[i] === Byte.RBRACE) return true;
  for (;;) {
    if (i >= end || b[i] !== Byte.QUOTE) return false;
    const ks = i + 1;
    const ke = closingQuote(b, ks, end);
    if (ke < 0) return false;
    i = skipWs(b, ke + 1, end);
    if (b[i] !== Byte.COLON) return false;
    i = skipWs(b, i + 1, end);
    if (i >= end) return false;
    if (b[i] === Byte.QUOTE && !top) {
      const vs = i + 1;
      const ve = closingQuote(b, vs, end);
      if (ve < 0) return false;
      const n = ke - ks;
      if (n === 4 && rangeEquals(b, ks, ke, K_TYPE)) { typeStart = vs; typeEnd = ve; }
      else if (n === 4 && rangeEquals(b, ks, ke, K_TEXT)) { textStart = vs; textEnd = ve; }
      else if (n === 8 && rangeEquals(b, ks, ke, K_THINKING)) { thinkingStart = vs; thinkingEnd = ve; }
      else if (n === 12 && rangeEquals(b, ks, ke, K_PARTIAL_JSON)) { jsonStart = vs; jsonEnd = ve; }
      i = ve + 1;
    } else {
      if (top && b[i] === Byte.LBRACE && deltaAt < 0 && rangeEquals(b, ks, ke, K_DELTA)) {
        // The rest of the top object does not matter.
        deltaAt = i;
        return true;
      }
      i = skipValue(b, i, end);
      if (i < 0) return false;
    }
    i = skipWs(b, i, end);
    if (b[i] === Byte.COMMA) {
      i = skipWs(b, i + 1, end);
      continue;
    }
    return b[i] === Byte.RBRACE;
  }
}

// Anthropic's own layout, read without the walk (anything else takes the walk).
const P_HEAD = Buffer.from('{"type":"content_block_delta","index":');
const P_DELTA = ',"delta":{"type":"';
const P_TEXT = Buffer.from(P_DELTA + 'text_delta","text":"');
const P_THINKING = Buffer.from(P_DELTA + 'thinking_delta","thinking":"');
const P_INPUT_JSON = Buffer.from(P_DELTA + 'input_json_delta","partial_json":"');
/** Where the delta's type begins in those. */
const TYPE_AT = P_DELTA.length;

/**
 * The fast path: true with `out` set, or false to take the walk. The head (type and index) is not
 * compared, only its length and last byte: the event is known to be a content_block_delta, and what
 * is compared, `,"delta":{"type":"text_delta","text":"`, can only be the delta object's first two
 * members (raw quotes around `delta` and the other keys cannot occur inside a JSON string).
 */
function anthropicLayout(b: Buffer, i: number, end: number, out: TextRange): boolean {
  if (b[i] !== Byte.LBRACE) return false;
  i += P_HEAD.length;
  if (i >= end || b[i - 1] !== Byte.COLON) return false;
  const digits = i;
  while (i < end && b[i]! >= 0x30 && b[i]! <= 0x39) i++;
  if (i === digits || b[i] !== Byte.COMMA) return false;
  let word: Buffer;
  const c = b[i + TYPE_AT];
  if (c === 0x74 /* t */) word = b[i + TYPE_AT + 1] === 0x65 /* e */ ? P_TEXT : P_THINKING;
  else if (c === 0x69 /* i */) word = P_INPUT_JSON;
  else return false; // signature_delta, citations_delta, …: the walk decides
  if (!startsWith(b, i, end, word)) return false;
  const vs = i + word.length;
  const ve = closingQuote(b, vs, end);
  // The delta object must end right after the text: then no other member can change the answer.
  if (ve < 0 || ve + 1 >= end || b[ve + 1] !== Byte.RBRACE) return false;
  out.start = vs;
  out.end = ve;
  return true;
}

/**
 * The raw bytes of the delivered text of one content_block_delta payload b[start, end) (the `data:`
 * value): true with `out` set (possibly an empty range), or false when the payload delivers no text.
 */
export function findDeltaText(b: Buffer, start: number, end: number, out: TextRange): boolean {
  const i = skipWs(b, start, end);
  if (anthropicLayout(b, i, end, out)) return true;
  deltaAt = -1;
  if (b[i] !== Byte.LBRACE || !walkObject(b, i, end, true) || deltaAt < 0) return false;
  typeStart = typeEnd = textStart = textEnd = thinkingStart = thinkingEnd = jsonStart = jsonEnd = -1;
  if (!walkObject(b, deltaAt, end, false)) return false;
  if (textStart >= 0 && (typeStart < 0 || rangeEquals(b, typeStart, typeEnd, T_TEXT))) {
    out.start = textStart;
    out.end = textEnd;
    return true;
  }
  if (thinkingStart >= 0 && typeStart >= 0 && rangeEquals(b, typeStart, typeEnd, T_THINKING)) {
    out.start = thinkingStart;
    out.end = thinkingEnd;
    return true;
  }
  if (jsonStart >= 0 && typeStart >= 0 && rangeEquals(b, typeStart, typeEnd, T_INPUT_JSON)) {
    out.start = jsonStart;
    out.end = jsonEnd;
    return true;
  }
  return false;
}

/** The text of pieces (raw JSON string contents, one per line), decoded and joined in order. */
export function decodePieces(data: Buffer): string {
  const raw = data.toString('utf8');
  try {
    return JSON.parse('"' + raw.replaceAll('\n', '') + '"') as string;
  } catch {
    // Some piece is not a valid JSON string: decode piece by piece and skip the bad ones.
    let text = '';
    for (const piece of raw.split('\n')) {
      try {
        text += JSON.parse('"' + piece + '"') as string;
      } catch {
        /* skipped, as an unparsable payload always was */
      }
    }
    return text;
  }
}

/** Decodes what deltaText used to: payloads one per line (tests and tools). */
export function deltaText(batch: Buffer): string {
  const range: TextRange = { start: 0, end: 0 };
  let text = '';
  let pos = 0;
  while (pos < batch.length) {
    let nl = batch.indexOf(Byte.NL, pos);
    if (nl < 0) nl = batch.length;
    if (findDeltaText(batch, pos, nl, range)) {
      try {
        text += JSON.parse('"' + batch.toString('utf8', range.start, range.end) + '"') as string;
      } catch {
        /* skipped */
      }
    }
    pos = nl + 1;
  }
  return text;
}
