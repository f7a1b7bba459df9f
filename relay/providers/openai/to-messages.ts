// A Chat Completions answer as an Anthropic Messages answer, for /v1/messages requests served by an
// OpenAI-format channel, and the filter of a Chat Completions stream passed to a Chat Completions
// client.
//
//   message.content (a string, or the text of its parts) → a text block; tool_calls → tool_use blocks
//   (arguments parsed; unparsable ones, or ones that are no object, as {}, streamed or not: a stream
//   writes a call's arguments only from its object's opening brace); the refusal (`message.refusal`,
//   `delta.refusal`, refusal content parts) → text, as Claude says one; reasoning is not converted.
//   finish_reason: stop → end_turn, length → max_tokens, tool_calls / function_call → tool_use,
//   content_filter → refusal; stop (or none) after tool calls → tool_use; stop (or none) after a
//   refusal → refusal. stop (or none) with the
//   matched stop sequence named by the provider (vLLM's choices[0].stop_reason, SGLang's
//   matched_stop), one of the request's stop_sequences → stop_sequence with stop_sequence set to it;
//   OpenAI names none, so its answers stopped by a stop sequence say end_turn, stop_sequence null.
//   usage: input_tokens = prompt_tokens - cached_tokens, cache_read_input_tokens = cached_tokens,
//   output_tokens = completion_tokens (and reasoning reported beside them: chat-usage.ts). The relay
//   passes the figures the request is billed (usageAsBilled in messages/settlement.ts, the ledger's), and
//   those are told: a provider's usage that is no count (a string, 0.5, 1e400) is billed as the relay
//   counts and bounds it, and the client is told that, not the provider's claim.
//
// Streamed (ChatToAnthropicStream), chunk by chunk: the first chunk → message_start (input tokens 0:
// a Chat Completions stream states them only at its end); content deltas → a text block's deltas;
// each tool call → a tool_use block with input_json_delta pieces (a call is told by its index, or by
// an id of its own: index-less calls, two calls under one index); `data: [DONE]` → the blocks closed,
// message_delta with the stop reason and the whole usage (input included), message_stop (after a
// message_start when none came: a stream of [DONE] alone is an empty message; with holdsFinalUsage,
// set by stream-relay.ts, message_delta and message_stop are held until the stream is settled and
// written by heldEndEvents() with the usage billed); an error object →
// Anthropic's error event, and nothing after it.
//
// Anthropic's blocks do not interleave and Chat Completions' tool calls may (their deltas carry an
// index for it): one block is open at a time, and what comes for another (a call, text) is held and
// written when its block opens: once the open call's arguments are a whole JSON object (the next
// call's block then opens with its first delta, so calls one after the other stream as they come),
// else at the finish_reason or [DONE]. No argument byte is lost and no block is cut: bytes for a
// call after its arguments were whole and its block closed can only be blanks or make its JSON
// invalid, and are not written. A stream cut while blocks are held ends with the relay's failed
// event; the meter counted every argument once, from the provider's bytes. Held arguments, with the
// ids and names of every call of the stream (each stays known by them to the end), are bounded
// (MAX_HELD_ARGUMENTS): past it the stream fails, as an event without end does.
import { anthropicTypeOfOpenAIError, errorBody } from '../../errors.js';
import type { StreamRewriter } from '../../messages/stream-relay.js';
import { indexOfBytes, valueAfterKey } from '../../stream/sse-bytes.js';
import { LineStream, MAX_JOINED_DATA } from '../../stream/line-stream.js';
import { usageOfChatUsage } from './chat-usage.js';
import type { StreamUsage } from '../../stream/sse-usage-parser.js';
import { isObject } from '../../../infra/json/is-object.js';

/**
 * Anthropic's stop_reason of a Chat Completions finish_reason; `toolUse`: the answer carries tool_use
 * blocks. Gemini's OpenAI-compatible endpoint ends tool calls with "stop" (googleapis/python-genai#2868),
 * and an agent loop waiting for "tool_use" took "end_turn" as the end of the conversation, the calls
 * never run. None stated counts as "stop", as the fold of a stream does (stream-as-answer.ts), so a
 * streamed answer and the same answer folded say the same. length and content_filter stand: calls cut
 * short or refused are not calls to run.
 */
export function stopReasonOf(finishReason: unknown, toolUse: boolean, refused = false): string {
  if (refused && (finishReason === 'stop' || finishReason === null || finishReason === undefined)) return 'refusal';
  switch (finishReason) {
    case 'length': return 'max_tokens';
    case 'tool_calls': case 'function_call': return 'tool_use';
    case 'content_filter': return 'refusal';
    case 'stop': case null: case undefined: return toolUse ? 'tool_use' : 'end_turn';
    default: return 'end_turn';
  }
}

/**
 * The counts in Anthropic's names: `billed`'s (the figures the request is billed) when given, else a
 * Chat Completions usage's as read (none stated: zeros); OpenAI bills no cache writes.
 */
function usageCounts(usage: unknown, billed?: StreamUsage | null): Record<string, number> {
  if (billed) {
    return {
      input_tokens: billed.inputTokens,
      cache_creation_input_tokens: billed.cacheCreationTokens,
      cache_read_input_tokens: billed.cacheReadTokens,
      output_tokens: billed.outputTokens,
    };
  }
  const u = usageOfChatUsage(usage);
  return {
    input_tokens: u?.inputTokens ?? 0,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: u?.cacheReadTokens ?? 0,
    output_tokens: u?.outputTokens ?? 0,
  };
}

/** A Message's usage: the counts and the fields Anthropic always sends beside them. */
function anthropicUsage(usage: unknown, billed?: StreamUsage | null): Record<string, unknown> {
  return { ...usageCounts(usage, billed), ...MESSAGE_USAGE_FIELDS };
}

/** message_delta's usage (the SDK's MessageDeltaUsage): the counts, and no server tool use. */
function deltaUsage(usage: unknown, billed?: StreamUsage | null): Record<string, unknown> {
  return { ...usageCounts(usage, billed), server_tool_use: null };
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

/**
 * The Anthropic Message of a Chat Completion body; `model` is the name the client asked for,
 * `stopSequences` the request's (to name the one a provider says it stopped at), `billed` the usage
 * the request is billed (usageAsBilled), which its `usage` tells; absent, the body's own, read as counts.
 */
export function chatToMessage(body: Buffer, model: string, stopSequences?: unknown, billed?: StreamUsage | null): string | null {
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
  // OpenAI states a refusal beside content (null then), or as a refusal part of it.
  const refusal = refusalOfMessage(msg);
  const text = textOfContent(msg.content) + refusal;
  if (text !== '') content.push({ type: 'text', text });
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
    ...stopOf(choice?.finish_reason, toolUse, choice ? matchedStop(choice, Array.isArray(stopSequences) ? stopSequences : undefined) : null, refusal !== ''),
    usage: anthropicUsage(c.usage, billed), container: null,
  });
}

/**
 * A message's content as text: the string, or the text of its parts (some OpenAI-compatible servers
 * answer `[{type: "text", text}]`, Mistral's reasoning models among them: the answer was lost, `[]`).
 */
function textOfContent(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content as unknown[]) if (isObject(part) && part.type === 'text' && typeof part.text === 'string') text += part.text;
  return text;
}

/** A message's refusal: its `refusal` field, and the text of refusal parts in its content. */
function refusalOfMessage(msg: Record<string, unknown>): string {
  let refusal = typeof msg.refusal === 'string' ? msg.refusal : '';
  if (Array.isArray(msg.content)) {
    for (const part of msg.content as unknown[]) if (isObject(part) && part.type === 'refusal' && typeof part.refusal === 'string') refusal += part.refusal;
  }
  return refusal;
}

function sse(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/**
 * A text_delta event, written by concatenation: the same text as sse('content_block_delta', { type,
 * index, delta: { type: 'text_delta', text } }), without an object per delta to stringify (one per
 * token of the answer; the Anthropic → Chat direction's chunks cost 17% of the relay's loop that way,
 * docs/performance.md).
 */
function textDelta(index: number, text: string): string {
  return `event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":{"type":"text_delta","text":${JSON.stringify(text)}}}\n\n`;
}

/** Most characters (tool-call arguments, text) a stream holds for blocks not yet opened (ChatToAnthropicStream): past it, the stream fails. */
export const MAX_HELD_ARGUMENTS = 8 * MAX_JOINED_DATA;

/** The converted stream held more arguments of calls not yet written than MAX_HELD_ARGUMENTS. */
export class HeldArgumentsTooLongError extends Error {
  constructor() {
    super(`a provider stream's interleaved tool calls held more than ${MAX_HELD_ARGUMENTS} characters of arguments`);
    this.name = 'HeldArgumentsTooLongError';
  }
}

/** Where the scan of a call's arguments is: nothing yet, inside its object, the object closed, or neither (a value that is no object, or more after it). */
const enum Scan { Empty, Inside, Whole, Other }

/**
 * One content block of the converted stream, from its first delta: text, or one tool call (told by
 * its index, else by its id). `held`: what came for it before its block opened.
 */
interface Item {
  readonly kind: 'text' | 'tool';
  /** Its content block's index once opened; -1 before. */
  block: number;
  held: string;
  /** A tool call's id and name, as its first delta (or, for the name, a later one before its block opened) gave them. */
  id?: unknown;
  idKey: string;
  name?: unknown;
  index: number | undefined;
  /** The scan of a tool call's arguments (scanArguments): whether its block may close before the answer ends. */
  scan: Scan;
  depth: number;
  inString: boolean;
  escaped: boolean;
}

function newItem(kind: 'text' | 'tool', index: number | undefined, idKey: string): Item {
  return { kind, block: -1, held: '', idKey, index, scan: Scan.Empty, depth: 0, inString: false, escaped: false };
}

/**
 * Follows a tool call's arguments as they come, to tell when they are a whole JSON object; returns how
 * much of `s` goes to the client: the arguments from the object's opening brace to its closing one.
 * Blanks before it are left out, and arguments that are no object (text, an array, a number) are never
 * written, so the tool_use's input stays the {} its block started with, as the unstreamed answer gives
 * it (parseArguments): written, the SDK's finalMessage() threw on "not json at all". What follows a
 * whole object but blanks (a second object run on) is left out too.
 */
function scanArguments(item: Item, s: string): string {
  if (item.scan === Scan.Other) return '';
  let from = item.scan === Scan.Empty ? -1 : 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const blank = c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
    if (item.scan === Scan.Whole) {
      if (!blank) {
        item.scan = Scan.Other;
        return from < 0 ? '' : s.slice(from, i);
      }
    } else if (item.scan === Scan.Empty) {
      // An object only: a tool_use's input is one (an array was input [1,2] to the SDK, {} unstreamed).
      if (c === 0x7b) {
        item.scan = Scan.Inside;
        item.depth = 1;
        from = i;
      } else if (!blank) {
        item.scan = Scan.Other;
        return '';
      }
    } else if (item.inString) {
      if (item.escaped) item.escaped = false;
      else if (c === 0x5c) item.escaped = true;
      else if (c === 0x22) item.inString = false;
    } else if (c === 0x22) {
      item.inString = true;
    } else if (c === 0x7b || c === 0x5b) {
      item.depth++;
    } else if ((c === 0x7d || c === 0x5d) && --item.depth === 0) {
      item.scan = Scan.Whole;
    }
  }
  return from < 0 ? '' : from === 0 ? s : s.slice(from);
}

/**
 * The stop sequence a provider names as the one that ended the answer: vLLM's `stop_reason`, SGLang's
 * `matched_stop` (a string; a number is a stop token's id), when it is one of the request's
 * stop_sequences; null otherwise (OpenAI names none).
 */
function matchedStop(choice: Record<string, unknown>, stops: readonly unknown[] | undefined): string | null {
  if (!stops || stops.length === 0) return null;
  for (const v of [choice.stop_reason, choice.matched_stop]) {
    if (typeof v === 'string' && stops.includes(v)) return v;
  }
  return null;
}

/** stop_reason and stop_sequence: "stop_sequence" when the provider stopped ("stop", or none stated) at a stop sequence it names. */
function stopOf(finishReason: unknown, toolUse: boolean, matched: string | null, refused: boolean): { stop_reason: string; stop_sequence: string | null } {
  if (matched !== null && !refused && (finishReason === 'stop' || finishReason === null || finishReason === undefined)) return { stop_reason: 'stop_sequence', stop_sequence: matched };
  return { stop_reason: stopReasonOf(finishReason, toolUse, refused), stop_sequence: null };
}

/** Chat Completions chunks in, Anthropic SSE out. */
export class ChatToAnthropicStream extends LineStream implements StreamRewriter {
  readonly #model: string;
  readonly #stops: readonly unknown[] | undefined;
  #started = false;
  /** message_stop or an error event was written: nothing more is. */
  #stopped = false;
  #blocks = 0;
  /** The item whose block is open; null when none. */
  #open: Item | null = null;
  /** Items not yet opened, in the order of their first delta: their block opens when the open one may close. */
  readonly #queue: Item[] = [];
  /** Tool calls by their index, and by their id (calls without an index). */
  readonly #byIndex = new Map<number, Item>();
  readonly #byId = new Map<string, Item>();
  /** The call the last tool-call delta went to: a delta with neither index nor id continues it. */
  #lastCall: Item | null = null;
  /** Characters held in the queue's items, bounded by MAX_HELD_ARGUMENTS. */
  #heldSize = 0;
  /** A finish_reason came: every call is whole, and no block waits for another to end. */
  #finished = false;
  /** Whether the answer has a tool call: "stop" then says tool_use (stopReasonOf). */
  #toolUse = false;
  /** Whether the answer is a refusal (delta.refusal text): "stop" then says refusal. */
  #refused = false;
  #finish: unknown = null;
  #matched: string | null = null;
  #usage: unknown = null;
  /** What the line being read wrote (#write), returned at its end. */
  #pending = '';
  /** Made once: a closure made per chunk is an allocation on the hot path. */
  readonly #onLine = (line: string): string => this.#line(line);
  /**
   * Set before the first push (stream-relay.ts): message_delta (the usage) and message_stop are not
   * written at the end but held for heldEndEvents(), once the stream is settled, so that the usage told
   * is the usage billed. Unset (unit tests), they are written at the end with the provider's figures.
   */
  holdsFinalUsage = false;
  /** The end came while holdsFinalUsage: message_delta and message_stop wait for heldEndEvents(). */
  #held = false;

  /** `stopSequences`: the request's, to name the one a provider says it stopped at. */
  constructor(model: string, stopSequences?: unknown) {
    super();
    this.joinsData = true;
    this.#model = model;
    this.#stops = Array.isArray(stopSequences) ? stopSequences : undefined;
  }

  push(chunk: Buffer): string {
    return this.lines(chunk, this.#onLine);
  }

  #line(line: string): string {
    if (this.#stopped || !line.startsWith('data:')) return '';
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
      // Anthropic sends nothing after an error event: a [DONE] after it wrote a message_stop, and a
      // raw client read a message completed normally. Blocks held are not written: the stream failed.
      this.#stopped = true;
      const e = c.error as { message?: unknown; type?: unknown; code?: unknown };
      return sse('error', JSON.parse(errorBody(anthropicTypeOfOpenAIError(e), typeof e.message === 'string' ? e.message : 'The model provider stream failed.')));
    }
    let out = this.#start(c.id);
    if (c.usage) this.#usage = c.usage;
    const choice: unknown = Array.isArray(c.choices) ? c.choices[0] : undefined;
    if (!isObject(choice)) return out;
    const delta = choice.delta;
    if (isObject(delta)) {
      if (typeof delta.content === 'string' && delta.content !== '') this.#text(delta.content);
      if (typeof delta.refusal === 'string' && delta.refusal !== '') {
        this.#refused = true;
        this.#text(delta.refusal);
      }
      if (Array.isArray(delta.tool_calls)) {
        for (const t of delta.tool_calls as unknown[]) if (isObject(t)) this.#toolDelta(t);
      }
    }
    if (choice.finish_reason) {
      this.#finish = choice.finish_reason;
      this.#finished = true;
    }
    const matched = matchedStop(choice, this.#stops);
    if (matched !== null) this.#matched = matched;
    if (this.#heldSize > MAX_HELD_ARGUMENTS) {
      this.failure = new HeldArgumentsTooLongError();
      return out + this.#drainOut();
    }
    return out + this.#drain();
  }

  /** message_start, once: the first chunk's, or (a stream of [DONE] alone) the end's. */
  #start(id: unknown): string {
    if (this.#started) return '';
    this.#started = true;
    return sse('message_start', {
      type: 'message_start',
      message: {
        id: messageId(id), type: 'message', role: 'assistant', model: this.#model, content: [],
        stop_reason: null, stop_sequence: null, container: null,
        // Nothing is stated before the last chunk: every count 0.
        usage: anthropicUsage(undefined),
      },
    });
  }

  #write(s: string): void {
    this.#pending += s;
  }

  #drainOut(): string {
    const out = this.#pending;
    this.#pending = '';
    return out;
  }

  /** Text: live into the open text block; else a block of its own, opened in its turn. */
  #text(text: string): void {
    const open = this.#open;
    if (open !== null && open.kind === 'text' && this.#queue.length === 0) {
      this.#write(textDelta(open.block, text));
      return;
    }
    const last = this.#queue[this.#queue.length - 1];
    const item = last !== undefined && last.kind === 'text' ? last : newItem('text', undefined, '');
    if (item !== last) this.#queue.push(item);
    item.held += text;
    this.#heldSize += text.length;
  }

  /**
   * One tool-call delta. A call is told by its index; two calls under one index (some servers send
   * them so, in one delta) and calls without an index (Gemini's OpenAI-compatible endpoint sends
   * parallel calls whole and without one) by their id. A delta without an id (or with "", or its
   * call's id again) is more of its call's arguments; one with neither index nor id, more of the last
   * call's. Before, a delta for another call than the open block's opened a new block, even for a
   * call whose block was closed: interleaved calls became blocks without id nor name and arguments
   * cut in two, which the Anthropic SDK throws on.
   */
  #toolDelta(t: Record<string, unknown>): void {
    const fn = isObject(t.function) ? t.function : undefined;
    const index = typeof t.index === 'number' ? t.index : undefined;
    const id = typeof t.id === 'string' ? t.id : '';
    let call: Item | undefined;
    if (index !== undefined) {
      call = this.#byIndex.get(index);
      if (call !== undefined && id !== '' && id !== call.idKey) {
        call = undefined;
      } else if (call === undefined) {
        // A call that came without an index and now states one: later deltas go by it.
        const c = id !== '' ? this.#byId.get(id) : this.#lastCall ?? undefined;
        if (c !== undefined && c.index === undefined) call = c;
      }
    } else if (id !== '') {
      call = this.#byId.get(id);
    } else {
      call = this.#lastCall ?? undefined;
    }
    if (call === undefined) {
      call = newItem('tool', index, id);
      call.id = t.id;
      call.name = fn?.name;
      if (id !== '') this.#byId.set(id, call);
      this.#queue.push(call);
      this.#toolUse = true;
      // Its id and name count in the held size for the stream's life: every call stays known by them
      // to its end (#byId, #byIndex), and a provider could send calls of huge ids without end.
      this.#heldSize += id.length + (typeof fn?.name === 'string' ? fn.name.length : 0);
    } else if (call.block < 0 && call.name === undefined && typeof fn?.name === 'string') {
      call.name = fn.name;
      this.#heldSize += fn.name.length;
    }
    if (index !== undefined) {
      call.index = index;
      this.#byIndex.set(index, call);
    }
    this.#lastCall = call;
    const args = fn?.arguments;
    if (typeof args !== 'string' || args === '') return;
    if (call === this.#open) {
      const json = scanArguments(call, args);
      if (json !== '') this.#write(sse('content_block_delta', { type: 'content_block_delta', index: call.block, delta: { type: 'input_json_delta', partial_json: json } }));
    } else if (call.block < 0) {
      const json = scanArguments(call, args);
      call.held += json;
      this.#heldSize += json.length;
    }
    // Else its block closed once its arguments were a whole object: what comes after it is blank, or
    // would make them JSON the SDK throws on. Not written (the meter counted it as it passed).
  }

  /** Whether the open block may close now: text may, a call once its arguments are whole or the answer finished. */
  #closable(item: Item): boolean {
    return item.kind === 'text' || this.#finished || item.scan === Scan.Whole;
  }

  /** Opens the queue's items in turn while the open block may close; returns what was written. */
  #drain(): string {
    while (this.#queue.length > 0 && (this.#open === null || this.#closable(this.#open))) this.#openItem(this.#queue.shift()!);
    return this.#drainOut();
  }

  #close(): void {
    if (this.#open === null) return;
    this.#write(sse('content_block_stop', { type: 'content_block_stop', index: this.#open.block }));
    this.#open = null;
  }

  #openItem(item: Item): void {
    this.#close();
    item.block = this.#blocks++;
    this.#open = item;
    const held = item.held;
    item.held = '';
    // Its id and name stay counted: the call stays known by them (#byId, #byIndex) to the end.
    this.#heldSize -= held.length;
    if (item.kind === 'text') {
      this.#write(sse('content_block_start', { type: 'content_block_start', index: item.block, content_block: { type: 'text', text: '' } }));
      if (held !== '') this.#write(textDelta(item.block, held));
    } else {
      this.#write(sse('content_block_start', { type: 'content_block_start', index: item.block, content_block: { type: 'tool_use', id: item.id, name: item.name, input: {} } }));
      if (held !== '') this.#write(sse('content_block_delta', { type: 'content_block_delta', index: item.block, delta: { type: 'input_json_delta', partial_json: held } }));
    }
  }

  /** The end: the blocks still held written in their order, the open one closed, message_delta, message_stop. */
  #stop(): string {
    if (this.#stopped) return '';
    this.#stopped = true;
    // A stream of [DONE] alone is an empty message, not events without their message_start (the SDK threw).
    const out = this.#start(undefined);
    this.#finished = true;
    const drained = this.#drain();
    this.#close();
    const blocks = out + drained + this.#drainOut();
    if (this.holdsFinalUsage) {
      this.#held = true;
      return blocks;
    }
    return blocks + this.#end(null);
  }

  /**
   * What the end held (holdsFinalUsage), written once the stream is settled: message_delta with
   * `billed` (the figures the ledger has; null: the provider's as counts), and message_stop. '' when
   * nothing is held (the stream did not end, or ended with an error event).
   */
  heldEndEvents(billed: StreamUsage | null): string {
    if (!this.#held) return '';
    this.#held = false;
    return this.#end(billed);
  }

  #end(billed: StreamUsage | null): string {
    return sse('message_delta', { type: 'message_delta', delta: stopOf(this.#finish, this.#toolUse, this.#matched, this.#refused), usage: deltaUsage(this.#usage, billed) })
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
      const first = indexOfBytes(chunk, USAGE_KEY);
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
    const first = indexOfBytes(bytes, USAGE_KEY);
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
  for (let at = first; at >= 0; at = indexOfBytes(chunk, USAGE_KEY, at + 1)) {
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
