// A nesting-depth bound for request bodies, checked on the raw bytes before they are parsed.
// V8's JSON.parse accepts any depth, but everything after it recurses (JSON.stringify of a
// model-mapped body, the prompt walk on the counting workers, zod): a body nested a few thousand
// levels deep would throw RangeError there and answer 500. Real Messages bodies nest a few levels
// (tool input schemas perhaps twenty); MAX_JSON_DEPTH leaves ample room.
export const MAX_JSON_DEPTH = 128;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;

/**
 * Whether the JSON text in `buf` opens more than `maxDepth` objects/arrays inside one another. A
 * single pass, no allocation; brackets inside strings do not count. Invalid JSON gets some answer
 * and is then refused by JSON.parse.
 */
export function jsonNestingExceeds(buf: Uint8Array, maxDepth = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  const n = buf.length;
  for (let i = 0; i < n; i++) {
    const c = buf[i]!;
    if (c === QUOTE) {
      // Skip the string with a native search for its closing quote (bodies are mostly string
      // content): a quote preceded by an odd run of backslashes is escaped.
      for (;;) {
        const q = buf.indexOf(QUOTE, i + 1);
        if (q < 0) return false;
        let b = q - 1;
        while (buf[b] === BACKSLASH) b--;
        i = q;
        if ((q - 1 - b) % 2 === 0) break;
      }
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > maxDepth) return true;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}
