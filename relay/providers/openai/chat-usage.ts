// The usage of a Chat Completions answer, priced with the same formula as Anthropic's
// (core/pricing/quota-cost.ts): OpenAI's prompt_tokens includes the cached tokens
// (usage.prompt_tokens_details.cached_tokens), so input = prompt_tokens - cached_tokens and the cached
// ones are cache reads; completion_tokens (reasoning included) is the output, plus the reasoning a
// provider reports beside it (see usageOfChatUsage). OpenAI reports no cache writes.
//
// ChatStreamMeter reads a streamed answer as it passes, without decoding or parsing the ordinary
// chunks: `data: [DONE]` marks the end; only a chunk holding the key `"usage"` with an object value or
// the key `"error"` (a quoted key cannot occur inside a JSON string, whose quotes would be escaped) is
// parsed: the usage (the last chunk, with stream_options.include_usage) or a failure. In every other
// chunk the raw bytes of each `"content"`, `"reasoning_content"`, `"reasoning"` (OpenRouter, newer
// vLLM), `"refusal"` and tool-call `"arguments"` string are found in place and handed to the
// delivered-text counter (pushText, no copy), so that a cut stream is billed for the text delivered,
// as on the Anthropic path. A `"finish_reason"` with a string value says the generation is over
// (generationDone): only the usage chunk is still to come, which stream-relay.ts waits for even when
// the client has left. Nothing is kept but a line split across chunks. Keys are matched with the
// whitespace JSON allows after them (`"usage": {`, as Python's json.dumps writes it): matched only
// compact, such a provider's streams were billed no output.
//
// The framing is the SSE spec's (as in sse-usage-parser.ts): CRLF, LF or a lone CR end a line, and a
// data line that does not end its object is joined with the event's next data lines and read at the
// blank line. A chunk whose text is too long to carry whole (MAX_CARRIED_LINE) has that text handed to
// the counter piece by piece (StringPieces), and the rest of its line read as a tail.
//
// A usage is a count only when it is one (usage-count.ts): a prompt below 0, or of 0, states no input
// and the relay counts the prompt; a completion below 0 states no output and the relay counts what
// was delivered. A usage chunk is final only if no content follows it (`contentAfterUsage`): some
// servers state one before the content, or with every chunk; stream-relay.ts then bills the larger of
// the stated and the delivered counts. Cumulative, a later usage never lowers the output.
import {
  Byte, DATA_PREFIX, LineBreaks, LineCarry, MAX_CARRIED_LINE, StringPieces, closingQuote, endsObject, indexOfBytes, startsWith, valueAfterKey,
} from '../../stream/sse-bytes.js';
import type { StatedUsage } from '../../stream/sse-usage-parser.js';
import type { DeliveredTextSink, StreamMeter } from '../provider.js';
import { MAX_USAGE_COUNT, isUsageCount, usageCount } from '../../stream/usage-count.js';

/**
 * Our usage of a Chat Completions `usage` object; null when it states neither prompt nor completion
 * tokens as a count. A side it does not state is marked (StatedUsage) for the relay to count.
 */
export function usageOfChatUsage(usage: unknown): StatedUsage | null {
  if (!usage || typeof usage !== 'object') return null;
  const u = usage as Record<string, unknown>;
  // A count below 0 (or no number) bills its side as 0: read as absent, the relay counts that side.
  const inputStated = isUsageCount(u.prompt_tokens) && u.prompt_tokens > 0;
  const outputStated = isUsageCount(u.completion_tokens);
  if (!isUsageCount(u.prompt_tokens) && !outputStated) return null;
  const prompt = inputStated ? usageCount(u.prompt_tokens) : 0;
  const d = u.prompt_tokens_details;
  const details = d !== null && typeof d === 'object' ? d as Record<string, unknown> : null;
  const cached = Math.min(prompt, cachedTokensOf(u, details));
  const writes = Math.min(prompt - cached, cacheWritesOf(details));
  const hourWrites = Math.min(writes, hourCacheWritesOf(details));
  let output = usageCount(u.completion_tokens);
  // OpenAI counts reasoning inside completion_tokens; xAI and Gemini's OpenAI-compatible API report it
  // beside them (their total_tokens = prompt + completion + reasoning). Taken as OpenAI's, a grok
  // answer's reasoning, often most of its output, went unbilled. Only reasoning the total shows
  // outside the completion is added, so a total that adds up bills nothing twice.
  const outside = usageCount(u.total_tokens) - prompt - output;
  if (outside > 0) {
    const c = u.completion_tokens_details as Record<string, unknown> | null | undefined;
    const reasoning = c && typeof c === 'object' ? usageCount(c.reasoning_tokens) : 0;
    output = Math.min(MAX_USAGE_COUNT, output + Math.min(outside, reasoning));
  }
  const stated: StatedUsage = { inputTokens: prompt - cached - writes, outputTokens: output, cacheCreationTokens: writes, cacheCreation1hTokens: hourWrites, cacheReadTokens: cached };
  // A prompt of 0 is none: every request has at least one token (prompt_tokens counts the cached ones).
  if (!inputStated) stated.inputUnstated = true;
  if (!outputStated) stated.outputUnstated = true;
  return stated;
}

/**
 * The prompt's cache hits: OpenAI's prompt_tokens_details.cached_tokens, else DeepSeek's
 * prompt_cache_hit_tokens, else Moonshot's cached_tokens beside the counts (each part of
 * prompt_tokens). Read from the first that states a count, so a provider stating two is counted once;
 * without these, their hits were billed as full-price input.
 */
function cachedTokensOf(u: Record<string, unknown>, details: Record<string, unknown> | null): number {
  if (details !== null && isUsageCount(details.cached_tokens)) return usageCount(details.cached_tokens);
  if (isUsageCount(u.prompt_cache_hit_tokens)) return usageCount(u.prompt_cache_hit_tokens);
  return usageCount(u.cached_tokens);
}

/**
 * The prompt's cache writes, part of prompt_tokens: DashScope's explicit cache states them in
 * prompt_tokens_details.cache_creation_input_tokens (billed by it at 1.25×, as Anthropic's 5-minute
 * writes), OpenRouter (Claude and others behind it) in prompt_tokens_details.cache_write_tokens;
 * OpenAI's own, from GPT-5.6 on, in cache_write_tokens too (1.25×; before it, it billed no writes).
 * Billed as writes only when the request marked a breakpoint (settlement.ts usageWithinBound,
 * relay/messages/cache-control.ts cacheUseOfChat) or its model writes without one (core/pricing/ratios.ts
 * writesCacheUnmarked).
 */
function cacheWritesOf(details: Record<string, unknown> | null): number {
  if (details === null) return 0;
  return isUsageCount(details.cache_creation_input_tokens) ? usageCount(details.cache_creation_input_tokens) : usageCount(details.cache_write_tokens);
}

/** The part of the writes made for an hour (prompt_tokens_details.cache_creation.ephemeral_1h_input_tokens). */
function hourCacheWritesOf(details: Record<string, unknown> | null): number {
  const creation = details?.cache_creation as Record<string, unknown> | null | undefined;
  return creation && typeof creation === 'object' ? usageCount(creation.ephemeral_1h_input_tokens) : 0;
}

/**
 * A chunk's or answer's usage: at its top level, else in a choice (Moonshot's stream puts it in the
 * finish chunk's choices[0].usage, and may restate it at the top level after: a usage is a total,
 * read, never added).
 */
function usageObjectOf(c: { usage?: unknown; choices?: unknown }): unknown {
  if (c.usage !== null && typeof c.usage === 'object') return c.usage;
  if (!Array.isArray(c.choices)) return undefined;
  for (const choice of c.choices as unknown[]) {
    const u = (choice as { usage?: unknown } | null)?.usage;
    if (u !== null && typeof u === 'object') return u;
  }
  return undefined;
}

export function usageOfChatBody(body: Buffer): StatedUsage | null {
  let c: unknown;
  try {
    c = JSON.parse(body.toString('utf8'));
  } catch {
    return null;
  }
  if (c === null || typeof c !== 'object') return null;
  const usage = usageOfChatUsage(usageObjectOf(c as { usage?: unknown; choices?: unknown }));
  if (usage !== null && (c as { service_tier?: unknown }).service_tier === 'flex') usage.flexServed = true;
  return usage;
}

/** What a Chat Completion delivers: every choice's text, reasoning, refusal and tool-call arguments; null when the body is not one. */
export function textOfChatBody(body: Buffer): string | null {
  let c: { choices?: unknown };
  try {
    c = JSON.parse(body.toString('utf8')) as { choices?: unknown };
  } catch {
    return null;
  }
  if (!c || typeof c !== 'object' || !Array.isArray(c.choices)) return null;
  const parts: string[] = [];
  for (const choice of c.choices as Array<{ message?: { content?: unknown; reasoning_content?: unknown; reasoning?: unknown; refusal?: unknown; tool_calls?: unknown } } | null>) {
    const m = choice?.message;
    if (!m || typeof m !== 'object') continue;
    if (typeof m.content === 'string') parts.push(m.content);
    else if (Array.isArray(m.content)) for (const p of m.content as Array<{ text?: unknown } | null>) if (typeof p?.text === 'string') parts.push(p.text);
    // The reasoning is generated output billed as such, under whichever name the provider gives it;
    // a refusal is the answer's text in a field of its own.
    if (typeof m.reasoning_content === 'string') parts.push(m.reasoning_content);
    if (typeof m.reasoning === 'string') parts.push(m.reasoning);
    if (typeof m.refusal === 'string') parts.push(m.refusal);
    if (Array.isArray(m.tool_calls)) {
      for (const t of m.tool_calls as Array<{ function?: { arguments?: unknown } } | null>) if (typeof t?.function?.arguments === 'string') parts.push(t.function.arguments);
    }
  }
  return parts.join('\n');
}

const DONE = Buffer.from('[DONE]');
/**
 * The byte sequences looked for, none of which can occur inside a JSON string (its quotes would be
 * escaped): the usage and error keys (their chunk is parsed), the finish_reason, then the string
 * values that are delivered output: the text, the reasoning (under both names providers use), the
 * refusal, the tool-call arguments.
 */
const NEEDLES = [
  Buffer.from('"usage"'), Buffer.from('"error"'), Buffer.from('"finish_reason"'),
  Buffer.from('"content"'), Buffer.from('"reasoning_content"'), Buffer.from('"reasoning"'), Buffer.from('"refusal"'), Buffer.from('"arguments"'),
];
/** The first byte of the value each needle's key must have: an object, anything, then strings (`null` is no finish nor text). */
const VALUE_FIRST = [Byte.LBRACE, -1, Byte.QUOTE, Byte.QUOTE, Byte.QUOTE, Byte.QUOTE, Byte.QUOTE, Byte.QUOTE];
const USAGE = 0;
const ERROR = 1;
const FINISH = 2;
const FIRST_TEXT = 3;
const CONTENT = 3;
const REASONING_CONTENT = 4;
const REASONING = 5;
const REFUSAL = 6;
const ARGUMENTS = 7;

/** Whether buf holds `needle` at `at`. */
function holdsAt(buf: Buffer, at: number, needle: Buffer): boolean {
  const n = needle.length;
  if (at + n > buf.length) return false;
  for (let j = 1; j < n; j++) if (buf[at + j] !== needle[j]) return false;
  return true;
}

/** The needle (an index of NEEDLES) that buf holds at `at`, a quote, or -1. */
function needleAt(buf: Buffer, at: number): number {
  switch (buf[at + 1]) {
    case 0x75: return holdsAt(buf, at, NEEDLES[USAGE]!) ? USAGE : -1;
    case 0x65: return holdsAt(buf, at, NEEDLES[ERROR]!) ? ERROR : -1;
    case 0x66: return holdsAt(buf, at, NEEDLES[FINISH]!) ? FINISH : -1;
    case 0x63: return holdsAt(buf, at, NEEDLES[CONTENT]!) ? CONTENT : -1;
    case 0x61: return holdsAt(buf, at, NEEDLES[ARGUMENTS]!) ? ARGUMENTS : -1;
    case 0x72:
      if (holdsAt(buf, at, NEEDLES[REASONING]!)) return REASONING;
      if (holdsAt(buf, at, NEEDLES[REASONING_CONTENT]!)) return REASONING_CONTENT;
      return holdsAt(buf, at, NEEDLES[REFUSAL]!) ? REFUSAL : -1;
    default: return -1;
  }
}


const NEWLINE = Buffer.from('\n');
const EMPTY = Buffer.alloc(0);

/** What the scanner is in the middle of: a line start, a line carried, an overlong text streamed, or that line's tail carried. */
const enum Mode { Lines, Carrying, Streaming, Tail }

export class ChatStreamMeter implements StreamMeter {
  inputTokens = 0;
  outputTokens = 0;
  cacheCreationTokens = 0;
  cacheCreation1hTokens = 0;
  cacheReadTokens = 0;
  sawMessageStart = false;
  /** A usage chunk stated the output as a count. */
  sawMessageDelta = false;
  sawMessageStop = false;
  /**
   * `[DONE]`'s event ended (the blank line after it): at this index of the chunk last pushed, 0 for
   * the chunks pushed after it, -1 before. What follows is not read.
   */
  endedAt = -1;
  /**
   * `[DONE]`, or a finish_reason and the final usage after it: servers that close the stream without
   * `[DONE]` (several OpenAI-compatible ones do) sent a whole answer, which a client must get as one
   * rather than followed by a failed-stream event.
   */
  get complete(): boolean {
    // A [DONE] with no chunk before it is no answer (as a lone message_stop, sse-usage-parser.ts).
    return (this.sawMessageStop && this.sawMessageStart) || (this.generationDone && this.sawMessageDelta && !this.contentAfterUsage);
  }
  get wholeAtCleanEnd(): boolean {
    return this.complete || (this.generationDone && this.sawMessageStart);
  }
  /** A usage chunk stated the input as a count of a prompt: else the relay counts the prompt. */
  inputStated = false;
  /** The last usage chunk said the `flex` service tier served the answer. */
  flexServed = false;
  /** A choice has finished (finish_reason): what is still to come is the usage chunk, not generation. */
  generationDone = false;
  contentDeltas = 0;
  /** Content came after the last stated output: that usage does not cover it. */
  contentAfterUsage = false;
  /** Data lines (not comments nor blank lines), and pieces of an overlong text: the stall check's progress. */
  events = 0;
  error: { type: string; message: string } | null = null;
  readonly #sink: DeliveredTextSink | null;
  #mode = Mode.Lines;
  readonly #breaks = new LineBreaks();
  /** A line that continues in a later chunk. */
  readonly #carry = new LineCarry();
  /** The data lines of the current event, while they do not end an object (joined with newlines). */
  readonly #data = new LineCarry();
  readonly #string = new StringPieces();
  /**
   * Per needle, where it next occurs in the buffer being read (the chunk, or the carried line): -1
   * nowhere after, below the line's start when not yet looked for. Each needle is searched for once
   * per occurrence, not once per line (a chunk can hold hundreds of lines).
   */
  readonly #next = new Int32Array(NEEDLES.length);

  constructor(sink?: DeliveredTextSink) {
    this.#sink = sink ?? null;
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
    // The needles' positions found in another buffer are not positions in this chunk.
    this.#next.fill(-2);
    while (pos < len) {
      if (this.#mode !== Mode.Lines) {
        pos = this.#continue(chunk, pos);
        continue;
      }
      const br = breaks.find(chunk, pos);
      if (br < 0) {
        if (len - pos > MAX_CARRIED_LINE && this.#data.bytes === 0 && this.#streamOverlong(chunk, pos, len, false)) return;
        this.#carry.begin(chunk, pos, len);
        this.#mode = Mode.Carrying;
        return;
      }
      if (br > pos) this.#line(chunk, pos, br);
      else {
        this.#endEvent();
        if (this.sawMessageStop) {
          this.endedAt = breaks.after(chunk, br);
          return;
        }
      }
      pos = breaks.after(chunk, br);
    }
  }

  /** Reads on in the current mode from chunk[pos]: where line scanning resumes (or the chunk's length). */
  #continue(chunk: Buffer, pos: number): number {
    const len = chunk.length;
    const br = this.#breaks.find(chunk, pos);
    const carry = this.#carry;
    if (this.#mode === Mode.Streaming) {
      this.events++;
      const end = br < 0 ? len : br;
      const quote = this.#string.feed(chunk, pos, end, this.#sink);
      if (quote < 0) {
        if (br < 0) return len;
        // A line that ends inside the string is no JSON: what passed was counted.
        this.#mode = Mode.Lines;
        return this.#breaks.after(chunk, br);
      }
      // The rest of the line may hold more text (a reasoning then its content, tool arguments) and
      // the finish_reason: carried and read as a tail.
      if (br < 0) {
        if (quote + 1 < len) carry.begin(chunk, quote + 1, len);
        else carry.begin(EMPTY, 0, 0);
        this.#mode = Mode.Tail;
        return len;
      }
      this.#mode = Mode.Lines;
      this.#texts(chunk, quote + 1, br, true);
      return this.#breaks.after(chunk, br);
    }
    // Carrying a line, or an overlong line's tail.
    if (br < 0) {
      if (carry.bytes + (len - pos) > MAX_CARRIED_LINE && this.#data.bytes === 0 && this.#streamOverlong(carry.buffer, 0, carry.bytes, this.#mode === Mode.Tail)) {
        carry.drop();
        return pos;
      }
      carry.append(chunk, pos, len);
      return len;
    }
    const tail = this.#mode === Mode.Tail;
    this.#mode = Mode.Lines;
    const line = carry.finishAt(chunk, pos, br);
    const end = carry.end;
    this.#next.fill(-2);
    // A view that ends with the line: indexOf, which finds the needles, would otherwise search on
    // through the stale bytes after it in the reused buffer.
    if (tail) this.#texts(line.subarray(0, end), 0, end, true);
    else if (end > 0) this.#line(line.subarray(0, end), 0, end);
    this.#next.fill(-2);
    return this.#breaks.after(chunk, br);
  }

  /**
   * A line too long to carry, buf[start, end) its first part: the text strings it completes are
   * handed over, and the one it leaves open is streamed from here on (Mode.Streaming); true. False
   * when it is a data line with no open text (dropped, as any overlong line).
   */
  #streamOverlong(buf: Buffer, start: number, end: number, tail: boolean): boolean {
    let s = start;
    if (!tail) {
      if (!startsWith(buf, start, end, DATA_PREFIX)) return false;
      s = start + DATA_PREFIX.length;
      // The usage and error chunks are parsed whole: one this long is no such chunk the relay reads.
      this.#next.fill(-2);
      if (this.#value(buf, USAGE, s, end) >= 0 || this.#value(buf, ERROR, s, end) >= 0) return false;
      this.sawMessageStart = true;
      this.events++;
    }
    this.#next.fill(-2);
    const open = this.#texts(buf, s, end, false);
    this.#next.fill(-2);
    if (open < 0) return false;
    this.#string.begin();
    this.contentDeltas++;
    this.#noteContent();
    this.#string.feed(buf, open, end, this.#sink);
    this.#mode = Mode.Streaming;
    return true;
  }

  /** The blank line that ends an event: data lines kept for joining are read now. */
  #endEvent(): void {
    const data = this.#data;
    if (data.bytes === 0) return;
    const joined = data.finishAt(EMPTY, 0, 0);
    const end = data.end;
    this.#next.fill(-2);
    this.#payload(joined.subarray(0, end), 0, end);
    this.#next.fill(-2);
  }

  #line(buf: Buffer, start: number, end: number): void {
    // The rest of [DONE]'s event: nothing in it is read.
    if (this.sawMessageStop || !startsWith(buf, start, end, DATA_PREFIX)) return;
    let s = start + DATA_PREFIX.length;
    const data = this.#data;
    if (data.bytes > 0) {
      // A later data line of an event whose data does not end yet: joined as the spec says.
      data.append(NEWLINE, 0, 1);
      data.append(buf, s, end);
      return;
    }
    while (s < end && buf[s] === Byte.SPACE) s++;
    if (startsWith(buf, s, end, DONE)) {
      this.sawMessageStop = true;
      return;
    }
    if (!endsObject(buf, s, end)) {
      data.begin(buf, s, end);
      return;
    }
    this.#payload(buf, s, end);
  }

  /** One chunk's JSON, buf[s, end). */
  #payload(buf: Buffer, s: number, end: number): void {
    this.events++;
    this.#findAll(buf, s, end);
    // The chunk that carries the usage (once per stream) or an error is parsed whole.
    if (this.#value(buf, USAGE, s, end) >= 0 || this.#value(buf, ERROR, s, end) >= 0) {
      this.#parsed(buf, s, end);
      return;
    }
    this.sawMessageStart = true;
    this.#texts(buf, s, end, true);
  }

  /**
   * The finish_reason and the text strings of buf[s, end), found in place and handed over. A string
   * the range leaves open is not handed over: with `complete` it is ignored (-1), without it its
   * first byte is returned (#streamOverlong streams it); -1 when none is open.
   */
  #texts(buf: Buffer, s: number, end: number, complete: boolean): number {
    if (!this.generationDone && this.#value(buf, FINISH, s, end) >= 0) this.generationDone = true;
    let open = -1;
    for (let k = FIRST_TEXT; k < NEEDLES.length; k++) {
      let v = this.#value(buf, k, s, end);
      while (v >= 0) {
        const from = v + 1;
        const close = closingQuote(buf, from, end);
        if (close < 0) {
          if (!complete && (open < 0 || from < open)) open = from;
          break;
        }
        if (close > from) {
          this.contentDeltas++;
          this.#noteContent();
          this.#sink?.pushText(buf, from, close);
        }
        v = this.#value(buf, k, close + 1, end);
      }
    }
    return open;
  }

  #noteContent(): void {
    if (this.sawMessageDelta) this.contentAfterUsage = true;
  }

  /** Where the value of needle k's key begins in buf[from, end), when it begins as VALUE_FIRST says; else -1. */
  #value(buf: Buffer, k: number, from: number, end: number): number {
    const first = VALUE_FIRST[k]!;
    for (let at = this.#find(buf, k, from, end); at >= 0; at = this.#find(buf, k, at + 1, end)) {
      const v = valueAfterKey(buf, at + NEEDLES[k]!.length, end);
      if (v >= 0 && (first < 0 || buf[v] === first)) return v;
    }
    return -1;
  }

  /** Where needle k occurs in buf[from, end), or -1. */
  #find(buf: Buffer, k: number, from: number, end: number): number {
    let at = this.#next[k]!;
    if (at !== -1 && at < from) this.#next[k] = at = indexOfBytes(buf, NEEDLES[k]!, from);
    return at >= 0 && at + NEEDLES[k]!.length <= end ? at : -1;
  }

  /**
   * The next occurrence from `from` of every needle not known there: what #find would find for each,
   * asked from `from`; in one pass over buf[from, end) (a line: no needle runs past its end, a line
   * break), then from `end` for those the line does not hold. Only where every later question is
   * asked from `from` or after (a line's start), as #next then holds the first occurrence at or after it.
   */
  #findAll(buf: Buffer, from: number, end: number): void {
    const next = this.#next;
    let pending = 0;
    for (let k = 0; k < NEEDLES.length; k++) {
      const at = next[k]!;
      if (at !== -1 && at < from) {
        pending |= 1 << k;
        next[k] = -1;
      }
    }
    for (let i = from; pending !== 0 && i < end; i++) {
      if (buf[i] !== Byte.QUOTE) continue;
      const k = needleAt(buf, i);
      if (k >= 0 && (pending & (1 << k)) !== 0) {
        next[k] = i;
        pending &= ~(1 << k);
      }
    }
    for (let k = 0; pending !== 0; k++, pending >>>= 1) {
      if ((pending & 1) !== 0) next[k] = indexOfBytes(buf, NEEDLES[k]!, end);
    }
  }

  #parsed(buf: Buffer, start: number, end: number): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(buf.toString('utf8', start, end));
    } catch {
      return;
    }
    // An array holding a usage-like object is no chunk.
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return;
    const chunk = parsed as Record<string, unknown>;
    if (chunk.error && typeof chunk.error === 'object') {
      const e = chunk.error as { type?: unknown; code?: unknown; message?: unknown };
      // Read as strings only: String() of a provider's object whose `toString` is no function throws.
      const type = typeof e.type === 'string' ? e.type : typeof e.code === 'string' ? e.code : typeof e.code === 'number' ? String(e.code) : 'api_error';
      this.error = { type, message: typeof e.message === 'string' ? e.message : '' };
      return;
    }
    this.sawMessageStart = true;
    // Some providers put the last text in the usage chunk: counted like any other, before the usage
    // it rides with (which covers it).
    const choices = chunk.choices;
    if (Array.isArray(choices)) {
      for (const choice of choices as Array<{ delta?: { content?: unknown; reasoning_content?: unknown; reasoning?: unknown; refusal?: unknown; tool_calls?: unknown }; finish_reason?: unknown } | null>) {
        if (typeof choice?.finish_reason === 'string') this.generationDone = true;
        const delta = choice?.delta;
        if (!delta) continue;
        this.#text(delta.content);
        this.#text(delta.reasoning_content);
        this.#text(delta.reasoning);
        this.#text(delta.refusal);
        if (Array.isArray(delta.tool_calls)) {
          for (const call of delta.tool_calls as Array<{ function?: { arguments?: unknown } } | null>) this.#text(call?.function?.arguments);
        }
      }
    }
    const usage = usageOfChatUsage(usageObjectOf(chunk));
    if (usage) {
      // The tier is read with the usage it prices: the chunk that states it says which tier served.
      this.flexServed = chunk.service_tier === 'flex';
      if (!usage.inputUnstated) {
        this.inputTokens = usage.inputTokens;
        this.cacheReadTokens = usage.cacheReadTokens;
        this.cacheCreationTokens = usage.cacheCreationTokens;
        this.cacheCreation1hTokens = usage.cacheCreation1hTokens;
        this.inputStated = true;
      }
      if (!usage.outputUnstated) {
        // Cumulative: a server that restates its usage never lowers what it stated.
        this.outputTokens = this.sawMessageDelta ? Math.max(this.outputTokens, usage.outputTokens) : usage.outputTokens;
        this.sawMessageDelta = true;
        this.contentAfterUsage = false;
      }
    }
  }

  #text(text: unknown): void {
    if (typeof text !== 'string' || text === '') return;
    this.contentDeltas++;
    this.#noteContent();
    if (!this.#sink) return;
    const raw = Buffer.from(JSON.stringify(text));
    this.#sink.pushText(raw, 1, raw.length - 1);
  }
}
