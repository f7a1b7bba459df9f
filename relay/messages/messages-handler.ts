// POST /v1/messages, one exchange from key check to settlement, following the uWS lifecycle:
// headers are read synchronously, onAborted is set before the first await, every write after an await
// is corked, a full socket pauses the provider's body until onWritable (stream-relay.ts), and one
// idempotent finish() settles the reservation whatever happened (settlement.ts).
//
// Nothing is done for a request before its key: the forwarded headers and the key's presence and
// shape are checked from the headers alone, the key is looked up while the body streams in, and an
// unknown key is answered as soon as the lookup says so, without reading the rest of the body. The
// key checks are those of the free endpoints (auth/key-check.ts); routing across the key's groups is
// routing/group-routing.ts's.
//
// What users see of a failure (the `content` of their log row) is a stable reason from a short list
// (failure-reasons.ts); the detail (addresses, exception messages) goes to the service log only.
import { randomUUID } from 'node:crypto';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import type { Dispatcher } from 'undici';
import type { ApiKeyRecord } from '../auth/key-directory.js';
import { extractApiKey, keyRouteGroups, peekKey, UNKNOWN_KEY_ERROR } from '../auth/key-check.js';
import { RelayError, errorBody, reserveRefusalError, statusLine } from '../errors.js';
import { quotaCostBound, webSearchFee, type PriceRatios } from '../../core/pricing/quota-cost.js';
import { mayUseCache } from './cache-control.js';
import { currentMinute, type QuotaStore } from '../../core/quota/quota-store.js';
import type { Channel } from '../routing/channel-registry.js';
import { pickNextChannel, servingGroups } from '../routing/group-routing.js';
import { CountQueueFull, reservationInputTokens } from '../token-count/token-counter.js';
import { headerOf, readText } from '../upstream/provider-response.js';
import type { RelayContext } from '../relay-context.js';
import { describeIssue, messagesRequestSchema, type MessagesRequest } from './messages-request.js';
import { isHttpFieldValue } from './header-values.js';
import { jsonNestingExceeds, MAX_JSON_DEPTH } from './json-depth.js';
import { usageOfMessageBody } from './message-usage.js';
import { httpReason, REASON } from './failure-reasons.js';
import { settleExchange, type Outcome } from './settlement.js';
import { extraInputTokens, UNBOUNDED, webSearchUses } from './reservation-bound.js';
import { CONTEXT_1M_BETA, DEFAULT_WEB_SEARCH_MAX_USES } from '../../core/pricing/input-bound.js';
import { pipeStream } from './stream-relay.js';
import { errorTypeForStatus, relayMetrics } from '../metrics/relay-metrics.js';

const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

/** Errors of the connect phase: the request was never written, so no provider can be generating it. */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

function reachedProvider(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return !(typeof code === 'string' && NOT_SENT_CODES.has(code));
}

export function handleMessages(ctx: RelayContext, res: HttpResponse, req: HttpRequest): void {
  const ex = new Exchange(ctx, res, req);
  ex.start();
}

const QUOTA_STORE_UNAVAILABLE = new RelayError('quota_store_unavailable');

/** One POST /v1/messages; stream-relay.ts and settlement.ts take it as it is (StreamingExchange, SettledExchange). */
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
  /** What the reservation took; settlement flags a cost above it (settlement.ts). */
  reservedAmount = 0;
  headersSent = false;
  /**
   * The provider answered 200 and has not yet said what it bills: a JSON answer being read (generated
   * in full already), or a stream before its message_start. A client leaving then does not cancel the
   * provider until it has (onClientAborted).
   */
  usagePending = false;
  upstream: AbortController | null = null;
  upstreamBody: Dispatcher.ResponseData['body'] | null = null;

  record: ApiKeyRecord | null = null;
  /** The key's lookup when the cache did not have it, started before the body is read. */
  keyLookup: Promise<ApiKeyRecord | null> | null = null;
  body: MessagesRequest | null = null;
  group = '';
  price: PriceRatios = { model: 1, completion: 1, group: 1, cacheRead: 1, cacheWrite: 1, cacheWrite1h: 1 };
  /** Groups this request may still be served by, in order (more than one only for `auto`). */
  routeGroups: readonly string[] = [];
  /** Where pickNextChannel found the channel to try next (a GroupCursor). */
  nextGroupIndex = 0;
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
    const known = peekKey(this.ctx.keys, this.apiKey);
    if (known instanceof RelayError) return this.fail(known);
    if (this.declaredLength > this.ctx.maxBodyBytes) return this.fail(new RelayError('request_too_large'));
    if (known === undefined) {
      this.keyLookup = this.ctx.keys.lookup(this.apiKey);
      // An unknown key is answered at once, the rest of its body discarded unread; a failed lookup is
      // answered by process(), which awaits the same promise.
      this.keyLookup.then((record) => {
        if (record === null) this.fail(UNKNOWN_KEY_ERROR);
      }, () => {});
    } else {
      this.record = known;
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

    const policy = this.ctx.groups();
    const allowed = keyRouteGroups(policy, record, body.model, this.ip, Math.floor(now / 1000));
    if (allowed instanceof RelayError) return this.fail(allowed);
    const ratios = this.ctx.ratios();
    // Groups that serve the model; a key without cross-group retry stays in the first one.
    const served = servingGroups(allowed, this.ctx.channels, body.model, record.crossGroupRetry);
    if (served.length === 0) {
      return this.fail(new RelayError('model_not_found', `No channel serves model "${body.model}" for group "${allowed[0]}".`));
    }
    this.routeGroups = served;
    this.group = this.routeGroups[0]!;
    let maxGroupRatio = 0;
    for (const g of this.routeGroups) maxGroupRatio = Math.max(maxGroupRatio, ratios.group(g)!);
    const bounds = this.ctx.inputBounds();
    this.price = {
      model: ratios.model(body.model), completion: ratios.completion(body.model), group: ratios.group(this.group)!,
      cacheRead: ratios.cacheRead(body.model), cacheWrite: ratios.cacheWrite(body.model), cacheWrite1h: ratios.cacheWrite1h(body.model),
      webSearch: bounds.webSearchCallPrice,
    };

    // The body's byte length bounds its token count from above (a token is at least one byte), so
    // a reservation of it covers the worst case and the settled debit never exceeds it. It is tried
    // first, so the worker pool is never used for a request the key's rules, rate limits or balance
    // refuse anyway. Only when the balance refuses the byte bound and the body is large is the prompt
    // counted (on a worker: never on the event loop), and the request reserved again with the counted
    // estimate (times a safety factor, never above the byte bound). A refused reservation leaves
    // nothing behind (reserveQuota-6.lua checks everything before it writes, rpm counter included),
    // so the second try counts the request once. The counts are limited per key and minute like
    // count_tokens calls, so a key with a small balance cannot keep the workers busy with large bodies.
    // The bytes bound only text: a request with media, server tools or blocks this relay does not know
    // reserves the model's context window instead (reservation-bound.ts), and counting cannot shrink
    // that; client tools add their hidden prompt's allowance; web searches are reserved at their fee.
    const price = maxGroupRatio === this.price.group ? this.price : { ...this.price, group: maxGroupRatio };
    // Input tokens can be cache writes (2× for an hour) only where the request sets a breakpoint.
    const cacheable = mayUseCache(body);
    const groupLimits = policy.rateLimits(allowed[0]!);
    const rpmLimit = record.rateLimitRpm || groupLimits.rpm;
    const tpmLimit = record.rateLimitTpm || groupLimits.tpm;
    this.tpmLimited = tpmLimit > 0;
    this.minute = currentMinute(now);
    const extraInput = extraInputTokens(body);
    const contextWindow = bounds.contextWindow(body.model, this.beta.includes(CONTEXT_1M_BETA));
    const inputBound = extraInput === UNBOUNDED ? contextWindow : Math.min(contextWindow, raw.length + extraInput);
    const searches = webSearchUses(body, DEFAULT_WEB_SEARCH_MAX_USES);
    // Settlement bills the searches made with the same fee (quotaCost), so max_uses bounds them.
    const fees = webSearchFee(searches, bounds.webSearchCallPrice, price.group);
    const reservation = {
      rpmLimit,
      tpmLimit,
      minute: this.minute,
      userId: record.userId,
      tokenId: record.tokenId,
      tokenLimited: !record.unlimitedQuota,
      requestId: this.requestId,
      amount: quotaCostBound(inputBound, body.max_tokens, price, cacheable) + fees,
      deadlineMs: now + this.ctx.reservationTtlMs,
    };
    // Redis away: refused before anything is reserved, rather than queued until it returns.
    if (!this.ctx.quotaReady()) return this.fail(QUOTA_STORE_UNAVAILABLE);
    let reserved = await this.tryReserve(reservation);
    if (reserved === null) return;
    if ((reserved === 'insufficient_balance' || reserved === 'insufficient_token_quota') && extraInput !== UNBOUNDED && raw.length > this.ctx.countPromptAboveBytes) {
      const counted = await this.countForReservation(raw, record);
      if (this.aborted) return;
      if (counted instanceof RelayError) return this.fail(counted);
      if (counted !== null) {
        const counts = Math.min(contextWindow, reservationInputTokens(raw.length, counted, this.ctx.tokenEstimateFactor) + extraInput);
        const smaller = quotaCostBound(counts, body.max_tokens, price, cacheable) + fees;
        if (smaller < reservation.amount) {
          reservation.amount = smaller;
          reserved = await this.tryReserve(reservation);
          if (reserved === null) return;
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
    this.reservedAmount = reservation.amount;
    this.ctx.heartbeat.hold(this);
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
      const next = attempt < this.ctx.maxTries ? pickNextChannel(this.ctx.channels, this, groupIndex, body.model, tried) : undefined;
      const result = await this.attempt(channel, raw, body, next !== undefined);
      if (result === 'done') return;
      lastFailure = result;
      if (next) relayMetrics.upstreamRetry();
      if (this.aborted) return this.finish({ kind: 'failed', reason: REASON.clientGone });
      channel = next;
      if (next && this.nextGroupIndex !== groupIndex) {
        groupIndex = this.nextGroupIndex;
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
        headersTimeout: body.stream === true ? this.ctx.streamHeadersTimeoutMs : this.ctx.messageHeadersTimeoutMs,
      });
    } catch (err) {
      if (this.aborted) return REASON.clientGone;
      this.ctx.log.warn({ channel: channel.id, requestId: this.requestId, err: (err as Error).message }, 'upstream connection failed');
      // Only a request that never reached the provider goes to another channel: once it may have
      // started generating (a headers timeout, a connection lost after the request was written), the
      // first provider bills it whatever happens, and a second would generate and bill it again.
      if (mayRetry && !reachedProvider(err)) return REASON.connectionFailed;
      this.fail(new RelayError('upstream_unreachable'), reachedProvider(err) ? REASON.noAnswer : REASON.connectionFailed);
      return 'done';
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
    if (contentType.startsWith('text/event-stream')) pipeStream(this, response);
    else await this.sendMessage(response);
    return 'done';
  }

  async sendMessage(response: Dispatcher.ResponseData): Promise<void> {
    let buf: Buffer;
    this.usagePending = true;
    try {
      buf = Buffer.from(await response.body.arrayBuffer());
    } catch (err) {
      this.usagePending = false;
      if (this.aborted) return this.finish({ kind: 'failed', reason: REASON.clientGone });
      this.ctx.log.warn({ channel: this.channel?.id, requestId: this.requestId, err: (err as Error).message }, 'provider body failed');
      return this.fail(new RelayError('upstream_unreachable'), REASON.bodyFailed);
    }
    this.usagePending = false;
    const usage = usageOfMessageBody(buf);
    // Generated in full: the provider bills it though the client left before it was delivered.
    if (this.aborted) return this.finish(usage ? { kind: 'partial', usage, reason: REASON.clientGoneUndelivered } : { kind: 'failed', reason: REASON.clientGone });
    // Settled (on the spool's disk) before the answer's last byte goes out: see settlement-spool.ts.
    if (usage) this.finish({ kind: 'ok', usage });
    else this.finish({ kind: 'failed', reason: REASON.noUsage });
    this.respond(200, 'application/json', buf);
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

  /**
   * The reservation's outcome, or null when its call failed (Redis went away, or did not answer within
   * RELAY_REDIS_COMMAND_TIMEOUT_MS) and the exchange was answered 529. Redis may have made it all the
   * same (a stalled server runs the queued script once it resumes), so the exchange is settled as
   * failed: that releases such a reservation, and changes nothing when there is none
   * (settleReservation-7.lua answers -6).
   */
  async tryReserve(r: Parameters<QuotaStore['reserve']>[0]): Promise<Awaited<ReturnType<QuotaStore['reserve']>> | null> {
    try {
      return await this.ctx.quota.reserve(r);
    } catch (err) {
      this.ctx.log.warn({ err: (err as Error).message, requestId: this.requestId }, 'reservation call failed; answered 529, settling it as failed');
      this.reserved = true;
      this.reservedAmount = r.amount;
      this.ctx.heartbeat.hold(this);
      relayMetrics.reservationOpened();
      this.fail(QUOTA_STORE_UNAVAILABLE);
      return null;
    }
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
    const body = this.upstreamBody;
    // The provider's usage is read before it is cancelled: sendMessage or the stream (stream-relay.ts)
    // cancels it once known. A paused stream is resumed to reach it; nothing more is written.
    if (this.usagePending && body && !body.destroyed) {
      if (body.isPaused()) body.resume();
      return;
    }
    this.upstream?.abort();
    // A stream in progress settles from its 'error' or 'end' handler with what was delivered.
    if (body && !body.destroyed) body.destroy(new Error('client went away'));
  }

  /** Settles the reservation exactly once: the actual cost, or nothing when the request failed. */
  finish(outcome: Outcome): void {
    if (this.finished || !this.reserved) return;
    this.finished = true;
    this.ctx.heartbeat.release(this);
    relayMetrics.reservationClosed();
    settleExchange(this, outcome);
  }
}
