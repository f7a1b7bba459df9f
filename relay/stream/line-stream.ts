// The lines of an SSE stream as text, for the rewriters that convert one protocol's stream into the
// other's (relay/providers/anthropic/to-chat.ts, relay/providers/openai/to-messages.ts): chunks
// decoded as UTF-8 across their boundaries, a line carried until its newline (CRLF or LF).
import { StringDecoder } from 'node:string_decoder';
import { MAX_CARRIED_LINE } from './sse-bytes.js';

export abstract class LineStream {
  readonly #decoder = new StringDecoder('utf8');
  #partial = '';
  /** Inside a line dropped for its length, until its newline. */
  #skipping = false;

  /** Each complete line of `chunk` (with what was carried) through `line`; their outputs joined. */
  protected lines(chunk: Buffer, line: (text: string) => string): string {
    let text = this.#partial + this.#decoder.write(chunk);
    let out = '';
    let pos = 0;
    if (this.#skipping) {
      const nl = text.indexOf('\n');
      if (nl < 0) {
        this.#partial = '';
        return '';
      }
      this.#skipping = false;
      text = text.slice(nl + 1);
    }
    for (;;) {
      const nl = text.indexOf('\n', pos);
      if (nl < 0) break;
      let end = nl;
      if (end > pos && text.charCodeAt(end - 1) === 13) end--;
      out += line(text.slice(pos, end));
      pos = nl + 1;
    }
    this.#partial = pos === 0 ? text : text.slice(pos);
    // A provider's SSE lines are a few kilobytes: one without a newline for this long is dropped
    // rather than grown (and copied again) with every chunk.
    if (this.#partial.length > MAX_CARRIED_LINE) {
      this.#partial = '';
      this.#skipping = true;
    }
    return out;
  }
}
