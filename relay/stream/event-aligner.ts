// A provider's event stream passed to the client whole events at a time. Why: a stream can be cut
// anywhere (a reset, a proxy's timeout), often inside an event, and the relay then ends it with an
// error event of its own. Appended after half an event, that error was read as part of it
// (`data: {"type":"content_blo` + `event: error…`): the SDKs failed on a JSON syntax error, with no
// status or error type for their retry logic, instead of reading the error. So the bytes after the
// last blank line (the end of an event) are held until the event's end arrives; providers write whole
// events, so in practice nothing waits and a chunk passes as it came (no copy, no allocation).
//
// Framing as the SSE spec's: a line ends with CRLF, LF or a lone CR, and an event ends at an empty
// line. A CR that ends a chunk may be half of a CRLF, so an event end is never taken to be at a
// chunk's last byte when that byte is a CR. What an event that never ends would hold is bounded
// (MAX_HELD_EVENT): past it, the held bytes go as they are.
import { Byte, MAX_CARRIED_LINE } from './sse-bytes.js';

/** Most bytes of one unfinished event held back; an event longer than this passes unaligned. */
export const MAX_HELD_EVENT = MAX_CARRIED_LINE;

const EMPTY = Buffer.alloc(0);
const DATA = Buffer.from('data');

function isBreak(c: number | undefined): boolean {
  return c === Byte.NL || c === Byte.CR;
}

/**
 * The start of the line break that ends at `end` (exclusive) in buf, or -1 when buf[end - 1] is no
 * break. A CRLF is one break.
 */
function breakStart(buf: Buffer, end: number): number {
  const c = buf[end - 1];
  if (c === Byte.NL) return buf[end - 2] === Byte.CR ? end - 2 : end - 1;
  return c === Byte.CR ? end - 1 : -1;
}

/** The index just after the last empty line in buf[0, len): where the last whole event ends (0: none). */
export function lastEventEnd(buf: Buffer, len = buf.length): number {
  // Most chunks end an event: LF LF, or CRLF CRLF.
  if (buf[len - 1] === Byte.NL && (buf[len - 2] === Byte.NL || (buf[len - 2] === Byte.CR && buf[len - 3] === Byte.NL))) return len;
  for (let i = len - 1; i >= 0; i--) {
    const c = buf[i];
    if (c !== Byte.NL && c !== Byte.CR) continue;
    // A CR that ends the chunk may be the first half of a CRLF still to come.
    if (c === Byte.CR && i === len - 1) continue;
    const end = i + 1;
    const start = breakStart(buf, end);
    // The break just before this one: the line between them is empty. A CR LF pair is one break, not two.
    if (start > 0 && breakStart(buf, start) >= 0) return end;
    i = start;
  }
  return 0;
}

/** Whether buf[0, end) holds a line that begins with `data` (the field name; a colon or the line's end follows). */
function hasDataLine(buf: Buffer, end: number): boolean {
  let lineStart = 0;
  for (let i = 0; i <= end; i++) {
    if (i === end || isBreak(buf[i])) {
      if (i - lineStart >= 4 && buf.compare(DATA, 0, 4, lineStart, lineStart + 4) === 0) {
        const after = lineStart + 4;
        if (after === i || buf[after] === Byte.COLON) return true;
      }
      lineStart = i + 1;
    }
  }
  return false;
}

export class EventAligner {
  /** The unfinished event's bytes so far, in the pieces they came in (each byte is copied once, when it goes). */
  #held: Buffer[] = [];
  #heldBytes = 0;

  /** How many bytes of an unfinished event are held. */
  get heldBytes(): number {
    return this.#heldBytes;
  }

  /** The bytes of this chunk that end whole events (with any held before them); the rest is held. */
  push(chunk: Buffer): Buffer {
    const len = chunk.length;
    let end = lastEventEnd(chunk);
    if (this.#heldBytes === 0) {
      if (end === len) return chunk;
      if (len - end > MAX_HELD_EVENT) return chunk;
      this.#held.push(end === 0 ? chunk : chunk.subarray(end));
      this.#heldBytes = len - end;
      return end === 0 ? EMPTY : chunk.subarray(0, end);
    }
    // An event may end across the two: the held bytes' last line break, then the chunk's first.
    if (end === 0) end = this.#endAcross(chunk);
    if (end < 0) {
      if (this.#heldBytes + len > MAX_HELD_EVENT) return this.#release(chunk);
      this.#held.push(chunk);
      this.#heldBytes += len;
      return EMPTY;
    }
    if (len - end > MAX_HELD_EVENT) return this.#release(chunk);
    const out = this.#release(chunk.subarray(0, end));
    if (end < len) {
      this.#held.push(chunk.subarray(end));
      this.#heldBytes = len - end;
    }
    return out;
  }

  /** At the stream's clean end: what is held, as it is (a provider may end its last event without the empty line). */
  rest(): Buffer {
    return this.#heldBytes === 0 ? EMPTY : this.#release(EMPTY);
  }

  /**
   * At a cut: of the unfinished event, its whole lines, ended with an empty line so that the client
   * reads them as one event, when they hold a data line (the meters read a data line as it ends, so
   * a delta in it was counted as delivered); nothing when they do not (an `event:` line alone would
   * be an event without data, which the SDKs fail to parse). A partial last line is dropped.
   */
  salvage(): Buffer {
    if (this.#heldBytes === 0) return EMPTY;
    const held = this.#release(EMPTY);
    let end = held.length;
    while (end > 0 && !isBreak(held[end - 1])) end--;
    if (end === 0 || !hasDataLine(held, end)) return EMPTY;
    // After a CR, a LF alone would only complete a CRLF: two make the empty line.
    return Buffer.concat([held.subarray(0, end), held[end - 1] === Byte.CR ? TWO_NEWLINES : NEWLINE]);
  }

  /** The held bytes and then `tail`, in one buffer; nothing is held after. */
  #release(tail: Buffer): Buffer {
    const held = this.#held;
    held.push(tail);
    const out = Buffer.concat(held, this.#heldBytes + tail.length);
    held.length = 0;
    this.#heldBytes = 0;
    return out;
  }

  /**
   * Where in `chunk` an event ends that began its empty line in the held bytes: 0 when at the held
   * bytes' very end (a CR there, left as maybe half a CRLF, was a line break after all), -1 when none.
   */
  #endAcross(chunk: Buffer): number {
    // The held bytes' last three (an empty line's breaks are at most CR LF CR LF), across pieces.
    const before: number[] = [];
    for (let p = this.#held.length - 1; p >= 0 && before.length < 3; p--) {
      const piece = this.#held[p]!;
      for (let i = piece.length - 1; i >= 0 && before.length < 3; i--) before.unshift(piece[i]!);
    }
    const joint = Buffer.from([...before, ...chunk.subarray(0, 3)]);
    const end = lastEventEnd(joint);
    return end > 0 && end >= before.length ? end - before.length : -1;
  }
}

const NEWLINE = Buffer.from('\n');
const TWO_NEWLINES = Buffer.from('\n\n');
