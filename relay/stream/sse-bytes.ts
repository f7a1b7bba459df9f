// Byte-level pieces shared by the scanners that read SSE and JSON without decoding it
// (relay/stream/sse-usage-parser.ts, relay/providers/openai/chat-usage.ts, relay/token-count/delta-text.ts,
// and relay/messages/raw-json-guard.ts on request bodies).

/**
 * The bytes the scanners test. A const enum because tsc writes each value in place: an imported
 * `const` is read through its module binding at every use, which made SseUsageParser about 7% slower
 * in a micro-benchmark.
 */
export const enum Byte {
  NL = 0x0a,
  CR = 0x0d,
  SPACE = 0x20,
  TAB = 0x09,
  QUOTE = 0x22,
  BACKSLASH = 0x5c,
  COLON = 0x3a,
  COMMA = 0x2c,
  LBRACE = 0x7b,
  RBRACE = 0x7d,
  LBRACKET = 0x5b,
  RBRACKET = 0x5d,
}

export const DATA_PREFIX = Buffer.from('data:');

/** buf[at, end) begins with word. */
export function startsWith(buf: Buffer, at: number, end: number, word: Buffer): boolean {
  const n = word.length;
  if (end - at < n) return false;
  for (let k = 0; k < n; k++) if (buf[at + k] !== word[k]) return false;
  return true;
}

/** buf[start, end) is exactly word. */
export function rangeEquals(buf: Buffer, start: number, end: number, word: Buffer): boolean {
  const n = word.length;
  if (end - start !== n) return false;
  // From the end: the names compared share their beginnings (message_start, message_delta, …).
  for (let k = n - 1; k >= 0; k--) if (buf[start + k] !== word[k]) return false;
  return true;
}

/**
 * `from` just after a JSON string's opening quote: the index of its closing quote, or -1 when none
 * comes before `end`. A backslash escapes the next byte, whatever it is, so `\\"` closes the string.
 */
export function closingQuote(buf: Buffer, from: number, end: number): number {
  for (let i = from; i < end; i++) {
    const c = buf[i];
    if (c === Byte.QUOTE) return i;
    if (c === Byte.BACKSLASH) i++;
  }
  return -1;
}

/**
 * `at` just after a quoted JSON key: the index of its value's first byte, past the colon and the
 * whitespace JSON allows around it (`"key":v`, `"key": v`, as Python's json.dumps writes); -1 when no
 * colon follows (the quoted text was a value, not a key) or the line ends first.
 */
export function valueAfterKey(buf: Buffer, at: number, end: number): number {
  let i = at;
  while (i < end && (buf[i] === Byte.SPACE || buf[i] === Byte.TAB)) i++;
  if (i >= end || buf[i] !== Byte.COLON) return -1;
  i++;
  while (i < end && (buf[i] === Byte.SPACE || buf[i] === Byte.TAB)) i++;
  return i < end ? i : -1;
}

/**
 * Bytes past which indexOfBytes leaves the search to buf.indexOf. Buffer.indexOf with a Buffer needle
 * sets its search up at every call, ~170-350 ns however short the haystack: on a stream's chunk (a
 * few hundred bytes), several such calls per chunk were most of a meter's time (docs/performance.md,
 * twentieth session), while on a long buffer its SIMD scan is the faster.
 */
export const SHORT_SCAN = 512;

/** Where `needle` next occurs in buf from `from`, or -1: what buf.indexOf(needle, from) answers. */
export function indexOfBytes(buf: Buffer, needle: Buffer, from = 0): number {
  const n = needle.length;
  const last = buf.length - n;
  if (last - from > SHORT_SCAN) return buf.indexOf(needle, from);
  const first = needle[0];
  for (let i = from < 0 ? 0 : from; i <= last; i++) {
    if (buf[i] !== first) continue;
    let j = 1;
    while (j < n && buf[i + j] === needle[j]) j++;
    if (j === n) return i;
  }
  return -1;
}

/**
 * The first value of key `quotedKey` (its quotes included) in buf[from, end) whose first byte is
 * `first`: its index, or -1. A quoted key cannot occur inside a JSON string, whose quotes are escaped.
 */
export function keyedValue(buf: Buffer, quotedKey: Buffer, from: number, end: number, first: number): number {
  for (let at = indexOfBytes(buf, quotedKey, from); at >= 0 && at + quotedKey.length <= end; at = indexOfBytes(buf, quotedKey, at + 1)) {
    const v = valueAfterKey(buf, at + quotedKey.length, end);
    if (v >= 0 && buf[v] === first) return v;
  }
  return -1;
}

/** Where the line from `start` to its newline at `nl` ends, a CR before the newline excluded (CRLF streams). */
export function lineEnd(buf: Buffer, start: number, nl: number): number {
  return nl > start && buf[nl - 1] === Byte.CR ? nl - 1 : nl;
}

/**
 * The line breaks of an SSE stream as its spec defines them: CRLF, LF, or a lone CR. A scanner that
 * split on LF alone read a stream of CR-ended lines as one endless line and billed it nothing.
 *
 * Why a class: to stay as cheap as the LF-only scan. Each buffer is searched for LF as before, and for
 * CR once until the search passes the CR found (`#cr` remembers it, -1: none left in this buffer), so
 * an LF-only stream costs one more memchr per chunk, not per line. A CR that ends a buffer may be the
 * first half of a CRLF whose LF begins the next: `start()` skips that LF.
 */
export class LineBreaks {
  /** The last buffer ended with a CR: an LF beginning the next completes that line break. */
  #afterCR = false;
  /** The next CR at or after the last search in the current buffer; -1 none; -2 not searched yet. */
  #cr = -2;

  /** Begins a new buffer: the index to read it from (1 past the LF of a CRLF the last one cut). */
  start(buf: Buffer): number {
    this.#cr = -2;
    if (!this.#afterCR || buf.length === 0) return 0;
    this.#afterCR = false;
    return buf[0] === Byte.NL ? 1 : 0;
  }

  /** The first CR or LF in buf[from, …) (buf: the buffer start() was given, from never decreasing); -1 when none. */
  find(buf: Buffer, from: number): number {
    const nl = buf.indexOf(Byte.NL, from);
    let cr = this.#cr;
    if (cr === -2 || (cr >= 0 && cr < from)) this.#cr = cr = buf.indexOf(Byte.CR, from);
    if (cr < 0) return nl;
    return nl >= 0 && nl < cr ? nl : cr;
  }

  /** The index just past the line break at `at` (a CRLF is one break). */
  after(buf: Buffer, at: number): number {
    if (buf[at] !== Byte.CR) return at + 1;
    if (at + 1 < buf.length) return buf[at + 1] === Byte.NL ? at + 2 : at + 1;
    this.#afterCR = true;
    return at + 1;
  }
}

/** Whether the JSON in buf[start, end) ends an object: its last byte but blanks is `}`. */
export function endsObject(buf: Buffer, start: number, end: number): boolean {
  let i = end - 1;
  while (i >= start && (buf[i] === Byte.SPACE || buf[i] === Byte.TAB)) i--;
  return i >= start && buf[i] === 0x7d;
}

/** Where a delivered-text piece goes: buf[start, end) are raw bytes between a JSON string's quotes. */
export interface TextPieceSink {
  pushText(buf: Buffer, start: number, end: number): void;
}

const U = 0x75;

/**
 * The raw bytes of one JSON string too long for a line to be carried whole (a content delta past
 * MAX_CARRIED_LINE), handed to a sink piece by piece as its chunks pass, so that the text of a delta
 * the client received in full is counted, in bounded memory, rather than dropped. Each piece ends on
 * a whole escape (`\n`, `\u00e9`) and a whole UTF-8 character: what a chunk's end cuts of either is
 * held (at most 6 bytes) and handed over once complete, so every piece decodes on its own as well as
 * joined to the others (delivered-text-counter.ts may count them in different batches).
 */
export class StringPieces {
  readonly #held = Buffer.alloc(6);
  #heldBytes = 0;

  /** Starts a new string (just past its opening quote). */
  begin(): void {
    this.#heldBytes = 0;
  }

  /**
   * Reads buf[from, end) of the string: its pieces to `sink`. The index of the closing quote when the
   * string ends there, else -1 (it goes on in the next buffer).
   */
  feed(buf: Buffer, from: number, end: number, sink: TextPieceSink | null): number {
    let i = from;
    if (this.#heldBytes > 0) {
      const held = this.#held;
      while (i < end && !heldComplete(held, this.#heldBytes)) held[this.#heldBytes++] = buf[i++]!;
      if (!heldComplete(held, this.#heldBytes)) return -1;
      sink?.pushText(held, 0, this.#heldBytes);
      this.#heldBytes = 0;
    }
    const start = i;
    for (; i < end; i++) {
      const c = buf[i];
      if (c === Byte.QUOTE) {
        if (i > start) sink?.pushText(buf, start, i);
        return i;
      }
      if (c === Byte.BACKSLASH) {
        const size = i + 1 < end && buf[i + 1] === U ? 6 : 2;
        if (i + size > end) return this.#hold(buf, start, i, end, sink);
        i += size - 1;
      }
    }
    // A UTF-8 character cut by the buffer's end waits for its last bytes.
    return this.#hold(buf, start, utf8Cut(buf, start, end), end, sink);
  }

  /** Hands over buf[start, cut) and holds buf[cut, end): -1, the string goes on. */
  #hold(buf: Buffer, start: number, cut: number, end: number, sink: TextPieceSink | null): number {
    if (cut > start) sink?.pushText(buf, start, cut);
    buf.copy(this.#held, 0, cut, end);
    this.#heldBytes = end - cut;
    return -1;
  }
}

/** Where buf[start, end) ends on a whole UTF-8 character: end, or the start of a character it cuts. */
function utf8Cut(buf: Buffer, start: number, end: number): number {
  let i = end - 1;
  // Back over at most 3 continuation bytes (10xxxxxx) to the character's first byte.
  while (i > start && end - i < 4 && (buf[i]! & 0xc0) === 0x80) i--;
  if (i < start) return end;
  const size = utf8Size(buf[i]!);
  return size > end - i ? i : end;
}

/** Bytes of the UTF-8 character a first byte begins (1 for anything else: never held). */
function utf8Size(first: number): number {
  if (first >= 0xf0 && first < 0xf8) return 4;
  if (first >= 0xe0) return first < 0xf0 ? 3 : 1;
  if (first >= 0xc0) return 2;
  return 1;
}

/** Whether the held bytes are a whole escape, or a whole UTF-8 character. */
function heldComplete(held: Buffer, n: number): boolean {
  if (held[0] === Byte.BACKSLASH) return n >= 2 && (held[1] !== U || n >= 6);
  return n >= utf8Size(held[0]!);
}

/** The longest line a scanner reads whole; a longer one is dropped (see LineCarry.append). */
export const MAX_CARRIED_LINE = 1024 * 1024;
const EMPTY_LINE = Buffer.alloc(0);

/** A carry buffer larger than this is dropped once its line is read, so one huge line is not kept for the stream's life. */
const KEEP_BYTES = 16 * 1024;

/**
 * A line that continues in later chunks, gathered in one buffer reused from line to line: a split
 * line costs a copy of its bytes, not an allocation per chunk.
 */
export class LineCarry {
  /** The end of the line finish() last returned, a trailing CR excluded. */
  end = 0;
  #buf: Buffer | null = null;
  #bytes = 0;
  #carrying = false;
  /** The line being carried passed MAX_CARRIED_LINE: dropped until its newline. */
  #overlong = false;

  /** A line has begun and its newline has not come yet. */
  get carrying(): boolean {
    return this.#carrying;
  }

  /** Bytes of the line carried so far (0 once it went past MAX_CARRIED_LINE). */
  get bytes(): number {
    return this.#bytes;
  }

  /** The buffer holding the line carried so far, at [0, bytes); valid until the next append. */
  get buffer(): Buffer {
    return this.#buf ?? EMPTY_LINE;
  }

  /** Ends the line without reading it (its rest is read otherwise: overlong-delta-text streaming). */
  drop(): void {
    this.#carrying = false;
    this.#overlong = false;
    this.#bytes = 0;
    if (this.#buf && this.#buf.length > KEEP_BYTES) this.#buf = null;
  }

  /** Starts a line with src[from, to), the rest of which comes in later chunks. */
  begin(src: Buffer, from: number, to: number): void {
    this.#carrying = true;
    this.#bytes = 0;
    this.#overlong = false;
    this.append(src, from, to);
  }

  /** Adds src[from, to) to the line; past MAX_CARRIED_LINE the line is dropped (finish gives it empty). */
  append(src: Buffer, from: number, to: number): void {
    if (this.#overlong) return;
    const at = this.#bytes;
    const n = to - from;
    if (at + n > MAX_CARRIED_LINE) {
      // A provider's SSE lines are a few kilobytes: one without a newline for this long is not one,
      // and is not kept whole (a stream never ending its line grew this buffer without bound).
      this.#overlong = true;
      this.#bytes = 0;
      if (this.#buf && this.#buf.length > KEEP_BYTES) this.#buf = null;
      return;
    }
    let dst = this.#buf;
    if (!dst || at + n > dst.length) {
      // allocUnsafeSlow: not a slice of Node's shared pool, which a kept buffer would pin.
      const grown = Buffer.allocUnsafeSlow(Math.max(256, at + n, dst ? dst.length * 2 : 0));
      if (dst && at > 0) dst.copy(grown, 0, 0, at);
      this.#buf = dst = grown;
    }
    src.copy(dst, at, from, to);
    this.#bytes = at + n;
  }

  /**
   * Ends the line with src[0, nl), nl being its newline: the buffer that holds it at [0, this.end),
   * valid until the next begin().
   */
  finish(src: Buffer, nl: number): Buffer {
    return this.finishAt(src, 0, nl);
  }

  /** finish() with the line's last part at src[from, to) (to: where its line break is). */
  finishAt(src: Buffer, from: number, to: number): Buffer {
    this.append(src, from, to);
    if (this.#overlong) {
      this.#overlong = false;
      this.#carrying = false;
      this.end = 0;
      return EMPTY_LINE;
    }
    const line = this.#buf!;
    this.end = lineEnd(line, 0, this.#bytes);
    this.#carrying = false;
    this.#bytes = 0;
    if (line.length > KEEP_BYTES) this.#buf = null;
    return line;
  }
}
