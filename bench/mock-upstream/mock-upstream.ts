// A fake Anthropic provider that speaks the real Messages API wire format, for tests and benchmarks
// (there is no internet). Built on uWebSockets.js so that a benchmark measures the gateway in front
// of it, not the mock.
//
// Endpoints: POST /v1/messages (JSON or `stream: true` SSE), POST /v1/messages/count_tokens,
// GET /v1/models, GET /v1/models/:id. Everything else answers 404 not_found_error.
//
// Determinism (so a test can compute the bill):
//   input_tokens  = countInputTokens(body): Σ ceil(utf8Bytes/4) over every text piece in `system`
//                   and messages[].content (string, or blocks of type 'text'). Other blocks count 0.
//   output_tokens = min(max_tokens, target) where target = x-mock-output-tokens header, else the
//                   outputTokens option (default 64). Each output token is the text "tok ".
//   stop_reason   = 'max_tokens' when max_tokens < target, else 'end_turn'.
//   cache_read_input_tokens / cache_creation_input_tokens = header x-mock-cache-read-tokens /
//                   x-mock-cache-creation-tokens, else the options, else 0 (input_tokens unchanged).
//
// Knobs, in precedence order header > option. Headers are for direct tests; a gateway in between
// usually drops x-mock-*, so the model name and setOptions() are the knobs that go through a proxy.
//   x-mock-error: <status>            answer that status with the matching Anthropic error type
//   model containing -error<status>   same, e.g. "claude-x-error529" (status 4xx/5xx)
//   errorRate (option)                fraction of /v1/messages requests answered 529 overloaded_error
//   x-mock-output-tokens              output token target (see above)
//   x-mock-token-delay-ms             delay between streamed tokens (option tokenDelayMs)
//   x-mock-first-token-delay-ms       delay before the first token (option firstTokenDelayMs,
//                                     defaults to the token delay). Non-streaming responses wait
//                                     first + (n-1)*tokenDelay before answering.
//   x-mock-fail-after-tokens          stream: socket closed abruptly after N text deltas
//                                     (option failMidStreamAfterTokens)
//   x-mock-stream-error-after-tokens  stream: `event: error` overloaded_error after N text deltas,
//                                     then the response ends cleanly (option streamErrorAfterTokens)
//   x-mock-cache-read-tokens / x-mock-cache-creation-tokens   usage cache fields
import { randomBytes } from 'node:crypto';
import uWS from 'uWebSockets.js';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';

export interface MockUpstreamOptions {
  /** Interface to bind. Default 127.0.0.1. */
  host?: string;
  /** 0 (default) = a random free port; MockUpstream.port reports the real one. */
  port?: number;
  /** When set, requests must carry it in x-api-key or Authorization: Bearer, else 401. */
  apiKey?: string;
  /** Output tokens per response unless max_tokens is lower. Default 64. */
  outputTokens?: number;
  /** Delay between streamed tokens, ms. Default 0 (tokens are then batched into few writes). */
  tokenDelayMs?: number;
  /** Delay before the first token, ms. Default: tokenDelayMs. */
  firstTokenDelayMs?: number;
  /** 0..1: fraction of /v1/messages requests answered 529 overloaded_error. Default 0. */
  errorRate?: number;
  /** Streams die (socket closed abruptly) after this many text deltas. */
  failMidStreamAfterTokens?: number;
  /** Streams send `event: error` (overloaded_error) after this many text deltas, then end. */
  streamErrorAfterTokens?: number;
  /** usage.cache_read_input_tokens unless the request header overrides it. Default 0. */
  cacheReadTokens?: number;
  /** usage.cache_creation_input_tokens unless the request header overrides it. Default 0. */
  cacheCreationTokens?: number;
  /** Request bodies above this many bytes answer 413 request_too_large. Default 32 MiB. */
  maxBodyBytes?: number;
  /** How many recent requests `requests` keeps. Default 100. */
  recordLimit?: number;
}

export interface RecordedRequest {
  method: string;
  /** Path plus query string, e.g. /v1/models?limit=2 */
  path: string;
  /** Lower-case names. */
  headers: Record<string, string>;
  /** Parsed JSON body; undefined when there was none, null when it was not valid JSON. */
  body: unknown;
  /** request-id the mock answered with. */
  requestId: string;
  receivedAt: number;
}

export interface MockUpstreamStats {
  /** Every request received. */
  requests: number;
  /** SSE responses started. */
  streams: number;
  /** Responses the client went away from before the mock finished them. */
  aborted: number;
  /** Error responses (HTTP status >= 400, and `event: error` mid-stream). */
  errors: number;
  /** Streams the mock killed on purpose (failMidStreamAfterTokens). */
  dropped: number;
  /** Text deltas written to streams. */
  tokensStreamed: number;
}

export interface MockUpstream {
  readonly port: number;
  /** http://host:port, usable as the SDK's baseURL. */
  readonly url: string;
  /** The last `recordLimit` requests, oldest first. */
  readonly requests: RecordedRequest[];
  readonly stats: MockUpstreamStats;
  /** Merge into the current options; applies to requests that arrive afterwards. */
  setOptions(partial: Partial<MockUpstreamOptions>): void;
  /** Stop listening and force-close every connection. */
  close(): Promise<void>;
}

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

function statusLine(status: number): string {
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

const DELTA_EVENT = sse('content_block_delta', {
  type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: TOKEN_TEXT },
});
const PING_EVENT = sse('ping', { type: 'ping' });
const BLOCK_START_EVENT = sse('content_block_start', {
  type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' },
});
const BLOCK_STOP_EVENT = sse('content_block_stop', { type: 'content_block_stop', index: 0 });
const MESSAGE_STOP_EVENT = sse('message_stop', { type: 'message_stop' });
const OVERLOADED_EVENT = sse('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
/** With no token delay, a stream is written in writes of at most this many deltas. */
const DELTAS_PER_WRITE = 256;

// anthropic-ratelimit-* headers, recomputed at most once a second.
let rateLimitHeaders: Array<[string, string]> = [];
let rateLimitSecond = -1;
function currentRateLimitHeaders(): Array<[string, string]> {
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
const MODELS: ReadonlyArray<{ id: string; display_name: string; created_at: string }> = [
  { id: 'claude-opus-4-7', display_name: 'Claude Opus 4.7', created_at: '2026-04-01T00:00:00Z' },
  { id: 'claude-sonnet-4-6', display_name: 'Claude Sonnet 4.6', created_at: '2026-02-01T00:00:00Z' },
  { id: 'claude-opus-4-5-20251101', display_name: 'Claude Opus 4.5', created_at: '2025-11-01T00:00:00Z' },
  { id: 'claude-haiku-4-5-20251001', display_name: 'Claude Haiku 4.5', created_at: '2025-10-01T00:00:00Z' },
  { id: 'claude-sonnet-4-5-20250929', display_name: 'Claude Sonnet 4.5', created_at: '2025-09-29T00:00:00Z' },
];
/** Model ids GET /v1/models lists (newest first). */
export const MOCK_MODEL_IDS: readonly string[] = MODELS.map((m) => m.id);

// ---------------------------------------------------------------------------------------------
// Per-request state

interface Exchange {
  res: HttpResponse;
  requestId: string;
  /** The client went away (or we force-closed): `res` must not be touched any more. */
  aborted: boolean;
  /** The mock has finished (or deliberately killed) the response. */
  done: boolean;
  timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  /** Called when the socket drains after a write() reported backpressure. */
  onDrain: (() => void) | undefined;
}

function headerInt(headers: Record<string, string>, name: string): number | undefined {
  const v = headers[name];
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  return Number.isInteger(n) && n >= 0 ? n : undefined;
}

function optInt(v: number | undefined): number | undefined {
  return v !== undefined && Number.isFinite(v) && v >= 0 ? Math.floor(v) : undefined;
}

// ---------------------------------------------------------------------------------------------

export async function startMockUpstream(opts: MockUpstreamOptions = {}): Promise<MockUpstream> {
  let options: MockUpstreamOptions = { ...opts };
  const host = opts.host ?? '127.0.0.1';
  const recorded: RecordedRequest[] = [];
  const stats: MockUpstreamStats = { requests: 0, streams: 0, aborted: 0, errors: 0, dropped: 0, tokensStreamed: 0 };
  const live = new Set<Exchange>();
  const app: TemplatedApp = uWS.App();

  // --- exchange lifecycle ----------------------------------------------------------------------

  function begin(res: HttpResponse): Exchange {
    const ex: Exchange = { res, requestId: randomId('req_'), aborted: false, done: false, timer: undefined, onDrain: undefined };
    stats.requests++;
    live.add(ex);
    res.onAborted(() => {
      ex.aborted = true;
      if (!ex.done) stats.aborted++;
      finish(ex);
    });
    return ex;
  }

  function finish(ex: Exchange): void {
    ex.done = true;
    if (ex.timer !== undefined) {
      clearTimeout(ex.timer as NodeJS.Timeout);
      clearImmediate(ex.timer as NodeJS.Immediate);
      ex.timer = undefined;
    }
    ex.onDrain = undefined;
    live.delete(ex);
  }

  /** uWS buffers all of a write(); false = backpressure: produce nothing more until waitDrain fires. */
  function writeChunk(ex: Exchange, chunk: string): boolean {
    return ex.res.write(chunk);
  }

  /** Run `then` once the socket drained (onWritable). */
  function waitDrain(ex: Exchange, then: () => void): void {
    ex.onDrain = then;
    ex.res.onWritable(() => {
      const cb = ex.onDrain;
      ex.onDrain = undefined;
      if (cb && !ex.aborted) cb();
      return true;
    });
  }

  function readHeaders(req: HttpRequest): Record<string, string> {
    const headers: Record<string, string> = {};
    req.forEach((k, v) => { headers[k] = v; });
    return headers;
  }

  function record(method: string, path: string, headers: Record<string, string>, body: unknown, ex: Exchange): void {
    recorded.push({ method, path, headers, body, requestId: ex.requestId, receivedAt: Date.now() });
    const limit = options.recordLimit ?? 100;
    if (recorded.length > limit) recorded.splice(0, recorded.length - limit);
  }

  /** Collect the whole body (copying each chunk: uWS neuters them), then call onBody (null = too large). */
  function readBody(ex: Exchange, onBody: (raw: Buffer | null) => void): void {
    const max = options.maxBodyBytes ?? 32 * 1024 * 1024;
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    ex.res.onData((chunk, isLast) => {
      if (!tooLarge) {
        size += chunk.byteLength;
        if (size > max) {
          tooLarge = true;
          chunks.length = 0;
        } else if (chunk.byteLength > 0) {
          chunks.push(Buffer.from(new Uint8Array(chunk)));
        }
      }
      if (isLast && !ex.aborted) onBody(tooLarge ? null : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    });
  }

  function writeCommonHeaders(ex: Exchange, contentType: string, rateLimited: boolean): void {
    const res = ex.res;
    res.writeHeader('request-id', ex.requestId);
    res.writeHeader('content-type', contentType);
    if (rateLimited) for (const [k, v] of currentRateLimitHeaders()) res.writeHeader(k, v);
  }

  function sendJson(ex: Exchange, status: number, body: unknown, rateLimited = false, extra?: Array<[string, string]>): void {
    if (ex.aborted || ex.done) return;
    const json = JSON.stringify(body);
    ex.res.cork(() => {
      ex.res.writeStatus(statusLine(status));
      writeCommonHeaders(ex, 'application/json', rateLimited);
      if (extra) for (const [k, v] of extra) ex.res.writeHeader(k, v);
      ex.res.end(json);
    });
    finish(ex);
  }

  function sendError(ex: Exchange, status: number, message?: string): void {
    stats.errors++;
    const e = errorTypeFor(status);
    const extra: Array<[string, string]> = [];
    if (status === 429) extra.push(['retry-after', '1']);
    if (status === 529 || status === 500) extra.push(['x-should-retry', 'true']);
    sendJson(ex, status, {
      type: 'error',
      error: { type: e.type, message: message ?? e.message },
      request_id: ex.requestId,
    }, status === 429, extra);
  }

  /** 401 unless the request carries the configured key. true = authorized. */
  function authorize(ex: Exchange, headers: Record<string, string>): boolean {
    const key = options.apiKey;
    if (!key) return true;
    const auth = headers['authorization'];
    const given = headers['x-api-key'] ?? (auth?.toLowerCase().startsWith('bearer ') ? auth.slice(7).trim() : undefined);
    if (given === key) return true;
    sendError(ex, 401, given === undefined ? 'x-api-key header is required' : 'invalid x-api-key');
    return false;
  }

  /** Forced errors: x-mock-error header, then a model name containing -error<status>. */
  function forcedErrorStatus(headers: Record<string, string>, model: unknown): number | undefined {
    const h = headerInt(headers, 'x-mock-error');
    if (h !== undefined && h >= 400 && h <= 599) return h;
    if (typeof model === 'string') {
      const m = /-error([45]\d\d)(?!\d)/.exec(model);
      if (m) return Number(m[1]);
    }
    return undefined;
  }

  /** Common start of the two POST endpoints: parse, validate, forced errors. */
  function handlePost(
    res: HttpResponse,
    req: HttpRequest,
    requireMaxTokens: boolean,
    then: (ex: Exchange, headers: Record<string, string>, body: Record<string, unknown>) => void,
  ): void {
    const ex = begin(res);
    const headers = readHeaders(req);
    const path = req.getUrl();
    readBody(ex, (raw) => {
      if (raw === null) {
        record('POST', path, headers, undefined, ex);
        sendError(ex, 413);
        return;
      }
      let body: unknown;
      let parseError = false;
      if (raw.length === 0) {
        body = undefined;
      } else {
        try {
          body = JSON.parse(raw.toString('utf8'));
        } catch {
          body = null;
          parseError = true;
        }
      }
      record('POST', path, headers, body, ex);
      if (!authorize(ex, headers)) return;
      const forcedByHeader = forcedErrorStatus(headers, undefined);
      if (forcedByHeader !== undefined) return sendError(ex, forcedByHeader);
      if (parseError) return sendError(ex, 400, 'There was an error parsing the body of your request: invalid JSON');
      if (body === undefined) return sendError(ex, 400, 'Request body is empty: a JSON object is required');
      const invalid = validateMessagesBody(body, { requireMaxTokens });
      if (invalid) return sendError(ex, 400, invalid);
      const b = body as Record<string, unknown>;
      const forced = forcedErrorStatus({}, b.model);
      if (forced !== undefined) return sendError(ex, forced);
      then(ex, headers, b);
    });
  }

  // --- /v1/messages ------------------------------------------------------------------------------

  function handleMessage(ex: Exchange, headers: Record<string, string>, body: Record<string, unknown>): void {
    const o = options;
    if (o.errorRate && Math.random() < o.errorRate) return sendError(ex, 529);

    const model = body.model as string;
    const maxTokens = body.max_tokens as number;
    const target = headerInt(headers, 'x-mock-output-tokens') ?? optInt(o.outputTokens) ?? 64;
    const n = Math.min(maxTokens, target);
    const stopReason = maxTokens < target ? 'max_tokens' : 'end_turn';
    const inputTokens = countInputTokens(body);
    const cacheRead = headerInt(headers, 'x-mock-cache-read-tokens') ?? optInt(o.cacheReadTokens) ?? 0;
    const cacheCreation = headerInt(headers, 'x-mock-cache-creation-tokens') ?? optInt(o.cacheCreationTokens) ?? 0;
    const tokenDelay = headerInt(headers, 'x-mock-token-delay-ms') ?? optInt(o.tokenDelayMs) ?? 0;
    const firstDelay = headerInt(headers, 'x-mock-first-token-delay-ms') ?? optInt(o.firstTokenDelayMs) ?? tokenDelay;
    const usage = {
      input_tokens: inputTokens,
      cache_creation_input_tokens: cacheCreation,
      cache_read_input_tokens: cacheRead,
      cache_creation: { ephemeral_5m_input_tokens: cacheCreation, ephemeral_1h_input_tokens: 0 },
      output_tokens: n,
      service_tier: 'standard',
    };
    const id = randomId('msg_');

    if (body.stream !== true) {
      const message = {
        id, type: 'message', role: 'assistant', model,
        content: [{ type: 'text', text: outputText(n) }],
        stop_reason: stopReason, stop_sequence: null, usage,
      };
      const wait = n > 0 ? firstDelay + tokenDelay * (n - 1) : 0;
      if (wait <= 0) return sendJson(ex, 200, message, true);
      ex.timer = setTimeout(() => { ex.timer = undefined; sendJson(ex, 200, message, true); }, wait);
      return;
    }

    // --- streaming ---
    stats.streams++;
    const failAfter = headerInt(headers, 'x-mock-fail-after-tokens') ?? optInt(o.failMidStreamAfterTokens);
    const errorAfter = headerInt(headers, 'x-mock-stream-error-after-tokens') ?? optInt(o.streamErrorAfterTokens);
    // Where the deltas stop, and what happens there.
    let stopAt = n;
    let ending: 'complete' | 'drop' | 'error' = 'complete';
    if (errorAfter !== undefined && errorAfter < stopAt) { stopAt = errorAfter; ending = 'error'; }
    if (failAfter !== undefined && failAfter < stopAt) { stopAt = failAfter; ending = 'drop'; }

    const head = sse('message_start', {
      type: 'message_start',
      message: {
        id, type: 'message', role: 'assistant', model, content: [],
        stop_reason: null, stop_sequence: null,
        usage: { ...usage, output_tokens: 1 },
      },
    }) + BLOCK_START_EVENT + PING_EVENT;
    const tail = BLOCK_STOP_EVENT + sse('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { output_tokens: n },
    }) + MESSAGE_STOP_EVENT;

    let sent = 0;
    const res = ex.res;

    const dropConnection = (): void => {
      stats.dropped++;
      finish(ex); // done before close(): the onAborted that close() triggers is not a client abort
      res.close();
    };

    /** Writes the next delta(s) and, at stopAt, the ending. Re-arms itself via timer/drain. */
    const step = (): void => {
      ex.timer = undefined;
      if (ex.aborted || ex.done) return;
      let count = tokenDelay > 0 ? 1 : DELTAS_PER_WRITE;
      count = Math.min(count, stopAt - sent);
      let ok = true;
      res.cork(() => {
        if (count > 0) {
          ok = writeChunk(ex, count === 1 ? DELTA_EVENT : DELTA_EVENT.repeat(count));
          sent += count;
          stats.tokensStreamed += count;
        }
        if (sent < stopAt) return;
        if (ending === 'complete') {
          res.end(tail);
          finish(ex);
        } else if (ending === 'error') {
          stats.errors++;
          res.end(OVERLOADED_EVENT);
          finish(ex);
        }
      });
      if (ex.done) return;
      if (sent >= stopAt) {
        // ending === 'drop': close once what was written has left uWS' buffer (close discards it).
        if (ok) dropConnection();
        else waitDrain(ex, dropConnection);
        return;
      }
      const next = (): void => {
        if (tokenDelay > 0) ex.timer = setTimeout(step, tokenDelay);
        else ex.timer = setImmediate(step);
      };
      if (ok) next();
      else waitDrain(ex, next);
    };

    let ok = true;
    res.cork(() => {
      res.writeStatus('200 OK');
      writeCommonHeaders(ex, 'text/event-stream; charset=utf-8', true);
      res.writeHeader('cache-control', 'no-cache');
      ok = writeChunk(ex, head);
    });
    const first = (): void => {
      if (stopAt > 0 && firstDelay > 0) ex.timer = setTimeout(step, firstDelay);
      else step();
    };
    if (ok) first();
    else waitDrain(ex, first);
  }

  app.post('/v1/messages', (res, req) => handlePost(res, req, true, handleMessage));

  app.post('/v1/messages/count_tokens', (res, req) =>
    handlePost(res, req, false, (ex, _headers, body) => {
      sendJson(ex, 200, { input_tokens: countInputTokens(body) });
    }));

  // --- /v1/models ----------------------------------------------------------------------------------

  const modelInfo = (m: (typeof MODELS)[number]) => ({ type: 'model', id: m.id, display_name: m.display_name, created_at: m.created_at });

  app.get('/v1/models', (res, req) => {
    const ex = begin(res);
    const headers = readHeaders(req);
    const query = req.getQuery() ?? '';
    const limitParam = req.getQuery('limit');
    const afterId = req.getQuery('after_id');
    const beforeId = req.getQuery('before_id');
    record('GET', query ? `/v1/models?${query}` : '/v1/models', headers, undefined, ex);
    if (!authorize(ex, headers)) return;
    let limit = 20;
    if (limitParam) {
      const l = Number(limitParam);
      if (!Number.isInteger(l) || l < 1 || l > 1000) return sendError(ex, 400, 'limit: Input should be between 1 and 1000');
      limit = l;
    }
    let list = MODELS.slice();
    if (afterId) list = list.slice(list.findIndex((m) => m.id === afterId) + 1);
    if (beforeId) {
      const i = list.findIndex((m) => m.id === beforeId);
      list = i >= 0 ? list.slice(Math.max(0, i - limit), i) : list;
    }
    const page = list.slice(0, limit);
    sendJson(ex, 200, {
      data: page.map(modelInfo),
      has_more: list.length > page.length,
      first_id: page[0]?.id ?? null,
      last_id: page[page.length - 1]?.id ?? null,
    });
  });

  app.get('/v1/models/:id', (res, req) => {
    const ex = begin(res);
    const headers = readHeaders(req);
    const id = decodeURIComponent(req.getParameter(0) ?? '');
    record('GET', req.getUrl(), headers, undefined, ex);
    if (!authorize(ex, headers)) return;
    const m = MODELS.find((x) => x.id === id);
    if (!m) return sendError(ex, 404, `model: ${id}`);
    sendJson(ex, 200, modelInfo(m));
  });

  app.any('/*', (res, req) => {
    const ex = begin(res);
    const method = req.getMethod().toUpperCase();
    record(method, req.getUrl(), readHeaders(req), undefined, ex);
    sendError(ex, 404, 'Not Found');
  });

  // --- listen ----------------------------------------------------------------------------------------

  const listenSocket = await new Promise<us_listen_socket>((resolve, reject) => {
    app.listen(host, opts.port ?? 0, (s) => {
      if (s) resolve(s);
      else reject(new Error(`mock upstream: cannot listen on ${host}:${opts.port ?? 0}`));
    });
  });
  const port = uWS.us_socket_local_port(listenSocket as unknown as uWS.us_socket);
  const urlHost = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
  let closed = false;

  return {
    port,
    url: `http://${urlHost}:${port}`,
    requests: recorded,
    stats,
    setOptions(partial) {
      options = { ...options, ...partial };
    },
    async close() {
      if (closed) return;
      closed = true;
      uWS.us_listen_socket_close(listenSocket);
      for (const ex of [...live]) finish(ex); // stops timers; not client aborts
      // uWS >= 20.31 App.close(): force-closes every socket, idle keep-alive ones included.
      const closeAll = (app as unknown as { close?: () => void }).close;
      if (typeof closeAll === 'function') closeAll.call(app);
    },
  };
}
