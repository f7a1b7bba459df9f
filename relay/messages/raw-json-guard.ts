// Checks on a request body's raw bytes before JSON.parse (infra/json/raw-json-scan.ts), with the
// relay's limits: nesting depth, object keys, no key named twice in one object.
//
// Depth: everything after JSON.parse recurses (JSON.stringify of a model-mapped body, the prompt walk
// on the counting workers, zod): a body nested a few thousand levels deep would throw RangeError there
// and answer 500. Real Messages bodies nest a few levels (tool input schemas perhaps twenty);
// MAX_JSON_DEPTH leaves ample room.
//
// Keys and values: a probe held /health up 9-15 s with 8 bodies of 390,000 keys at once, sent with a
// key of zero balance, since the body is read before anything is reserved; another, 6-10 s with 8
// bodies of nested arrays or empty objects and no key. An ordinary conversation at a model's context
// limit holds a few thousand keys and values (each message and block two to five, tool schemas a few
// hundred), so a body of more than MAX_JSON_KEYS keys or MAX_JSON_VALUES values is refused; those
// bodies now in tens of milliseconds. An agent's conversation on a 1M-token model is larger: 3,900
// tool round trips, 1.7 MB, hold 50,700 keys and 66,000 values (a key per 34 bytes, a value per 26),
// and JSON.parse takes 15 ms of it, as it repeats a few names. So a body larger than MAX_JSON_KEYS
// keys at BYTES_PER_KEY may hold a key per BYTES_PER_KEY bytes and a value per BYTES_PER_VALUE, up to
// KEYS_CEILING and VALUES_CEILING, and no more than MAX_JSON_KEYS distinct names (a dense agent loop
// of tiny tool calls holds a key per ~20 bytes): the costliest bodies it then takes hold the event
// loop ~120 ms, scan and JSON.parse together (the costliest under the fixed limits: ~55 ms; 200,000
// distinct names would be ~770 ms of JSON.parse alone).
//
// Repeated keys: the relay forwards a Messages body's bytes as they came, and prices and bounds the
// request by what JSON.parse read from them, where the last of two equal keys wins. A provider whose
// parser keeps the first (gjson, as gateways built on new-api and one-api read bodies; simdjson) would
// run `{"max_tokens":100000,…,"max_tokens":1}` or `{"model":"cheap",…,"model":"dear"}` as something
// other than what was reserved and billed, and `{"type":"image",…,"type":"text"}` in a content block
// as an image the byte bound does not cover. No client that matters sends such a body, so it is
// refused rather than guessed at.
import { isUtf8 } from 'node:buffer';
import { rawJsonProblem as scanJson, SCAN_DEPTH_MAX, type RawJsonProblem } from '../../infra/json/raw-json-scan.js';
import { RelayError } from '../errors.js';

export type { RawJsonProblem };

export const MAX_JSON_DEPTH = SCAN_DEPTH_MAX;
/** The most object keys a request body may hold, all objects together (a larger body: keysAllowed). */
export const MAX_JSON_KEYS = 50_000;
/** The most objects, arrays and commas (each starts one more value) a request body may hold (a larger body: valuesAllowed). */
export const MAX_JSON_VALUES = 200_000;
export const BYTES_PER_KEY = 16;
export const BYTES_PER_VALUE = 16;
export const KEYS_CEILING = 200_000;
export const VALUES_CEILING = 500_000;

/** The object keys a body of `bytes` may hold. */
export function keysAllowed(bytes: number): number {
  return Math.max(MAX_JSON_KEYS, Math.min(KEYS_CEILING, Math.floor(bytes / BYTES_PER_KEY)));
}

/** The JSON values a body of `bytes` may hold. */
export function valuesAllowed(bytes: number): number {
  return Math.max(MAX_JSON_VALUES, Math.min(VALUES_CEILING, Math.floor(bytes / BYTES_PER_VALUE)));
}

/** The first problem of the JSON text in `buf` under the relay's limits (a depth of its own when given), or null. */
export function rawJsonProblem(buf: Uint8Array, maxDepth = MAX_JSON_DEPTH): RawJsonProblem | null {
  const keys = keysAllowed(buf.length);
  // Names are bounded, at a string per key, only where keys are allowed past MAX_JSON_KEYS.
  return scanJson(buf, maxDepth, keys, valuesAllowed(buf.length), keys > MAX_JSON_KEYS ? MAX_JSON_KEYS : Infinity);
}

/**
 * A request body parsed, or the 400 that refuses it: too deep or a key named twice (rawJsonProblem),
 * then not JSON. What /v1/messages, count_tokens and /v1/chat/completions all do first with a body.
 */
export function parseRequestJson(raw: Buffer): unknown {
  // Decoded as it stood, invalid bytes became U+FFFD for the relay (what it counts and checks) while
  // the provider was sent the bytes themselves: one body read two ways. simdutf, GB/s: no cost to speak of.
  if (!isUtf8(raw)) return NOT_UTF8;
  const refusal = rawJsonRefusal(raw);
  if (refusal !== null) return refusal;
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    return new RelayError('invalid_json');
  }
  return foldedFieldRefusal(body) ?? body;
}

/**
 * The top-level fields the relay reads to route, price and bound a request, on either route. A body is
 * forwarded as its bytes: a provider that matches field names without regard to case (Go's
 * encoding/json, as gateways built on new-api and one-api decode bodies; Go OpenAI-compatible
 * servers) read `"Model"` or `"MAX_TOKENS"` beside or instead of the relay's `model` and
 * `max_tokens`: one model served and another billed, 80,000 characters delivered for a bound of 10
 * tokens (review http). Go folds `ſ` to `s` and the Kelvin sign to `k` as well.
 */
const READ_FIELDS: ReadonlySet<string> = new Set([
  'model', 'max_tokens', 'max_completion_tokens', 'stream', 'stream_options', 'messages', 'system', 'tools', 'tool_choice',
  'functions', 'function_call', 'n', 'service_tier', 'metadata', 'thinking', 'stop', 'stop_sequences', 'response_format',
  'output_config', 'output_format', 'mcp_servers', 'container', 'context_management', 'modalities', 'audio',
  'web_search_options', 'prediction', 'reasoning_effort', 'logprobs', 'top_logprobs', 'search_parameters', 'plugins', 'models',
  'enable_search', 'user', 'inference_geo',
]);

/** A name as Go's case-insensitive match sees it: upper then lower case folds `ſ` to `s` and the Kelvin sign to `k`. */
function folded(name: string): string {
  return name.toUpperCase().toLowerCase();
}

/** The 400 of a top-level key that is one of READ_FIELDS in other letters (`Model`, `MAX_TOKENS`), or null. */
export function foldedFieldRefusal(body: unknown): RelayError | null {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return null;
  for (const key in body) {
    // Every field the relay reads is lower case ASCII: a key that is its own fold is no disguise.
    if (!/[^a-z0-9_]/.test(key)) continue;
    const fold = folded(key);
    if (fold !== key && READ_FIELDS.has(fold)) {
      return new RelayError('invalid_request', `The request body names the field ${JSON.stringify(key.length > 64 ? `${key.slice(0, 64)}…` : key)}: the field is ${JSON.stringify(fold)}, in lower case (a provider could read it as that field).`);
    }
  }
  return null;
}

const NOT_UTF8 = new RelayError('invalid_request', 'The request body is not valid UTF-8 (JSON text must be: RFC 8259 §8.1).');

/** The 400 for a body with a problem (rawJsonProblem), or null. */
export function rawJsonRefusal(buf: Uint8Array): RelayError | null {
  const problem = rawJsonProblem(buf);
  if (problem === null) return null;
  if (problem.kind === 'too_deep') {
    return new RelayError('invalid_request', `The request body nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep.`);
  }
  if (problem.kind === 'too_many_keys') {
    return new RelayError('invalid_request', `The request body holds more than ${keysAllowed(buf.length).toLocaleString('en-US')} object keys (${MAX_JSON_KEYS.toLocaleString('en-US')}, or one per ${BYTES_PER_KEY} bytes of a larger body, up to ${KEYS_CEILING.toLocaleString('en-US')}).`);
  }
  if (problem.kind === 'too_many_values') {
    return new RelayError('invalid_request', `The request body holds more than ${valuesAllowed(buf.length).toLocaleString('en-US')} JSON values (objects, arrays and array items: ${MAX_JSON_VALUES.toLocaleString('en-US')}, or one per ${BYTES_PER_VALUE} bytes of a larger body, up to ${VALUES_CEILING.toLocaleString('en-US')}).`);
  }
  if (problem.kind === 'too_many_names') {
    return new RelayError('invalid_request', `The request body holds more than ${MAX_JSON_KEYS.toLocaleString('en-US')} distinct object key names.`);
  }
  const key = problem.key.length > 64 ? `${problem.key.slice(0, 64)}…` : problem.key;
  return new RelayError('invalid_request', `The request body names the key ${JSON.stringify(key)} twice in one object: a provider could read the other value.`);
}
