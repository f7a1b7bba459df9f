// The lines of an SSE stream as text, for the rewriters that convert one protocol's stream into the
// other's (relay/providers/anthropic/to-chat.ts, relay/providers/openai/to-messages.ts): chunks
// decoded as UTF-8 across their boundaries, a line carried until its end. A line ends as the SSE spec
// says, with CRLF, LF or a lone CR (the meters read CR-ended lines too: converted on LF alone, such a
// stream was billed and its client got nothing).
import { StringDecoder } from 'node:string_decoder';
import { MAX_CARRIED_LINE } from './sse-bytes.js';

/**
 * Most characters of one event's data lines (as they came: each is at least a byte) a conversion
 * joins: past it the stream fails.
 */
export const MAX_JOINED_DATA = MAX_CARRIED_LINE;

/** A converted stream's event whose data lines went on past MAX_JOINED_DATA without the event's end. */
export class JoinedDataTooLongError extends Error {
  constructor() {
    super(`a provider stream event's data lines went on past ${MAX_JOINED_DATA} characters without its end`);
    this.name = 'JoinedDataTooLongError';
  }
}

export abstract class LineStream {
  readonly #decoder = new StringDecoder('utf8');
  #partial = '';
  /** Inside a line too long to carry (MAX_CARRIED_LINE), until its end: its text goes to overlong(). */
  #skipping = false;
  /** The last chunk ended with a CR: an LF beginning the next completes that line break. */
  #afterCR = false;
  /** The next CR in the text being split, at or after the last search; -1: none; -2: not searched. */
  #cr = -2;
  /**
   * A conversion reads an event's data as one JSON value: a `data:` line that opens an object and
   * does not close it is held, the event's next data lines are joined to it with newlines (as the SSE
   * spec and the SDKs join them) and the whole goes to line() as one. Else such an event's content,
   * which the meters bill, never reached a client of the other protocol. A filter that passes lines
   * on as they are leaves it off: it would change their framing.
   */
  protected joinsData = false;
  #data: string | null = null;
  /** The joined lines' length as they came (their `data:` and line breaks included). */
  #dataSize = 0;
  /**
   * Set when an event's joined data passed MAX_JOINED_DATA (the meters and the aligner hold no more
   * of one line or event): the stream cannot be converted on, nothing more is read, and the relay
   * ends it as failed (stream-relay.ts). Held without bound, one stream of endless data lines took
   * the relay's heap to 2.8 GB.
   */
  failure: Error | null = null;

  /** Each complete line of `chunk` (with what was carried) through `line`; their outputs joined. */
  protected lines(chunk: Buffer, line: (text: string) => string): string {
    if (this.failure !== null) return '';
    let text = this.#partial + this.#decoder.write(chunk);
    if (this.#afterCR && text.length > 0) {
      this.#afterCR = false;
      if (text.charCodeAt(0) === 10) text = text.slice(1);
    }
    let out = '';
    let pos = 0;
    this.#cr = -2;
    if (this.#skipping) {
      const end = this.#break(text, 0);
      if (end < 0) {
        this.#partial = '';
        return this.overlong(text, false);
      }
      this.#skipping = false;
      out = this.overlong(text.slice(0, end), true);
      pos = this.#after(text, end);
    }
    for (;;) {
      const end = this.#break(text, pos);
      if (end < 0) break;
      out += this.joinsData ? this.#joined(text.slice(pos, end), line) : line(text.slice(pos, end));
      // What came before in this chunk is returned, to be written; nothing after is read.
      if (this.failure !== null) {
        this.#partial = '';
        return out;
      }
      pos = this.#after(text, end);
    }
    this.#partial = pos === 0 ? text : text.slice(pos);
    // A provider's SSE lines are a few kilobytes: one without an end for this long is not grown (and
    // copied again) with every chunk, but handed to overlong() as it comes.
    if (this.#partial.length > MAX_CARRIED_LINE) {
      out += this.overlong(this.#partial, false);
      this.#partial = '';
      this.#skipping = true;
    }
    return out;
  }

  /** What line() makes of `l`, once the data lines it may end are joined (joinsData). */
  #joined(l: string, line: (text: string) => string): string {
    const data = l.startsWith('data:');
    if (this.#data !== null) {
      if (data) {
        this.#dataSize += l.length + 1;
        if (this.#dataSize > MAX_JOINED_DATA) {
          this.#data = null;
          this.failure = new JoinedDataTooLongError();
          return '';
        }
        this.#data += '\n' + l.slice(5);
        return '';
      }
      const joined = this.#data;
      this.#data = null;
      return line(joined) + line(l);
    }
    if (data && opensObject(l) && !l.trimEnd().endsWith('}')) {
      this.#data = l;
      this.#dataSize = l.length + 1;
      return '';
    }
    return line(l);
  }

  /**
   * The text of a line too long to carry, piece by piece as it arrives (`ended`: this piece ends the
   * line); what to write for it. Dropped by default: a conversion needs the whole line.
   */
  protected overlong(_text: string, _ended: boolean): string {
    return '';
  }

  /** The first CR or LF of the text from `from` (never decreasing within a text), -1 when none; CR searched once until passed. */
  #break(text: string, from: number): number {
    const nl = text.indexOf('\n', from);
    let cr = this.#cr;
    if (cr === -2 || (cr >= 0 && cr < from)) this.#cr = cr = text.indexOf('\r', from);
    if (cr < 0) return nl;
    return nl >= 0 && nl < cr ? nl : cr;
  }

  /** The index past the line break at `at` (a CRLF is one; a CR that ends the text may be the first half of one). */
  #after(text: string, at: number): number {
    if (text.charCodeAt(at) !== 13) return at + 1;
    if (at + 1 < text.length) return text.charCodeAt(at + 1) === 10 ? at + 2 : at + 1;
    this.#afterCR = true;
    return at + 1;
  }
}

/** A data line whose value begins a JSON object. */
function opensObject(l: string): boolean {
  let i = 5;
  while (i < l.length && (l.charCodeAt(i) === 0x20 || l.charCodeAt(i) === 0x09)) i++;
  return l.charCodeAt(i) === 0x7b;
}
