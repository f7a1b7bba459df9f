// POST /v1/messages, one exchange from key check to settlement, following the uWS lifecycle:
// headers are read synchronously, onAborted is set before the first await, every write after an await
// is corked, a full socket pauses the provider's body until onWritable, and one idempotent finish()
// settles the reservation whatever happened.
//
// Nothing is done for a request before its key: the forwarded headers and the key's presence and
// shape are checked from the headers alone, the key is looked up while the body streams in, and an
// unknown key is answered as soon as the lookup says so, without reading the rest of the body.
//
// What users see of a failure (the `content` of their log row) is a stable reason from a short list;
// the detail (addresses, exception messages) goes to the service log only.
import { randomUUID } from 'node:crypto';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { Dispatcher } from 'undici';
import type { Logger } from '../../infra/logger.js';
import { encodeUsageEvent, LOG_TYPE, usageEvent } from '../../core/usage/usage-event.js';
import type { ClientAddressResolver } from '../auth/client-address.js';
import type { ApiKeyRecord, KeyDirectory } from '../auth/key-directory.js';
import { checkKeyRules } from '../auth/key-rules.js';
import { RelayError, errorBody, reserveRefusalError, statusLine } from '../errors.js';
import { extractApiKey, keyShapeError, UNKNOWN_KEY_ERROR } from '../auth/api-key-header.js';
import type { Ratios } from '../../core/pricing/ratios.js';
import { describeCost, quotaCost, type PriceRatios } from '../../core/pricing/quota-cost.js';
import { currentMinute, type QuotaStore } from '../../core/quota/quota-store.js';
import type { Channel, ChannelRegistry } from '../routing/channel-registry.js';
import type { GroupPolicy } from '../../core/groups/group-policy.js';
import { SseUsageParser, type StreamUsage } from '../stream/sse-usage-parser.js';
import { DeliveredTextCounter } from '../tokens/delivered-text-counter.js';
import { CountQueueFull, reservationInputTokens, type TokenCounter } from '../tokens/token-counter.js';
import type { UpstreamPools } from '../upstream/upstream-pools.js';
import { describeIssue, messagesRequestSchema, type MessagesRequest } from './messages-request.js';
import { isHttpFieldValue } from './header-values.js';
import { jsonNestingExceeds, MAX_JSON_DEPTH } from './json-depth.js';
import { usageOfMessageBody } from './message-usage.js';
import { errorTypeForStatus, relayMetrics } from '../metrics/relay-metrics.js';

export interface RelayContext {
  log: Logger;
  keys: KeyDirectory;
  channels: ChannelRegistry;
  quota: QuotaStore;
  pools: UpstreamPools;
  ratios(): Ratios;
  groups(): GroupPolicy;
  clientAddress: ClientAddressResolver;
  maxBodyBytes: number;
  maxTries: number;
  reservationTtlMs: number;
  tokens: TokenCounter;
  /**
   * Bodies larger than this whose byte-bound reservation the balance refuses are token-counted and
   * reserved again with the counted estimate; smaller ones reserve their byte length only.
   */
  countPromptAboveBytes: number;
  /** Token counts (count_tokens calls, prompt counts) per key per minute. */
  countsPerMinute: number;
  /** Reserved input tokens = min(body bytes, counted × this + 16). */
  tokenEstimateFactor: number;
  /** Batch size of delivered-text counting. */
  deliveredFlushBytes: number;
}

const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';
/** Largest error or JSON body read from a provider before it is passed on. */
const MAX_UPSTREAM_JSON = 32 * 1024 * 1024;

const STREAM_FAILED_EVENT = `event: error\ndata: ${errorBody('api_error', 'The model provider stream failed.')}\n\n`;

/**
 * Why an exchange failed, as users read it in their log: stable wording, never an address or an
 * exception message (those go to the service log).
 */
const REASON = {
  clientGone: 'client went away',
  clientGoneBeforeForwarding: 'client went away before forwarding',
  clientGoneMidStream: 'client went away mid-stream',
  connectionFailed: 'provider connection failed',
  bodyFailed: 'provider answer could not be read',
  streamFailed: 'provider stream failed',
  streamCut: 'stream ended without message_stop',
  noUsage: 'provider answer carried no usage',
  noChannel: 'no channel answered',
  relayError: 'relay error',
} as const;

/** `provider answered HTTP <status>`, built once per status. */
const httpReasons = new Map<number, string>();
function httpReason(status: number): string {
  let r = httpReasons.get(status);
  if (r === undefined) httpReasons.set(status, (r = `provider answered HTTP ${status}`));
  return r;
}

/** A provider's SSE error type, if it looks like one (`overloaded_error`); anything else is not echoed. */
function providerErrorReason(type: unknown): string {
  return typeof type === 'string' && /^[a-z_]{1,40}$/.test(type) ? `provider error event: ${type}` : 'provider error event';
}

type Outcome =
  | { kind: 'ok'; usage: StreamUsage }
  | { kind: 'partial'; usage: StreamUsage; reason: string }
  | { kind: 'failed'; reason: string };

export function handleMessages(ctx: RelayContext, res: HttpResponse, req: HttpRequest): void {
  const ex = new Exchange(ctx, res, req);
  ex.start();
}

class Exchange {
  readonly ctx: RelayContext;
  readonly res: HttpResponse;
  readonly requestId = randomUUID();
  readonly startedAt = Date.now();
  readonly t0 = performance.now();
  metricsDone = false;
  readonly apiKey: string;
  readonly version: string;
  readonly beta: string;
  readonly ip: string;
  readonly declaredLength: number;

  aborted = false;
  responded = false;
  finished = false;
  reserved = false;
  headersSent = false;
  upstream: AbortController | null = null;
  upstreamBody: Dispatcher.ResponseData['body'] | null = null;

  record: ApiKeyRecord | null = null;
  /** The key's lookup when the cache did not have it, started before the body is read. */
  keyLookup: Promise<ApiKeyRecord | null> | null = null;
  body: MessagesRequest | null = null;
  group = '';
  price: PriceRatios = { model: 1, completion: 1, group: 1 };
  /** Groups this request may still be served by, in order (more than one only for `auto`). */
  routeGroups: readonly string[] = [];
  minute = 0;
  tpmLimited = false;
  channel: Channel | null = null;
  upstreamRequestId = '';

  constructor(ctx: RelayContext, res: HttpResponse, req: HttpRequest) {
    this.ctx = ctx;
    this.res = res;
    this.apiKey = extractApiKey(req);
    this.version = req.getHeader('anthropic-version');
    this.beta = req.getHeader('anthropic-beta');
    const cl = req.getHeader('content-length');
    this.declaredLength = cl ? Number(cl) : -1;
    this.ip = ctx.clientAddress.resolve(Buffer.from(res.getRemoteAddressAsText()).toString(), req.getHeader('x-forwarded-for'));
    res.onAborted(() => this.onClientAborted());
    relayMetrics.requestStarted();
  }

  /** Once per exchange: its status, error type ('' = success) and duration into the metrics. */
  done(status: number, errorType: string): void {
    if (this.metricsDone) return;
    this.metricsDone = true;
    relayMetrics.requestDone(status, errorType, performance.now() - this.t0);
  }

  start(): void {
    // From the headers alone: what is forwarded, then the key. No body byte is kept before these pass.
    if (!isHttpFieldValue(this.version)) return this.fail(new RelayError('invalid_request', 'anthropic-version: the header holds characters HTTP does not allow.'));
    if (!isHttpFieldValue(this.beta)) return this.fail(new RelayError('invalid_request', 'anthropic-beta: the header holds characters HTTP does not allow.'));
    const keyError = keyShapeError(this.apiKey);
    if (keyError) return this.fail(keyError);
    const cached = this.ctx.keys.peek(this.apiKey);
    if (cached === null) return this.fail(UNKNOWN_KEY_ERROR);
    if (this.declaredLength > this.ctx.maxBodyBytes) return this.fail(new RelayError('request_too_large'));
    if (cached === undefined) {
      this.keyLookup = this.ctx.keys.lookup(this.apiKey);
      // An unknown key is answered at once, the rest of its body discarded unread; a failed lookup is
      // answered by process(), which awaits the same promise.
      this.keyLookup.then((record) => {
        if (record === null) this.fail(UNKNOWN_KEY_ERROR);
      }, () => {});
    } else {
      this.record = cached;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    this.res.onData((ab, isLast) => {
      if (this.responded) return;
      size += ab.byteLength;
      if (size > this.ctx.maxBodyBytes) return this.fail(new RelayError('request_too_large'));
      // uWS reuses the ArrayBuffer after this callback returns: copy.
      chunks.push(Buffer.from(new Uint8Array(ab)));
      if (isLast) {
        const raw = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
        this.process(raw).catch((err: unknown) => this.crash(err));
      }
    });
  }

  async process(raw: Buffer): Promise<void> {
    let record = this.record;
    if (record === null) {
      record = await this.keyLookup!;
      if (this.aborted || this.responded) return;
      if (!record) return this.fail(UNKNOWN_KEY_ERROR);
      this.record = record;
    }

    if (jsonNestingExceeds(raw)) {
      return this.fail(new RelayError('invalid_request', `The request body nests objects and arrays more than ${MAX_JSON_DEPTH} levels deep.`));
    }
    let json: unknown;
    try {
      json = JSON.parse(raw.toString('utf8'));
    } catch {
      return this.fail(new RelayError('invalid_json'));
    }
    const parsed = messagesRequestSchema.safeParse(json);
    if (!parsed.success) return this.fail(new RelayError('invalid_request', describeIssue(parsed.error)));
    const body = parsed.data;
    this.body = body;
    const now = Date.now();

    const broken = checkKeyRules(record, body.model, this.ip, Math.floor(now / 1000));
    if (broken) return this.fail(new RelayError(broken));

    const ratios = this.ctx.ratios();
    const policy = this.ctx.groups();
    const allowed = policy.routeGroups(record.group, record.userGroup);
    if (!allowed) {
      return this.fail(new RelayError('group_not_allowed', `Group "${record.group || record.userGroup}" is not available to this account.`));
    }
    // Groups that serve the model; a key without cross-group retry stays in the first one.
    const served = servingGroups(allowed, this.ctx.channels, body.model, record.crossGroupRetry);
    if (served.length === 0) {
      return this.fail(new RelayError('model_not_found', `No channel serves model "${body.model}" for group "${allowed[0]}".`));
    }
    this.routeGroups = served;
    this.group = this.routeGroups[0]!;
    let maxGroupRatio = 0;
    for (const g of this.routeGroups) maxGroupRatio = Math.max(maxGroupRatio, ratios.group(g)!);
    this.price = { model: ratios.model(body.model), completion: ratios.completion(body.model), group: ratios.group(this.group)! };

    // The body's byte length bounds its token count from above (a token is at least one byte), so
    // a reservation of it covers the worst case and the settled debit never exceeds it. It is tried
    // first, so the worker pool is never used for a request the key's rules, rate limits or balance
    // refuse anyway. Only when the balance refuses the byte bound and the body is large is the prompt
    // counted (on a worker: never on the event loop), and the request reserved again with the counted
    // estimate (times a safety factor, never above the byte bound). A refused reservation leaves
    // nothing behind (reserveQuota-6.lua checks everything before it writes, rpm counter included),
    // so the second try counts the request once. The counts are limited per key and minute like
    // count_tokens calls, so a key with a small balance cannot keep the workers busy with large bodies.
    const price = maxGroupRatio === this.price.group ? this.price : { ...this.price, group: maxGroupRatio };
    const groupLimits = policy.rateLimits(allowed[0]!);
    const rpmLimit = record.rateLimitRpm || groupLimits.rpm;
    const tpmLimit = record.rateLimitTpm || groupLimits.tpm;
    this.tpmLimited = tpmLimit > 0;
    this.minute = currentMinute(now);
    const reservation = {
      rpmLimit,
      tpmLimit,
      minute: this.minute,
      userId: record.userId,
      tokenId: record.tokenId,
      tokenLimited: !record.unlimitedQuota,
      requestId: this.requestId,
      amount: quotaCost({ inputTokens: raw.length, outputTokens: body.max_tokens, cacheTokens: 0 }, price),
      deadlineMs: now + this.ctx.reservationTtlMs,
    };
    let reserved = await this.ctx.quota.reserve(reservation);
    if ((reserved === 'insufficient_balance' || reserved === 'insufficient_token_quota') && raw.length > this.ctx.countPromptAboveBytes) {
      const counted = await this.countForReservation(raw, record);
      if (this.aborted) return;
      if (counted instanceof RelayError) return this.fail(counted);
      if (counted !== null) {
        const smaller = quotaCost({ inputTokens: reservationInputTokens(raw.length, counted, this.ctx.tokenEstimateFactor), outputTokens: body.max_tokens, cacheTokens: 0 }, price);
        if (smaller < reservation.amount) {
          reservation.amount = smaller;
          reserved = await this.ctx.quota.reserve(reservation);
        }
      }
    }
    if (reserved !== 'reserved') {
      const refused = reserveRefusalError(reserved, { rpm: rpmLimit, tpm: tpmLimit });
      // A rate limit lifts when its wall-clock minute ends.
      const retryAfter = refused.code === 'rate_limited' ? String(60 - Math.floor((now / 1000) % 60)) : undefined;
      return this.fail(refused, undefined, retryAfter);
    }
    this.reserved = true;
    relayMetrics.reservationOpened();
    if (this.aborted) return this.finish({ kind: 'failed', reason: REASON.clientGoneBeforeForwarding });

    await this.forward(raw, body);
  }

  /**
   * The prompt's token count for a second reservation try; null when it cannot help (the key's counts
   * of this minute are spent, or counting failed): the byte bound's refusal stands. 529 when the
   * counting queue is full.
   */
  async countForReservation(raw: Buffer, record: ApiKeyRecord): Promise<number | null | RelayError> {
    if (!(await this.ctx.quota.takeCountSlot(record.userId, record.tokenId, this.ctx.countsPerMinute, this.minute))) return null;
    try {
      relayMetrics.promptCounted();
      return await this.ctx.tokens.countPrompt(raw);
    } catch (err) {
      if (err instanceof CountQueueFull) return new RelayError('relay_overloaded');
      this.ctx.log.warn({ err, requestId: this.requestId }, 'prompt count failed; the byte bound stands');
      return null;
    }
  }

  /**
   * Tries channels in turn, at most maxTries in all: within a group by priority then weight, then
   * (for `auto` keys with cross_group_retry) in the next group. A retry happens only while nothing
   * has reached the client.
   */
  async forward(raw: Buffer, body: MessagesRequest): Promise<void> {
    const ratios = this.ctx.ratios();
    const tried = new Set<number>();
    let lastFailure = '';
    let attempt = 0;
    let groupIndex = 0;
    let channel = this.ctx.channels.pick(this.routeGroups[0]!, body.model);
    while (channel && attempt < this.ctx.maxTries) {
      tried.add(channel.id);
      this.channel = channel;
      attempt++;
      let next: Channel | undefined;
      let nextGroup = groupIndex;
      if (attempt < this.ctx.maxTries) {
        for (; nextGroup < this.routeGroups.length && !next; nextGroup++) {
          next = this.ctx.channels.pick(this.routeGroups[nextGroup]!, body.model, tried);
          if (next) break;
        }
      }
      const result = await this.attempt(channel, raw, body, next !== undefined);
      if (result === 'done') return;
      lastFailure = result;
      if (next) relayMetrics.upstreamRetry();
      if (this.aborted) return this.finish({ kind: 'failed', reason: REASON.clientGone });
      channel = next;
      if (next && nextGroup !== groupIndex) {
        groupIndex = nextGroup;
        this.group = this.routeGroups[groupIndex]!;
        this.price = { ...this.price, group: ratios.group(this.group) ?? this.price.group };
      }
    }
    this.fail(new RelayError('upstream_unreachable'), lastFailure || REASON.noChannel);
  }

  /** One call to one channel: 'done' when the exchange is answered, otherwise why to retry (a REASON). */
  async attempt(channel: Channel, raw: Buffer, body: MessagesRequest, mayRetry: boolean): Promise<'done' | string> {
    const mapped = channel.modelMapping?.[body.model];
    // Safe to stringify: process() refused bodies nested deeper than MAX_JSON_DEPTH.
    const payload = mapped ? Buffer.from(JSON.stringify({ ...body, model: mapped })) : raw;
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'x-api-key': channel.apiKey,
      'anthropic-version': this.version || DEFAULT_ANTHROPIC_VERSION,
    };
    if (this.beta) headers['anthropic-beta'] = this.beta;
    const controller = new AbortController();
    this.upstream = controller;
    let response: Dispatcher.ResponseData;
    const sentAt = performance.now();
    try {
      response = await this.ctx.pools.for(channel.baseUrl).request({
        path: '/v1/messages',
        method: 'POST',
        headers,
        body: payload,
        signal: controller.signal,
      });
    } catch (err) {
      if (this.aborted) return REASON.clientGone;
      this.ctx.log.warn({ channel: channel.id, requestId: this.requestId, err: (err as Error).message }, 'upstream connection failed');
      return REASON.connectionFailed;
    }
    relayMetrics.upstreamLatency(performance.now() - sentAt);
    this.upstreamBody = response.body;
    this.upstreamRequestId = headerOf(response.headers['request-id']);
    const status = response.statusCode;
    if (status === 429 || status >= 500) {
      const text = await readText(response.body).catch(() => '');
      if (this.aborted) return REASON.clientGone;
      if (mayRetry && !this.headersSent) {
        this.ctx.log.warn({ channel: channel.id, requestId: this.requestId, status }, 'provider failed; retrying on another channel');
        return httpReason(status);
      }
      this.passThroughError(status, text, response.headers);
      return 'done';
    }
    if (status !== 200) {
      const text = await readText(response.body).catch(() => '');
      this.passThroughError(status, text, response.headers);
      return 'done';
    }
    const contentType = headerOf(response.headers['content-type']);
    if (contentType.startsWith('text/event-stream')) this.pipeStream(response);
    else await this.sendMessage(response);
    return 'done';
  }

  async sendMessage(response: Dispatcher.ResponseData): Promise<void> {
    let buf: Buffer;
    try {
      buf = Buffer.from(await response.body.arrayBuffer());
    } catch (err) {
      if (this.aborted) return this.finish({ kind: 'failed', reason: REASON.clientGone });
      this.ctx.log.warn({ channel: this.channel?.id, requestId: this.requestId, err: (err as Error).message }, 'provider body failed');
      return this.fail(new RelayError('upstream_unreachable'), REASON.bodyFailed);
    }
    if (this.aborted) return this.finish({ kind: 'failed', reason: REASON.clientGone });
    const usage = usageOfMessageBody(buf);
    this.respond(200, 'application/json', buf);
    if (usage) this.finish({ kind: 'ok', usage });
    else this.finish({ kind: 'failed', reason: REASON.noUsage });
  }

  pipeStream(response: Dispatcher.ResponseData): void {
    const body = response.body;
    const res = this.res;
    // Two reasons to pause the provider: the client socket is full, or delivered-text counting lags.
    let socketFull = false;
    let countingLags = false;
    const delivered = new DeliveredTextCounter(this.ctx.tokens, {
      flushBytes: this.ctx.deliveredFlushBytes,
      onCongestion: (lagging) => {
        countingLags = lagging;
        if (lagging) body.pause();
        else if (!socketFull && !body.destroyed) body.resume();
      },
    });
    const parser = new SseUsageParser(delivered); // payloads handed over in place, no copy
    this.headersSent = true;
    res.cork(() => {
      res.writeStatus('200 OK')
        .writeHeader('content-type', 'text/event-stream; charset=utf-8')
        .writeHeader('cache-control', 'no-cache')
        .writeHeader('request-id', this.upstreamRequestId)
        .writeHeader('x-gateway-request-id', this.requestId);
    });
    const onWritable = (): boolean => {
      socketFull = false;
      if (!countingLags) body.resume();
      return true;
    };
    let first = true;
    body.on('data', (chunk: Buffer) => {
      parser.push(chunk);
      if (this.aborted) return;
      if (first) {
        first = false;
        relayMetrics.streamFirstByte(performance.now() - this.t0);
      }
      let ok = true;
      res.cork(() => {
        ok = res.write(chunk);
      });
      if (!ok) {
        socketFull = true;
        relayMetrics.streamPaused();
        body.pause();
        res.onWritable(onWritable);
      }
    });
    body.on('end', () => {
      // A provider stream that stops before message_stop (and says nothing) died mid-way.
      const cut = !parser.sawMessageStop && !parser.error;
      if (!this.aborted && !this.responded) {
        this.responded = true;
        res.cork(() => res.end(cut ? STREAM_FAILED_EVENT : undefined));
      }
      this.done(200, cut || parser.error ? 'stream_error' : '');
      void this.settleStream(parser, delivered, parser.error
        ? providerErrorReason(parser.error.type)
        : parser.sawMessageStop ? null : REASON.streamCut);
    });
    body.on('error', (err: Error) => {
      if (this.aborted) return void this.settleStream(parser, delivered, REASON.clientGoneMidStream);
      // The client already has a 200: tell it in the stream, as Anthropic does.
      if (!this.responded) {
        this.responded = true;
        res.cork(() => res.end(STREAM_FAILED_EVENT));
      }
      this.done(200, 'stream_error');
      this.ctx.log.warn({ channel: this.channel?.id, requestId: this.requestId, err: err.message }, 'provider stream failed');
      void this.settleStream(parser, delivered, REASON.streamFailed);
    });
  }

  /**
   * Settles a stream: with the provider's final usage (message_delta) when it sent one, pending
   * delivered text dropped uncounted; otherwise with the exact token count of the text delivered.
   * `partialReason` null means the stream completed.
   */
  async settleStream(parser: SseUsageParser, delivered: DeliveredTextCounter, partialReason: string | null): Promise<void> {
    let usage: StreamUsage;
    if (parser.sawMessageDelta) {
      delivered.discard();
      usage = snapshot(parser);
    } else {
      let output: number;
      try {
        output = await delivered.total();
      } catch (err) {
        this.ctx.log.warn({ err, requestId: this.requestId }, 'delivered-text count failed; billing the delta count');
        output = snapshot(parser).outputTokens;
      }
      usage = { inputTokens: parser.inputTokens, outputTokens: output, cacheCreationTokens: parser.cacheCreationTokens, cacheReadTokens: parser.cacheReadTokens };
    }
    if (partialReason === null) this.finish({ kind: 'ok', usage });
    else this.finish({ kind: 'partial', usage, reason: partialReason });
  }

  passThroughError(status: number, text: string, headers: Dispatcher.ResponseData['headers']): void {
    // A provider's JSON error is Anthropic's own and passes as it is; anything else (a proxy's HTML
    // page, a stack trace) is replaced by a stable message and logged for operators.
    const isJson = text.startsWith('{') && headerOf(headers['content-type']).includes('json');
    if (!isJson && text) this.ctx.log.warn({ channel: this.channel?.id, requestId: this.requestId, status, body: text.slice(0, 2048) }, 'provider answered a non-JSON error');
    const body = isJson ? text : errorBody(status === 529 ? 'overloaded_error' : status >= 500 ? 'api_error' : errorTypeForStatus(status), httpReason(status));
    const retryAfter = headerOf(headers['retry-after']);
    this.respond(status, 'application/json', body, retryAfter);
    this.finish({ kind: 'failed', reason: httpReason(status) });
  }

  respond(status: number, contentType: string, body: string | Buffer, retryAfter?: string): void {
    if (this.aborted || this.responded) return;
    this.responded = true;
    this.headersSent = true;
    this.done(status, errorTypeForStatus(status));
    const res = this.res;
    res.cork(() => {
      res.writeStatus(statusLine(status)).writeHeader('content-type', contentType);
      if (this.upstreamRequestId) res.writeHeader('request-id', this.upstreamRequestId);
      res.writeHeader('x-gateway-request-id', this.requestId);
      if (retryAfter) res.writeHeader('retry-after', retryAfter);
      res.end(body);
    });
  }

  fail(err: RelayError, reason?: string, retryAfter?: string): void {
    this.respond(err.status, 'application/json', err.body(), retryAfter);
    if (this.reserved) this.finish({ kind: 'failed', reason: reason ?? err.message });
  }

  crash(err: unknown): void {
    this.ctx.log.error({ err, requestId: this.requestId }, 'relay exchange failed');
    this.fail(new RelayError('internal'), REASON.relayError);
  }

  onClientAborted(): void {
    this.done(499, 'client_closed');
    this.aborted = true;
    this.responded = true;
    this.upstream?.abort();
    // A stream in progress settles from its 'error' or 'end' handler with what was delivered.
    if (this.upstreamBody && !this.upstreamBody.destroyed) this.upstreamBody.destroy(new Error('client went away'));
  }

  /** Settles the reservation exactly once: the actual cost, or nothing when the request failed. */
  finish(outcome: Outcome): void {
    if (this.finished || !this.reserved) return;
    this.finished = true;
    relayMetrics.reservationClosed();
    const record = this.record!;
    const usage = outcome.kind === 'failed' ? null : outcome.usage;
    const cost = usage ? quotaCost({ inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, cacheTokens: usage.cacheCreationTokens + usage.cacheReadTokens }, this.price) : 0;
    const content = outcome.kind === 'ok' ? costText(this.price) : `${outcome.reason}; ${costText(this.price)}`;
    const event = usageEvent({
      type: outcome.kind === 'ok' ? LOG_TYPE.consume : outcome.kind === 'partial' ? LOG_TYPE.consume : LOG_TYPE.error,
      request_id: this.requestId,
      upstream_request_id: this.upstreamRequestId,
      user_id: record.userId,
      username: record.username,
      token_id: record.tokenId,
      token_name: record.name,
      token_limited: !record.unlimitedQuota,
      channel: this.channel?.id ?? 0,
      model_name: this.body?.model ?? '',
      group: this.group,
      quota: cost,
      prompt_tokens: usage ? usage.inputTokens + usage.cacheCreationTokens + usage.cacheReadTokens : 0,
      completion_tokens: usage?.outputTokens ?? 0,
      cache_tokens: usage ? usage.cacheCreationTokens + usage.cacheReadTokens : 0,
      is_stream: this.body?.stream === true,
      use_time_ms: Date.now() - this.startedAt,
      created_at: Math.floor(this.startedAt / 1000),
      content,
      ip: this.ip,
    });
    const tokens = this.tpmLimited ? event.prompt_tokens + event.completion_tokens : 0;
    const settlement = { userId: record.userId, tokenId: record.tokenId, requestId: this.requestId, cost, eventJson: encodeUsageEvent(event), tokens, minute: currentMinute() };
    settleWithRetry(this.ctx, settlement, 0);
  }
}

/**
 * The settlement script is idempotent, so a failed call (Redis restarting, a network blip) is simply
 * tried again; only after the last try does the reservation wait for the reaper, which releases it
 * and still accepts this settlement late (settleReservation-7.lua).
 */
const SETTLE_RETRY_DELAYS_MS = [50, 250, 1000, 5000];

export function settleWithRetry(ctx: RelayContext, settlement: Parameters<QuotaStore['settle']>[0], attempt: number): void {
  ctx.quota.settle(settlement).catch((err: unknown) => {
    const delay = SETTLE_RETRY_DELAYS_MS[attempt];
    if (delay === undefined) {
      relayMetrics.settleFailed();
      ctx.log.error({ err, requestId: settlement.requestId }, 'settlement failed; the reservation stays open for the reaper');
      return;
    }
    ctx.log.warn({ err: (err as Error).message, requestId: settlement.requestId, attempt }, 'settlement failed; retrying');
    setTimeout(() => settleWithRetry(ctx, settlement, attempt + 1), delay).unref();
  });
}

/** The groups of `allowed` that serve the model, in order; only the first unless `all`. */
function servingGroups(allowed: readonly string[], channels: ChannelRegistry, model: string, all: boolean): readonly string[] {
  if (allowed.length === 1) return channels.serves(allowed[0]!, model) ? allowed : [];
  const served: string[] = [];
  for (const g of allowed) {
    if (!channels.serves(g, model)) continue;
    served.push(g);
    if (!all) break;
  }
  return served;
}

/** describeCost of the last price seen, kept: a gateway's traffic mostly repeats a few prices. */
let lastCost: PriceRatios & { text: string } = { model: NaN, completion: NaN, group: NaN, text: '' };

function costText(p: PriceRatios): string {
  const c = lastCost;
  if (c.model === p.model && c.completion === p.completion && c.group === p.group) return c.text;
  lastCost = { model: p.model, completion: p.completion, group: p.group, text: describeCost(p) };
  return lastCost.text;
}

function snapshot(p: SseUsageParser): StreamUsage {
  // A cut stream has no final message_delta: each text delta passed on is one token of the mock and
  // a lower bound for real providers; the exact count of delivered text is the token counter's job.
  const output = p.sawMessageDelta ? p.outputTokens : Math.max(p.outputTokens, p.contentDeltas);
  return { inputTokens: p.inputTokens, outputTokens: output, cacheCreationTokens: p.cacheCreationTokens, cacheReadTokens: p.cacheReadTokens };
}

function headerOf(v: string | string[] | undefined): string {
  return Array.isArray(v) ? (v[0] ?? '') : (v ?? '');
}

async function readText(body: Dispatcher.ResponseData['body']): Promise<string> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size > MAX_UPSTREAM_JSON) {
      body.destroy();
      break;
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
