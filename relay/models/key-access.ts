// The key checks shared by the relay's free endpoints (GET /v1/models, POST /v1/messages/count_tokens):
// the same rules and errors as POST /v1/messages, no quota moved, and the same order: the key's
// presence and shape from the headers, its lookup before any body is parsed. uWS lifecycle as in
// messages-handler.ts: headers read synchronously, onAborted set before the first await, writes corked.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { Logger } from '../../infra/logger.js';
import type { ClientAddressResolver } from '../auth/client-address.js';
import type { ApiKeyRecord, KeyDirectory } from '../auth/key-directory.js';
import { extractApiKey, keyShapeError, UNKNOWN_KEY_ERROR } from '../auth/api-key-header.js';
import { checkKeyRules } from '../auth/key-rules.js';
import { RelayError, statusLine } from '../errors.js';
import type { ChannelRegistry } from '../routing/channel-registry.js';
import type { GroupPolicy } from '../../core/groups/group-policy.js';

export interface FreeEndpointContext {
  log: Logger;
  keys: KeyDirectory;
  channels: ChannelRegistry;
  groups(): GroupPolicy;
  clientAddress: ClientAddressResolver;
  maxBodyBytes: number;
}

/** One request's response side: aborted tracking and corked single-shot answers. */
export class Reply {
  aborted = false;
  done = false;
  readonly res: HttpResponse;
  constructor(res: HttpResponse) {
    this.res = res;
    res.onAborted(() => {
      this.aborted = true;
    });
  }
  json(status: number, body: string, retryAfter?: string): void {
    if (this.aborted || this.done) return;
    this.done = true;
    this.res.cork(() => {
      this.res.writeStatus(statusLine(status)).writeHeader('content-type', 'application/json');
      if (retryAfter) this.res.writeHeader('retry-after', retryAfter);
      this.res.end(body);
    });
  }
  error(err: RelayError, retryAfter?: string): void {
    this.json(err.status, err.body(), retryAfter);
  }
}

export interface RequestHead {
  apiKey: string;
  ip: string;
  declaredLength: number;
}

/** Everything needed from the uWS request, read before any await (req is invalid afterwards). */
export function readHead(ctx: FreeEndpointContext, res: HttpResponse, req: HttpRequest): RequestHead {
  const cl = req.getHeader('content-length');
  const ip = ctx.clientAddress.resolve(Buffer.from(res.getRemoteAddressAsText()).toString(), req.getHeader('x-forwarded-for'));
  return { apiKey: extractApiKey(req), ip, declaredLength: cl ? Number(cl) : -1 };
}

export interface KeyAccess {
  record: ApiKeyRecord;
  /** The groups the key's requests may route through (one, or the `auto` list), in order. */
  groups: readonly string[];
}

/** Models some channel serves in any of `groups`. */
export function servedModels(channels: ChannelRegistry, groups: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const g of groups) for (const m of channels.modelsOf(g)) out.add(m);
  return out;
}

/**
 * The key's record and group when its rules allow the request (for `model`, or any model when null),
 * else the error to answer.
 */
export async function authorizeKey(ctx: FreeEndpointContext, head: RequestHead, model: string | null): Promise<KeyAccess | RelayError> {
  const record = await lookupKey(ctx, head);
  return record instanceof RelayError ? record : checkAccess(ctx, head, record, model);
}

/** The key's record, or 401. */
export async function lookupKey(ctx: FreeEndpointContext, head: RequestHead): Promise<ApiKeyRecord | RelayError> {
  const found = beginKeyLookup(ctx, head.apiKey);
  return found instanceof Promise ? await found : found;
}

/**
 * The key's record or its 401: at once when the headers or the cache decide, else a lookup already
 * under way (so it runs while a body streams in). The promise never rejects with a RelayError; it
 * rejects only when Postgres fails.
 */
export function beginKeyLookup(ctx: Pick<FreeEndpointContext, 'keys'>, apiKey: string): ApiKeyRecord | RelayError | Promise<ApiKeyRecord | RelayError> {
  const shapeError = keyShapeError(apiKey);
  if (shapeError) return shapeError;
  const cached = ctx.keys.peek(apiKey);
  if (cached !== undefined) return cached ?? UNKNOWN_KEY_ERROR;
  return ctx.keys.lookup(apiKey).then((record) => record ?? UNKNOWN_KEY_ERROR);
}

/** The key's rules for `model` (every rule but the model one when null) and its group. */
export function checkAccess(ctx: FreeEndpointContext, head: RequestHead, record: ApiKeyRecord, model: string | null): KeyAccess | RelayError {
  const now = Date.now();
  // Listing checks every rule but the model one: probe with a model the whitelist holds.
  const probe = model ?? (record.modelLimits ? (record.modelLimits.values().next().value ?? '') : '');
  const broken = checkKeyRules(record, probe, head.ip, Math.floor(now / 1000));
  if (broken && !(model === null && broken === 'model_not_allowed')) return new RelayError(broken);
  const groups = ctx.groups().routeGroups(record.group, record.userGroup);
  if (!groups) return new RelayError('group_not_allowed', `Group "${record.group || record.userGroup}" is not available to this account.`);
  return { record, groups };
}

/** Reads the whole body (copying each chunk: uWS reuses its buffers); null after a 413 or an abort. */
export function readBody(ctx: FreeEndpointContext, reply: Reply, head: RequestHead): Promise<Buffer | null> {
  return new Promise((resolve) => {
    if (head.declaredLength > ctx.maxBodyBytes) {
      reply.error(new RelayError('request_too_large'));
      return resolve(null);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    reply.res.onData((ab, isLast) => {
      // Answered already (an unknown key): the rest of the body is dropped unread.
      if (reply.done) return resolve(null);
      size += ab.byteLength;
      if (size > ctx.maxBodyBytes) {
        reply.error(new RelayError('request_too_large'));
        return resolve(null);
      }
      chunks.push(Buffer.from(new Uint8Array(ab)));
      if (isLast) resolve(Buffer.concat(chunks, size));
    });
  });
}
