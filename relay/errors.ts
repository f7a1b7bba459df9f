// Every failure the relay can answer with: a stable code, the HTTP status and Anthropic's error type.
// The body is Anthropic's error JSON on Anthropic's routes and OpenAI's on /v1/chat/completions
// (openaiBody: the same status, OpenAI's type, our stable code as `code`), so either SDK raises its
// usual typed errors.
import type { ReserveRefusal } from '../core/quota/quota-outcomes.js';

export const RELAY_ERRORS = {
  invalid_json: { status: 400, type: 'invalid_request_error', message: 'The request body is not valid JSON.' },
  invalid_request: { status: 400, type: 'invalid_request_error', message: 'The request body is invalid.' },
  missing_api_key: { status: 401, type: 'authentication_error', message: 'No API key: send it in the x-api-key header or as Authorization: Bearer sk-...' },
  invalid_api_key: { status: 401, type: 'authentication_error', message: 'Invalid API key.' },
  key_disabled: { status: 401, type: 'authentication_error', message: 'This API key is disabled.' },
  key_expired: { status: 401, type: 'authentication_error', message: 'This API key has expired.' },
  account_banned: { status: 403, type: 'permission_error', message: 'This account is banned.' },
  model_not_allowed: { status: 403, type: 'permission_error', message: 'This API key may not use this model.' },
  ip_not_allowed: { status: 403, type: 'permission_error', message: 'This API key may not be used from this address.' },
  group_not_allowed: { status: 403, type: 'permission_error', message: 'This API key\'s group is not available to the account.' },
  insufficient_balance: { status: 402, type: 'billing_error', message: 'The account balance is too low for this request: before it is sent, the cost of its prompt and of max_tokens of output is reserved.' },
  insufficient_key_quota: { status: 402, type: 'billing_error', message: 'This API key\'s remaining quota is too low for this request.' },
  model_not_found: { status: 404, type: 'not_found_error', message: 'No channel serves this model for this group.' },
  model_not_priced: { status: 404, type: 'not_found_error', message: 'This model has no price on this gateway.' },
  not_found: { status: 404, type: 'not_found_error', message: 'Not found.' },
  unsupported_encoding: { status: 415, type: 'invalid_request_error', message: 'The request body must be sent uncompressed: Content-Encoding is not supported on this gateway (send identity).' },
  request_too_large: { status: 413, type: 'request_too_large', message: 'The request body is too large.' },
  rate_limited: { status: 429, type: 'rate_limit_error', message: 'Rate limit exceeded.' },
  internal: { status: 500, type: 'api_error', message: 'Internal error.' },
  upstream_unreachable: { status: 500, type: 'api_error', message: 'The model provider could not be reached.' },
  // Anthropic's own 504 for a request that timed out while processing.
  upstream_timeout: { status: 504, type: 'timeout_error', message: 'The model provider did not begin its answer in time.' },
  overloaded: { status: 529, type: 'overloaded_error', message: 'The model provider is overloaded.' },
  quota_store_unavailable: { status: 529, type: 'overloaded_error', message: 'The relay cannot reach its quota store, so it takes no request until it returns. Retry shortly.' },
  quota_store_foreign: { status: 529, type: 'overloaded_error', message: 'The relay\'s quota store holds another gateway database\'s accounts, so it takes no request until an operator fixes its configuration.' },
  key_store_unavailable: { status: 529, type: 'overloaded_error', message: 'The relay cannot reach its account database to check this API key. Retry shortly.' },
  relay_closing: { status: 529, type: 'overloaded_error', message: 'The relay is shutting down and cut this request before the model provider answered; nothing was billed. Retry it.' },
  relay_overloaded: { status: 529, type: 'overloaded_error', message: 'The relay is overloaded: too many token counts are waiting. Retry shortly.' },
} as const satisfies Record<string, { status: number; type: string; message: string }>;

export type RelayErrorCode = keyof typeof RELAY_ERRORS;

const STATUS_TEXT: Record<number, string> = {
  200: 'OK', 204: 'No Content', 400: 'Bad Request', 401: 'Unauthorized', 402: 'Payment Required', 403: 'Forbidden', 404: 'Not Found',
  405: 'Method Not Allowed', 408: 'Request Timeout', 413: 'Payload Too Large', 415: 'Unsupported Media Type', 422: 'Unprocessable Entity',
  429: 'Too Many Requests', 500: 'Internal Server Error', 502: 'Bad Gateway', 503: 'Service Unavailable',
  504: 'Gateway Timeout', 529: 'Overloaded',
};

/** uWS wants the whole status line; precomputed strings keep the hot path allocation-free. */
export function statusLine(status: number): string {
  return `${status} ${STATUS_TEXT[status] ?? 'Status'}`;
}

/**
 * Anthropic's error JSON. An answer's body carries `request_id` (Anthropic's ErrorResponse has it,
 * nullable): the gateway's request id where there is one, null where the request made none (a free
 * endpoint). A stream's `event: error` has none, as Anthropic's: `requestId` left undefined.
 */
export function errorBody(type: string, message: string, requestId?: string | null): string {
  return requestId === undefined
    ? JSON.stringify({ type: 'error', error: { type, message } })
    : JSON.stringify({ type: 'error', error: { type, message }, request_id: requestId });
}

/**
 * OpenAI's error `type` for an Anthropic one: OpenAI's SDK raises by status, but tools read the type
 * (insufficient_quota, rate_limit_exceeded, server_error are OpenAI's own words).
 */
export function openaiErrorType(anthropicType: string): string {
  switch (anthropicType) {
    case 'billing_error': return 'insufficient_quota';
    case 'rate_limit_error': return 'rate_limit_exceeded';
    case 'authentication_error': return 'authentication_error';
    case 'permission_error': return 'permission_error';
    case 'not_found_error': return 'not_found_error';
    case 'api_error': case 'overloaded_error': case 'timeout_error': return 'server_error';
    default: return 'invalid_request_error';
  }
}

/**
 * A provider's failure in OpenAI's error JSON, by its Anthropic error type. OpenAI's own 429 and quota
 * errors carry their type as their `code` too (`rate_limit_exceeded`, `insufficient_quota`), which
 * clients match on; the same failure from an Anthropic channel had `code: null`, so it read
 * differently by the channel behind it.
 */
export function openaiProviderErrorBody(anthropicType: string, message: string): string {
  // A provider's billing error is about the gateway's own account with it (the channel's), never the
  // client's: OpenAI's insufficient_quota would tell the client its own balance is empty, and its
  // message ("Your credit balance is too low") that it should top up.
  if (anthropicType === 'billing_error') return openaiErrorBody('server_error', PROVIDER_ACCOUNT_REFUSED, null);
  const type = openaiErrorType(anthropicType);
  return openaiErrorBody(type, message, type === 'rate_limit_exceeded' ? type : null);
}

/** What a client is told of a provider refusing the gateway's own credential or account. */
export const PROVIDER_ACCOUNT_REFUSED = 'The model provider refused this gateway\'s own credential or account for the request (not your API key).';

/**
 * What a provider's error object (OpenAI's `type` and `code`, or Anthropic's `type`) says, as an
 * Anthropic error type: a rate limit and an overload keep their meaning (clients wait and retry by
 * them), anything else is the provider's failure.
 */
export function anthropicTypeOfOpenAIError(error: { type?: unknown; code?: unknown }): string {
  const words = `${typeof error.type === 'string' ? error.type : ''} ${typeof error.code === 'string' ? error.code : ''}`;
  if (/rate_limit/.test(words)) return 'rate_limit_error';
  if (/overloaded/.test(words)) return 'overloaded_error';
  return 'api_error';
}

/** OpenAI's error JSON: `{"error": {"message", "type", "param", "code"}}`. */
export function openaiErrorBody(type: string, message: string, code: string | null = null, param: string | null = null): string {
  return JSON.stringify({ error: { message, type, param, code } });
}

/**
 * The body field a request problem names, as the validator words it (`messages.0.role: must be …`,
 * compiled-schema.ts, and the conversions' refusals alike), in OpenAI's notation (`messages.[0].role`),
 * which tools read from `param` to point at the field; null when the message names none (a header's
 * name has a hyphen, the body as a whole a space).
 */
const FIELD_PATH = /^([A-Za-z_]\w*(?:\.\w+)*): /;

function paramOf(message: string): string | null {
  const m = FIELD_PATH.exec(message);
  return m ? m[1]!.replace(/\.(\d+)(?=\.|$)/g, '.[$1]') : null;
}

export class RelayError extends Error {
  readonly status: number;
  readonly type: string;
  readonly code: RelayErrorCode;
  /** OpenAI's `param`: the request field at fault; by default the one an invalid request's message names. */
  readonly param: string | null;
  constructor(code: RelayErrorCode, message?: string, param?: string | null) {
    const def = RELAY_ERRORS[code];
    super(message ?? def.message);
    this.code = code;
    this.status = def.status;
    this.type = def.type;
    this.param = param !== undefined ? param : code === 'invalid_request' && message !== undefined ? paramOf(message) : null;
  }
  body(requestId: string | null = null): string {
    return errorBody(this.type, this.message, requestId);
  }
  /**
   * The same failure in OpenAI's error JSON (POST /v1/chat/completions). A rate limit or a balance
   * too low carries OpenAI's own code (`rate_limit_exceeded`, `insufficient_quota`), as a provider's
   * does (openaiProviderErrorBody): clients match on them, and the relay's own 429 said `rate_limited`
   * where the provider's said `rate_limit_exceeded`. Every other failure carries the relay's code.
   */
  openaiBody(): string {
    const type = openaiErrorType(this.type);
    const code = type === 'rate_limit_exceeded' || type === 'insufficient_quota' ? type : this.code;
    return openaiErrorBody(type, this.message, code, this.param);
  }
}

/**
 * The relay's answer to each refusal of a reservation (core/quota/quota-outcomes.ts maps the Lua codes
 * to these). A duplicate request id is the relay's own fault: a random UUID collided.
 */
export const RESERVE_REFUSAL_ERRORS = {
  insufficient_balance: 'insufficient_balance',
  insufficient_token_quota: 'insufficient_key_quota',
  rpm_limited: 'rate_limited',
  tpm_limited: 'rate_limited',
  duplicate: 'internal',
} as const satisfies Record<ReserveRefusal, RelayErrorCode>;

/** The error of a refused reservation; a rate limit names the key's limit per minute. */
/** `group`: the limits are the group's for the account (all its keys of the group), not the key's own. */
export function reserveRefusalError(refusal: ReserveRefusal, limits: { rpm: number; tpm: number }, group?: string): RelayError {
  const code = RESERVE_REFUSAL_ERRORS[refusal];
  const whose = group === undefined ? 'this API key' : `this account's keys in group ${JSON.stringify(group)}`;
  if (refusal === 'rpm_limited') return new RelayError(code, `Rate limit of ${limits.rpm} requests per minute reached for ${whose}.`);
  if (refusal === 'tpm_limited') return new RelayError(code, `Rate limit of ${limits.tpm} tokens per minute reached for ${whose}.`);
  return new RelayError(code);
}
