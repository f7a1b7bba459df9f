// The provider's error events in a stream, scrubbed before the client reads them. Providers quote the
// key they were sent ("Incorrect API key provided: <key>"), in a stream as in an error answered whole
// (messages-handler.ts passThroughError): an error event the client reads, passed on as it came
// (same protocol) or converted (to-chat.ts, to-messages.ts copy the message), is scrubbed of the
// channel's key, by value and as JSON escapes it, and of anything key-shaped
// (infra/secrets/credential-text.ts). Only error events: content is the model's answer, passed byte
// for byte, key-shaped examples included.
//
// Nor is only an error event read: a chunk that holds the channel's key (its anchor, keyAnchor in
// key-forms.ts: one more search a chunk) is cut into events too, and an event that is not a
// well-formed one of the protocols (an `event:` name neither protocol writes, data that is no JSON)
// and holds the key, in any JSON spelling, has it scrubbed as text. vLLM's `{"object":"error",…}` is
// an error. A well-formed event that is no error passes byte for byte, the key in it or not.
//
// An error event, as the SDKs read one: an `event: error` (Anthropic's SDK raises it whatever its
// data), or data that is a JSON object with an `error` member or `"type":"error"` (OpenAI's SDK raises
// the former; the meters read both). Either holds the bytes `error` as the event's name or as a
// quoted JSON string (`"error"`): a chunk without them is written as it is, unparsed and uncopied,
// after one indexOf (and a few byte comparisons for each `error` a content chunk holds). A chunk with
// them is decoded and cut into events; an event that is an error has every string of its data (keys
// included) scrubbed, and is written anew only when that changed anything.
//
// What the relay writes is whole events (EventAligner, the conversions) or whole lines (the Chat
// Completions usage filter): an error event whose lines come in two writes is held from its first
// line that may open one until its end, as the aligner holds it (bounded by MAX_HELD_EVENT).
import { scrubCredentials } from '../../infra/secrets/credential-text.js';
import { isAccountTrouble } from '../../core/channels/provider-fault.js';
import { PROVIDER_ACCOUNT_REFUSED } from '../errors.js';
import type { Protocol } from '../providers/provider.js';
import { holdsKey, keyAnchor, scrubKeyText } from './key-forms.js';
import { isObject } from '../../infra/json/is-object.js';
import { EventAligner, lastEventEnd } from './event-aligner.js';
import { Byte, indexOfBytes } from './sse-bytes.js';

const ERROR = Buffer.from('error');
const EVENT = Buffer.from('event:');
const BREAK = /\r\n|\r|\n/;
const BREAKS = /\r\n|\r|\n/g;
/** An `event: error` line, in text decoded as latin1 (an event too long to hold). */
const ERROR_EVENT_LINE = /(?:^|[\r\n])event:[ \t]*error[ \t]*(?:[\r\n]|$)/;
/** The `event:` names of Anthropic's stream (Chat Completions' names none): any other is scrubbed of the key. */
const KNOWN_EVENTS = new Set(['', 'message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop', 'ping', 'error']);
/** Deeper than this an error's data is scrubbed as text (JSON.stringify of a deep value throws). */
const MAX_DEPTH = 64;

/**
 * Where the bytes `error` first occur in buf, -1 if nowhere: Horspool's search for the one pattern, in
 * JavaScript. Every chunk a stream writes is searched, and Buffer#indexOf with a Buffer costs ~180 ns
 * a call on a 120-byte event before it reads a byte (the native call); this ~30 ns.
 */
export function indexOfError(buf: Buffer): number {
  const last = buf.length - 5;
  let i = 0;
  while (i <= last) {
    const c = buf[i + 4]!;
    if (c === 0x72 && buf[i] === 0x65 && buf[i + 1] === 0x72 && buf[i + 2] === 0x72 && buf[i + 3] === 0x6f) return i;
    // Shift by the distance from the last occurrence of c in "erro" to the pattern's end.
    i += c === 0x72 ? 2 : c === 0x6f ? 1 : c === 0x65 ? 4 : 5;
  }
  return -1;
}

/**
 * Horspool's bad-character shifts for `pattern` (at least 1 byte): how far to move the window when its
 * last byte is b.
 */
export function horspoolShifts(pattern: Buffer): Uint8Array | Uint16Array {
  const m = pattern.length;
  const shifts = m < 256 ? new Uint8Array(256).fill(m) : new Uint16Array(256).fill(m);
  for (let i = 0; i < m - 1; i++) shifts[pattern[i]!] = m - 1 - i;
  return shifts;
}

/**
 * Where `pattern` first occurs in buf, -1 if nowhere: Horspool's search with the shifts of
 * horspoolShifts(pattern). In JavaScript for the reason indexOfError is: a short chunk searched for a
 * pattern of 6 or more bytes costs a few steps, less than Buffer#indexOf's native call.
 */
export function indexOfPattern(buf: Buffer, pattern: Buffer, shifts: Uint8Array | Uint16Array): number {
  const m = pattern.length;
  const lastP = m - 1;
  const lastByte = pattern[lastP]!;
  const end = buf.length - m;
  let i = 0;
  while (i <= end) {
    const c = buf[i + lastP]!;
    if (c === lastByte) {
      let j = 0;
      while (j < lastP && buf[i + j] === pattern[j]) j++;
      if (j === lastP) return i;
    }
    i += shifts[c]!;
  }
  return -1;
}

function isBreak(c: number | undefined): boolean {
  return c === Byte.NL || c === Byte.CR;
}

/**
 * Whether buf holds the bytes every error event holds: `error` quoted (`"error"`, a JSON key or the
 * type's value) or as an `event:` line's value. Content quoting the word has it escaped (`\"error\"`)
 * or unquoted.
 */
export function mayHoldErrorEvent(buf: Buffer): boolean {
  for (let at = indexOfBytes(buf, ERROR); at >= 0; at = indexOfBytes(buf, ERROR, at + ERROR.length)) {
    if (buf[at - 1] === Byte.QUOTE && buf[at + ERROR.length] === Byte.QUOTE) return true;
    let i = at;
    while (i > 0 && (buf[i - 1] === Byte.SPACE || buf[i - 1] === Byte.TAB)) i--;
    if (i >= EVENT.length && buf.compare(EVENT, 0, EVENT.length, i - EVENT.length, i) === 0 && (i === EVENT.length || isBreak(buf[i - EVENT.length - 1]))) return true;
  }
  return false;
}

/** Scrubs the error events of a stream on its way to the client; `write` gets what is to be written. */
export class ErrorEventScrubber {
  readonly #key: string | undefined;
  /** keyAnchor of the key, as searched in a string and in a Buffer; undefined without a key. */
  readonly #anchor: string | undefined;
  readonly #anchorBuf: Buffer | undefined;
  readonly #anchorShifts: Uint8Array | Uint16Array | undefined;
  /** The key as latin1 text holds it (an event too long to hold is scrubbed byte for byte). */
  #latin1Key: string | undefined;
  readonly #write: (out: Buffer | string) => void;
  /** The client's protocol, in which an account refusal is told; undefined: the error's own shape's. */
  readonly #protocol: Protocol | undefined;
  /** An event that may be an error, held until its end; null when nothing is held. */
  #held: EventAligner | null = null;

  /** `channelKey`: the channel's key, scrubbed by value (none: key shapes only). */
  constructor(channelKey: string | undefined, write: (out: Buffer | string) => void, protocol?: Protocol) {
    this.#key = channelKey;
    this.#protocol = protocol;
    this.#anchor = keyAnchor(channelKey);
    this.#anchorBuf = this.#anchor === undefined ? undefined : Buffer.from(this.#anchor);
    this.#anchorShifts = this.#anchorBuf === undefined ? undefined : horspoolShifts(this.#anchorBuf);
    this.#write = write;
  }

  /** Whether a chunk may hold the channel's key (its anchor): one search. */
  #mayHoldKey(out: Buffer | string): boolean {
    if (this.#anchor === undefined) return false;
    return typeof out === 'string' ? out.includes(this.#anchor) : indexOfPattern(out, this.#anchorBuf!, this.#anchorShifts!) >= 0;
  }

  /** Whether a decoded chunk must be read event by event: it may hold an error event, or the key. */
  #mayNeedScrub(buf: Buffer): boolean {
    return mayHoldErrorEvent(buf) || this.#mayHoldKey(buf);
  }

  /** Writes `out` (a chunk for the client: whole events or whole lines), its error events scrubbed. */
  push(out: Buffer | string): void {
    if (this.#held === null) {
      // The hot path: no error event, no key, nothing held. A string is only encoded when it holds
      // `error` or the key's anchor.
      if ((typeof out === 'string' ? !out.includes('error') : indexOfError(out) < 0) && !this.#mayHoldKey(out)) return this.#write(out);
      const buf = typeof out === 'string' ? Buffer.from(out) : out;
      if (!this.#mayNeedScrub(buf)) return this.#write(out);
      const end = lastEventEnd(buf);
      if (end === buf.length) return this.#write(this.#events(buf) ?? out);
      if (end > 0) this.#write(this.#events(buf.subarray(0, end)) ?? buf.subarray(0, end));
      const tail = buf.subarray(end);
      if (!this.#mayNeedScrub(tail)) return this.#write(tail);
      this.#held = new EventAligner();
      return this.#released(this.#held.push(tail));
    }
    this.#released(this.#held.push(typeof out === 'string' ? Buffer.from(out) : out));
  }

  /** At the stream's end (clean or cut): what is held, as one event, scrubbed if it is an error. */
  flush(): void {
    if (this.#held === null) return;
    const rest = this.#held.rest();
    this.#held = null;
    if (rest.length > 0) this.#write(this.#events(rest) ?? rest);
  }

  /** What the held event's aligner gave back: whole events, or (past MAX_HELD_EVENT) all it held. */
  #released(out: Buffer): void {
    if (this.#held !== null && this.#held.heldBytes === 0) this.#held = null;
    if (out.length === 0) return;
    if (lastEventEnd(out) === out.length) return this.#write(this.#events(out) ?? out);
    // An event longer than can be held: scrubbed as text when it looks like an error, byte for byte
    // (latin1: it may end inside a UTF-8 character).
    const text = out.toString('latin1');
    if (!ERROR_EVENT_LINE.test(text) && !text.includes('"error"') && !(this.#anchor !== undefined && text.includes(this.#latin1(this.#anchor)))) return this.#write(out);
    // Made when first needed: every stream makes a scrubber, few hold an event this long.
    if (this.#latin1Key === undefined && this.#key !== undefined) this.#latin1Key = this.#latin1(this.#key);
    const scrubbed = scrubKeyText(text, this.#latin1Key);
    this.#write(scrubbed === text ? out : Buffer.from(scrubbed, 'latin1'));
  }

  /** UTF-8 text as latin1 decoding reads its bytes. */
  #latin1(s: string): string {
    return Buffer.from(s).toString('latin1');
  }

  /** Whole events (the last may lack its empty line at the stream's end) scrubbed; null when none changed. */
  #events(buf: Buffer): string | null {
    const text = buf.toString('utf8');
    let out = '';
    let copied = 0;
    let changed = false;
    let eventStart = 0;
    let lineStart = 0;
    BREAKS.lastIndex = 0;
    for (let m = BREAKS.exec(text); ; m = BREAKS.exec(text)) {
      // An event ends at an empty line, or at the end of the text.
      const end = m === null ? text.length : m.index === lineStart ? BREAKS.lastIndex : -1;
      if (end > eventStart) {
        const event = text.slice(eventStart, end);
        let scrubbed = event.includes('error') ? scrubErrorEvent(event, this.#key, this.#protocol) : null;
        if (scrubbed === null && this.#anchor !== undefined && event.includes(this.#anchor)) scrubbed = scrubOddEvent(event, this.#key);
        if (scrubbed !== null) {
          out += text.slice(copied, eventStart) + scrubbed;
          copied = end;
          changed = true;
        }
        eventStart = end;
      }
      if (m === null) break;
      lineStart = BREAKS.lastIndex;
    }
    return changed ? out + text.slice(copied) : null;
  }
}

/** An event's `event:` name ('' without one) and its data: its `data:` lines' values joined by newlines. */
function eventFields(lines: readonly string[]): { name: string; data: string } {
  let name = '';
  const data: string[] = [];
  for (const l of lines) {
    if (l.startsWith('event:')) name = l.slice(6).trim();
    else if (l.startsWith('data:')) data.push(l.charCodeAt(5) === 0x20 ? l.slice(6) : l.slice(5));
  }
  return { name, data: data.join('\n') };
}

/**
 * One event's text (its lines and the empty line that ends it) with its error scrubbed; null when it
 * is no error event, or nothing in it needed scrubbing.
 */
export function scrubErrorEvent(event: string, key: string | undefined, protocol?: Protocol): string | null {
  const lines = event.split(BREAK);
  const { name, data: joined } = eventFields(lines);
  let parsed: unknown;
  if (joined.includes('"error"')) {
    try {
      parsed = JSON.parse(joined);
    } catch {
      parsed = undefined;
    }
  }
  // vLLM's (and older OpenAI-compatible servers') stream error: `{"object":"error","message":…}`.
  const error = isObject(parsed) && (Boolean(parsed.error) || parsed.type === 'error' || parsed.object === 'error');
  if (!error && name !== 'error') return null;
  if (isObject(parsed)) {
    try {
      const scrubbed = accountRefusal(parsed, joined, protocol) ?? scrubValue(parsed, key, 0);
      // Unchanged, it is scrubbed as text below: JSON.parse keeps the last of two members of one name,
      // so a key in the first was never seen by scrubValue.
      if (scrubbed !== parsed) {
        // The data as one line of the scrubbed JSON, where its first line was; the other lines kept.
        const br = BREAK.exec(event)?.[0] ?? '\n';
        let dataWritten = false;
        const out: string[] = [];
        for (const l of lines) {
          if (!l.startsWith('data:')) out.push(scrubKeyText(l, key));
          else if (!dataWritten) {
            dataWritten = true;
            out.push(`data: ${JSON.stringify(scrubbed)}`);
          }
        }
        return out.join(br);
      }
    } catch {
      // Nested too deep to write again: scrubbed as text below.
    }
  }
  const text = scrubKeyText(event, key);
  return text === event ? null : text;
}

/**
 * A provider's error event saying the channel's own account cannot pay (Anthropic's billing_error,
 * "credit balance is too low"; OpenAI's insufficient_quota), in the same protocol's words for the
 * gateway's fault: the client's SDK reads billing_error and insufficient_quota as its own balance
 * (the relay's own 402 says so), and the provider's message tells it to top up. Before a stream
 * starts the same answer moves to the next channel (the 500 of a channel refused when none is left);
 * mid-stream, nothing can be retried. Null for any other error.
 */
function accountRefusal(parsed: Record<string, unknown>, data: string, protocol: Protocol | undefined): Record<string, unknown> | null {
  if (!isAccountTrouble(data)) return null;
  // In the client's protocol whatever the provider's error looked like (an `error` that is a string,
  // vLLM's `{"object":"error"}`, an Anthropic error without its top-level type); without it known, in
  // the protocol the error's own shape is of.
  const anthropic = protocol === undefined ? parsed.type === 'error' : protocol === 'anthropic';
  if (anthropic) return { type: 'error', error: { type: 'api_error', message: PROVIDER_ACCOUNT_REFUSED } };
  if (protocol !== undefined || isObject(parsed.error)) return { error: { message: PROVIDER_ACCOUNT_REFUSED, type: 'server_error', param: null, code: null } };
  return null;
}

/**
 * An event that is no error event and may hold the key (its anchor): null when it is a well-formed
 * event of the protocols (a name Anthropic's stream uses or none, data that is JSON or `[DONE]` or
 * none), which passes as it is; else (an unknown name, data that is no JSON) it scrubbed of the key in
 * every JSON spelling and of key shapes, null when that changed nothing. Such data is not the
 * model's answer: no SDK reads it as one.
 */
export function scrubOddEvent(event: string, key: string | undefined): string | null {
  if (!holdsKey(event, key)) return null;
  const { name, data: joined } = eventFields(event.split(BREAK));
  if (KNOWN_EVENTS.has(name)) {
    let wellFormed = joined === '' || joined.trim() === '[DONE]';
    if (!wellFormed) {
      try {
        JSON.parse(joined);
        wellFormed = true;
      } catch {
        // No JSON: scrubbed below.
      }
    }
    if (wellFormed) return null;
  }
  const text = scrubKeyText(event, key);
  return text === event ? null : text;
}

/** `v` with every string in it (object keys included) scrubbed; `v` itself when nothing changed. */
export function scrubValue(v: unknown, key: string | undefined, depth: number): unknown {
  if (typeof v === 'string') return scrubCredentials(v, key);
  if (v === null || typeof v !== 'object') return v;
  if (depth > MAX_DEPTH) throw new RangeError('error data nested too deep');
  if (Array.isArray(v)) {
    let out: unknown[] | null = null;
    for (let i = 0; i < v.length; i++) {
      const s = scrubValue(v[i], key, depth + 1);
      if (s !== v[i] && out === null) out = v.slice();
      if (out !== null) out[i] = s;
    }
    return out ?? v;
  }
  let changed = false;
  const entries: [string, unknown][] = [];
  for (const [k, val] of Object.entries(v)) {
    const sk = scrubCredentials(k, key);
    const sv = scrubValue(val, key, depth + 1);
    if (sk !== k || sv !== val) changed = true;
    entries.push([sk, sv]);
  }
  if (!changed) return v;
  // Own data properties, as JSON.parse makes them (a `__proto__` key set by assignment would be the prototype).
  const out: Record<string, unknown> = {};
  for (const [k, val] of entries) Object.defineProperty(out, k, { value: val, enumerable: true, writable: true, configurable: true });
  return out;
}
