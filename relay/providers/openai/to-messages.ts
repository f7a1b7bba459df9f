// A Chat Completions answer as an Anthropic Messages answer, for /v1/messages requests served by an
// OpenAI-format channel, and the filter of a Chat Completions stream passed to a Chat Completions
// client.
//
//   message.content → a text block; tool_calls → tool_use blocks (arguments parsed; unparsable ones
//   as {}); reasoning and refusal are not converted.
//   finish_reason: stop → end_turn, length → max_tokens, tool_calls / function_call → tool_use,
//   content_filter → refusal; stop (or none) after tool calls → tool_use.
//   usage: input_tokens = prompt_tokens - cached_tokens, cache_read_input_tokens = cached_tokens,
//   output_tokens = completion_tokens (and reasoning reported beside them: chat-usage.ts).
//
// Streamed (ChatToAnthropicStream), chunk by chunk: the first chunk → message_start (input tokens 0:
// a Chat Completions stream states them only at its end); content deltas → a text block's deltas;
// each tool call → a tool_use block with input_json_delta pieces (a call is told from the open one by
// its index, or by an id of its own: index-less calls, two calls under one index); `data: [DONE]` → the blocks closed,
// message_delta with the stop reason and the whole usage (input included), message_stop; an error
// object → Anthropic's error event.
import { anthropicTypeOfOpenAIError, errorBody } from '../../errors.js';
import type { StreamRewriter } from '../../messages/stream-relay.js';
import { valueAfterKey } from '../../stream/sse-bytes.js';
import { LineStream } from '../../stream/line-stream.js';
import { usageOfChatUsage } from './chat-usage.js';
import { isObject } from '../../../infra/json/is-object.js';

/**
 * Anthropic's stop_reason of a Chat Completions finish_reason; `toolUse`: the answer carries tool_use
 * blocks. Gemini's OpenAI-compatible endpoint ends tool calls with "stop" (googleapis/python-genai#2868),
 * and an agent loop waiting for "tool_use" took "end_turn" as the end of the conversation, the calls
 * never run. None stated counts as "stop", as the fold of a stream does (stream-as-answer.ts), so a
 * streamed answer and the same answer folded say the same. length and content_filter stand: calls cut
 * short or refused are not calls to run.
 */
export function stopReasonOf(finishReason: unknown, toolUse: boolean): string {
  switch (finishReason) {
    case 'length': return 'max_tokens';
    case 'tool_calls': case 'function_call': return 'tool_use';
    case 'content_filter': return 'refusal';
    case 'stop': case null: case undefined: return toolUse ? 'tool_use' : 'end_turn';
    default: return 'end_turn';
  }
}

/** A Chat Completions usage's counts in Anthropic's names (none stated: zeros); OpenAI bills no cache writes. */
function usageCounts(usage: unknown): Record<string, number> {
  const u = usageOfChatUsage(usage);
  return {
    input_tokens: u?.inputTokens ?? 0,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: u?.cacheReadTokens ?? 0,
    output_tokens: u?.outputTokens ?? 0,
  };
}

/** A Message's usage: the counts and the fields Anthropic always sends beside them. */
function anthropicUsage(usage: unknown): Record<string, unknown> {
  return { ...usageCounts(usage), ...MESSAGE_USAGE_FIELDS };
}

/** message_delta's usage (the SDK's MessageDeltaUsage): the counts, and no server tool use. */
function deltaUsage(usage: unknown): Record<string, unknown> {
  return { ...usageCounts(usage), server_tool_use: null };
}

/**
 * The fields Anthropic's Message usage always carries (the SDK types them required, nullable) that a
 * Chat Completions usage has no counterpart of: no cache writes (OpenAI bills none), the standard tier.
 * Left out, a typed client read `undefined` where Anthropic sends a value or null.
 */
const MESSAGE_USAGE_FIELDS = {
  cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
  server_tool_use: null,
  service_tier: 'standard',
} as const;

function messageId(id: unknown): string {
  return typeof id === 'string' && id ? `msg_${id.replace(/^chatcmpl-/, '')}` : `msg_${Date.now().toString(36)}`;
}

function parseArguments(args: unknown): unknown {
  if (typeof args !== 'string' || args.trim() === '') return {};
  try {
    const v: unknown = JSON.parse(args);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}

/** The Anthropic Message of a Chat Completion body; `model` is the name the client asked for. */
export function chatToMessage(body: Buffer, model: string): string | null {
  let c: unknown;
  try {
    c = JSON.parse(body.toString('utf8'));
  } catch {
    return null;
  }
  // `null`, `[]` or a number is no Chat Completion: not converted (the client is told the answer could not be read).
  if (!isObject(c)) return null;
  const first: unknown = Array.isArray(c.choices) ? c.choices[0] : undefined;
  const choice = isObject(first) ? first : undefined;
  const msg = isObject(choice?.message) ? choice.message : {};
  const content: Record<string, unknown>[] = [];
  if (typeof msg.content === 'string' && msg.content !== '') content.push({ type: 'text', text: msg.content });
  let toolUse = false;
  if (Array.isArray(msg.tool_calls)) {
    for (const t of msg.tool_calls as unknown[]) {
      if (!isObject(t)) continue;
      const fn = isObject(t.function) ? t.function : undefined;
      content.push({ type: 'tool_use', id: t.id, name: fn?.name, input: parseArguments(fn?.arguments) });
      toolUse = true;
    }
  }
  return JSON.stringify({
    id: messageId(c.id), type: 'message', role: 'assistant', model, content,
    stop_reason: stopReasonOf(choice?.finish_reason, toolUse), stop_sequence: null, usage: anthropicUsage(c.usage), container: null,
  });
}

function sse(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** Splits a stream into lines across chunks (UTF-8 safe); calls `line` for each complete one. */
/** Chat Completions chunks in, Anthropic SSE out. */
export class ChatToAnthropicStream extends LineStream implements StreamRewriter {
  readonly #model: string;
  #started = false;
  #stopped = false;
  /** Index of the open content block, -1 when none. */
  #block = -1;
  #blocks = 0;
  /** Whether the open block is a tool_use block. */
  #inTool = false;
  /** The OpenAI index of the open tool_use block; undefined when its call came without one. */
  #toolIndex: number | undefined = undefined;
  /** The id of the open tool_use block's call; '' when it came without one. */
  #toolId = '';
  /** Whether a tool_use block was written: "stop" then says tool_use (stopReasonOf). */
  #toolUse = false;
  #finish: unknown = null;
  #usage: unknown = null;
  /** Made once: a closure made per chunk is an allocation on the hot path. */
  readonly #onLine = (line: string): string => this.#line(line);

  constructor(model: string) {
    super();
    this.joinsData = true;
    this.#model = model;
  }

  push(chunk: Buffer): string {
    return this.lines(chunk, this.#onLine);
  }

  #line(line: string): string {
    if (!line.startsWith('data:')) return '';
    const data = line.slice(5).trim();
    if (data === '[DONE]') return this.#stop();
    let c: unknown;
    try {
      c = JSON.parse(data);
    } catch {
      return '';
    }
    // JSON that is no object (`data: null`, `1`, `[]`) is no chunk: skipped like a line that does not parse.
    if (!isObject(c)) return '';
    if (c.error && typeof c.error === 'object') {
      const e = c.error as { message?: unknown; type?: unknown; code?: unknown };
      return sse('error', JSON.parse(errorBody(anthropicTypeOfOpenAIError(e), typeof e.message === 'string' ? e.message : 'The model provider stream failed.')));
    }
    let out = '';
    if (!this.#started) {
      this.#started = true;
      out += sse('message_start', {
        type: 'message_start',
        message: {
          id: messageId(c.id), type: 'message', role: 'assistant', model: this.#model, content: [],
          stop_reason: null, stop_sequence: null, container: null,
          // Nothing is stated before the last chunk: every count 0.
          usage: anthropicUsage(undefined),
        },
      });
    }
    if (c.usage) this.#usage = c.usage;
    const choice: unknown = Array.isArray(c.choices) ? c.choices[0] : undefined;
    if (!isObject(choice)) return out;
    if (choice.finish_reason) this.#finish = choice.finish_reason;
    const delta = choice.delta;
    if (!isObject(delta)) return out;
    if (typeof delta.content === 'string' && delta.content !== '') {
      if (this.#block < 0 || this.#inTool) out += this.#open({ type: 'text', text: '' });
      out += sse('content_block_delta', { type: 'content_block_delta', index: this.#block, delta: { type: 'text_delta', text: delta.content } });
    }
    if (Array.isArray(delta.tool_calls)) {
      for (const t of delta.tool_calls as unknown[]) {
        if (!isObject(t)) continue;
        const fn = isObject(t.function) ? t.function : undefined;
        const index = typeof t.index === 'number' ? t.index : undefined;
        const id = typeof t.id === 'string' ? t.id : '';
        // A delta continues the open call unless an index or an id says otherwise. Gemini's
        // OpenAI-compatible endpoint sends parallel calls whole and without `index`, and some
        // servers send two calls under one index in one delta: only the id tells them apart
        // (taken for one call, their arguments made `{…}{…}`, which the Anthropic SDK throws on).
        // A delta without an id (or with "", or the open call's id again) is more of the open
        // call's arguments; one without an index goes by its id alone.
        if (!this.#inTool
          || (index !== undefined && this.#toolIndex !== undefined && index !== this.#toolIndex)
          || (id !== '' && id !== this.#toolId)) {
          out += this.#open({ type: 'tool_use', id: t.id, name: fn?.name, input: {} });
          this.#inTool = true;
          this.#toolIndex = index;
          this.#toolId = id;
          this.#toolUse = true;
        } else if (this.#toolIndex === undefined) {
          // The call came without an index and this delta states one: later deltas go by it.
          this.#toolIndex = index;
        }
        const args = fn?.arguments;
        if (typeof args === 'string' && args !== '') {
          out += sse('content_block_delta', { type: 'content_block_delta', index: this.#block, delta: { type: 'input_json_delta', partial_json: args } });
        }
      }
    }
    return out;
  }

  #close(): string {
    if (this.#block < 0) return '';
    const out = sse('content_block_stop', { type: 'content_block_stop', index: this.#block });
    this.#block = -1;
    this.#inTool = false;
    return out;
  }

  #open(block: Record<string, unknown>): string {
    const out = this.#close();
    this.#block = this.#blocks++;
    return out + sse('content_block_start', { type: 'content_block_start', index: this.#block, content_block: block });
  }

  #stop(): string {
    if (this.#stopped) return '';
    this.#stopped = true;
    return this.#close()
      + sse('message_delta', { type: 'message_delta', delta: { stop_reason: stopReasonOf(this.#finish, this.#toolUse), stop_sequence: null }, usage: deltaUsage(this.#usage) })
      + sse('message_stop', { type: 'message_stop' });
  }
}

const USAGE_KEY = Buffer.from('"usage"');

/**
 * A Chat Completions stream passed to a Chat Completions client that did not ask for its usage: the
 * relay asked for it (it bills by it), so what the client would not have had is left out, as OpenAI
 * leaves it out: the extra last chunk (`choices: []` with the usage), a usage a provider attaches to
 * another chunk (the finish_reason's), and the `"usage":null` that OpenAI and others put in every
 * chunk once include_usage is on. A chunk without a `"usage"` key (and no line pending) passes as it
 * is; one whose usage keys are all `null` is copied once without them, its bytes neither decoded nor
 * parsed (that is every chunk of such a provider); only a usage object makes its line parsed.
 */
export class ChatUsageFilter extends LineStream implements StreamRewriter {
  #pending = false;
  #dropBlank = false;
  readonly #onLine = (line: string): string => this.#line(line);

  push(chunk: Buffer): string | Buffer {
    if (!this.#pending && !this.#dropBlank && chunk[chunk.length - 1] === 0x0a) {
      const first = chunk.indexOf(USAGE_KEY);
      if (first < 0) return chunk;
      const cut = withoutNullUsage(chunk, first);
      if (cut !== null) return cut;
    }
    const out = this.lines(chunk, this.#onLine);
    this.#pending = chunk[chunk.length - 1] !== 0x0a;
    return out;
  }

  /**
   * A line too long to carry is passed on as it comes: only the usage chunk is filtered, and none is
   * that long. Dropped (as a conversion drops it), a 1.2 MB delta never reached the client, which was
   * billed for it all the same (the meter counts what the provider sent).
   */
  protected override overlong(text: string, ended: boolean): string {
    this.#dropBlank = false;
    return ended ? text + '\n' : text;
  }

  #line(line: string): string {
    if (line === '' && this.#dropBlank) {
      this.#dropBlank = false;
      return '';
    }
    this.#dropBlank = false;
    if (!line.startsWith('data:') || !line.includes('"usage"')) return line + '\n';
    const bytes = Buffer.from(line);
    const first = bytes.indexOf(USAGE_KEY);
    const cut = withoutNullUsage(bytes, first);
    if (cut !== null) return cut.toString() + '\n';
    // A usage object: the client did not ask for it.
    try {
      const c: unknown = JSON.parse(line.slice(5));
      if (isObject(c) && 'usage' in c) {
        if (Array.isArray(c.choices) && c.choices.length === 0) {
          this.#dropBlank = true;
          return '';
        }
        delete c.usage;
        return `data: ${JSON.stringify(c)}\n`;
      }
    } catch {
      // not a chunk of ours to judge: passed on
    }
    return line + '\n';
  }
}

/**
 * The chunk without each `"usage":null` member (and a comma next to it), from `first`, the first
 * `"usage"`; null when one of its usage keys has another value (the line path parses that line).
 */
function withoutNullUsage(chunk: Buffer, first: number): Buffer | null {
  const out = Buffer.allocUnsafe(chunk.length);
  let copied = 0;
  let written = 0;
  for (let at = first; at >= 0; at = chunk.indexOf(USAGE_KEY, at + 1)) {
    const v = valueAfterKey(chunk, at + USAGE_KEY.length, chunk.length);
    // A string value "usage" is no key.
    if (v < 0) continue;
    if (!(chunk[v] === 0x6e && chunk[v + 1] === 0x75 && chunk[v + 2] === 0x6c && chunk[v + 3] === 0x6c)) return null;
    let from = at;
    let to = v + 4;
    let before = at - 1;
    while (before >= copied && isBlank(chunk[before]!)) before--;
    if (before >= copied && chunk[before] === 0x2c) {
      from = before;
    } else {
      let after = to;
      while (after < chunk.length && isBlank(chunk[after]!)) after++;
      if (chunk[after] === 0x2c) {
        after++;
        while (after < chunk.length && isBlank(chunk[after]!)) after++;
        to = after;
      }
    }
    written += chunk.copy(out, written, copied, from);
    copied = to;
    at = to - 1;
  }
  written += chunk.copy(out, written, copied, chunk.length);
  return out.subarray(0, written);
}

function isBlank(c: number): boolean {
  return c === 0x20 || c === 0x09;
}
