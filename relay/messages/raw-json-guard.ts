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
// bodies now in tens of milliseconds.
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
/** The most object keys a request body may hold, all objects together. */
export const MAX_JSON_KEYS = 50_000;
/** The most objects, arrays and commas (each starts one more value) a request body may hold. */
export const MAX_JSON_VALUES = 200_000;

/** The first problem of the JSON text in `buf` under the relay's limits (or those given), or null. */
export function rawJsonProblem(buf: Uint8Array, maxDepth = MAX_JSON_DEPTH, maxKeys = MAX_JSON_KEYS, maxValues = MAX_JSON_VALUES): RawJsonProblem | null {
  return scanJson(buf, maxDepth, maxKeys, maxValues);
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
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    return new RelayError('invalid_json');
  }
}

const TOO_MANY_KEYS_ERROR = new RelayError('invalid_request', `The request body holds more than ${MAX_JSON_KEYS.toLocaleString('en-US')} object keys.`);
const TOO_MANY_VALUES_ERROR = new RelayError('invalid_request', `The request body holds more than ${MAX_JSON_VALUES.toLocaleString('en-US')} JSON values (objects, arrays and array items).`);
const NOT_UTF8 = new RelayError('invalid_request', 'The request body is not valid UTF-8 (JSON text must be: RFC 8259 §8.1).');

/** The 400 for a body with a problem (rawJsonProblem), or null. */
export function rawJsonRefusal(buf: Uint8Array): RelayError | null {
  const problem = rawJsonProblem(buf);
  if (problem === null) return null;
  if (problem.kind === 'too_deep') {
    return new RelayError('invalid_request', `The request body nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep.`);
  }
  if (problem.kind === 'too_many_keys') return TOO_MANY_KEYS_ERROR;
  if (problem.kind === 'too_many_values') return TOO_MANY_VALUES_ERROR;
  const key = problem.key.length > 64 ? `${problem.key.slice(0, 64)}…` : problem.key;
  return new RelayError('invalid_request', `The request body names the key ${JSON.stringify(key)} twice in one object: a provider could read the other value.`);
}
