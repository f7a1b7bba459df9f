// The key checks of every /v1/ route (POST /v1/messages, count_tokens, GET /v1/models), in one place
// so that they refuse the same keys with the same errors in the same order: the key from the headers
// alone, its shape, the cache, then a lookup; once a request is known, the key's rules and the groups
// it may route through. A request without a key of our shape is refused before any body byte is kept,
// any hash computed or any query made.
import type { HttpRequest } from 'uWebSockets.js';
import type { GroupPolicy } from '../../core/groups/group-policy.js';
import { hasApiKeyShape } from '../../infra/secrets/api-key-crypto.js';
import { RelayError } from '../errors.js';
import { mayHaveMoreLines } from '../header-lines.js';
import type { ApiKeyRecord, KeyDirectory } from './key-directory.js';
import { checkKeyRules } from './key-rules.js';

/** Answered to every request without a key, and to every key we could not have issued or do not know. */
export const MISSING_KEY_ERROR = new RelayError('missing_api_key');
export const UNKNOWN_KEY_ERROR = new RelayError('invalid_api_key');

/**
 * What extractApiKey answers for a request whose x-api-key and bearer token differ: no header value
 * can hold a line feed, so it is no key anyone sent.
 */
const TWO_KEYS = '\n';
export const TWO_KEYS_ERROR = new RelayError('invalid_api_key', 'The request carries two different API keys (in x-api-key and Authorization: Bearer, or in two lines of one of them); send one.');

/**
 * The key of a request: x-api-key (Anthropic's header) or a bearer token (OpenAI's). Two different
 * keys are refused (TWO_KEYS) rather than one picked: a client configured with one key and a proxy or
 * SDK default adding another would be billed to a key nobody chose, and which one wins differs between
 * gateways. The same key twice is that key. Every line of the two headers counts: uWS's getHeader
 * reads the first line alone, and two x-api-key lines (a proxy appending its own) were billed to the
 * first, silently.
 */
export function extractApiKey(req: HttpRequest): string {
  const direct = req.getHeader('x-api-key');
  const auth = req.getHeader('authorization');
  const first = keyOfLines(direct, bearerOf(auth));
  if ((direct === '' || !mayHaveMoreLines('x-api-key')) && (auth === '' || !mayHaveMoreLines('authorization'))) return first;
  walkedKey = first;
  req.forEach(checkKeyLine);
  return walkedKey;
}

function bearerOf(auth: string): string {
  return auth.length > 7 && auth.slice(0, 7).toLowerCase() === 'bearer ' ? auth.slice(7).trim() : '';
}

function keyOfLines(direct: string, bearer: string): string {
  if (!direct) return bearer;
  return bearer === '' || bearer === direct ? direct : TWO_KEYS;
}

/** The key the lines walked so far name ('' none yet, TWO_KEYS two): module state, so the walk allocates no closure. */
let walkedKey = '';

function checkKeyLine(name: string, value: string): void {
  if (walkedKey === TWO_KEYS) return;
  const key = name === 'x-api-key' ? value : name === 'authorization' ? bearerOf(value) : '';
  if (key === '') return;
  if (walkedKey === '') walkedKey = key;
  else if (key !== walkedKey) walkedKey = TWO_KEYS;
}

/** The 401 for a key that is missing or not of the shape generateApiKey gives; null when it may be looked up. */
export function keyShapeError(apiKey: string): RelayError | null {
  if (!apiKey) return MISSING_KEY_ERROR;
  if (apiKey === TWO_KEYS) return TWO_KEYS_ERROR;
  return hasApiKeyShape(apiKey) ? null : UNKNOWN_KEY_ERROR;
}

/**
 * What the headers and the cache say of a key without a query: its record, its 401, or undefined when
 * only a lookup can tell.
 */
export function peekKey(keys: KeyDirectory, apiKey: string): ApiKeyRecord | RelayError | undefined {
  const shapeError = keyShapeError(apiKey);
  if (shapeError) return shapeError;
  const cached = keys.peek(apiKey);
  return cached === null ? UNKNOWN_KEY_ERROR : cached;
}

/**
 * Postgres could not be asked and the cache holds nothing recent enough (key-directory.ts): a
 * dependency outage, answered 529 like the quota store's, never 500.
 */
export const KEY_STORE_UNAVAILABLE = new RelayError('key_store_unavailable');

/** The lookup's answer: the record, the 401 of an unknown key, or 529 when Postgres failed. */
export function settleKeyLookup(lookup: Promise<ApiKeyRecord | null>): Promise<ApiKeyRecord | RelayError> {
  return lookup.then((record) => record ?? UNKNOWN_KEY_ERROR, () => KEY_STORE_UNAVAILABLE);
}

/**
 * The key's record or its error: at once when the headers or the cache decide, else a lookup already
 * under way (so it runs while a body streams in). The promise never rejects: a failed Postgres read
 * resolves to KEY_STORE_UNAVAILABLE.
 */
export function beginKeyLookup(ctx: { keys: KeyDirectory }, apiKey: string): ApiKeyRecord | RelayError | Promise<ApiKeyRecord | RelayError> {
  const known = peekKey(ctx.keys, apiKey);
  if (known !== undefined) return known;
  return settleKeyLookup(ctx.keys.lookup(apiKey));
}

/** What the key checks need of a request: its key and the client's address. */
export interface KeyedRequest {
  apiKey: string;
  ip: string;
}

export interface KeyCheckContext {
  keys: KeyDirectory;
  groups(): GroupPolicy;
}

/** The key's record, or 401. */
export async function lookupKey(ctx: KeyCheckContext, request: KeyedRequest): Promise<ApiKeyRecord | RelayError> {
  const found = beginKeyLookup(ctx, request.apiKey);
  return found instanceof Promise ? await found : found;
}

/**
 * The groups a known key's request may route through (one, or the `auto` list), in order, when the
 * key's rules allow it for `model` (every rule but the model one when null: a listing); else the error
 * to answer. `nowSec` is Unix seconds.
 */
export function keyRouteGroups(policy: GroupPolicy, record: ApiKeyRecord, model: string | null, ip: string, nowSec: number): readonly string[] | RelayError {
  // Listing checks every rule but the model one: probe with a model the whitelist holds.
  const probe = model ?? (record.modelLimits ? (record.modelLimits.values().next().value ?? '') : '');
  const broken = checkKeyRules(record, probe, ip, nowSec);
  if (broken && !(model === null && broken === 'model_not_allowed')) return new RelayError(broken);
  const groups = policy.routeGroups(record.group, record.userGroup);
  if (!groups) return new RelayError('group_not_allowed', `Group "${record.group || record.userGroup}" is not available to this account.`);
  return groups;
}

export interface KeyAccess {
  record: ApiKeyRecord;
  /** The groups the key's requests may route through (one, or the `auto` list), in order. */
  groups: readonly string[];
}

/** keyRouteGroups now, with the record: what the free endpoints go on with. */
export function checkAccess(ctx: KeyCheckContext, request: KeyedRequest, record: ApiKeyRecord, model: string | null): KeyAccess | RelayError {
  const groups = keyRouteGroups(ctx.groups(), record, model, request.ip, Math.floor(Date.now() / 1000));
  return groups instanceof RelayError ? groups : { record, groups };
}

/**
 * The key's record and groups when its rules allow the request (for `model`, or any model when null),
 * else the error to answer.
 */
export async function authorizeKey(ctx: KeyCheckContext, request: KeyedRequest, model: string | null): Promise<KeyAccess | RelayError> {
  const record = await lookupKey(ctx, request);
  return record instanceof RelayError ? record : checkAccess(ctx, request, record, model);
}
