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
import { Byte, DATA_PREFIX, LineCarry, closingQuote, lineEnd, startsWith, valueAfterKey } from '../../stream/sse-bytes.js';
import type { StreamUsage } from '../../stream/sse-usage-parser.js';
import type { DeliveredTextSink, StreamMeter } from '../provider.js';
import { MAX_USAGE_COUNT, usageCount } from '../../stream/usage-count.js';

/** Our usage of a Chat Completions `usage` object; null when it is not one (both counts stated). */
export function usageOfChatUsage(usage: unknown): StreamUsage | null {
  if (!usage || typeof usage !== 'object') return null;
  const u = usage as Record<string, unknown>;
  // Both counts or none: a usage stating one bills the other as 0; read as absent, the relay counts it.
  if (typeof u.prompt_tokens !== 'number' || typeof u.completion_tokens !== 'number') return null;
  const prompt = usageCount(u.prompt_tokens);
  const details = u.prompt_tokens_details as Record<string, unknown> | null | undefined;
  const cached = Math.min(prompt, details && typeof details === 'object' ? usageCount(details.cached_tokens) : 0);
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
  return { inputTokens: prompt - cached, outputTokens: output, cacheCreationTokens: 0, cacheCreation1hTokens: 0, cacheReadTokens: cached };
}

export function usageOfChatBody(body: Buffer): StreamUsage | null {
  let c: unknown;
  try {
    c = JSON.parse(body.toString('utf8'));
  } catch {
    return null;
  }
  return c !== null && typeof c === 'object' ? usageOfChatUsage((c as { usage?: unknown }).usage) : null;
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

export class ChatStreamMeter implements StreamMeter {
  inputTokens = 0;
  outputTokens = 0;
  cacheCreationTokens = 0;
  cacheCreation1hTokens = 0;
  cacheReadTokens = 0;
  sawMessageStart = false;
  sawMessageDelta = false;
  sawMessageStop = false;
  /** A choice has finished (finish_reason): what is still to come is the usage chunk, not generation. */
  generationDone = false;
  contentDeltas = 0;
  error: { type: string; message: string } | null = null;
  readonly inputOnlyAtEnd = true;
  readonly #sink: DeliveredTextSink | null;
  /** A line that continues in a later chunk. */
  readonly #carry = new LineCarry();
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
    let pos = 0;
    const len = chunk.length;
    const carry = this.#carry;
    if (carry.carrying) {
      const nl = chunk.indexOf(Byte.NL);
      if (nl < 0) {
        carry.append(chunk, 0, len);
        return;
      }
      const line = carry.finish(chunk, nl);
      if (carry.end > 0) {
        this.#next.fill(-2);
        // A view that ends with the line: indexOf, which finds the needles, would otherwise search
        // on through the stale bytes after it in the reused buffer.
        this.#line(line.subarray(0, carry.end), 0, carry.end);
      }
      pos = nl + 1;
    }
    // The needles' positions found in the carried line are not positions in the chunk.
    this.#next.fill(-2);
    while (pos < len) {
      const nl = chunk.indexOf(Byte.NL, pos);
      if (nl < 0) {
        carry.begin(chunk, pos, len);
        return;
      }
      const end = lineEnd(chunk, pos, nl);
      if (end > pos) this.#line(chunk, pos, end);
      pos = nl + 1;
    }
  }

  #line(buf: Buffer, start: number, end: number): void {
    if (!startsWith(buf, start, end, DATA_PREFIX)) return;
    let s = start + DATA_PREFIX.length;
    while (s < end && buf[s] === Byte.SPACE) s++;
    if (startsWith(buf, s, end, DONE)) {
      this.sawMessageStop = true;
      return;
    }
    // The chunk that carries the usage (once per stream) or an error is parsed whole.
    if (this.#value(buf, USAGE, s, end) >= 0 || this.#value(buf, ERROR, s, end) >= 0) {
      this.#parsed(buf, s, end);
      return;
    }
    this.sawMessageStart = true;
    if (!this.generationDone && this.#value(buf, FINISH, s, end) >= 0) this.generationDone = true;
    // The text of every other chunk is found in place, without decoding or parsing.
    for (let k = FIRST_TEXT; k < NEEDLES.length; k++) {
      let v = this.#value(buf, k, s, end);
      while (v >= 0) {
        const from = v + 1;
        const close = closingQuote(buf, from, end);
        if (close < 0) break;
        if (close > from) {
          this.contentDeltas++;
          this.#sink?.pushText(buf, from, close);
        }
        v = this.#value(buf, k, close + 1, end);
      }
    }
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
    if (at !== -1 && at < from) this.#next[k] = at = buf.indexOf(NEEDLES[k]!, from);
    return at >= 0 && at + NEEDLES[k]!.length <= end ? at : -1;
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
      this.error = { type: String(e.type ?? e.code ?? 'api_error'), message: String(e.message ?? '') };
      return;
    }
    this.sawMessageStart = true;
    const usage = usageOfChatUsage(chunk.usage);
    if (usage) {
      this.sawMessageDelta = true;
      this.inputTokens = usage.inputTokens;
      this.outputTokens = usage.outputTokens;
      this.cacheReadTokens = usage.cacheReadTokens;
    }
    // Some providers put the last text in the usage chunk: counted like any other.
    const choices = chunk.choices;
    if (!Array.isArray(choices)) return;
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

  #text(text: unknown): void {
    if (typeof text !== 'string' || text === '') return;
    this.contentDeltas++;
    if (!this.#sink) return;
    const raw = Buffer.from(JSON.stringify(text));
    this.#sink.pushText(raw, 1, raw.length - 1);
  }
}
