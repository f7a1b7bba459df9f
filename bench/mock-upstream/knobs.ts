// The mock's knobs: its options, and the per-request overrides a test sends in x-mock-* headers or
// in the model name.
//
// Knobs, in precedence order header > option. Headers are for direct tests; a gateway in between
// usually drops x-mock-*, so the model name and setOptions() are the knobs that go through a proxy.
//   x-mock-error: <status>            answer that status with the matching Anthropic error type
//   model containing -error<status>   same, e.g. "claude-x-error529" (status 4xx/5xx)
//   errorRate (option)                fraction of /v1/messages requests answered 529 overloaded_error
//   x-mock-output-tokens              output token target (mock-upstream.ts: output_tokens)
//   x-mock-token-delay-ms             delay between streamed tokens (option tokenDelayMs)
//   x-mock-first-token-delay-ms       delay before the first token (option firstTokenDelayMs,
//                                     defaults to the token delay). Non-streaming responses wait
//                                     first + (n-1)*tokenDelay before answering.
//   x-mock-fail-after-tokens          stream: socket closed abruptly after N deltas (thinking ones first)
//                                     (option failMidStreamAfterTokens)
//   x-mock-stream-error-after-tokens  stream: `event: error` overloaded_error after N deltas,
//                                     then the response ends cleanly (option streamErrorAfterTokens)
//   x-mock-cache-read-tokens / x-mock-cache-creation-tokens   usage cache fields (creation: 5-minute)
//   x-mock-cache-creation-1h-tokens   usage.cache_creation.ephemeral_1h_input_tokens (option
//                                     cacheCreation1hTokens); cache_creation_input_tokens is 5m + 1h
//   x-mock-document-tokens / x-mock-image-tokens   input tokens each document / image block adds
//                                     (options documentInputTokens / imageInputTokens, default 0):
//                                     a few bytes that cost many tokens, as a PDF given by URL does
//   x-mock-web-search-requests        usage.server_tool_use.web_search_requests of the answer (option
//                                     webSearchRequests, default 0: the field is then left out); a
//                                     stream reports them in message_delta, message_start says 0
//   x-mock-thinking-tokens            thinking tokens of a request with extended thinking (`thinking`
//                                     of type enabled or adaptive; option thinkingTokens, default 16),
//                                     at most its budget_tokens and its max_tokens: the answer opens
//                                     with a thinking block of that many "tok " tokens and a signature,
//                                     output_tokens counts them (as Anthropic bills thinking)
//   keyFailures (option)              per credential: a key listed fails every request it makes (the
//                                     provider revoked it, forbade it, or its account ran out of
//                                     credit), whatever else it asks; setOptions() or PUT
//                                     /mock/key-failures (option control) change the list at run time
import type { StopReason } from './wire-format.js';

export interface MockUpstreamOptions {
  /** Interface to bind. Default 127.0.0.1. */
  host?: string;
  /** 0 (default) = a random free port; MockUpstream.port reports the real one. */
  port?: number;
  /** When set, requests must carry it (or one of apiKeys) in x-api-key or Authorization: Bearer, else 401. */
  apiKey?: string;
  /** More keys accepted besides apiKey (several channels with credentials of their own). */
  apiKeys?: readonly string[];
  /** Keys that fail every request, and how (KEY_FAILURES). */
  keyFailures?: Readonly<Record<string, KeyFailure>>;
  /** Serve PUT /mock/key-failures (a JSON object: key → failure, or null to accept the key again). */
  control?: boolean;
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
  /** 5-minute cache writes (usage.cache_creation.ephemeral_5m_input_tokens) unless the request header overrides it. Default 0. */
  cacheCreationTokens?: number;
  /** 1-hour cache writes (usage.cache_creation.ephemeral_1h_input_tokens) unless the request header overrides it. Default 0. */
  cacheCreation1hTokens?: number;
  /** Input tokens each `document` block adds (in messages, at any depth of tool results). Default 0. */
  documentInputTokens?: number;
  /** Input tokens each `image` block adds, likewise. Default 0. */
  imageInputTokens?: number;
  /** usage.server_tool_use.web_search_requests unless the request header overrides it. Default 0. */
  webSearchRequests?: number;
  /** Thinking tokens of a request with extended thinking (at most its budget and max_tokens). Default 16. */
  thinkingTokens?: number;
  /** Request bodies above this many bytes answer 413 request_too_large. Default 32 MiB. */
  maxBodyBytes?: number;
  /** How many recent requests `requests` keeps. Default 100. */
  recordLimit?: number;
}

/** How a listed key fails: the answer a real provider gives in that case. */
export type KeyFailure = 'revoked' | 'forbidden' | 'no_credit';

export const KEY_FAILURES: Readonly<Record<KeyFailure, { status: number; message: string }>> = {
  revoked: { status: 401, message: 'invalid x-api-key' },
  forbidden: { status: 403, message: 'Your API key does not have permission to use the specified resource.' },
  no_credit: { status: 400, message: 'Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.' },
};

export function isKeyFailure(v: unknown): v is KeyFailure {
  return typeof v === 'string' && Object.hasOwn(KEY_FAILURES, v);
}

/** A knob header's whole non-negative number; absent, empty or anything else: undefined. Both mocks read their headers with it. */
export function headerInt(headers: Record<string, string>, name: string): number | undefined {
  const v = headers[name];
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  return Number.isInteger(n) && n >= 0 ? n : undefined;
}

function optInt(v: number | undefined): number | undefined {
  return v !== undefined && Number.isFinite(v) && v >= 0 ? Math.floor(v) : undefined;
}

/** Forced errors: x-mock-error header, then a model name containing -error<status>. */
export function forcedErrorStatus(headers: Record<string, string>, model: unknown): number | undefined {
  const h = headerInt(headers, 'x-mock-error');
  if (h !== undefined && h >= 400 && h <= 599) return h;
  if (typeof model === 'string') {
    const m = /-error([45]\d\d)(?!\d)/.exec(model);
    if (m) return Number(m[1]);
  }
  return undefined;
}

/** What one /v1/messages request gets, headers over options over defaults. */
export interface MessageKnobs {
  /** The text's tokens: min(max_tokens less the thinking, target). */
  outputTokens: number;
  /** The thinking block's tokens (0: the request asked for no thinking); billed in output_tokens with the text's. */
  thinkingTokens: number;
  stopReason: StopReason;
  cacheReadTokens: number;
  cacheCreationTokens: number;
  cacheCreation1hTokens: number;
  documentInputTokens: number;
  imageInputTokens: number;
  webSearchRequests: number;
  tokenDelayMs: number;
  firstTokenDelayMs: number;
  /** Streams only: close the socket after this many deltas. */
  failAfterTokens: number | undefined;
  /** Streams only: send `event: error` after this many deltas. */
  streamErrorAfterTokens: number | undefined;
}

export function messageKnobs(headers: Record<string, string>, o: MockUpstreamOptions, maxTokens: number, thinking?: unknown): MessageKnobs {
  const target = headerInt(headers, 'x-mock-output-tokens') ?? optInt(o.outputTokens) ?? 64;
  const tokenDelayMs = headerInt(headers, 'x-mock-token-delay-ms') ?? optInt(o.tokenDelayMs) ?? 0;
  const thinkingTokens = thinkingTokensOf(thinking, headerInt(headers, 'x-mock-thinking-tokens') ?? optInt(o.thinkingTokens) ?? 16, maxTokens);
  const textBound = maxTokens - thinkingTokens;
  return {
    outputTokens: Math.min(textBound, target),
    thinkingTokens,
    stopReason: textBound < target ? 'max_tokens' : 'end_turn',
    cacheReadTokens: headerInt(headers, 'x-mock-cache-read-tokens') ?? optInt(o.cacheReadTokens) ?? 0,
    cacheCreationTokens: headerInt(headers, 'x-mock-cache-creation-tokens') ?? optInt(o.cacheCreationTokens) ?? 0,
    cacheCreation1hTokens: headerInt(headers, 'x-mock-cache-creation-1h-tokens') ?? optInt(o.cacheCreation1hTokens) ?? 0,
    documentInputTokens: headerInt(headers, 'x-mock-document-tokens') ?? optInt(o.documentInputTokens) ?? 0,
    imageInputTokens: headerInt(headers, 'x-mock-image-tokens') ?? optInt(o.imageInputTokens) ?? 0,
    webSearchRequests: headerInt(headers, 'x-mock-web-search-requests') ?? optInt(o.webSearchRequests) ?? 0,
    tokenDelayMs,
    firstTokenDelayMs: headerInt(headers, 'x-mock-first-token-delay-ms') ?? optInt(o.firstTokenDelayMs) ?? tokenDelayMs,
    failAfterTokens: headerInt(headers, 'x-mock-fail-after-tokens') ?? optInt(o.failMidStreamAfterTokens),
    streamErrorAfterTokens: headerInt(headers, 'x-mock-stream-error-after-tokens') ?? optInt(o.streamErrorAfterTokens),
  };
}

/** The thinking tokens of a request's `thinking` (enabled with budget_tokens, or adaptive): at most the budget and max_tokens. */
function thinkingTokensOf(thinking: unknown, wanted: number, maxTokens: number): number {
  if (!thinking || typeof thinking !== 'object') return 0;
  const t = thinking as { type?: unknown; budget_tokens?: unknown };
  if (t.type !== 'enabled' && t.type !== 'adaptive') return 0;
  const budget = typeof t.budget_tokens === 'number' && t.budget_tokens > 0 ? t.budget_tokens : Infinity;
  return Math.max(0, Math.min(wanted, budget, maxTokens));
}
