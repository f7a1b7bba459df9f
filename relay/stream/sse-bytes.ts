// Byte-level pieces shared by the stream scanners that read SSE and JSON without decoding it
// (relay/stream/sse-usage-parser.ts, relay/providers/openai/chat-usage.ts, relay/token-count/delta-text.ts).

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
  LBRACE = 0x7b,
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
 * The first value of key `quotedKey` (its quotes included) in buf[from, end) whose first byte is
 * `first`: its index, or -1. A quoted key cannot occur inside a JSON string, whose quotes are escaped.
 */
export function keyedValue(buf: Buffer, quotedKey: Buffer, from: number, end: number, first: number): number {
  for (let at = buf.indexOf(quotedKey, from); at >= 0 && at + quotedKey.length <= end; at = buf.indexOf(quotedKey, at + 1)) {
    const v = valueAfterKey(buf, at + quotedKey.length, end);
    if (v >= 0 && buf[v] === first) return v;
  }
  return -1;
}

/** Where the line from `start` to its newline at `nl` ends, a CR before the newline excluded (CRLF streams). */
export function lineEnd(buf: Buffer, start: number, nl: number): number {
  return nl > start && buf[nl - 1] === Byte.CR ? nl - 1 : nl;
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
    this.append(src, 0, nl);
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
