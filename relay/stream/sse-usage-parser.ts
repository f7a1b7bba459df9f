// Reads Anthropic's SSE stream as it passes through, chunk by chunk, and keeps only the usage:
// message_start (input and cache tokens, the cache writes split 5-minute / 1-hour), message_delta
// (output tokens, cache counts when restated, web searches) and error events are parsed;
// the lines of every other event are skipped by scanning for newlines, without decoding or copying.
// `event:` names are compared byte-wise with the few names of interest: no string per line, and no
// allocation per chunk unless a line of interest continues in the next chunk (its start is then kept
// in one reused buffer). Nothing of the stream is retained beyond one partial line.
//
// Content deltas: the `data:` payload of each content_block_delta event is handed over as raw bytes,
// still without decoding, to a sink (`pushDelta(buf, start, end)`: the bytes in place, valid only
// during the call; what DeliveredTextCounter in relay/token-count/ takes) or to a function (`(data) => …`:
// a view, valid only during the call: copy to keep).

import { Byte, DATA_PREFIX, LineCarry, lineEnd, rangeEquals, startsWith } from './sse-bytes.js';
import { usageCount } from './usage-count.js';

const EVENT = Buffer.from('event:');
const N_MESSAGE_START = Buffer.from('message_start');
const N_MESSAGE_DELTA = Buffer.from('message_delta');
const N_MESSAGE_STOP = Buffer.from('message_stop');
const N_CONTENT_BLOCK_DELTA = Buffer.from('content_block_delta');
const N_ERROR = Buffer.from('error');
/** How a data-only stream's content_block_delta payload begins (Anthropic's key order). */
const DATA_CONTENT_DELTA = Buffer.from('{"type":"content_block_delta"');

const enum Ev { None, MessageStart, MessageDelta, Error, ContentDelta, Other }

function eventOfType(type: unknown): Ev {
  switch (type) {
    case 'message_start': return Ev.MessageStart;
    case 'message_delta': return Ev.MessageDelta;
    case 'error': return Ev.Error;
    default: return Ev.Other;
  }
}

/** Takes content_block_delta payloads in place: buf[start, end) is valid only during the call. */
export interface ContentDeltaSink {
  pushDelta(buf: Buffer, start: number, end: number): void;
}

/** Anthropic's usage, as core/pricing's TokenUsage prices it. */
export interface StreamUsage {
  inputTokens: number;
  outputTokens: number;
  /** Every cache write, 5-minute and 1-hour. */
  cacheCreationTokens: number;
  /** The part of cacheCreationTokens written for an hour. */
  cacheCreation1hTokens: number;
  cacheReadTokens: number;
  /** usage.server_tool_use.web_search_requests: each search is billed apart (core/pricing/quota-cost.ts). */
  webSearchRequests?: number;
}

export class SseUsageParser implements StreamUsage {
  inputTokens = 0;
  outputTokens = 0;
  cacheCreationTokens = 0;
  cacheCreation1hTokens = 0;
  cacheReadTokens = 0;
  webSearchRequests = 0;
  sawMessageStart = false;
  /** The final usage arrived: a message_delta that states output_tokens (one without is only the stop reason). */
  sawMessageDelta = false;
  /**
   * The stream stated its input tokens (message_start, or restated by message_delta). A provider that
   * leaves them out has its prompt counted by the relay (stream-relay.ts), not billed as 0.
   */
  inputStated = false;
  sawMessageStop = false;
  /**
   * A message_delta came: the generation is over (unlike a content block's stop, after which another
   * block may follow). A provider that states the final usage in a later message_delta still owes it.
   */
  generationDone = false;
  /** Count of content_block_delta events passed through. */
  contentDeltas = 0;
  error: { type: string; message: string } | null = null;
  /** Receives the raw `data:` payload of every content_block_delta (a view into the chunk: copy to keep). */
  onContentDelta: ((data: Buffer) => void) | null;
  readonly #sink: ContentDeltaSink | null;

  #event = Ev.None;
  /** A line of interest that continues in a later chunk. */
  readonly #carry = new LineCarry();
  /** Inside a line that started in an earlier chunk and is of no interest. */
  #skipping = false;

  constructor(onContentDelta?: ((data: Buffer) => void) | ContentDeltaSink) {
    if (typeof onContentDelta === 'function') {
      this.onContentDelta = onContentDelta;
      this.#sink = null;
    } else {
      this.onContentDelta = null;
      this.#sink = onContentDelta ?? null;
    }
  }

  get #wantsDeltas(): boolean {
    return this.#sink !== null || this.onContentDelta !== null;
  }

  push(chunk: Buffer): void {
    let pos = 0;
    const len = chunk.length;
    if (this.#skipping) {
      const nl = chunk.indexOf(Byte.NL);
      if (nl < 0) return;
      this.#skipping = false;
      pos = nl + 1;
    } else if (this.#carry.carrying) {
      // A line spanning chunks is gathered and read when its end arrives.
      const nl = chunk.indexOf(Byte.NL);
      if (nl < 0) {
        this.#carry.append(chunk, 0, len);
        return;
      }
      const line = this.#carry.finish(chunk, nl);
      this.#line(line, 0, this.#carry.end);
      pos = nl + 1;
    }
    while (pos < len) {
      const c = chunk[pos];
      // The blank line that ends an event, found without a search.
      if (c === Byte.NL) {
        this.#event = Ev.None;
        pos++;
        continue;
      }
      if (c === Byte.CR && pos + 1 < len && chunk[pos + 1] === Byte.NL) {
        this.#event = Ev.None;
        pos += 2;
        continue;
      }
      const nl = chunk.indexOf(Byte.NL, pos);
      if (nl < 0) {
        this.#keepPartial(chunk, pos);
        return;
      }
      this.#line(chunk, pos, lineEnd(chunk, pos, nl));
      pos = nl + 1;
    }
  }

  #keepPartial(buf: Buffer, pos: number): void {
    // A data line of an event we skip needs only its end found, not its bytes.
    if (this.#event === Ev.Other && startsWith(buf, pos, buf.length, DATA_PREFIX)) {
      this.#skipping = true;
      return;
    }
    this.#carry.begin(buf, pos, buf.length);
  }

  #line(buf: Buffer, start: number, end: number): void {
    if (start === end) {
      this.#event = Ev.None;
      return;
    }
    const c = buf[start];
    if (c === 0x65 /* e */) {
      if (startsWith(buf, start, end, EVENT)) this.#eventLine(buf, start + EVENT.length, end);
      return;
    }
    if (c !== 0x64 /* d */ || !startsWith(buf, start, end, DATA_PREFIX)) return;
    const ev = this.#event;
    if (ev === Ev.Other) return;
    const from = start + DATA_PREFIX.length;
    if (ev === Ev.ContentDelta) {
      this.#delta(buf, from, end);
      return;
    }
    if (ev === Ev.None) {
      // Streams without `event:` lines carry the type in the data; a content delta needs no parse.
      let s = from;
      while (s < end && (buf[s] === Byte.SPACE || buf[s] === Byte.TAB)) s++;
      if (startsWith(buf, s, end, DATA_CONTENT_DELTA)) {
        this.contentDeltas++;
        if (this.#wantsDeltas) this.#delta(buf, from, end);
        return;
      }
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(buf.toString('utf8', from, end));
    } catch {
      return;
    }
    // JSON that is no object (`data: null`, `1`, `[]`) is no event of the protocol: skipped like a line
    // that does not parse. Read as one, `null` threw out of the provider body's 'data' handler.
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return;
    const payload = parsed as Record<string, unknown>;
    if (ev === Ev.None && payload.type === 'message_stop') {
      // A data-only stream's end: without it the stream would be taken for one cut short.
      this.sawMessageStop = true;
      return;
    }
    const kind = ev === Ev.None ? eventOfType(payload.type) : ev;
    if (kind === Ev.MessageStart) {
      const usage = (payload.message as { usage?: Record<string, unknown> } | undefined)?.usage;
      this.sawMessageStart = true;
      if (usage) {
        this.inputTokens = usageCount(usage.input_tokens);
        this.inputStated = typeof usage.input_tokens === 'number';
        this.cacheReadTokens = usageCount(usage.cache_read_input_tokens);
        this.outputTokens = usageCount(usage.output_tokens);
        this.cacheCreation1hTokens = 0;
        this.#cacheWrites(usage);
        this.webSearchRequests = webSearches(usage);
      }
    } else if (kind === Ev.MessageDelta) {
      this.generationDone = true;
      const usage = payload.usage as Record<string, unknown> | undefined;
      if (usage) {
        // message_delta's counts are cumulative; input may be restated by some providers. Without an
        // output count it is not the final usage: the delivered text is counted instead, else the
        // answer is billed message_start's placeholder output (1).
        if (typeof usage.output_tokens === 'number') {
          this.outputTokens = usageCount(usage.output_tokens);
          this.sawMessageDelta = true;
        }
        if (typeof usage.input_tokens === 'number') {
          this.inputTokens = usageCount(usage.input_tokens);
          this.inputStated = true;
        }
        // Anthropic restates the cache counts in the final message_delta; they are cumulative too.
        if (usage.cache_read_input_tokens !== undefined && usage.cache_read_input_tokens !== null) this.cacheReadTokens = usageCount(usage.cache_read_input_tokens);
        if (usage.cache_creation_input_tokens != null || usage.cache_creation != null) this.#cacheWrites(usage);
        // The searches happen during the generation: message_start says 0, the final delta all of them.
        if (usage.server_tool_use != null) this.webSearchRequests = Math.max(this.webSearchRequests, webSearches(usage));
      }
    } else if (kind === Ev.Other && ev === Ev.None && payload.type === 'content_block_delta') {
      // A content delta whose keys come in another order.
      this.contentDeltas++;
      if (this.#wantsDeltas) this.#delta(buf, from, end);
    } else if (kind === Ev.Error) {
      const err = payload.error as { type?: unknown; message?: unknown } | undefined;
      this.error = { type: String(err?.type ?? 'api_error'), message: String(err?.message ?? '') };
    }
  }

  #cacheWrites(usage: Record<string, unknown>): void {
    const split = usage.cache_creation as Record<string, unknown> | null | undefined;
    const total = usageCount(usage.cache_creation_input_tokens);
    if (split && typeof split === 'object') {
      this.cacheCreationTokens = cacheWrites(total, split);
      this.cacheCreation1hTokens = Math.min(usageCount(split.ephemeral_1h_input_tokens), this.cacheCreationTokens);
    } else {
      // A message_delta restates the total without the split: the 1-hour part message_start gave stays.
      this.cacheCreationTokens = Math.max(total, this.cacheCreation1hTokens);
    }
  }

  #delta(buf: Buffer, start: number, end: number): void {
    if (this.#sink) this.#sink.pushDelta(buf, start, end);
    else this.onContentDelta?.(buf.subarray(start, end));
  }

  /** `event:` line, name in buf[start, end) with surrounding whitespace. */
  #eventLine(buf: Buffer, start: number, end: number): void {
    while (start < end && (buf[start] === Byte.SPACE || buf[start] === Byte.TAB)) start++;
    while (end > start && (buf[end - 1] === Byte.SPACE || buf[end - 1] === Byte.TAB || buf[end - 1] === Byte.CR)) end--;
    let ev = Ev.Other;
    if (rangeEquals(buf, start, end, N_CONTENT_BLOCK_DELTA)) {
      this.contentDeltas++;
      if (this.#wantsDeltas) ev = Ev.ContentDelta;
    } else if (rangeEquals(buf, start, end, N_MESSAGE_DELTA)) ev = Ev.MessageDelta;
    else if (rangeEquals(buf, start, end, N_MESSAGE_START)) ev = Ev.MessageStart;
    else if (rangeEquals(buf, start, end, N_MESSAGE_STOP)) this.sawMessageStop = true;
    else if (rangeEquals(buf, start, end, N_ERROR)) ev = Ev.Error;
    this.#event = ev;
  }
}

/**
 * All cache writes: the split (cache_creation.ephemeral_5m/1h_input_tokens) when the provider gives
 * it, never less than its cache_creation_input_tokens; without the split every write is 5-minute.
 */
function cacheWrites(total: number, split: Record<string, unknown> | null | undefined): number {
  if (!split || typeof split !== 'object') return total;
  return Math.max(total, usageCount(split.ephemeral_5m_input_tokens) + usageCount(split.ephemeral_1h_input_tokens));
}

/** usage.server_tool_use.web_search_requests, 0 when absent. */
function webSearches(usage: Record<string, unknown>): number {
  const s = usage.server_tool_use as Record<string, unknown> | null | undefined;
  return s && typeof s === 'object' ? usageCount(s.web_search_requests) : 0;
}

/** Usage of a non-streaming Message JSON body; null when it does not state both input and output tokens. */
export function usageOfMessage(body: unknown): StreamUsage | null {
  const usage = (body as { usage?: Record<string, unknown> } | null)?.usage;
  // A usage without both counts (`"usage":{}`, output alone) bills its missing side as 0: the prompt or
  // the answer delivered free. Read as absent, the relay counts the answer instead.
  if (!usage || typeof usage.input_tokens !== 'number' || typeof usage.output_tokens !== 'number') return null;
  const split = usage.cache_creation as Record<string, unknown> | null | undefined;
  const cacheCreationTokens = cacheWrites(usageCount(usage.cache_creation_input_tokens), split);
  const searches = webSearches(usage);
  const u: StreamUsage = {
    inputTokens: usageCount(usage.input_tokens),
    outputTokens: usageCount(usage.output_tokens),
    cacheCreationTokens,
    cacheCreation1hTokens: split && typeof split === 'object' ? Math.min(usageCount(split.ephemeral_1h_input_tokens), cacheCreationTokens) : 0,
    cacheReadTokens: usageCount(usage.cache_read_input_tokens),
  };
  // Only when there were any, as the field is optional: most answers make no search.
  if (searches > 0) u.webSearchRequests = searches;
  return u;
}
