// A channel's key in text, however JSON may spell it: as written, with any character as a `\uXXXX`
// escape (Go writes `<`, `>`, `&` so, Python any non-ASCII one), `/` as `\/` (PHP's json_encode
// default), `"` and `\` and control characters as their short escapes. A JSON reader decodes every
// one of these back to the key, so a scrub of a provider's text that knows only the key as written
// (infra/secrets/credential-text.ts) lets them through. Used where the text is not (or cannot be)
// decoded first: an error body or an event that is no JSON, a line of an SSE event.
import { CENSOR, scrubCredentials } from '../../infra/secrets/credential-text.js';

/** As credential-text.ts: shorter than this a known credential is not searched for. */
const MIN_KNOWN_LENGTH = 8;
const SHORT_ESCAPES: Record<string, string> = { '"': '\\\\"', '\\': '\\\\\\\\', '/': '\\\\/', '\b': '\\\\b', '\f': '\\\\f', '\n': '\\\\n', '\r': '\\\\r', '\t': '\\\\t' };
/** Characters JSON escapes, or that a JSON writer commonly escapes: none of them is in a key's `anchor`. */
const ESCAPED_BY_WRITERS = /["\\/<>&\u0000-\u001f\u007f-\uffff]/;

let cachedKey: string | undefined;
let cachedPattern: RegExp | null = null;

/** A global pattern that matches `key` in every JSON spelling of it (one per key, the last one cached). */
export function keyPattern(key: string): RegExp {
  if (key === cachedKey && cachedPattern !== null) return cachedPattern;
  let source = '';
  for (let i = 0; i < key.length; i++) {
    const c = key[i]!;
    const code = c.charCodeAt(0);
    const hex = code.toString(16).padStart(4, '0');
    const uEscape = '\\\\u' + [...hex].map((h) => (h >= 'a' ? `[${h}${h.toUpperCase()}]` : h)).join('');
    const literal = c.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
    const short = SHORT_ESCAPES[c];
    source += `(?:${literal}|${uEscape}${short !== undefined ? `|${short}` : ''})`;
  }
  cachedKey = key;
  cachedPattern = new RegExp(source, 'g');
  return cachedPattern;
}

/** Whether `text` holds `key` in any JSON spelling of it. */
export function holdsKey(text: string, key: string | undefined): boolean {
  if (key === undefined || key.length < MIN_KNOWN_LENGTH) return false;
  const p = keyPattern(key);
  p.lastIndex = 0;
  return p.test(text);
}

/**
 * `text` scrubbed of the channel's key in every JSON spelling of it, and of anything key-shaped
 * (scrubCredentials).
 */
export function scrubKeyText(text: string, key: string | undefined): string {
  let out = text;
  if (key !== undefined && key.length >= MIN_KNOWN_LENGTH) out = out.replace(keyPattern(key), CENSOR);
  return scrubCredentials(out, key);
}

/**
 * The longest run of `key` without a character a JSON writer may escape: every spelling of the key
 * but a fully `\u`-escaped one holds it, so one search for it tells a chunk that may hold the key
 * from one that does not (a hit is then checked with keyPattern). The key itself when that run is
 * shorter than 6 characters (the search would hit ordinary text too often); undefined without a key.
 */
export function keyAnchor(key: string | undefined): string | undefined {
  if (key === undefined || key.length < MIN_KNOWN_LENGTH) return undefined;
  let best = '';
  let run = '';
  for (const c of key) {
    if (ESCAPED_BY_WRITERS.test(c)) run = '';
    else if ((run += c).length > best.length) best = run;
  }
  return best.length >= 6 ? best : key;
}
