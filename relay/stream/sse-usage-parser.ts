// Reads Anthropic's SSE stream as it passes through, chunk by chunk, and keeps only the usage:
// message_start (input and cache tokens, the cache writes split 5-minute / 1-hour), message_delta
// (output tokens, cache counts when restated, web searches) and error events are parsed;
// the lines of every other event are skipped by scanning for line breaks, without decoding or copying.
// `event:` names are compared byte-wise with the few names of interest: no string per line, and no
// allocation per chunk unless a line of interest continues in the next chunk (its start is then kept
// in one reused buffer). Nothing of the stream is retained beyond one partial line (or one event's
// data lines, below).
//
// The framing is the SSE spec's, as the SDKs read it: a line ends with CRLF, LF or a lone CR
// (LineBreaks), and an event's data may span several `data:` lines, joined with newlines. A data line
// that ends an object is read at once, as every provider writes them; one that does not is kept and
// joined with the event's next data lines, and read at the blank line that ends the event.
//
// What is billed is what the provider states when it is a count, and the relay's own count otherwise
// (stream-relay.ts): a count below 0 is not stated (usage-count.ts), an input of 0 without cache
// tokens states no prompt (a prompt is at least one token), only the first message_start that states
// a usage counts, and message_delta's output, cumulative, never goes down.
//
// Content deltas: the `data:` payload of each content_block_delta event is handed over as raw bytes,
// still without decoding, to a sink (`pushDelta(buf, start, end)`: the bytes in place, valid only
// during the call; what DeliveredTextCounter in relay/token-count/ takes) or to a function (`(data) => …`:
// a view, valid only during the call: copy to keep). A delta line too long to carry whole
// (MAX_CARRIED_LINE) has its text handed to the sink's pushText piece by piece instead (StringPieces),
// so a client that received it is billed for it.

import { Byte, DATA_PREFIX, endsObject, keyedValue, LineBreaks, LineCarry, MAX_CARRIED_LINE, rangeEquals, startsWith, StringPieces, type TextPieceSink } from './sse-bytes.js';
import { isUsageCount, usageCount } from './usage-count.js';

const EVENT = Buffer.from('event:');
const N_MESSAGE_START = Buffer.from('message_start');
const N_MESSAGE_DELTA = Buffer.from('message_delta');
const N_MESSAGE_STOP = Buffer.from('message_stop');
const N_CONTENT_BLOCK_DELTA = Buffer.from('content_block_delta');
const N_ERROR = Buffer.from('error');
const N_PING = Buffer.from('ping');
/** How a data-only stream's content_block_delta payload begins (Anthropic's key order). */
const DATA_CONTENT_DELTA = Buffer.from('{"type":"content_block_delta"');
/** The keys of a delta's text (text_delta, thinking_delta, input_json_delta), for a delta too long to carry. */
const TEXT_KEYS = [Buffer.from('"text"'), Buffer.from('"thinking"'), Buffer.from('"partial_json"')];
const NEWLINE = Buffer.from('\n');
const EMPTY = Buffer.alloc(0);

const enum Ev { None, MessageStart, MessageDelta, Error, ContentDelta, Other }

/** What the scanner is in the middle of: a line start, a line carried, one skipped, one's text streamed. */
const enum Mode { Lines, Carrying, Skipping, Streaming }

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
  /** The text of a delta too long to be handed over whole, piece by piece (DeliveredTextCounter has it). */
  pushText?(buf: Buffer, start: number, end: number): void;
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
  /**
   * An OpenAI-format answer says the `flex` service tier served it (its `service_tier`, beside the
   * usage): billed at the channel's flex ratio when the request asked for flex (settlement.ts).
   */
  flexServed?: boolean;
}

/**
 * A usage as an answer states it. A side it does not state as a count is marked (the flag is absent
 * otherwise, so a usage stated in full is a plain StreamUsage): its figure there is 0, and the relay
 * counts that side instead (messages-handler.ts).
 */
export interface StatedUsage extends StreamUsage {
  /** The input is absent, below 0, or 0 with no cache token: the prompt is counted. */
  inputUnstated?: true;
  /** output_tokens is absent or below 0: the answer's text is counted. */
  outputUnstated?: true;
}

/** Whether a usage states a prompt: input ≥ 0, and at least one prompt token with the cache tokens. */
function statesInput(input: unknown, cacheTokens: number): boolean {
  return isUsageCount(input) && (input > 0 || cacheTokens > 0);
}

export class SseUsageParser implements StreamUsage {
  inputTokens = 0;
  outputTokens = 0;
  cacheCreationTokens = 0;
  cacheCreation1hTokens = 0;
  cacheReadTokens = 0;
  webSearchRequests = 0;
  sawMessageStart = false;
  /** The final usage arrived: a message_delta that states output_tokens as a count (one without is only the stop reason). */
  sawMessageDelta = false;
  /**
   * The stream stated its input tokens (message_start, or restated by message_delta) as a count of a
   * prompt. A provider that leaves them out, or states nonsense, has its prompt counted by the relay
   * (stream-relay.ts), not billed as 0.
   */
  inputStated = false;
  sawMessageStop = false;
  /**
   * message_stop's event ended (the blank line after it): at this index of the chunk last pushed, 0
   * for the chunks pushed after it, -1 before. What follows is not read.
   */
  endedAt = -1;
  /**
   * The stream ended as an answer does: message_stop after a message_start. A stream of message_stop
   * alone is no answer (nothing says what message it ends): it ends as failed, as one cut before its
   * message_stop does; passed as complete, its client got a 200 of that one event, which the SDK's
   * MessageStream rejects as out of order and a raw reader took for an empty answer.
   */
  get complete(): boolean {
    return this.sawMessageStop && this.sawMessageStart;
  }
  /**
   * A message_delta came: the generation is over (unlike a content block's stop, after which another
   * block may follow). A provider that states the final usage in a later message_delta still owes it.
   */
  generationDone = false;
  /** Count of content_block_delta events passed through. */
  contentDeltas = 0;
  /** Content came after the last stated output: that output does not cover it (stream-relay.ts bills the larger). */
  contentAfterUsage = false;
  /** Events other than keep-alives (pings, comments), and pieces of an overlong delta: the stall check's progress. */
  events = 0;
  error: { type: string; message: string } | null = null;
  /** Receives the raw `data:` payload of every content_block_delta (a view into the chunk: copy to keep). */
  onContentDelta: ((data: Buffer) => void) | null;
  readonly #sink: ContentDeltaSink | null;
  /** Where an overlong delta's text goes: the sink, when it takes pieces. */
  readonly #pieces: TextPieceSink | null;

  #event = Ev.None;
  /** A message_start with a usage was read: later ones are not. */
  #startRead = false;
  #mode = Mode.Lines;
  readonly #breaks = new LineBreaks();
  /** A line of interest that continues in a later chunk. */
  readonly #carry = new LineCarry();
  /** The carried line is a content delta's data line (its text is streamed should it grow too long). */
  #carryText = false;
  /** The data lines of the current event, while they do not end an object (joined with newlines). */
  readonly #data = new LineCarry();
  /** #data holds an event's data lines (a field, not its getter: read on every data line). */
  #joining = false;
  readonly #string = new StringPieces();

  constructor(onContentDelta?: ((data: Buffer) => void) | ContentDeltaSink) {
    if (typeof onContentDelta === 'function') {
      this.onContentDelta = onContentDelta;
      this.#sink = null;
    } else {
      this.onContentDelta = null;
      this.#sink = onContentDelta ?? null;
    }
    this.#pieces = this.#sink !== null && typeof this.#sink.pushText === 'function' ? (this.#sink as TextPieceSink) : null;
  }

  get #wantsDeltas(): boolean {
    return this.#sink !== null || this.onContentDelta !== null;
  }

  push(chunk: Buffer): void {
    // After the stream's end nothing is read: it is no part of the answer (stream-relay.ts).
    if (this.endedAt >= 0) {
      this.endedAt = 0;
      return;
    }
    const len = chunk.length;
    const breaks = this.#breaks;
    let pos = breaks.start(chunk);
    while (pos < len) {
      if (this.#mode !== Mode.Lines) {
        pos = this.#continue(chunk, pos);
        continue;
      }
      const c = chunk[pos];
      // The blank line that ends an event, found without a search.
      if (c === Byte.NL || c === Byte.CR) {
        this.#endEvent();
        pos = breaks.after(chunk, pos);
        if (this.sawMessageStop) {
          this.endedAt = pos;
          return;
        }
        continue;
      }
      const br = breaks.find(chunk, pos);
      if (br < 0) {
        this.#keepPartial(chunk, pos);
        return;
      }
      this.#line(chunk, pos, br);
      pos = breaks.after(chunk, br);
    }
  }

  /** Reads on in the current mode from chunk[pos]: the index where line scanning resumes (or the chunk's length). */
  #continue(chunk: Buffer, pos: number): number {
    const len = chunk.length;
    const br = this.#breaks.find(chunk, pos);
    switch (this.#mode) {
      case Mode.Skipping:
        if (br < 0) return len;
        this.#mode = Mode.Lines;
        return this.#breaks.after(chunk, br);
      case Mode.Carrying: {
        const carry = this.#carry;
        if (br < 0) {
          if (this.#carryText && carry.bytes + (len - pos) > MAX_CARRIED_LINE && this.#streamText(carry.buffer, 0, carry.bytes)) {
            carry.drop();
            return pos;
          }
          carry.append(chunk, pos, len);
          return len;
        }
        this.#mode = Mode.Lines;
        const line = carry.finishAt(chunk, pos, br);
        // end 0: a line dropped past MAX_CARRIED_LINE (a carried line has at least one byte).
        if (carry.end > 0) this.#line(line, 0, carry.end);
        return this.#breaks.after(chunk, br);
      }
      default: {
        // Streaming an overlong delta's text: its closing quote comes before the line's end.
        this.events++;
        const end = br < 0 ? len : br;
        const quote = this.#string.feed(chunk, pos, end, this.#pieces);
        if (quote >= 0) {
          // The rest of the line closes the delta's objects: nothing in it is billed.
          this.#mode = Mode.Skipping;
          return quote + 1;
        }
        if (br < 0) return len;
        // A line that ends inside the string is no JSON: what passed was counted, the rest is dropped.
        this.#mode = Mode.Lines;
        return this.#breaks.after(chunk, br);
      }
    }
  }

  #keepPartial(buf: Buffer, pos: number): void {
    const end = buf.length;
    if (!startsWith(buf, pos, end, DATA_PREFIX)) {
      this.#beginCarry(buf, pos, false);
      return;
    }
    const ev = this.#event;
    // A data line of an event we skip needs only its end found, not its bytes.
    if (ev === Ev.Other) {
      this.#mode = Mode.Skipping;
      return;
    }
    const text = this.#pieces !== null && !this.#joining && (ev === Ev.ContentDelta || (ev === Ev.None && this.#dataOnlyDelta(buf, pos + DATA_PREFIX.length, end)));
    if (text && end - pos > MAX_CARRIED_LINE && this.#streamText(buf, pos, end)) return;
    this.#beginCarry(buf, pos, text);
  }

  #beginCarry(buf: Buffer, pos: number, text: boolean): void {
    this.#carry.begin(buf, pos, buf.length);
    this.#carryText = text;
    this.#mode = Mode.Carrying;
  }

  /** A data-only stream's data line buf[from, end) is a content_block_delta (Anthropic's key order). */
  #dataOnlyDelta(buf: Buffer, from: number, end: number): boolean {
    let s = from;
    while (s < end && (buf[s] === Byte.SPACE || buf[s] === Byte.TAB)) s++;
    return startsWith(buf, s, end, DATA_CONTENT_DELTA);
  }

  /**
   * A content delta's data line buf[start, end), too long to carry, whose text value begins in it: its
   * text streamed to the sink from here on (Mode.Streaming), and true; false when no text begins in it
   * (the line is then dropped, as any overlong line).
   */
  #streamText(buf: Buffer, start: number, end: number): boolean {
    let v = -1;
    for (const key of TEXT_KEYS) {
      const at = keyedValue(buf, key, start, end, Byte.QUOTE);
      if (at >= 0 && (v < 0 || at < v)) v = at;
    }
    if (v < 0) return false;
    // A data-only stream's delta is counted here: its line is never read whole.
    if (this.#event === Ev.None) this.contentDeltas++;
    this.#noteContent();
    this.#string.begin();
    const quote = this.#string.feed(buf, v + 1, end, this.#pieces);
    this.#mode = quote >= 0 ? Mode.Skipping : Mode.Streaming;
    return true;
  }

  /** The blank line that ends an event: data lines kept for joining are read now. */
  #endEvent(): void {
    if (this.#joining) {
      this.#joining = false;
      const data = this.#data;
      const joined = data.finishAt(EMPTY, 0, 0);
      // end 0: data past MAX_CARRIED_LINE, dropped.
      if (data.end > 0) this.#payload(joined, 0, data.end);
    }
    this.#event = Ev.None;
  }

  #line(buf: Buffer, start: number, end: number): void {
    // The rest of message_stop's event: nothing in it is read.
    if (this.sawMessageStop) return;
    if (start === end) {
      this.#endEvent();
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
    if (this.#joining) {
      // A later data line of an event whose data does not end yet: joined as the spec says.
      this.#data.append(NEWLINE, 0, 1);
      this.#data.append(buf, from, end);
      return;
    }
    if (!endsObject(buf, from, end)) {
      this.#data.begin(buf, from, end);
      this.#joining = true;
      return;
    }
    // The common case, a whole content delta on one line, handed over without further dispatch.
    if (ev === Ev.ContentDelta) {
      if (this.sawMessageDelta) this.contentAfterUsage = true;
      this.#delta(buf, from, end);
      return;
    }
    this.#payload(buf, from, end);
  }

  /** The data of one event, buf[from, end). */
  #payload(buf: Buffer, from: number, end: number): void {
    const ev = this.#event;
    if (ev === Ev.ContentDelta) {
      this.#noteContent();
      this.#delta(buf, from, end);
      return;
    }
    // Streams without `event:` lines carry the type in the data; a content delta needs no parse.
    if (ev === Ev.None && this.#dataOnlyDelta(buf, from, end)) {
      this.contentDeltas++;
      this.events++;
      this.#noteContent();
      if (this.#wantsDeltas) this.#delta(buf, from, end);
      return;
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
    if (ev === Ev.None) {
      // A data-only stream's keep-alive is no progress; its other events are.
      if (payload.type === 'ping') return;
      this.events++;
      if (payload.type === 'message_stop') {
        // A data-only stream's end: without it the stream would be taken for one cut short.
        this.sawMessageStop = true;
        return;
      }
    }
    const kind = ev === Ev.None ? eventOfType(payload.type) : ev;
    if (kind === Ev.MessageStart) {
      this.sawMessageStart = true;
      // One message per stream: a second message_start (a provider's retry, a proxy's splice) would
      // reset what the first stated, the output included after the final usage. The first that
      // states a usage is read; one without (`"message":null`) leaves the next its place.
      if (this.#startRead) return;
      const usage = (payload.message as { usage?: Record<string, unknown> } | null | undefined)?.usage;
      if (usage && typeof usage === 'object') {
        this.#startRead = true;
        this.inputTokens = usageCount(usage.input_tokens);
        this.cacheReadTokens = usageCount(usage.cache_read_input_tokens);
        this.outputTokens = usageCount(usage.output_tokens);
        this.cacheCreation1hTokens = 0;
        this.#cacheWrites(usage);
        this.inputStated = statesInput(usage.input_tokens, this.cacheReadTokens + this.cacheCreationTokens);
        this.webSearchRequests = webSearches(usage);
      }
    } else if (kind === Ev.MessageDelta) {
      this.generationDone = true;
      const usage = payload.usage as Record<string, unknown> | undefined;
      if (usage && typeof usage === 'object') {
        // message_delta's counts are cumulative; input may be restated by some providers. Without an
        // output count it is not the final usage: the delivered text is counted instead, else the
        // answer is billed message_start's placeholder output (1). A later, smaller one does not
        // lower what an earlier one stated.
        if (isUsageCount(usage.output_tokens)) {
          const output = usageCount(usage.output_tokens);
          this.outputTokens = this.sawMessageDelta ? Math.max(this.outputTokens, output) : output;
          this.sawMessageDelta = true;
          this.contentAfterUsage = false;
        }
        // Anthropic restates the cache counts in the final message_delta; they are cumulative too.
        if (usage.cache_read_input_tokens !== undefined && usage.cache_read_input_tokens !== null) this.cacheReadTokens = usageCount(usage.cache_read_input_tokens);
        if (usage.cache_creation_input_tokens != null || usage.cache_creation != null) this.#cacheWrites(usage);
        if (statesInput(usage.input_tokens, this.cacheReadTokens + this.cacheCreationTokens)) {
          this.inputTokens = usageCount(usage.input_tokens);
          this.inputStated = true;
        }
        // The searches happen during the generation: message_start says 0, the final delta all of them.
        if (usage.server_tool_use != null) this.webSearchRequests = Math.max(this.webSearchRequests, webSearches(usage));
      }
    } else if (kind === Ev.Other && ev === Ev.None && payload.type === 'content_block_delta') {
      // A content delta whose keys come in another order.
      this.contentDeltas++;
      this.#noteContent();
      if (this.#wantsDeltas) this.#delta(buf, from, end);
    } else if (kind === Ev.Error) {
      const err = payload.error as { type?: unknown; message?: unknown } | undefined;
      // Read as strings only: String() of a provider's object whose `toString` is no function throws.
      this.error = { type: typeof err?.type === 'string' ? err.type : 'api_error', message: typeof err?.message === 'string' ? err.message : '' };
    }
  }

  #noteContent(): void {
    if (this.sawMessageDelta) this.contentAfterUsage = true;
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
      else this.#noteContent();
    } else if (rangeEquals(buf, start, end, N_MESSAGE_DELTA)) ev = Ev.MessageDelta;
    else if (rangeEquals(buf, start, end, N_MESSAGE_START)) ev = Ev.MessageStart;
    else if (rangeEquals(buf, start, end, N_MESSAGE_STOP)) this.sawMessageStop = true;
    else if (rangeEquals(buf, start, end, N_ERROR)) ev = Ev.Error;
    // Keep-alives say nothing of the generation: a stream of pings alone is stalled (reservation-heartbeat.ts).
    if (ev !== Ev.Other || !rangeEquals(buf, start, end, N_PING)) this.events++;
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

/**
 * Usage of a non-streaming Message JSON body; null when it states neither input nor output tokens as
 * a count. A side it does not state is marked (StatedUsage) for the relay to count.
 */
export function usageOfMessage(body: unknown): StatedUsage | null {
  const usage = (body as { usage?: Record<string, unknown> } | null)?.usage;
  // A usage without a count (`"usage":{}`, `-5`) would bill its side as 0: the prompt or the answer
  // delivered free. Read as absent, the relay counts that side instead.
  if (!usage || typeof usage !== 'object') return null;
  const outputStated = isUsageCount(usage.output_tokens);
  if (!isUsageCount(usage.input_tokens) && !outputStated) return null;
  const split = usage.cache_creation as Record<string, unknown> | null | undefined;
  const cacheCreationTokens = cacheWrites(usageCount(usage.cache_creation_input_tokens), split);
  const cacheReadTokens = usageCount(usage.cache_read_input_tokens);
  const searches = webSearches(usage);
  const u: StatedUsage = {
    inputTokens: usageCount(usage.input_tokens),
    outputTokens: usageCount(usage.output_tokens),
    cacheCreationTokens,
    cacheCreation1hTokens: split && typeof split === 'object' ? Math.min(usageCount(split.ephemeral_1h_input_tokens), cacheCreationTokens) : 0,
    cacheReadTokens,
  };
  // Only when there were any, as the field is optional: most answers make no search.
  if (searches > 0) u.webSearchRequests = searches;
  if (!statesInput(usage.input_tokens, cacheReadTokens + cacheCreationTokens)) u.inputUnstated = true;
  if (!outputStated) u.outputUnstated = true;
  return u;
}
