// What the mock says on the wire, in Anthropic's Messages API format: the deterministic token
// accounting a test computes the bill from, request validation with Anthropic's error wording, ids,
// status lines and error types, the SSE events of a streamed message, rate-limit headers and the
// model list.
import { randomBytes } from 'node:crypto';

// ---------------------------------------------------------------------------------------------
// Token counting

interface TextHolder { type?: unknown; text?: unknown }

function textTokens(text: string): number {
  return Math.ceil(Buffer.byteLength(text, 'utf8') / 4);
}

function contentTokens(content: unknown): number {
  if (typeof content === 'string') return textTokens(content);
  if (!Array.isArray(content)) return 0;
  let n = 0;
  for (const block of content as TextHolder[]) {
    if (block !== null && typeof block === 'object' && block.type === 'text' && typeof block.text === 'string') {
      n += textTokens(block.text);
    }
  }
  return n;
}

/**
 * The mock's deterministic input token count of a Messages request body: the sum, over every text
 * piece of `system` (string or text blocks) and of each messages[].content (string or text blocks),
 * of Math.ceil(utf8ByteLength / 4). Non-text blocks count 0. Tolerates malformed bodies (counts 0).
 */
export function countInputTokens(body: unknown): number {
  if (body === null || typeof body !== 'object') return 0;
  const b = body as { system?: unknown; messages?: unknown };
  let n = contentTokens(b.system);
  if (Array.isArray(b.messages)) {
    for (const m of b.messages as Array<{ content?: unknown } | null>) {
      if (m !== null && typeof m === 'object') n += contentTokens(m.content);
    }
  }
  return n;
}

/**
 * Input tokens the media blocks of a request add: `perDocument` for each `document` block and
 * `perImage` for each `image` block, in `system` and messages[].content, tool results included.
 */
export function mediaInputTokens(body: unknown, perDocument: number, perImage: number): number {
  if ((perDocument === 0 && perImage === 0) || body === null || typeof body !== 'object') return 0;
  const b = body as { system?: unknown; messages?: unknown };
  let n = mediaTokens(b.system, perDocument, perImage);
  if (Array.isArray(b.messages)) {
    for (const m of b.messages as Array<{ content?: unknown } | null>) {
      if (m !== null && typeof m === 'object') n += mediaTokens(m.content, perDocument, perImage);
    }
  }
  return n;
}

function mediaTokens(content: unknown, perDocument: number, perImage: number): number {
  if (!Array.isArray(content)) return 0;
  let n = 0;
  for (const block of content as Array<{ type?: unknown; content?: unknown } | null>) {
    if (block === null || typeof block !== 'object') continue;
    if (block.type === 'document') n += perDocument;
    else if (block.type === 'image') n += perImage;
    else if (block.type === 'tool_result') n += mediaTokens(block.content, perDocument, perImage);
  }
  return n;
}

/** The text of a response with `n` output tokens. */
export const TOKEN_TEXT = 'tok ';
export function outputText(n: number): string {
  return TOKEN_TEXT.repeat(n);
}

// ---------------------------------------------------------------------------------------------
// Request validation (Anthropic-style messages)

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function validateContent(content: unknown, where: string): string | null {
  if (typeof content === 'string') return null;
  if (!Array.isArray(content)) return `${where}: Input should be a valid string or a valid list`;
  for (let i = 0; i < content.length; i++) {
    const block: unknown = content[i];
    if (!isObject(block)) return `${where}.${i}: Input should be a valid dictionary or object`;
    if (typeof block.type !== 'string') return `${where}.${i}.type: Field required`;
    if (block.type === 'text' && typeof block.text !== 'string') {
      return `${where}.${i}.text: ${block.text === undefined ? 'Field required' : 'Input should be a valid string'}`;
    }
  }
  return null;
}

/** null when valid, else the invalid_request_error message. */
export function validateMessagesBody(body: unknown, opts: { requireMaxTokens: boolean }): string | null {
  if (!isObject(body)) return 'Input should be a valid dictionary or object to extract fields from';
  if (body.model === undefined) return 'model: Field required';
  if (typeof body.model !== 'string') return 'model: Input should be a valid string';
  if (body.model.length === 0) return 'model: String should have at least 1 character';
  if (body.messages === undefined) return 'messages: Field required';
  if (!Array.isArray(body.messages)) return 'messages: Input should be a valid list';
  if (body.messages.length === 0) return 'messages: at least one message is required';
  for (let i = 0; i < body.messages.length; i++) {
    const m: unknown = body.messages[i];
    if (!isObject(m)) return `messages.${i}: Input should be a valid dictionary or object to extract fields from`;
    if (m.role === undefined) return `messages.${i}.role: Field required`;
    if (m.role !== 'user' && m.role !== 'assistant' && m.role !== 'system') {
      return `messages.${i}.role: Input should be 'user' or 'assistant'`;
    }
    if (m.content === undefined) return `messages.${i}.content: Field required`;
    const err = validateContent(m.content, `messages.${i}.content`);
    if (err) return err;
  }
  if (opts.requireMaxTokens || body.max_tokens !== undefined) {
    if (body.max_tokens === undefined) return 'max_tokens: Field required';
    if (typeof body.max_tokens !== 'number' || !Number.isInteger(body.max_tokens)) {
      return 'max_tokens: Input should be a valid integer';
    }
    if (body.max_tokens < 1) return 'max_tokens: Input should be greater than or equal to 1';
  }
  if (body.system !== undefined) {
    const err = validateContent(body.system, 'system');
    if (err) return err;
  }
  if (body.stream !== undefined && typeof body.stream !== 'boolean') return 'stream: Input should be a valid boolean';
  for (const f of ['temperature', 'top_p'] as const) {
    const v = body[f];
    if (v !== undefined && (typeof v !== 'number' || v < 0 || v > 1)) {
      return `${f}: Input should be a number between 0 and 1`;
    }
  }
  if (body.top_k !== undefined && (typeof body.top_k !== 'number' || !Number.isInteger(body.top_k) || body.top_k < 0)) {
    return 'top_k: Input should be a non-negative integer';
  }
  if (body.stop_sequences !== undefined
    && (!Array.isArray(body.stop_sequences) || body.stop_sequences.some((s) => typeof s !== 'string'))) {
    return 'stop_sequences: Input should be a valid list of strings';
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// Wire helpers

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
let idPool = Buffer.alloc(0);
let idPoolPos = 0;

/** prefix + 24 random base62 characters (msg_…, req_…), as Anthropic's ids look. */
export function randomId(prefix: string, length = 24): string {
  if (idPoolPos + length > idPool.length) {
    idPool = randomBytes(4096);
    idPoolPos = 0;
  }
  let s = prefix;
  // 248 = 4 * 62: rejection-free enough and unbiased for bytes < 248.
  while (s.length < prefix.length + length) {
    if (idPoolPos >= idPool.length) {
      idPool = randomBytes(4096);
      idPoolPos = 0;
    }
    const b = idPool[idPoolPos++]!;
    if (b < 248) s += BASE62[b % 62];
  }
  return s;
}

const STATUS_LINE: Record<number, string> = {
  200: '200 OK', 400: '400 Bad Request', 401: '401 Unauthorized', 402: '402 Payment Required',
  403: '403 Forbidden', 404: '404 Not Found', 405: '405 Method Not Allowed', 408: '408 Request Timeout',
  409: '409 Conflict', 413: '413 Payload Too Large', 422: '422 Unprocessable Entity',
  429: '429 Too Many Requests', 500: '500 Internal Server Error', 502: '502 Bad Gateway',
  503: '503 Service Unavailable', 504: '504 Gateway Timeout', 529: '529 Overloaded',
};

export function statusLine(status: number): string {
  return STATUS_LINE[status] ?? `${status} Error`;
}

/** The Anthropic error type and a realistic message for an HTTP status. */
export function errorTypeFor(status: number): { type: string; message: string } {
  switch (status) {
    case 400: return { type: 'invalid_request_error', message: 'Invalid request' };
    case 401: return { type: 'authentication_error', message: 'invalid x-api-key' };
    case 402: return { type: 'billing_error', message: 'Your credit balance is too low to access the Anthropic API.' };
    case 403: return { type: 'permission_error', message: 'Your API key does not have permission to use the specified resource.' };
    case 404: return { type: 'not_found_error', message: 'Not found' };
    case 409: return { type: 'conflict_error', message: 'Conflict' };
    case 413: return { type: 'request_too_large', message: 'Request exceeds the maximum allowed number of bytes.' };
    case 429: return { type: 'rate_limit_error', message: 'This request would exceed the rate limit for your organization. Please retry later.' };
    case 500: return { type: 'api_error', message: 'Internal server error' };
    case 504: return { type: 'timeout_error', message: 'Request timed out' };
    case 529: return { type: 'overloaded_error', message: 'Overloaded' };
    default:
      return status >= 500 ? { type: 'api_error', message: 'Internal server error' }
        : { type: 'invalid_request_error', message: 'Invalid request' };
  }
}

function sse(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** One output token of a stream. */
export const DELTA_EVENT = sse('content_block_delta', {
  type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: TOKEN_TEXT },
});
const PING_EVENT = sse('ping', { type: 'ping' });
const BLOCK_START_EVENT = sse('content_block_start', {
  type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' },
});
const BLOCK_STOP_EVENT = sse('content_block_stop', { type: 'content_block_stop', index: 0 });
const TEXT_BLOCK_AFTER_THINKING_STOP_EVENT = sse('content_block_stop', { type: 'content_block_stop', index: 1 });
const MESSAGE_STOP_EVENT = sse('message_stop', { type: 'message_stop' });

// Extended thinking: the thinking block (index 0) of "tok " tokens, its signature, then the text
// block at index 1, as Anthropic streams them.
/** An opaque signature of the thinking, as Anthropic sends one (base64; the mock's is fixed). */
export const MOCK_THINKING_SIGNATURE = 'EqQBCkYIBRgCKkBtb2NrIHRoaW5raW5nIHNpZ25hdHVyZQ==';
/** One thinking token of a stream. */
export const THINKING_DELTA_EVENT = sse('content_block_delta', {
  type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: TOKEN_TEXT },
});
/** One text token of a stream that thought first. */
export const TEXT_AFTER_THINKING_DELTA_EVENT = sse('content_block_delta', {
  type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: TOKEN_TEXT },
});
const THINKING_BLOCK_START_EVENT = sse('content_block_start', {
  type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' },
});
/** Between the last thinking token and the first text token: the signature, the thinking block's end, the text block's start. */
export const THINKING_END_EVENTS = sse('content_block_delta', {
  type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: MOCK_THINKING_SIGNATURE },
}) + BLOCK_STOP_EVENT + sse('content_block_start', { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } });
/** A stream's mid-flight failure, as Anthropic sends it when overloaded. */
export const OVERLOADED_EVENT = sse('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });

export type StopReason = 'max_tokens' | 'end_turn' | 'tool_use';

export interface MessageUsage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  cache_creation: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
  output_tokens: number;
  service_tier: string;
  /** Only when the answer made server-tool calls, as the provider bills each web search apart. */
  server_tool_use?: { web_search_requests: number };
}

/** cacheCreation is the 5-minute writes; Anthropic's cache_creation_input_tokens is the sum of both TTLs. */
export function messageUsage(inputTokens: number, cacheRead: number, cacheCreation: number, outputTokens: number, cacheCreation1h = 0, webSearchRequests = 0): MessageUsage {
  const usage: MessageUsage = {
    input_tokens: inputTokens,
    cache_creation_input_tokens: cacheCreation + cacheCreation1h,
    cache_read_input_tokens: cacheRead,
    cache_creation: { ephemeral_5m_input_tokens: cacheCreation, ephemeral_1h_input_tokens: cacheCreation1h },
    output_tokens: outputTokens,
    service_tier: 'standard',
  };
  if (webSearchRequests > 0) usage.server_tool_use = { web_search_requests: webSearchRequests };
  return usage;
}

/** The non-streaming answer: one text block of the text's tokens, after a thinking block of `thinkingTokens` when there are any. */
export function messageBody(id: string, model: string, usage: MessageUsage, stopReason: StopReason, thinkingTokens = 0) {
  const text = { type: 'text', text: outputText(usage.output_tokens - thinkingTokens) };
  return {
    id, type: 'message', role: 'assistant', model,
    content: thinkingTokens > 0 ? [{ type: 'thinking', thinking: outputText(thinkingTokens), signature: MOCK_THINKING_SIGNATURE }, text] : [text],
    stop_reason: stopReason, stop_sequence: null, usage,
  };
}

/** Everything a stream sends before its first delta: message_start (output_tokens 1, as Anthropic reports it), the text block's start, a ping. */
export function streamHead(id: string, model: string, usage: MessageUsage, thinking = false): string {
  return sse('message_start', {
    type: 'message_start',
    message: {
      id, type: 'message', role: 'assistant', model, content: [],
      stop_reason: null, stop_sequence: null,
      // Searches happen during the generation: message_start counts none, message_delta all.
      usage: usage.server_tool_use ? { ...usage, output_tokens: 1, server_tool_use: { web_search_requests: 0 } } : { ...usage, output_tokens: 1 },
    },
  }) + (thinking ? THINKING_BLOCK_START_EVENT : BLOCK_START_EVENT) + PING_EVENT;
}

/** Everything a completed stream sends after its last delta. */
export function streamTail(stopReason: StopReason, outputTokens: number, webSearchRequests = 0, thinking = false): string {
  return (thinking ? TEXT_BLOCK_AFTER_THINKING_STOP_EVENT : BLOCK_STOP_EVENT) + sse('message_delta', {
    type: 'message_delta',
    delta: { stop_reason: stopReason, stop_sequence: null },
    usage: webSearchRequests > 0 ? { output_tokens: outputTokens, server_tool_use: { web_search_requests: webSearchRequests } } : { output_tokens: outputTokens },
  }) + MESSAGE_STOP_EVENT;
}

// anthropic-ratelimit-* headers, recomputed at most once a second.
let rateLimitHeaders: Array<[string, string]> = [];
let rateLimitSecond = -1;
export function currentRateLimitHeaders(): Array<[string, string]> {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== rateLimitSecond) {
    rateLimitSecond = second;
    const reset = new Date((second + 1) * 1000).toISOString().replace('.000Z', 'Z');
    rateLimitHeaders = [
      ['anthropic-ratelimit-requests-limit', '4000'],
      ['anthropic-ratelimit-requests-remaining', '3999'],
      ['anthropic-ratelimit-requests-reset', reset],
      ['anthropic-ratelimit-input-tokens-limit', '2000000'],
      ['anthropic-ratelimit-input-tokens-remaining', '2000000'],
      ['anthropic-ratelimit-input-tokens-reset', reset],
      ['anthropic-ratelimit-output-tokens-limit', '400000'],
      ['anthropic-ratelimit-output-tokens-remaining', '400000'],
      ['anthropic-ratelimit-output-tokens-reset', reset],
      ['anthropic-ratelimit-tokens-limit', '2400000'],
      ['anthropic-ratelimit-tokens-remaining', '2400000'],
      ['anthropic-ratelimit-tokens-reset', reset],
    ];
  }
  return rateLimitHeaders;
}

// Ids from the SDK's `Model` union; dates are placeholders (the mock has no source for them).
export const MODELS: ReadonlyArray<{ id: string; display_name: string; created_at: string }> = [
  { id: 'claude-opus-4-7', display_name: 'Claude Opus 4.7', created_at: '2026-04-01T00:00:00Z' },
  { id: 'claude-sonnet-4-6', display_name: 'Claude Sonnet 4.6', created_at: '2026-02-01T00:00:00Z' },
  { id: 'claude-opus-4-5-20251101', display_name: 'Claude Opus 4.5', created_at: '2025-11-01T00:00:00Z' },
  { id: 'claude-haiku-4-5-20251001', display_name: 'Claude Haiku 4.5', created_at: '2025-10-01T00:00:00Z' },
  { id: 'claude-sonnet-4-5-20250929', display_name: 'Claude Sonnet 4.5', created_at: '2025-09-29T00:00:00Z' },
];
/** Model ids GET /v1/models lists (newest first). */
export const MOCK_MODEL_IDS: readonly string[] = MODELS.map((m) => m.id);

// ---------------------------------------------------------------------------------------------
// Tool calls

/**
 * The tool the answer calls, or null for a text answer: a request whose tool_choice forces a tool
 * (`any`: the first tool, `tool`: the named one) calls it, unless its last message already carries a
 * tool_result (the round trip is then answered in text).
 */
export function forcedTool(body: Record<string, unknown>): { name: string; input: Record<string, unknown> } | null {
  const tools = body.tools as Array<{ name?: unknown; input_schema?: unknown }> | undefined;
  const choice = body.tool_choice as { type?: unknown; name?: unknown } | undefined;
  if (!Array.isArray(tools) || tools.length === 0 || (choice?.type !== 'any' && choice?.type !== 'tool')) return null;
  const messages = body.messages as Array<{ content?: unknown }>;
  const last = messages[messages.length - 1]?.content;
  if (Array.isArray(last) && last.some((b: { type?: unknown } | null) => b?.type === 'tool_result')) return null;
  const tool = choice.type === 'tool' ? tools.find((t) => t.name === choice.name) : tools[0];
  if (!tool || typeof tool.name !== 'string') return null;
  return { name: tool.name, input: toolInput(tool.input_schema) };
}

/** Deterministic arguments: "tok" for each string property of the schema, 1 for each number. */
export function toolInput(schema: unknown): Record<string, unknown> {
  const props = (schema as { properties?: Record<string, { type?: unknown }> } | null)?.properties;
  const input: Record<string, unknown> = {};
  if (props && typeof props === 'object') {
    for (const [k, v] of Object.entries(props)) input[k] = v?.type === 'number' || v?.type === 'integer' ? 1 : 'tok';
  }
  return input;
}

/** The non-streaming answer calling a tool. */
export function toolUseMessageBody(id: string, model: string, usage: MessageUsage, tool: { name: string; input: Record<string, unknown> }, toolUseId: string) {
  return {
    id, type: 'message', role: 'assistant', model,
    content: [{ type: 'tool_use', id: toolUseId, name: tool.name, input: tool.input }],
    stop_reason: 'tool_use', stop_sequence: null, usage,
  };
}

/** A whole streamed answer calling a tool: its arguments in two input_json_delta pieces. */
export function toolUseStream(id: string, model: string, usage: MessageUsage, tool: { name: string; input: Record<string, unknown> }, toolUseId: string): string {
  // A call without arguments streams one empty partial_json, as Anthropic's do.
  const json = Object.keys(tool.input).length === 0 ? '' : JSON.stringify(tool.input);
  const half = Math.floor(json.length / 2);
  const pieces = json === '' ? [''] : [json.slice(0, half), json.slice(half)];
  return sse('message_start', {
    type: 'message_start',
    message: { id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } },
  })
    + sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: toolUseId, name: tool.name, input: {} } })
    + pieces.map((p) => sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: p } })).join('')
    + sse('content_block_stop', { type: 'content_block_stop', index: 0 })
    + sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: usage.output_tokens } })
    + MESSAGE_STOP_EVENT;
}
