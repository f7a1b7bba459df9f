// A Chat Completions answer as an Anthropic Messages answer, for /v1/messages requests served by an
// OpenAI-format channel, and the filter of a Chat Completions stream passed to a Chat Completions
// client.
//
//   message.content → a text block; tool_calls → tool_use blocks (arguments parsed; unparsable ones
//   as {}); reasoning and refusal are not converted.
//   finish_reason: stop → end_turn, length → max_tokens, tool_calls / function_call → tool_use,
//   content_filter → refusal.
//   usage: input_tokens = prompt_tokens - cached_tokens, cache_read_input_tokens = cached_tokens,
//   output_tokens = completion_tokens (and reasoning reported beside them: chat-usage.ts).
//
// Streamed (ChatToAnthropicStream), chunk by chunk: the first chunk → message_start (input tokens 0:
// a Chat Completions stream states them only at its end); content deltas → a text block's deltas;
// each tool call → a tool_use block with input_json_delta pieces; `data: [DONE]` → the blocks closed,
// message_delta with the stop reason and the whole usage (input included), message_stop; an error
// object → Anthropic's error event.
import { errorBody } from '../../errors.js';
import type { StreamRewriter } from '../../messages/stream-relay.js';
import { keyedValue } from '../../stream/sse-bytes.js';
import { LineStream } from '../../stream/line-stream.js';
import { usageOfChatUsage } from './chat-usage.js';

export function stopReasonOf(finishReason: unknown): string {
  switch (finishReason) {
    case 'length': return 'max_tokens';
    case 'tool_calls': case 'function_call': return 'tool_use';
    case 'content_filter': return 'refusal';
    default: return 'end_turn';
  }
}

function anthropicUsage(usage: unknown): Record<string, number> {
  const u = usageOfChatUsage(usage);
  return {
    input_tokens: u?.inputTokens ?? 0,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: u?.cacheReadTokens ?? 0,
    output_tokens: u?.outputTokens ?? 0,
  };
}

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
  let c: Record<string, unknown>;
  try {
    c = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
  } catch {
    return null;
  }
  const choice = (Array.isArray(c.choices) ? c.choices[0] : undefined) as { message?: Record<string, unknown>; finish_reason?: unknown } | undefined;
  const msg = choice?.message ?? {};
  const content: Record<string, unknown>[] = [];
  if (typeof msg.content === 'string' && msg.content !== '') content.push({ type: 'text', text: msg.content });
  if (Array.isArray(msg.tool_calls)) {
    for (const t of msg.tool_calls as Array<{ id?: unknown; function?: { name?: unknown; arguments?: unknown } }>) {
      content.push({ type: 'tool_use', id: t.id, name: t.function?.name, input: parseArguments(t.function?.arguments) });
    }
  }
  return JSON.stringify({
    id: messageId(c.id), type: 'message', role: 'assistant', model, content,
    stop_reason: stopReasonOf(choice?.finish_reason), stop_sequence: null, usage: anthropicUsage(c.usage),
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
  /** The OpenAI tool call index of the open tool_use block, -1 when the open block is text. */
  #toolIndex = -1;
  #finish: unknown = null;
  #usage: unknown = null;

  constructor(model: string) {
    super();
    this.#model = model;
  }

  push(chunk: Buffer): string {
    return this.lines(chunk, (line) => this.#line(line));
  }

  #line(line: string): string {
    if (!line.startsWith('data:')) return '';
    const data = line.slice(5).trim();
    if (data === '[DONE]') return this.#stop();
    let c: Record<string, unknown>;
    try {
      c = JSON.parse(data) as Record<string, unknown>;
    } catch {
      return '';
    }
    if (c.error && typeof c.error === 'object') {
      const e = c.error as { message?: unknown };
      return sse('error', JSON.parse(errorBody('api_error', typeof e.message === 'string' ? e.message : 'The model provider stream failed.')));
    }
    let out = '';
    if (!this.#started) {
      this.#started = true;
      out += sse('message_start', {
        type: 'message_start',
        message: {
          id: messageId(c.id), type: 'message', role: 'assistant', model: this.#model, content: [],
          stop_reason: null, stop_sequence: null, usage: { input_tokens: 0, output_tokens: 0 },
        },
      });
    }
    if (c.usage) this.#usage = c.usage;
    const choice = (Array.isArray(c.choices) ? c.choices[0] : undefined) as { delta?: Record<string, unknown>; finish_reason?: unknown } | undefined;
    if (!choice) return out;
    if (choice.finish_reason) this.#finish = choice.finish_reason;
    const delta = choice.delta;
    if (!delta) return out;
    if (typeof delta.content === 'string' && delta.content !== '') {
      if (this.#block < 0 || this.#toolIndex >= 0) out += this.#open({ type: 'text', text: '' }, -1);
      out += sse('content_block_delta', { type: 'content_block_delta', index: this.#block, delta: { type: 'text_delta', text: delta.content } });
    }
    if (Array.isArray(delta.tool_calls)) {
      for (const t of delta.tool_calls as Array<{ index?: unknown; id?: unknown; function?: { name?: unknown; arguments?: unknown } }>) {
        const index = typeof t.index === 'number' ? t.index : 0;
        if (this.#toolIndex !== index || (typeof t.id === 'string' && this.#block < 0)) {
          out += this.#open({ type: 'tool_use', id: t.id, name: t.function?.name, input: {} }, index);
        }
        const args = t.function?.arguments;
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
    this.#toolIndex = -1;
    return out;
  }

  #open(block: Record<string, unknown>, toolIndex: number): string {
    const out = this.#close();
    this.#block = this.#blocks++;
    this.#toolIndex = toolIndex;
    return out + sse('content_block_start', { type: 'content_block_start', index: this.#block, content_block: block });
  }

  #stop(): string {
    if (this.#stopped) return '';
    this.#stopped = true;
    return this.#close()
      + sse('message_delta', { type: 'message_delta', delta: { stop_reason: stopReasonOf(this.#finish), stop_sequence: null }, usage: anthropicUsage(this.#usage) })
      + sse('message_stop', { type: 'message_stop' });
  }
}

const USAGE_KEY = Buffer.from('"usage"');
/** A line with a usage object, compact or spaced (`"usage": {`). */
const hasUsageObject = (buf: Buffer, end = buf.length) => keyedValue(buf, USAGE_KEY, 0, end, 0x7b) >= 0;

/**
 * A Chat Completions stream passed to a Chat Completions client that did not ask for its usage: the
 * relay asked for it (it bills by it), so the extra last chunk (`choices: []` with the usage) is
 * left out. Chunks that cannot hold it (no `"usage"` key with an object value, and no line pending)
 * pass as they are.
 */
export class ChatUsageFilter extends LineStream implements StreamRewriter {
  #pending = false;
  #dropBlank = false;

  push(chunk: Buffer): string | Buffer {
    if (!this.#pending && !hasUsageObject(chunk) && chunk[chunk.length - 1] === 0x0a && !this.#dropBlank) return chunk;
    const out = this.lines(chunk, (line) => this.#line(line));
    this.#pending = chunk[chunk.length - 1] !== 0x0a;
    return out;
  }

  #line(line: string): string {
    if (line === '' && this.#dropBlank) {
      this.#dropBlank = false;
      return '';
    }
    if (line.startsWith('data:') && line.includes('"usage"') && hasUsageObject(Buffer.from(line))) {
      try {
        const c = JSON.parse(line.slice(5)) as { choices?: unknown };
        if (Array.isArray(c.choices) && c.choices.length === 0) {
          this.#dropBlank = true;
          return '';
        }
      } catch {
        // not a chunk of ours to judge: passed on
      }
    }
    return line + '\n';
  }
}
