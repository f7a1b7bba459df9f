// An Anthropic Messages answer as a Chat Completions answer, for /v1/chat/completions requests served
// by an Anthropic channel.
//
//   text blocks → message.content (joined); tool_use → message.tool_calls (input as JSON arguments);
//   thinking blocks → message.reasoning_content (joined; the field DeepSeek's API, new-api and the
//   chat front ends read; absent without thinking); redacted thinking and server-tool blocks are
//   not converted (left out).
//   stop_reason: end_turn, stop_sequence, pause_turn → stop; max_tokens, model_context_window_exceeded
//   → length; tool_use → tool_calls; refusal → content_filter.
//   usage: prompt_tokens = input + cache reads + cache writes (OpenAI counts the cached part inside),
//   prompt_tokens_details.cached_tokens = cache reads, completion_tokens = output; the figures the
//   request is billed (the relay passes them: usageAsBilled in messages/settlement.ts, the ledger's
//   prompt_tokens and completion_tokens), so the client is shown what it pays for, a provider's usage
//   that is no count (a string, 0.5, 1e400) included; without them, each count as usageCount reads it. completion_tokens_details.reasoning_tokens
//   is 0 for an answer without thinking, and left out (`completion_tokens_details: {}`) for one with a
//   thinking or redacted_thinking block: Anthropic's output_tokens holds the thinking without telling
//   it apart, and the thinking's text is no measure of it (Claude 4 models return a summary of the
//   thinking billed in full; redacted thinking has no text), so the thinking billed was shown as 0.
//
// Streamed (AnthropicToChatStream), event by event as they arrive: message_start → a first chunk with
// the assistant role (and no content); text deltas → content deltas; a tool_use block → a tool_calls delta with its id
// and name, its input_json_delta pieces → arguments deltas (a block that streamed no piece, as
// Anthropic streams a call without arguments — one empty partial_json — gets its start's `input` as
// JSON, `{}` at least, when it stops: OpenAI's arguments are always a JSON text, and `""` made the
// SDK's runTools fail to parse them); message_delta → a chunk with the finish_reason; message_stop →
// the usage chunk (only when the client asked for it with stream_options.include_usage) and
// `data: [DONE]` (with holdsFinalUsage, set by stream-relay.ts, both are held until the stream is
// settled and written by heldEndEvents() with the usage billed); an error event → `data: {"error": …}` (OpenAI's SDK raises it); thinking deltas →
// `reasoning_content` deltas. ping, other block stops and signature deltas send nothing. With include_usage every chunk before the usage chunk
// carries `"usage": null`, as OpenAI's do.
import { openaiProviderErrorBody } from '../../errors.js';
import type { StreamRewriter } from '../../messages/stream-relay.js';
import type { StreamUsage } from '../../stream/sse-usage-parser.js';
import { usageCount } from '../../stream/usage-count.js';
import { LineStream } from '../../stream/line-stream.js';
import { isObject } from '../../../infra/json/is-object.js';

export function finishReasonOf(stopReason: unknown): string {
  switch (stopReason) {
    case 'max_tokens': case 'model_context_window_exceeded': return 'length';
    case 'tool_use': return 'tool_calls';
    case 'refusal': return 'content_filter';
    default: return 'stop';
  }
}

/** A content block's index in a stream event; 0 for anything but a positive number. */
function blockIndex(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0;
}

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
  /** Empty when the answer thought: how much of completion_tokens was thinking is not known. */
  completion_tokens_details: { reasoning_tokens?: number };
}

const NO_REASONING = { reasoning_tokens: 0 } as const;
const REASONING_UNKNOWN = {} as const;

/**
 * The Chat Completions usage of the figures a request is billed (settlement.ts): prompt_tokens and
 * completion_tokens as the ledger has them. `thought`: as chatUsageOf's.
 */
export function chatUsageOfBilled(u: StreamUsage, thought: boolean): ChatUsage {
  const prompt = u.inputTokens + u.cacheReadTokens + u.cacheCreationTokens;
  return {
    prompt_tokens: prompt,
    completion_tokens: u.outputTokens,
    total_tokens: prompt + u.outputTokens,
    prompt_tokens_details: { cached_tokens: u.cacheReadTokens },
    completion_tokens_details: thought ? REASONING_UNKNOWN : NO_REASONING,
  };
}

/** `thought`: the answer holds a thinking (or redacted_thinking) block. */
export function chatUsageOf(usage: Record<string, unknown> | undefined | null, thought: boolean): ChatUsage {
  const u = usage ?? {};
  const cacheRead = usageCount(u.cache_read_input_tokens);
  const prompt = usageCount(u.input_tokens) + cacheRead + usageCount(u.cache_creation_input_tokens);
  const completion = usageCount(u.output_tokens);
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cacheRead },
    completion_tokens_details: thought ? REASONING_UNKNOWN : NO_REASONING,
  };
}

function chatId(messageId: unknown): string {
  return typeof messageId === 'string' && messageId ? `chatcmpl-${messageId}` : `chatcmpl-${Date.now().toString(36)}`;
}

/**
 * The Chat Completion of an Anthropic Message body; `model` is the name the client asked for, `billed`
 * the usage the request is billed (usageAsBilled), which its `usage` tells; absent, the body's own, read
 * as counts.
 */
export function messageToChat(body: Buffer, model: string, billed?: StreamUsage | null): string | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return null;
  }
  // `null`, `[]` or a number is no Message: not converted (the client is told the answer could not be read).
  if (!isObject(parsed)) return null;
  const m = parsed;
  let text: string | null = null;
  let reasoning: string | null = null;
  let thought = false;
  const toolCalls: unknown[] = [];
  if (Array.isArray(m.content)) {
    for (const b of m.content as Array<Record<string, unknown>>) {
      if (isThinkingBlock(b)) thought = true;
      if (b?.type === 'text' && typeof b.text === 'string') text = (text ?? '') + b.text;
      else if (b?.type === 'thinking' && typeof b.thinking === 'string') reasoning = (reasoning ?? '') + b.thinking;
      else if (b?.type === 'tool_use') toolCalls.push({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } });
    }
  }
  const message: Record<string, unknown> = { role: 'assistant', content: text, refusal: null, annotations: [] };
  if (reasoning !== null) message.reasoning_content = reasoning;
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  return JSON.stringify({
    id: chatId(m.id),
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishReasonOf(m.stop_reason) }],
    usage: billed ? chatUsageOfBilled(billed, thought) : chatUsageOf(isObject(m.usage) ? m.usage : undefined, thought),
    ...OPENAI_ANSWER_TAIL,
  });
}

/**
 * The members OpenAI writes in every answer and chunk, which clients that check for them (not the
 * SDKs, whose types have them optional) missed in a converted one: the standard tier (Anthropic's
 * "standard" is OpenAI's "default"), and no fingerprint of a backend configuration.
 */
const OPENAI_ANSWER_TAIL = { service_tier: 'default', system_fingerprint: null } as const;

/** A thinking block, shown or not: its tokens are in output_tokens, whatever text it carries. */
function isThinkingBlock(b: unknown): boolean {
  const type = (b as { type?: unknown } | null | undefined)?.type;
  return type === 'thinking' || type === 'redacted_thinking';
}

const DONE = 'data: [DONE]\n\n';
/** OPENAI_ANSWER_TAIL's members as JSON, for chunks written by concatenation. */
const ANSWER_TAIL_MEMBERS = JSON.stringify(OPENAI_ANSWER_TAIL).slice(1, -1);
const ROLE_DELTA = '{"role":"assistant"}';
const NO_DELTA = '{}';

const DELTA_EVENT_LINE = 'event: content_block_delta';
const TEXT_DELTA_HEAD = 'data: {"type":"content_block_delta","index":';
const TEXT_DELTA_MID = ',"delta":{"type":"text_delta","text":"';
const TEXT_DELTA_END = '"}}';
/** A JSON string's content that JSON.stringify writes back as it is: no quote, backslash, control character or surrogate. */
const PLAIN_JSON_TEXT = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/;

/**
 * The text of a text delta's data line as Anthropic writes it, as a JSON string literal (its quotes
 * included), when the line is exactly that event and the text is plain (PLAIN_JSON_TEXT): then the
 * literal is what JSON.stringify makes of the parsed text, and the chunk is written without parsing
 * the line (JSON.parse of every event was 11% of the relay's event loop in chat-stream64). null for
 * any other line, which is parsed.
 */
function plainTextDelta(line: string): string | null {
  // substring and ===, not startsWith: V8's startsWith compares char by char (~5 ns each, 210 ns
  // for this prefix on Node 20 against 50 ns).
  if (line.substring(0, TEXT_DELTA_HEAD.length) !== TEXT_DELTA_HEAD || !line.endsWith(TEXT_DELTA_END)) return null;
  // The index: 0 or digits without a leading 0, as JSON writes a whole number (other forms are parsed).
  let i = TEXT_DELTA_HEAD.length;
  const first = line.charCodeAt(i);
  if (first === 0x30) i++;
  else if (first > 0x30 && first <= 0x39) while (i < line.length && line.charCodeAt(i) >= 0x30 && line.charCodeAt(i) <= 0x39) i++;
  else return null;
  if (line.substring(i, i + TEXT_DELTA_MID.length) !== TEXT_DELTA_MID) return null;
  const start = i + TEXT_DELTA_MID.length;
  const end = line.length - TEXT_DELTA_END.length;
  if (end < start) return null;
  const text = line.slice(start, end);
  return PLAIN_JSON_TEXT.test(text) ? `"${text}"` : null;
}

/** Anthropic SSE in, Chat Completions chunks out, one event at a time. */
export class AnthropicToChatStream extends LineStream implements StreamRewriter {
  readonly #model: string;
  readonly #includeUsage: boolean;
  readonly #created = Math.floor(Date.now() / 1000);
  #event = '';
  #id = '';
  #head: string;
  /** What follows the delta of a chunk with no finish_reason. */
  readonly #openTail: string;
  /** Anthropic block index → OpenAI tool_calls index, for tool_use blocks. */
  #tools = new Map<number, number>();
  /** Anthropic block index → the start's `input` as JSON, for tool_use blocks that streamed no arguments yet. */
  #pendingArguments = new Map<number, string>();
  #usage: Record<string, unknown> = {};
  /** A thinking or redacted_thinking block started: the usage does not say 0 reasoning tokens. */
  #thought = false;
  /**
   * Set before the first push (stream-relay.ts): the usage chunk and `[DONE]` are not written at
   * message_stop but held for heldEndEvents(), once the stream is settled, so that the usage told is the
   * usage billed. Unset (unit tests), they are written at message_stop with the provider's figures.
   */
  holdsFinalUsage = false;
  /** message_stop came while holdsFinalUsage: the usage chunk and [DONE] wait for heldEndEvents(). */
  #held = false;
  /** A finish_reason was written (message_delta's). */
  #finished = false;

  constructor(model: string, includeUsage: boolean) {
    super();
    this.joinsData = true;
    this.#model = model;
    this.#includeUsage = includeUsage;
    this.#head = this.#headOf('');
    this.#openTail = `,"logprobs":null,"finish_reason":null}]${includeUsage ? ',"usage":null' : ''}}\n\n`;
  }

  push(chunk: Buffer): string {
    return this.lines(chunk, this.#onLine);
  }

  readonly #onLine = (line: string): string => this.#line(line);

  #line(line: string): string {
    if (line === '') {
      this.#event = '';
      return '';
    }
    if (line.startsWith('event:')) {
      this.#event = line === DELTA_EVENT_LINE ? 'content_block_delta' : line.slice(6).trim();
      return '';
    }
    if (!line.startsWith('data:')) return '';
    if (this.#event === 'content_block_delta' || this.#event === '') {
      const text = plainTextDelta(line);
      if (text !== null) return this.#chunk(`{"content":${text}}`);
    }
    let data: unknown;
    try {
      data = JSON.parse(line.slice(5));
    } catch {
      return '';
    }
    // JSON that is no object (`data: null`, `1`, `[]`) is no event: skipped like a line that does not parse.
    if (!isObject(data)) return '';
    return this.#convert(this.#event || (typeof data.type === 'string' ? data.type : ''), data);
  }

  /**
   * A chunk of `delta` (its JSON) and `finishReason`. Written by concatenation, not by stringifying a
   * chunk object: this runs once per provider event and was the conversion's largest cost (17% of the
   * relay's event loop in chat-stream64, 2026-12-03); the text is the same, member for member, as
   * JSON.stringify of { id, object, created, model, service_tier, system_fingerprint, choices, usage? }.
   */
  #chunk(delta: string, finishReason: string | null = null): string {
    return this.#head + delta + (finishReason === null ? this.#openTail
      : `,"logprobs":null,"finish_reason":${JSON.stringify(finishReason)}}]${this.#includeUsage ? ',"usage":null' : ''}}\n\n`);
  }

  /** A chunk's text up to its delta's JSON, for the stream's id (rebuilt when message_start sets it). */
  #headOf(id: string): string {
    return `data: {"id":${JSON.stringify(id)},"object":"chat.completion.chunk","created":${this.#created},"model":${JSON.stringify(this.#model)},${ANSWER_TAIL_MEMBERS},"choices":[{"index":0,"delta":`;
  }

  /**
   * What message_stop held (holdsFinalUsage), written once the stream is settled: the usage chunk with
   * `billed` (the figures the ledger has; null: the provider's as counts), and `[DONE]`. '' when
   * nothing is held (no message_stop came, or the client did not ask for the usage).
   */
  heldEndEvents(billed: StreamUsage | null): string {
    if (!this.#held) return '';
    this.#held = false;
    return this.#usageChunk(billed ? chatUsageOfBilled(billed, this.#thought) : chatUsageOf(this.#usage, this.#thought)) + DONE;
  }

  #usageChunk(usage: ChatUsage): string {
    return `data: ${JSON.stringify({
      id: this.#id, object: 'chat.completion.chunk', created: this.#created, model: this.#model, ...OPENAI_ANSWER_TAIL, choices: [], usage,
    })}\n\n`;
  }

  #convert(type: string, data: Record<string, unknown>): string {
    switch (type) {
      case 'message_start': {
        const message = data.message as Record<string, unknown> | undefined;
        this.#id = chatId(message?.id);
        this.#head = this.#headOf(this.#id);
        this.#usage = isObject(message?.usage) ? { ...message.usage } : {};
        // No content yet: an answer of tool calls alone keeps content null, as OpenAI's (whose first
        // chunk of such an answer says null); with `content: ""` here the openai SDK (7.x) finished
        // it with content "", which code that tells text answers by content !== null took for text.
        return this.#chunk(ROLE_DELTA);
      }
      case 'content_block_start': {
        const block = data.content_block as Record<string, unknown> | undefined;
        if (isThinkingBlock(block)) this.#thought = true;
        if (block?.type !== 'tool_use') return '';
        const index = this.#tools.size;
        const at = blockIndex(data.index);
        this.#tools.set(at, index);
        this.#pendingArguments.set(at, isObject(block.input) ? JSON.stringify(block.input) : '{}');
        return this.#chunk(JSON.stringify({ tool_calls: [{ index, id: block.id, type: 'function', function: { name: block.name, arguments: '' } }] }));
      }
      case 'content_block_delta': {
        const delta = data.delta as Record<string, unknown> | undefined;
        if (delta?.type === 'text_delta' && typeof delta.text === 'string') return this.#chunk(`{"content":${JSON.stringify(delta.text)}}`);
        if (delta?.type === 'thinking_delta') {
          this.#thought = true;
          if (typeof delta.thinking === 'string' && delta.thinking !== '') return this.#chunk(`{"reasoning_content":${JSON.stringify(delta.thinking)}}`);
          return '';
        }
        if (delta?.type === 'input_json_delta' && typeof delta.partial_json === 'string') {
          const at = blockIndex(data.index);
          const index = this.#tools.get(at);
          if (index === undefined || delta.partial_json === '') return '';
          this.#pendingArguments.delete(at);
          return this.#chunk(JSON.stringify({ tool_calls: [{ index, function: { arguments: delta.partial_json } }] }));
        }
        return '';
      }
      case 'content_block_stop': {
        const at = blockIndex(data.index);
        const args = this.#pendingArguments.get(at);
        if (args === undefined) return '';
        this.#pendingArguments.delete(at);
        return this.#chunk(JSON.stringify({ tool_calls: [{ index: this.#tools.get(at)!, function: { arguments: args } }] }));
      }
      case 'message_delta': {
        const usage = data.usage;
        if (isObject(usage)) for (const [k, v] of Object.entries(usage)) if (v !== null && v !== undefined && k !== '__proto__') this.#usage[k] = v;
        const delta = data.delta as Record<string, unknown> | undefined;
        this.#finished = true;
        return this.#chunk(NO_DELTA, finishReasonOf(delta?.stop_reason));
      }
      case 'message_stop': {
        // A provider that ends without message_delta (no stop_reason said): the choice still finishes,
        // or the openai SDK's stream helper (finalChatCompletion) throws "missing finish_reason".
        const finish = this.#finished ? '' : this.#chunk(NO_DELTA, 'stop');
        this.#finished = true;
        if (!this.#includeUsage) return finish + DONE;
        if (this.holdsFinalUsage) {
          this.#held = true;
          return finish;
        }
        return finish + this.#usageChunk(chatUsageOf(this.#usage, this.#thought)) + DONE;
      }
      case 'error': {
        const e = data.error as { type?: unknown; message?: unknown } | undefined;
        const t = typeof e?.type === 'string' ? e.type : 'api_error';
        // As a provider's error answered whole (openaiProviderErrorBody): OpenAI's type, and its code
        // for a rate limit or quota; the Anthropic type was the code before, which no OpenAI client reads.
        return `data: ${openaiProviderErrorBody(t, typeof e?.message === 'string' ? e.message : 'The model provider stream failed.')}\n\n`;
      }
      default:
        return '';
    }
  }
}
