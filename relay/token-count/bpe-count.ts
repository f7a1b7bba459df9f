// Counts tokens of text in one of two encodings, cl100k_base (GPT-4 and GPT-3.5, and the estimate for
// every model whose tokenizer is not public, Claude's) or o200k_base (GPT-4o and later OpenAI models),
// without building token arrays, in time linear in the text
// (js-tiktoken's own merge is quadratic in the length of a regex piece: a 100 KB word or a paragraph
// of CJK text, which has no spaces, would take minutes). Runs inside the counting workers
// (count-worker.ts); pure, so tests call it directly too.
//
// Segments. The text is cut into segments that are counted independently, and the count of a text is
// the sum over its segments. A segment ends
//   - at a word boundary: just before a non-newline whitespace character that follows a
//     non-whitespace one ("abc| def"). No piece of the tokenizer's split pattern contains such a pair,
//     so cutting there changes nothing: the sum equals the tokenizer's count of the whole text;
//   - or, in a run of MAX_SEGMENT characters without a word boundary (CJK, base64, a very long word),
//     after MAX_SEGMENT characters (one earlier when that would split a surrogate pair). Only there
//     can the count differ from the tokenizer's (by about one token per forced cut).
// Where the segments fall depends only on the text after the previous cut, so counting a text in
// batches cut at segment ends (countWithCarry) gives exactly countText of the whole. The same holds
// for o200k_base, whose split pattern has the same shape (a piece holds whitespace only at its start,
// or only whitespace): its pieces differ in letter case and digits, not at whitespace.
import { createRequire } from 'node:module';
import type { TiktokenBPE } from 'js-tiktoken/lite';

export type Encoding = 'cl100k_base' | 'o200k_base';
export const DEFAULT_ENCODING: Encoding = 'cl100k_base';
/** Longest run of characters counted as one piece of text when it has no word boundary. */
export const MAX_SEGMENT = 2048;

interface Bpe {
  pattern: RegExp;
  /** Token bytes as a latin1 string → rank. */
  ranks: Map<string, number>;
}

const loaded = new Map<Encoding, Bpe>();
const require = createRequire(import.meta.url);

/**
 * Loads an encoding's ranks once per thread, when first used (cl100k: about 100 ms and 100k entries;
 * o200k twice that): a relay with no OpenAI-format channel never holds o200k's.
 */
function load(encoding: Encoding): Bpe {
  const known = loaded.get(encoding);
  if (known) return known;
  const module = require(`js-tiktoken/ranks/${encoding}`) as TiktokenBPE | { default: TiktokenBPE };
  const ranks = 'default' in module ? module.default : module;
  const map = new Map<string, number>();
  for (const line of ranks.bpe_ranks.split('\n')) {
    if (!line) continue;
    const parts = line.split(' ');
    const offset = Number.parseInt(parts[1]!, 10);
    for (let i = 2; i < parts.length; i++) map.set(Buffer.from(parts[i]!, 'base64').toString('latin1'), offset + i - 2);
  }
  const bpe = { pattern: new RegExp(ranks.pat_str, 'gu'), ranks: map };
  loaded.set(encoding, bpe);
  return bpe;
}

/** Loads an encoding's ranks now rather than on its first count. */
export function warmUp(encoding: Encoding = DEFAULT_ENCODING): void {
  load(encoding);
}

// --- byte-pair merge -------------------------------------------------------------------------------

/** Tokens of one piece given as a latin1 string of its UTF-8 bytes (at least 2 bytes long). */
function mergeCount(piece: string, ranks: Map<string, number>): number {
  const n = piece.length;
  if (n <= 24) return mergeSmall(piece, ranks);
  return mergeHeap(piece, ranks);
}

/** The reference algorithm (always merge the lowest-ranked adjacent pair, leftmost on ties). */
function mergeSmall(piece: string, ranks: Map<string, number>): number {
  const starts: number[] = [];
  for (let i = 0; i <= piece.length; i++) starts.push(i);
  // starts[k]..starts[k+1] is part k; parts = starts.length - 1
  while (starts.length > 2) {
    let minRank = Infinity;
    let minAt = -1;
    for (let k = 0; k + 2 < starts.length; k++) {
      const r = ranks.get(piece.slice(starts[k]!, starts[k + 2]!));
      if (r !== undefined && r < minRank) {
        minRank = r;
        minAt = k;
      }
    }
    if (minAt < 0) break;
    starts.splice(minAt + 1, 1);
  }
  return starts.length - 1;
}

/**
 * The same merge order with a min-heap keyed by (rank, position) over a linked list of parts:
 * O(n log n). Entries are invalidated lazily: an entry is live when its left part still starts
 * there and the pair it describes (left part + its current right neighbour) still has that rank.
 */
function mergeHeap(piece: string, ranks: Map<string, number>): number {
  const n = piece.length;
  // Parts are identified by their start offset; next[s] is the start of the following part (n at the end).
  const next = new Int32Array(n + 1);
  const prev = new Int32Array(n + 1);
  const alive = new Uint8Array(n + 1);
  for (let i = 0; i < n; i++) {
    next[i] = i + 1;
    prev[i] = i - 1;
    alive[i] = 1;
  }
  next[n] = n;
  const heapRank: number[] = [];
  const heapPos: number[] = [];
  const heapEnd: number[] = [];
  const less = (a: number, b: number) => heapRank[a]! < heapRank[b]! || (heapRank[a] === heapRank[b] && heapPos[a]! < heapPos[b]!);
  const swap = (a: number, b: number) => {
    let t = heapRank[a]!; heapRank[a] = heapRank[b]!; heapRank[b] = t;
    t = heapPos[a]!; heapPos[a] = heapPos[b]!; heapPos[b] = t;
    t = heapEnd[a]!; heapEnd[a] = heapEnd[b]!; heapEnd[b] = t;
  };
  const pushEntry = (rank: number, pos: number, end: number) => {
    let i = heapRank.length;
    heapRank.push(rank); heapPos.push(pos); heapEnd.push(end);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!less(i, p)) break;
      swap(i, p);
      i = p;
    }
  };
  const popEntry = () => {
    const last = heapRank.length - 1;
    swap(0, last);
    heapRank.pop(); heapPos.pop(); heapEnd.pop();
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < heapRank.length && less(l, m)) m = l;
      if (r < heapRank.length && less(r, m)) m = r;
      if (m === i) break;
      swap(i, m);
      i = m;
    }
  };
  const pairOf = (s: number) => {
    const mid = next[s]!;
    if (mid >= n) return;
    const end = next[mid]!;
    const r = ranks.get(piece.slice(s, end));
    if (r !== undefined) pushEntry(r, s, end);
  };
  for (let i = 0; i + 1 < n; i++) pairOf(i);
  let parts = n;
  while (heapRank.length > 0) {
    const pos = heapPos[0]!;
    const end = heapEnd[0]!;
    popEntry();
    // Stale: the left part is gone, or its right neighbour changed since the entry was made.
    if (!alive[pos] || next[pos]! >= n || next[next[pos]!]! !== end) continue;
    const mid = next[pos]!;
    alive[mid] = 0;
    next[pos] = end;
    if (end < n) prev[end] = pos;
    parts--;
    pairOf(pos);
    if (prev[pos]! >= 0) pairOf(prev[pos]!);
  }
  return parts;
}

// --- counting -------------------------------------------------------------------------------------

/** Tokens of a text with no forced cut inside (word boundaries need no cut: see the header). */
function countRun(text: string, bpe: Bpe): number {
  if (!text) return 0;
  const { pattern, ranks } = bpe;
  pattern.lastIndex = 0;
  let count = 0;
  let m: RegExpExecArray | null;
  while ((m = pattern.exec(text)) !== null) {
    const s = m[0];
    if (s.length === 0) {
      pattern.lastIndex++;
      continue;
    }
    const bytes = Buffer.from(s, 'utf8').toString('latin1');
    if (bytes.length === 1 || ranks.has(bytes)) count++;
    else count += mergeCount(bytes, ranks);
  }
  return count;
}

function isWhitespace(c: number): boolean {
  // Exactly JavaScript's \s (what the split pattern uses).
  if (c <= 0x20) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  if (c < 0xa0) return false;
  return c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 ||
    c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;
}

/**
 * Scans the segments of `text`: returns the forced cuts (ascending) and the start of the last segment.
 * A word boundary at i: text[i] is whitespace other than \r and \n, text[i-1] is not whitespace.
 */
function scan(text: string): { forced: number[]; lastStart: number } {
  const forced: number[] = [];
  let start = 0;
  let prevWs = true;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    const ws = isWhitespace(c);
    if (i > start && ws && !prevWs && c !== 0x0a && c !== 0x0d) {
      start = i;
    } else if (i - start >= MAX_SEGMENT) {
      // i - start === MAX_SEGMENT: cut before i, or before i-1 so as not to split a surrogate pair.
      let cut = i;
      const before = text.charCodeAt(i - 1);
      if (before >= 0xd800 && before <= 0xdbff) cut = i - 1;
      forced.push(cut);
      start = cut;
      i = cut;
      prevWs = isWhitespace(text.charCodeAt(cut));
      continue;
    }
    prevWs = ws;
  }
  return { forced, lastStart: start };
}

function countRange(text: string, from: number, to: number, forced: number[], bpe: Bpe): number {
  let count = 0;
  let a = from;
  for (const cut of forced) {
    if (cut <= a) continue;
    if (cut >= to) break;
    count += countRun(text.slice(a, cut), bpe);
    a = cut;
  }
  return count + countRun(text.slice(a, to), bpe);
}

/** Tokens of a whole text. */
export function countText(text: string, encoding: Encoding = DEFAULT_ENCODING): number {
  const { forced } = scan(text);
  return countRange(text, 0, text.length, forced, load(encoding));
}

/**
 * Tokens of `text` up to the start of its last segment, and that last segment as the carry to put in
 * front of the next batch; with `final`, tokens of all of it and an empty carry. The carry is at most
 * MAX_SEGMENT characters. With `final` and `trimEnd`, whitespace at the very end is not counted: a BPE
 * tokenizer attaches whitespace to the word after it, so it belongs to a token that was not delivered
 * (the mock's K deltas "tok " then count K). The sum over batches then equals countText(whole.trimEnd())
 * (unless the text ends with more than MAX_SEGMENT whitespace characters).
 */
export function countWithCarry(text: string, final: boolean, trimEnd = false, encoding: Encoding = DEFAULT_ENCODING): { count: number; carry: string } {
  if (final && trimEnd) {
    let end = text.length;
    while (end > 0 && isWhitespace(text.charCodeAt(end - 1))) end--;
    text = text.slice(0, end);
  }
  const { forced, lastStart } = scan(text);
  const bpe = load(encoding);
  if (final) return { count: countRange(text, 0, text.length, forced, bpe), carry: '' };
  return { count: countRange(text, 0, lastStart, forced, bpe), carry: text.slice(lastStart) };
}
