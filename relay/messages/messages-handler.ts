// POST /v1/messages and POST /v1/chat/completions, one exchange from key check to settlement, following
// the uWS lifecycle:
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
//
// Two protocols, one lifecycle. The client's protocol (`protocol`: Anthropic on /v1/messages, OpenAI
// on /v1/chat/completions) decides how the body is read and how errors are written; the request is
// priced, reserved and settled in Anthropic's form (`body`: a Chat Completions request is converted
// first, providers/anthropic/from-chat.ts). The channel's provider (providers/registry.ts, by channel
// type) decides where the request goes, how it authenticates and how its usage is read. When both
// speak the same protocol the client's bytes go out and the provider's come back as they are;
// otherwise the request and the answer are converted (convertRequest, convertAnswer, the stream's
// rewriter).
import { randomUUID } from 'node:crypto';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { forwardedForOf } from '../auth/client-address.js';
import type { Readable } from 'node:stream';
import { scrubCredentials } from '../../infra/secrets/credential-text.js';
import type { ApiKeyRecord } from '../auth/key-directory.js';
import { extractApiKey, keyRouteGroups, peekKey, settleKeyLookup } from '../auth/key-check.js';
import { BodyLinger, declaredLengthOf } from '../free-request.js';
import { headerLines } from '../header-lines.js';
import { PROVIDER_ACCOUNT_REFUSED, RelayError, anthropicTypeOfOpenAIError, errorBody, openaiErrorBody, openaiErrorType, openaiProviderErrorBody, reserveRefusalError, statusLine } from '../errors.js';
import { quotaCostBound, webSearchFee, type PriceRatios } from '../../core/pricing/quota-cost.js';
import { writesCacheUnmarked, type Ratios } from '../../core/pricing/ratios.js';
import { cacheUseOf, cacheUseOfChat } from './cache-control.js';
import { currentMinute, type QuotaStore, type RateLimitWait } from '../../core/quota/quota-store.js';
import type { Channel } from '../routing/channel-registry.js';
import { pickNextChannel, servingGroups } from '../routing/group-routing.js';
import { affinityOf, endUserOf } from '../routing/affinity.js';
import { exchangeEnded, providerAnswered, providerFailed, providerUnreachable } from '../routing/channel-outcomes.js';
import { isRetriedFault } from '../../core/channels/provider-fault.js';
import { reservationInputTokens } from '../token-count/token-counter.js';
import { DeliveredTextCounter } from '../token-count/delivered-text-counter.js';
import { contentCodingOf, isEventStream, looksLikeSse, MAX_UPSTREAM_JSON, OVER_BOUND, StreamedAnswer, WholeAnswer, type ProviderAnswer } from '../upstream/provider-response.js';
import { BufferedCall } from '../upstream/buffered-call.js';
import type { RelayContext } from '../relay-context.js';
import { checkMessagesRequest, type MessagesRequest } from './messages-request.js';
import { unpricedMessagesFieldRefusal } from './unpriced-fields.js';
import { fileReferenceRefusal } from './file-references.js';
import { isHttpFieldValue, retryAfterOf } from './header-values.js';
import { parseRequestJson } from './raw-json-guard.js';
import { ACCOUNT_BUSY_RETRY_AFTER, accountBusyError, takeCountPlace } from './count-place.js';
import type { Encoding } from '../token-count/bpe-count.js';
import { encodingOf } from '../token-count/encoding-of.js';
import { httpReason, providerErrorReason, REASON } from './failure-reasons.js';
import { checkChatRequest, type ChatRequest } from '../chat-completions/chat-request.js';
import type { Protocol, Provider } from '../providers/provider.js';
import type { StatedUsage, StreamUsage } from '../stream/sse-usage-parser.js';
import { providerOf } from '../providers/registry.js';
import { anthropicOnlyRefusal, chatToMessages, countedForm, narrowedTools } from '../providers/anthropic/from-chat.js';
import { AnthropicToChatStream, messageToChat } from '../providers/anthropic/to-chat.js';
import { messagesToChat } from '../providers/openai/from-messages.js';
import { ChatToAnthropicStream, chatToMessage, ChatUsageFilter } from '../providers/openai/to-messages.js';
import { usageAsBilled, settleExchange, type Outcome, type UsageBound } from './settlement.js';
import { logRepeated } from './repeated-log.js';
import { forwardedChat } from '../providers/openai/forwarded-chat.js';
import { withoutTopLevelMember, withTopLevelMember } from './json-member.js';
import { boundedWebSearchTools, inputBeyondBytes, promptPasses, SERVER_LOOP_MAX_PASSES, UNBOUNDED, webSearchUses } from './reservation-bound.js';
import { CONTEXT_1M_BETA, DEFAULT_WEB_SEARCH_MAX_USES, imageScaling } from '../../core/pricing/input-bound.js';
import { UpstreamAbort } from '../upstream/upstream-abort.js';
import { billedByFinalUsage, pipeStream, RELAY_CLOSING_EVENT, RELAY_CLOSING_STREAM_MESSAGE, STREAM_FAILED_EVENT, USAGE_TAIL_WAIT_MS, type StreamRewriter } from './stream-relay.js';
import { errorTypeForStatus, relayMetrics } from '../metrics/relay-metrics.js';
import { closesConnection } from '../connection-draining.js';
import { writeCorsHeaders } from '../cors.js';
import { completionAsChunks, messageAsEvents } from '../stream/answer-as-stream.js';
import { scrubValue } from '../stream/error-event-scrub.js';
import { scrubKeyText } from '../stream/key-forms.js';
import { foldStreamAnswer } from './folded-answer.js';

/** What an OpenAI client is told last of a provider stream that failed or was cut (OpenAI's SDK raises it). */
const CHAT_STREAM_FAILED_EVENT = `data: ${openaiErrorBody('server_error', 'The model provider stream failed.', 'stream_failed')}\n\n`;
const CHAT_RELAY_CLOSING_EVENT = `data: ${openaiErrorBody('server_error', RELAY_CLOSING_STREAM_MESSAGE, 'relay_closing')}\n\n`;

/** What a client is told of a provider's 200 that is no answer of its protocol (an HTML page, bytes in a coding the relay cannot read). */
const UNREADABLE_ANSWER = 'The model provider\'s answer could not be read.';
/** What a client is told of a provider's 200 whose body stopped before its end (the body timeout, a lost connection). */
const STOPPED_ANSWERING = 'The model provider stopped answering before its answer was complete.';
/** Why the body of an answer read whole was cut (reservation-heartbeat.ts): the client is told STOPPED_ANSWERING. */
const WHOLE_ANSWER_TOO_SLOW = new Error('the provider\'s answer did not end within UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS of its headers');
/** What a client is told of a provider whose connection was lost after the request was sent, before any answer. */
const LOST_BEFORE_ANSWER = 'The model provider\'s connection was lost after the request was sent, before it answered.';
/** What a client is told when a channel answered not found and the next one failed otherwise. */
const PROVIDER_NOT_FOUND = 'The model provider answered that it does not know this request\'s model or path.';
/** Errors of the connect phase: the request was never written, so no provider can be generating it. */
const NOT_SENT_CODES = new Set([
  'ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT',
  // A TLS handshake that failed (a certificate expired, self-signed or for another name; plain HTTP
  // behind an https URL): nothing is written before it completes. Answered 500 "lost after the request
  // was sent" without trying the next channel until the cooldown set the channel aside (review routing).
  'CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID', 'CERT_REVOKED', 'CERT_UNTRUSTED', 'CERT_REJECTED', 'CERT_SIGNATURE_FAILURE',
  'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'ERR_TLS_CERT_ALTNAME_INVALID',
  'ERR_SSL_WRONG_VERSION_NUMBER', 'ERR_SSL_UNSUPPORTED_PROTOCOL', 'ERR_SSL_NO_PROTOCOLS_AVAILABLE',
  'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION', 'ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE', 'ERR_SSL_TLSV1_ALERT_INTERNAL_ERROR',
  'ERR_SSL_TLSV1_UNRECOGNIZED_NAME', 'ERR_SSL_PACKET_LENGTH_TOO_LONG',
  // undici refusing the request before it is written: a channel key a header cannot carry (a line
  // break, a character outside Latin-1, stored before the console refused such keys). Answered 500
  // "lost after the request was sent", and the next channel was never tried (review route).
  'UND_ERR_INVALID_ARG',
]);

function reachedProvider(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return !(typeof code === 'string' && NOT_SENT_CODES.has(code));
}

/**
 * The failure of a request that reached the provider and got no answer's headers: it was sent, so the
 * provider was reached, and "could not be reached" sent users looking at their network. A headers
 * timeout is Anthropic's own 504 `timeout_error`; a connection lost is a 500 saying so.
 */
function noAnswerError(err: unknown, cutByRelay: boolean): RelayError {
  // Cut by this relay as it closed (its grace over): the provider was not at fault, and the client
  // can send the request again to another relay (529, which the SDKs retry).
  if (cutByRelay) return RELAY_CLOSING;
  return (err as { code?: unknown } | null)?.code === 'UND_ERR_HEADERS_TIMEOUT'
    ? new RelayError('upstream_timeout')
    : new RelayError('upstream_unreachable', LOST_BEFORE_ANSWER);
}

/** The usage a JSON answer is billed, and whether the relay counted a side of it (Exchange.billedUsage). */
interface BilledUsage {
  usage: StreamUsage | null;
  counted: boolean;
  /** The answer's text, when it was read (null: the body is no answer). */
  text?: string | null;
}

/** An answer that states both counts, its output above 0: billed as stated, nothing read or counted (no allocation). */
const STATED_IN_FULL: BilledUsage = { usage: null, counted: false };

/** POST /v1/messages: Anthropic Messages in. */
export function handleMessages(ctx: RelayContext, res: HttpResponse, req: HttpRequest): void {
  const ex = new Exchange(ctx, res, req, 'anthropic');
  ex.start();
}

/** POST /v1/chat/completions: OpenAI Chat Completions in. */
export function handleChatCompletions(ctx: RelayContext, res: HttpResponse, req: HttpRequest): void {
  const ex = new Exchange(ctx, res, req, 'openai');
  ex.start();
}

const QUOTA_STORE_UNAVAILABLE = new RelayError('quota_store_unavailable');
const QUOTA_STORE_FOREIGN = new RelayError('quota_store_foreign');

function unusablePriceMessage(model: string): string {
  return `Model "${model}" has a price on this gateway that gives no usable cost for this request (its ratios multiply past what a balance can hold): an administrator corrects ModelRatio, CompletionRatio or GroupRatio before it can be used.`;
}
const RELAY_CLOSING = new RelayError('relay_closing');

/** One request of either protocol; stream-relay.ts and settlement.ts take it as it is (StreamingExchange, SettledExchange). */
class Exchange {
  readonly ctx: RelayContext;
  /** The protocol the client speaks: how its body is read and its errors written. */
  readonly protocol: Protocol;
  /** The response header that carries the provider's request id, as the client's SDK reads it. */
  readonly requestIdHeader: string;
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
  /**
   * Until the reservation is asked for, what the exchange answers is decided from the request alone
   * (its headers, the key cache, its body), often inside uWS's parser callback, before uWS reads the
   * connection's next request. Written there and kept alive, such answers let a client pipelining
   * requests without reading have uWS buffer every one (+213 MB for 500,000 bodiless POSTs), the idle
   * timeout never firing while it sent. So they are deferred (respond(), as free-request.ts's Reply
   * does, where the reasons are told in full) and close their connection. Later answers come from an
   * I/O callback (Redis, the provider), after which uWS closes a connection that sends a request while
   * one is pending.
   */
  beforeReservation = true;
  /** The request body's bytes received, and whether all came. */
  bodyBytes = 0;
  bodyEnded = false;
  /** A refusal held for the end of the request's body (BodyLinger). */
  linger: BodyLinger<Exchange> | null = null;
  /** A refusal given before the reservation, for sendRefusal. */
  refusalStatus = 0;
  refusalContentType = '';
  refusalBody: string | Buffer = '';
  refusalRetryAfter: string | undefined = undefined;
  finished = false;
  /** Settled with a usage (ok or partial): an error answered after it must not be retried by the client. */
  billed = false;
  /**
   * The error answered is one no retry of the client can change (every channel of the model refused
   * the gateway's own credential or account): told `x-should-retry: false`, as after a bill.
   */
  noRetry = false;
  reserved = false;
  /** What the reservation took; settlement flags a cost above it (settlement.ts). */
  reservedAmount = 0;
  /** The most the request can use (max_tokens × n; a text prompt's bytes): settlement bills no usage above it. */
  usageBound: UsageBound | undefined = undefined;
  headersSent = false;
  /**
   * The provider answered 200 and has not yet said what it bills: a JSON answer being read (generated
   * in full already), a stream before its message_start, or a stream whose generation is over and
   * whose final usage is still to come (stream-relay.ts). A client leaving then does not cancel the
   * provider until it has (onClientAborted).
   */
  usagePending = false;
  /** Only the stream's final usage says what it is billed (stream-relay.ts billedByFinalUsage): a client leaving does not cut it. */
  billedByFinalUsage = false;
  /** The prompt holds media, documents or blocks the relay cannot count (reservation-bound.ts UNBOUNDED). */
  promptUncountable = false;
  /** The stream's part of a client leaving while usagePending (stream-relay.ts: the deadline of the usage after the generation). */
  onAbortedWhilePending: (() => void) | undefined = undefined;
  /** Cancels the call to the provider in progress. */
  upstream: UpstreamAbort | BufferedCall | null = null;
  /** The provider's body as the relay reads it (undici's, or the decoder piped from it). */
  upstreamBody: Readable | null = null;
  /** performance.now() when the provider's stream last made progress, an event other than a keep-alive (stream-relay.ts); 0 before it streams. */
  streamLineAt = 0;

  record: ApiKeyRecord | null = null;
  /**
   * The key's lookup when the cache did not have it, started before the body is read: the record, or
   * the error to answer (401 unknown key, 529 when Postgres could not be asked). Never rejects.
   */
  keyLookup: Promise<ApiKeyRecord | RelayError> | null = null;
  /** The key directory's generation when the key was read at the headers (process() reads it again if it moved). */
  keyGeneration = 0;
  /** The request in Anthropic's form: what is priced, reserved and settled (converted from `chat`). */
  body: MessagesRequest | null = null;
  /** The client's Chat Completions request (protocol 'openai'). */
  chat: ChatRequest | null = null;
  /** The client asked for the `flex` service tier: settlement.ts bills a flex answer at the channel's flex ratio. */
  get flexRequested(): boolean {
    return (this.chat as { service_tier?: unknown } | null)?.service_tier === 'flex';
  }
  /**
   * What counts the tokens of the request and its answer where the provider states none: the
   * encoding of the model as the channel is sent it (encoding-of.ts), the model asked for before a
   * channel is picked.
   */
  get tokenEncoding(): Encoding {
    return encodingOf(this.sentModel);
  }
  /** The model as the channel is sent it (its model mapping), the model asked for before a channel is picked. */
  get sentModel(): string {
    const model = this.body?.model ?? '';
    return this.channel?.modelMapping?.[model] ?? model;
  }
  /** The client's body bytes. */
  raw: Buffer | null = null;
  group = '';
  price: PriceRatios = { model: 1, completion: 1, group: 1, cacheRead: 1, cacheWrite: 1, cacheWrite1h: 1 };
  /** Groups this request may still be served by, in order (more than one only for `auto`). */
  routeGroups: readonly string[] = [];
  /**
   * The ratios the request was reserved at, kept for a cross-group retry's group ratio: read again
   * after the reservation, a GroupRatio an administrator raised meanwhile billed the retry beyond its
   * reservation (1 → 20 took a balance of 1,000,000 to -9,501,600).
   */
  reservedRatios: Ratios | null = null;
  /** Where pickNextChannel found the channel to try next (a GroupCursor). */
  nextGroupIndex = 0;
  /** Cache affinity (routing/affinity.ts): the key and end user's hash, so they keep their channel. */
  affinity = 0;
  /** When the request went to the channel that answered it (per-channel latency). */
  channelSentAt = 0;
  minute = 0;
  tpmLimited = false;
  /** The group whose tokens-per-minute window for the account holds the request's tokens, if one does. */
  tpmGroup: string | undefined = undefined;
  channel: Channel | null = null;
  upstreamRequestId = '';
  /** The answer is the relay's own (fail): its request-id header is the gateway's, whatever provider answered before. */
  ownAnswer = false;
  /**
   * The client's answer should a later channel be unable to carry the request: the failure an
   * earlier channel's provider gave (null: none failed yet).
   */
  earlierFailure: RelayError | null = null;
  /** The retry-after of the provider whose failure earlierFailure is, if it sent one. */
  earlierRetryAfter = '';
  /** An earlier channel failed in a way that may pass (a rate limit, an overload, a 5xx): a client's retry may be served. */
  retryMayHelp = false;
  /** The channels this request was sent to (forward), to tell whether any of the model's is left. */
  triedChannels: ReadonlySet<number> | null = null;

  constructor(ctx: RelayContext, res: HttpResponse, req: HttpRequest, protocol: Protocol) {
    this.ctx = ctx;
    this.res = res;
    this.protocol = protocol;
    this.requestIdHeader = protocol === 'openai' ? 'x-request-id' : 'request-id';
    this.apiKey = extractApiKey(req);
    this.version = req.getHeader('anthropic-version');
    // Every line (a client or proxy may send one per beta): the first alone dropped the others, on
    // the way to the provider and in the relay's own reading of them (context-1m's window).
    this.beta = headerLines(req, 'anthropic-beta');
    this.declaredLength = declaredLengthOf(req);
    this.ip = ctx.clientAddress.resolve(Buffer.from(res.getRemoteAddressAsText()).toString(), forwardedForOf(req));
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
    // The body's reader is registered first, in uWS's handler as uWS requires: a refusal given before
    // the body is all in is sent at its end (BodyLinger), the rest of the body dropped unread.
    const chunks: Buffer[] = [];
    this.res.onData((ab, isLast) => {
      const size = (this.bodyBytes += ab.byteLength);
      if (isLast) this.bodyEnded = true;
      if (this.responded) return this.linger?.chunk(isLast);
      if (size > this.ctx.maxBodyBytes) return this.fail(new RelayError('request_too_large'));
      // uWS reuses the ArrayBuffer after this callback returns: copy.
      chunks.push(Buffer.from(new Uint8Array(ab)));
      if (isLast) {
        const raw = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
        this.process(raw).catch((err: unknown) => this.crash(err));
      }
    });
    // From the headers alone: what is forwarded, then the key. No body byte is kept before these pass.
    if (!isHttpFieldValue(this.version)) return this.fail(new RelayError('invalid_request', 'anthropic-version: the header holds characters HTTP does not allow.'));
    if (!isHttpFieldValue(this.beta)) return this.fail(new RelayError('invalid_request', 'anthropic-beta: the header holds characters HTTP does not allow.'));
    this.keyGeneration = this.ctx.keys.generation;
    const known = peekKey(this.ctx.keys, this.apiKey);
    if (known instanceof RelayError) return this.fail(known);
    if (this.declaredLength > this.ctx.maxBodyBytes) return this.fail(new RelayError('request_too_large'));
    if (known === undefined) {
      this.keyLookup = settleKeyLookup(this.ctx.keys.lookup(this.apiKey));
      // An unknown key (or a lookup Postgres failed) is answered at once, the rest of its body
      // discarded unread; process() awaits the same promise.
      void this.keyLookup.then((record) => {
        if (record instanceof RelayError) this.fail(record);
      });
    } else {
      this.record = known;
    }
  }

  async process(raw: Buffer): Promise<void> {
    let record = this.record;
    if (record === null) {
      const found = await this.keyLookup!;
      if (this.aborted || this.responded) return;
      if (found instanceof RelayError) return this.fail(found);
      record = found;
      this.record = record;
    }
    // A key or account changed while the body came in (a key disabled or deleted, an account
    // banned): the record read at the headers is read again. A body sent slowly (seconds; a client
    // holding the request open on purpose) was served with a key revoked before its end.
    // Read again while it keeps moving (a change during the read's own lookup may have answered the
    // record from before it), three times at most.
    for (let reads = 0; reads < 3 && this.ctx.keys.generation !== this.keyGeneration; reads++) {
      this.keyGeneration = this.ctx.keys.generation;
      const known = peekKey(this.ctx.keys, this.apiKey);
      const again = known !== undefined ? known : await settleKeyLookup(this.ctx.keys.lookup(this.apiKey));
      if (this.aborted || this.responded) return;
      if (again instanceof RelayError) return this.fail(again);
      record = again;
      this.record = record;
    }

    const json = parseRequestJson(raw);
    if (json instanceof RelayError) return this.fail(json);
    const body = this.readBody(json);
    if (body instanceof RelayError) return this.fail(body);
    this.body = body;
    this.raw = raw;
    this.affinity = affinityOf(record.tokenId, endUserOf(body));
    const now = Date.now();

    const policy = this.ctx.groups();
    const allowed = keyRouteGroups(policy, record, body.model, this.ip, Math.floor(now / 1000));
    if (allowed instanceof RelayError) return this.fail(allowed);
    const ratios = this.ctx.ratios();
    this.reservedRatios = ratios;
    // Groups that serve the model; a key without cross-group retry stays in the first one.
    const served = servingGroups(allowed, this.ctx.channels, body.model, record.crossGroupRetry);
    if (served.length === 0) {
      return this.fail(new RelayError('model_not_found', `No channel serves model "${body.model}" for group "${allowed[0]}".`));
    }
    if (!ratios.priced(body.model)) {
      return this.fail(new RelayError('model_not_priced', `Model "${body.model}" has no price on this gateway: an administrator sets its ratio (option ModelRatio) before it can be used.`));
    }
    this.routeGroups = served;
    this.group = this.routeGroups[0]!;
    // What no channel of the model can take (n > 1, logprobs, json_object to Anthropic-format channels
    // only) is refused before the reservation: after it, a balance that could not hold the reservation
    // heard 402 for a request no channel could serve, and the key's requests per minute counted it.
    // One OpenAI-format channel among them may serve it: then each channel's conversion decides. The
    // request's own fields first, a few reads: the channels are walked only for one it refuses.
    if (this.protocol === 'openai') {
      const refused = anthropicOnlyRefusal(this.chat!, body);
      if (refused && served.every((g) => this.ctx.channels.everyChannel(g, body.model, isAnthropicFormat))) return this.fail(refused);
    }
    let maxGroupRatio = 0;
    for (const g of this.routeGroups) maxGroupRatio = Math.max(maxGroupRatio, ratios.group(g)!);
    const bounds = this.ctx.inputBounds();
    this.price = {
      model: ratios.model(body.model), completion: ratios.completion(body.model), group: ratios.group(this.group)!,
      cacheRead: ratios.cacheRead(body.model), cacheWrite: ratios.cacheWrite(body.model), cacheWrite1h: ratios.cacheWrite1h(body.model),
      webSearch: bounds.webSearchCallPrice, longContext: ratios.longContext(body.model),
    };

    // The body's byte length bounds its token count from above (a token is at least one byte), so
    // a reservation of it covers the worst case and the settled debit never exceeds it. It is tried
    // first, so the worker pool is never used for a request the key's rules, rate limits or balance
    // refuse anyway. Only when the balance refuses the byte bound and the body is large is the prompt
    // counted (on a worker: never on the event loop), and the request reserved again with the counted
    // estimate (times a safety factor, never above the byte bound). A refused reservation leaves
    // nothing behind (reserveQuota-8.lua checks everything before it writes, requests window included),
    // so the second try counts the request once. The counts are limited per key and minute like
    // count_tokens calls, so a key with a small balance cannot keep the workers busy with large bodies.
    // The bytes bound only text: an image adds its model's image bound (its base64 data out of the
    // bytes), and a request with documents, images of a model without a bound, server tools or blocks
    // this relay does not know reserves the model's context window instead (reservation-bound.ts), and
    // counting cannot shrink that; client tools add their hidden prompt's allowance; web searches are
    // reserved at their fee.
    const price = maxGroupRatio === this.price.group ? this.price : { ...this.price, group: maxGroupRatio };
    // Input tokens can be cache writes only where the request sets a breakpoint, and an hour's (2×) only at one with ttl "1h".
    let cacheable = this.chat === null ? cacheUseOf(body) : cacheUseOfChat(this.chat);
    // The limit of the group that serves the request, as a key of that group meets it: an auto key's
    // first group of AutoGroups may serve none of the model (a cross-group retry stays under the limit
    // it started with).
    // Both apply: the key's own limits (its owner's to set, in the console) count the key's requests;
    // the group's (the operator's) count the account's, all its keys of the group together, so neither
    // a higher limit on a key nor more keys lift the operator's.
    const groupLimits = policy.rateLimits(this.group);
    const rpmLimit = record.rateLimitRpm;
    const tpmLimit = record.rateLimitTpm;
    this.tpmLimited = tpmLimit > 0 || groupLimits.tpm > 0;
    this.tpmGroup = groupLimits.tpm > 0 ? this.group : undefined;
    this.minute = currentMinute(now);
    const extended = this.beta.includes(CONTEXT_1M_BETA);
    // Text is capped only by a window known to be its model's: a guessed one may be smaller than the
    // model's (input-bound.ts), and the bytes bound the text anyway. The model is the one the provider
    // is sent: a channel's model_mapping may send one with a larger window than the asked model's (the
    // largest of those the request's channels send, as a retry may go to any of them).
    let textWindow = 0;
    let contextWindow = 0;
    // The most an image costs on any of them; undefined when one has no known bound (its window then).
    let imageTokenBound: number | undefined = 0;
    for (const g of this.routeGroups) {
      for (const sent of this.ctx.channels.sentModels(g, body.model)) {
        textWindow = Math.max(textWindow, bounds.textWindow(sent, extended));
        contextWindow = Math.max(contextWindow, bounds.contextWindow(sent, extended));
        const image = bounds.imageTokenBound(sent);
        imageTokenBound = image === undefined || imageTokenBound === undefined ? undefined : Math.max(imageTokenBound, image);
        // A model whose provider writes the cache without a breakpoint, and bills it (ratios.ts).
        if (cacheable === 'none' && writesCacheUnmarked(sent)) cacheable = '5m';
      }
    }
    if (contextWindow === 0) {
      // Not reached (the serving groups above come from the same registry, read in the same turn);
      // a bound of 0 would bill nothing, so the asked model's stands in.
      textWindow = bounds.textWindow(body.model, extended);
      contextWindow = bounds.contextWindow(body.model, extended);
      imageTokenBound = bounds.imageTokenBound(body.model);
    }
    const beyondBytes = inputBeyondBytes(body, imageTokenBound);
    const extraInput = beyondBytes.extra;
    // What the relay's count cannot count as the provider does (an image, taken at its model's most).
    this.promptUncountable = extraInput === UNBOUNDED || beyondBytes.images > 0;
    // The body's bytes less the images' base64 data, which the provider reads as images (their
    // tokens are in extraInput): a 1 MB screenshot is not a million text tokens.
    const textBytes = raw.length - beyondBytes.imageDataChars;
    // Server tools read the prompt once a pass, each pass up to the window (promptPasses).
    const passes = extraInput === UNBOUNDED ? promptPasses(body, DEFAULT_WEB_SEARCH_MAX_USES) : 1;
    const inputBound = extraInput === UNBOUNDED ? contextWindow * passes : Math.min(textWindow, textBytes + extraInput);
    const searches = webSearchUses(body, DEFAULT_WEB_SEARCH_MAX_USES);
    // The provider is sent max_tokens (× n) and refuses a prompt longer than the model's window; the
    // bytes bound a text prompt, a window known to be the model's caps it, media included. A usage
    // above these is the provider's fault, billed at them (settlement.ts). Media to a model whose
    // window is a guess (200,000 for a model no table names) take no input bound from it (textWindow
    // is Infinity then): 5 documents stated as 400,000 tokens to a model of a known 200,000 took the
    // balance below zero. An image's bound is what its model's documented largest size costs, not a
    // fact of the bytes: reserved by it, but billed, like the rest of the media, up to the window, so
    // that a bound below what the provider bills (a model that reads larger images) is billed and
    // flagged over its reservation rather than absorbed unseen.
    this.usageBound = {
      input: extraInput === UNBOUNDED ? textWindow * passes : beyondBytes.images > 0 ? textWindow : inputBound,
      output: this.outputBound(), searches, cache: cacheable, countedInput: inputBound,
    };
    // Settlement bills the searches made with the same fee (quotaCost), so max_uses bounds them.
    const fees = webSearchFee(searches, bounds.webSearchCallPrice, price.group);
    const reservation = {
      rpmLimit,
      tpmLimit,
      group: this.group,
      groupRpmLimit: groupLimits.rpm,
      groupTpmLimit: groupLimits.tpm,
      userId: record.userId,
      tokenId: record.tokenId,
      tokenLimited: !record.unlimitedQuota,
      requestId: this.requestId,
      amount: quotaCostBound(inputBound, this.outputBound(), price, cacheable) + fees,
      // Dated with Redis's clock (the quota store's), which the billing worker's reaper reads too.
      deadlineMs: this.ctx.quota.clock.now() + this.ctx.reservationTtlMs,
      // Held against the tokens-per-minute limits while the request runs (reserveQuota-8.lua).
      tokens: this.tpmLimited ? inputBound + this.outputBound() : 0,
    };
    // Ratios each within their bounds can still multiply past what a balance can hold (ModelRatio and
    // CompletionRatio 1e300) or to NaN (those times a GroupRatio of 0): Redis refused such an amount,
    // and the client heard 529 "quota store unreachable" for as long as the prices stayed.
    if (!Number.isSafeInteger(reservation.amount)) {
      // A price that bounds one output token is usable: the client's output bound is what overflowed
      // (max_tokens 2^53 - 1 heard 404 model_not_priced, blaming the administrator's ratios).
      const tokensCost = quotaCostBound(inputBound, 1, price, cacheable);
      if (Number.isSafeInteger(tokensCost + fees)) return this.fail(this.outputBoundRefusal());
      // The searches' fees alone past it: the client's max_uses (1e15 heard 404 model_not_priced too).
      if (Number.isSafeInteger(tokensCost)) return this.fail(new RelayError('invalid_request', `tools: ${searches.toLocaleString('en-US')} web searches (their max_uses) cost more at this gateway's price than any balance can hold`, 'tools'));
      return this.fail(new RelayError('model_not_priced', unusablePriceMessage(body.model)));
    }
    // Redis away: refused before anything is reserved, rather than queued until it returns.
    if (!this.ctx.quotaReady()) return this.fail(this.ctx.quotaForeign() ? QUOTA_STORE_FOREIGN : QUOTA_STORE_UNAVAILABLE);
    this.beforeReservation = false;
    // Only a key with a rate limit can be told when its window has room.
    const limitWait = rpmLimit > 0 || groupLimits.rpm > 0 || this.tpmLimited ? { ms: 0, group: false } : undefined;
    let reserved = await this.tryReserve(reservation, limitWait);
    if (reserved === null) return;
    if ((reserved === 'insufficient_balance' || reserved === 'insufficient_token_quota') && extraInput !== UNBOUNDED && textBytes > this.ctx.countPromptAboveBytes) {
      // The input tokens and the amount a reservation from a count of `counted` prompt tokens asks
      // (made on this refusal path only; the count takes an image for IMAGE_TOKENS, extraInput for its bound again).
      const countedReservation = (counted: number): { counts: number; amount: number } => {
        const counts = Math.min(textWindow, reservationInputTokens(textBytes, counted, this.ctx.tokenEstimateFactor) + extraInput);
        return { counts, amount: quotaCostBound(counts, this.outputBound(), price, cacheable) + fees };
      };
      const counted = await this.countCanHelp(reserved, record, countedReservation(0).amount) ? await this.countForReservation(this.anthropicBytes(), record) : null;
      if (this.aborted) return;
      // The account's counts all in flight (429): one ends within seconds.
      if (counted instanceof RelayError) return this.fail(counted, undefined, counted.code === 'rate_limited' ? ACCOUNT_BUSY_RETRY_AFTER : undefined);
      if (counted !== null) {
        const { counts, amount: smaller } = countedReservation(counted);
        if (smaller < reservation.amount) {
          reservation.amount = smaller;
          if (reservation.tokens > 0) reservation.tokens = counts + this.outputBound();
          reserved = await this.tryReserve(reservation, limitWait);
          if (reserved === null) return;
        }
      }
    }
    if (reserved !== 'reserved') {
      let refused = limitWait?.group === true
        ? reserveRefusalError(reserved, { rpm: groupLimits.rpm, tpm: groupLimits.tpm }, this.group)
        : reserveRefusalError(reserved, { rpm: rpmLimit, tpm: tpmLimit });
      // What a client can change: server tools are reserved a context window per pass they may make.
      if (passes > 1 && refused.status === 402) {
        const lower = passes < SERVER_LOOP_MAX_PASSES || searches > 0 ? ': a lower max_uses reserves less' : '';
        refused = new RelayError(refused.code, `${refused.message} Its server tools may read its prompt up to ${passes} times, each reserved at the model's context window${lower}.`);
      } else if (extraInput === UNBOUNDED && refused.status === 402) {
        // A document's or an unbounded image's tokens are not known before the provider reads them.
        refused = new RelayError(refused.code, `${refused.message} Its documents, images or other content whose tokens the gateway cannot bound are reserved at the model's context window (${contextWindow} tokens).`);
      }
      // What it would take: the amount the request reserves (review lifecycle: "too low" alone left a
      // key holder guessing whether a top-up of $1 or a lower max_tokens would do).
      if (refused.status === 402) refused = new RelayError(refused.code, `${refused.message} This request reserves ${reservation.amount} quota.`);
      // The rate-limit window says when it has room.
      const retryAfter = refused.code === 'rate_limited' && limitWait !== undefined ? String(Math.max(1, Math.ceil(limitWait.ms / 1000))) : undefined;
      return this.fail(refused, undefined, retryAfter);
    }
    this.reserved = true;
    this.reservedAmount = reservation.amount;
    this.ctx.heartbeat.hold(this);
    relayMetrics.reservationOpened();
    if (this.aborted) return this.finish({ kind: 'failed', reason: REASON.clientGoneBeforeForwarding });

    await this.forward(raw, body);
  }

  /** The request in Anthropic's form, from the client's JSON; a 400 when it is not a valid request of its protocol. */
  readBody(json: unknown): MessagesRequest | RelayError {
    if (this.protocol === 'anthropic') {
      const body = checkMessagesRequest(json);
      return body instanceof RelayError ? body : unpricedMessagesFieldRefusal(body) ?? fileReferenceRefusal(body) ?? body;
    }
    const chat = checkChatRequest(json);
    if (chat instanceof RelayError) return chat;
    this.chat = chat;
    // A request that sets no output bound gets the model's (option ModelMaxOutputTokens).
    return chatToMessages(chat, this.ctx.inputBounds().maxOutputTokens(chat.model));
  }

  /** The 400 for an output bound (max_tokens, times n) that no balance could hold at the model's price. */
  outputBoundRefusal(): RelayError {
    const chat = this.chat as { max_completion_tokens?: unknown } | null;
    const field = chat === null ? 'max_tokens' : chat.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens';
    return new RelayError('invalid_request', `${field}: ${this.outputBound().toLocaleString('en-US')} output tokens cost more at this model's price than any balance can hold`);
  }

  /**
   * The output tokens reserved: max_tokens of the Anthropic form (the client's max_completion_tokens,
   * else its max_tokens, else the model's ModelMaxOutputTokens, 4096 by default), times the `n` choices a Chat Completions request
   * asks for (the provider bills every choice's tokens; only an OpenAI-format channel serves n > 1).
   * convertRequest makes the provider's request carry this bound.
   */
  outputBound(): number {
    const n = this.chat?.n;
    return this.body!.max_tokens * (typeof n === 'number' && n > 1 ? n : 1);
  }

  /**
   * The request's Anthropic form as bytes, for the token counter (which reads Messages bodies). A Chat
   * Completions request's tool call arguments that were no object count as the text an OpenAI-format
   * channel is sent, unless the request went to an Anthropic channel, which was sent {} for them.
   */
  anthropicBytes(): Buffer {
    if (this.protocol === 'anthropic') return this.raw!;
    const sentAnthropic = this.channel !== null && isAnthropicFormat(this.channel);
    return Buffer.from(sentAnthropic ? JSON.stringify(this.body) : countedForm(this.body!));
  }

  /**
   * The prompt's token count for a settlement whose provider did not state it. Should the count fail
   * (a worker lost), the request's input bound is billed, which its reservation covered: 0 gave the
   * prompt away.
   */
  async countPromptTokens(): Promise<number> {
    const most = this.usageBound?.countedInput ?? Infinity;
    try {
      // An image at the most its model bills one (image-tokens.ts), not 1,600 whatever the model.
      const counted = await this.ctx.tokens.countBilledPrompt(this.anthropicBytes(), this.tokenEncoding, { imageScaling: imageScaling(this.sentModel) });
      if (counted <= most) return counted;
      relayMetrics.usageAboveBound();
      this.ctx.log.warn({ requestId: this.requestId, model: this.body?.model, counted, billed: most }, 'the prompt counted here exceeds the input the request was reserved for; billed at that bound');
      return most;
    } catch (err) {
      const bound = Number.isFinite(most) ? most : 0;
      this.ctx.log.error({ err, requestId: this.requestId, billed: bound }, 'prompt count for a settlement failed; the input is billed at the request\'s input bound');
      return bound;
    }
  }

  /**
   * Whether a count could make the reservation fit: not when the balance (or the key's remaining
   * quota) that refused it is below `floor`, the least a counted reservation asks. A key of zero
   * balance sending 8 MB bodies had each counted on the workers before its 402. Asked only after a
   * refusal, of the mirror the reservation script read; unknown (not loaded, Redis failing): counted.
   */
  async countCanHelp(refusal: 'insufficient_balance' | 'insufficient_token_quota', record: ApiKeyRecord, floor: number): Promise<boolean> {
    try {
      const left = refusal === 'insufficient_balance'
        ? await this.ctx.quota.accountBalance(record.userId)
        : await this.ctx.quota.tokenRemain(record.userId, record.tokenId);
      return left === null || left >= floor;
    } catch {
      return true;
    }
  }

  /**
   * The prompt's token count for a second reservation try; null when it cannot help (the key's counts
   * of this minute are spent, or counting failed): the byte bound's refusal stands. 529 when the
   * counting queue is full.
   */
  async countForReservation(raw: Buffer, record: ApiKeyRecord): Promise<number | null | RelayError> {
    const place = await takeCountPlace(this.ctx.tokens, this.ctx.quota, record, this.ctx.countsPerMinute, this.minute);
    if (place === 'queue_full') return new RelayError('relay_overloaded');
    if (place === 'account_busy') return accountBusyError(this.ctx.countsInFlightPerAccount);
    if (place === 'budget_spent') return null;
    try {
      relayMetrics.promptCounted();
      return await place.count(raw, this.tokenEncoding);
    } catch (err) {
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
    const ratios = this.reservedRatios ?? this.ctx.ratios();
    const tried = new Set<number>();
    this.triedChannels = tried;
    let lastFailure = '';
    let attempt = 0;
    let groupIndex = 0;
    // From the first group, or (an `auto` key with cross_group_retry) a later one when the first has
    // only channels set aside.
    let channel = pickNextChannel(this.ctx.channels, this, 0, body.model, tried);
    while (channel && attempt < this.ctx.maxTries) {
      // The channel's group (pickNextChannel's last pick) is the one that serves and prices the try.
      if (this.nextGroupIndex !== groupIndex) {
        groupIndex = this.nextGroupIndex;
        this.group = this.routeGroups[groupIndex]!;
        this.price = { ...this.price, group: ratios.group(this.group) ?? this.price.group };
      }
      tried.add(channel.id);
      this.channel = channel;
      attempt++;
      const next = attempt < this.ctx.maxTries ? pickNextChannel(this.ctx.channels, this, groupIndex, body.model, tried) : undefined;
      const result = await this.attempt(channel, raw, body, next !== undefined);
      if (result === 'done') return;
      lastFailure = result;
      if (next) relayMetrics.upstreamRetry();
      if (this.aborted) return this.finish({ kind: 'failed', reason: REASON.clientGone });
      // Picked again now: a reload during the attempt (a channel disabled, deleted, moved to another
      // base_url or key) left `next` as it was when the attempt began, and the retry went to it.
      channel = next && pickNextChannel(this.ctx.channels, this, groupIndex, body.model, tried);
    }
    // The channels left were taken away during the last attempt: the client hears what failed, and
    // that no retry helps when none can (channelRefused's rule: the channels tried refused their own
    // credential and none is left).
    if (this.earlierFailure) {
      this.noRetry = !this.retryMayHelp;
      return this.fail(this.earlierFailure, lastFailure, this.earlierRetryAfter || undefined);
    }
    this.fail(new RelayError('upstream_unreachable'), lastFailure || REASON.noChannel);
  }

  /**
   * A channel's failure before the next is tried: answered should no later channel carry the request.
   * `retryMayHelp` false for a fault of the channel's own setup (a refused credential, a redirect),
   * which a client's retry meets again: it leaves `x-should-retry: false` possible (channelRefused).
   */
  noteFailure(err: RelayError, retryAfter = '', retryMayHelp = true): void {
    this.earlierFailure = err;
    this.earlierRetryAfter = retryAfter;
    if (retryMayHelp) this.retryMayHelp = true;
  }

  /**
   * The provider refused the channel's own credential or account (a 401, 403, 402, a credit balance
   * too low, OpenAI's 429 insufficient_quota: core/channels/provider-fault.ts 'channel'), already
   * counted against it (providerFailed): tried on the next channel while nothing reached the client,
   * else answered 500 saying so. Never the provider's own answer: a 401 would tell the client its
   * key is bad, a 429 insufficient_quota that its own balance is empty (OpenAI's word for it, which
   * the relay's own 402 uses too) and a rate limit to wait out. When no channel of the model is left
   * untried and every one tried refused so, the client's retry would meet the same: `x-should-retry:
   * false`, which both SDKs obey.
   */
  channelRefused(channel: Channel, status: number, model: string, mayRetry: boolean): 'done' | string {
    if (mayRetry && !this.headersSent) {
      logRepeated(this.ctx, 'warn', 'channel-refused', channel.id, { channel: channel.id, requestId: this.requestId, status }, 'provider refused the channel; retrying on another channel');
      this.noteFailure(new RelayError('upstream_unreachable', PROVIDER_ACCOUNT_REFUSED), '', false);
      return httpReason(status);
    }
    // Asked only here, on the way out: whether the pick found nothing or RELAY_MAX_TRIES stopped it.
    this.noRetry = !this.retryMayHelp && (this.triedChannels === null
      || pickNextChannel(this.ctx.channels, this, 0, model, this.triedChannels) === undefined);
    this.fail(new RelayError('upstream_unreachable', PROVIDER_ACCOUNT_REFUSED), httpReason(status));
    return 'done';
  }

  /** One call to one channel: 'done' when the exchange is answered, otherwise why to retry (a REASON). */
  async attempt(channel: Channel, raw: Buffer, body: MessagesRequest, mayRetry: boolean): Promise<'done' | string> {
    // An earlier attempt's provider request id names no part of this one's answer.
    this.upstreamRequestId = '';
    const provider = providerOf(channel);
    const payload = this.convertRequest(provider, channel.modelMapping?.[body.model], raw, body, channel.openAiApi);
    if (payload instanceof RelayError) {
      // This channel's format cannot carry the request (a document block to an OpenAI-format
      // channel): another channel of the group may, and this one is not at fault. With none left, the
      // client hears why the channels that could carry it failed, not that its request is invalid.
      if (mayRetry) return REASON.notCarried;
      if (this.earlierFailure) this.fail(this.earlierFailure, undefined, this.earlierRetryAfter || undefined);
      else this.fail(payload);
      return 'done';
    }
    const headers = provider.headers(channel, { version: this.version, beta: this.beta });
    const pool = this.ctx.pools.for(channel.baseUrl);
    let answer: ProviderAnswer;
    const sentAt = performance.now();
    try {
      if (body.stream === true) {
        const controller = new UpstreamAbort();
        this.upstream = controller;
        const response = await pool.request({
          path: provider.path,
          method: 'POST',
          headers,
          body: payload,
          // Not an AbortSignal, but all of one undici uses (upstream-abort.ts).
          signal: controller as unknown as AbortSignal,
          headersTimeout: this.ctx.streamHeadersTimeoutMs,
        });
        this.upstreamBody = response.body;
        answer = new StreamedAnswer(response, response.body, performance.now());
      } else {
        // Read whole, without a stream (buffered-call.ts).
        const call = new BufferedCall(MAX_UPSTREAM_JSON, this.ctx.messageHeadersTimeoutMs, WHOLE_ANSWER_TOO_SLOW);
        this.upstream = call;
        pool.dispatch({ path: provider.path, method: 'POST', headers, body: payload, headersTimeout: this.ctx.messageHeadersTimeoutMs }, call);
        answer = new WholeAnswer(await call.answer);
      }
    } catch (err) {
      if (this.aborted) return REASON.clientGone;
      providerUnreachable(this.ctx.channels.cooldown, channel);
      logRepeated(this.ctx, 'warn', 'upstream-unreachable', channel.id, { channel: channel.id, requestId: this.requestId, err: (err as Error).message }, 'upstream connection failed');
      // Only a request that never reached the provider goes to another channel: once it may have
      // started generating (a headers timeout, a connection lost after the request was written), the
      // first provider bills it whatever happens, and a second would generate and bill it again.
      if (mayRetry && !reachedProvider(err)) {
        this.noteFailure(new RelayError('upstream_unreachable'));
        return REASON.connectionFailed;
      }
      if (reachedProvider(err)) this.fail(noAnswerError(err, this.ctx.pools.cut), REASON.noAnswer);
      else this.fail(new RelayError('upstream_unreachable'), REASON.connectionFailed);
      return 'done';
    }
    relayMetrics.upstreamLatency(answer.headersAt - sentAt);
    this.upstreamRequestId = answer.header(provider.requestIdHeader);
    // A body in a coding the relay did not ask for (a proxy that compresses) is read decoded: passed on
    // as it came, no client could read it and the meters found nothing in it to bill. One it cannot
    // decode is read as it is: an error's text is then replaced, a 200 is a provider failure (below).
    const coding = contentCodingOf(answer.header('content-encoding'));
    let decodable = coding !== null;
    if (coding !== null && coding !== 'identity') {
      try {
        answer = answer instanceof StreamedAnswer ? answer.decoded(coding) : await (answer as WholeAnswer).decoded(coding);
        if (answer instanceof StreamedAnswer) this.upstreamBody = answer.stream();
      } catch (err) {
        this.ctx.log.warn({ channel: channel.id, requestId: this.requestId, coding, err: (err as Error).message }, 'provider answer could not be decoded');
        decodable = false;
      }
    }
    const status = answer.statusCode;
    if (status === 429 || status >= 500) {
      // Within the wait for a stream's headers: an error's text is short, and a provider trickling it
      // (undici's body timeout restarts with each byte) held the exchange, and kept the next channel
      // from being tried, for as long as it liked.
      const text = await answer.text(this.ctx.streamHeadersTimeoutMs).catch(() => '');
      if (this.aborted) return REASON.clientGone;
      // A 429 that says the channel's account is out of credit (OpenAI's insufficient_quota) is the
      // channel's fault, as a 401 is: no rate limit of the client's to wait out.
      if (providerFailed(this.ctx.health, this.ctx.channels.cooldown, channel, this.requestId, status, text, performance.now() - sentAt) === 'channel') {
        return this.channelRefused(channel, status, body.model, mayRetry);
      }
      // A gateway timeout (504, Cloudflare's 524) says the provider behind the proxy did not answer in
      // time, not that it stopped: it may still be generating, and billing the operator for it, so a
      // second channel would generate it again (new-api does not retry them either).
      if (mayRetry && !this.headersSent && status !== 504 && status !== 524) {
        logRepeated(this.ctx, 'warn', 'provider-failed', channel.id, { channel: channel.id, requestId: this.requestId, status }, 'provider failed; retrying on another channel');
        this.noteFailure(new RelayError(status === 529 ? 'overloaded' : status === 429 ? 'rate_limited' : 'upstream_unreachable'), retryAfterOf(answer.header('retry-after')));
        return httpReason(status);
      }
      this.passThroughError(status, text, answer, provider);
      return 'done';
    }
    // Any other 2xx (a proxy's 201, a cache's 203 Non-Authoritative, a 204) is an answer like a 200's:
    // passed on as an error under its own 2xx, the SDKs took the error object for the answer (or
    // read no event of a 201 stream) and the answer the provider generated was billed 0.
    if (status < 200 || status > 299) {
      const text = await answer.text(this.ctx.streamHeadersTimeoutMs).catch(() => '');
      if (this.aborted) return REASON.clientGone;
      const fault = providerFailed(this.ctx.health, this.ctx.channels.cooldown, channel, this.requestId, status, text, performance.now() - sentAt);
      // A 1xx or 3xx (a redirect: a channel's base URL that moved, a login page) is no answer of either
      // protocol: passed on, the client got a 3xx with an empty error type. It is the channel's setup
      // (counted against it, provider-fault.ts) and reached no model: another channel is tried; with
      // none left, the client's protocol's 500 api_error, as for a 200 that is no answer, nothing of
      // the provider's (its Location, its text) passed on.
      if (status < 400) {
        logRepeated(this.ctx, 'warn', `provider-odd-status:${status}`, channel.id, { channel: channel.id, requestId: this.requestId, status }, 'provider answered a status that is no answer nor error; answered as a provider failure');
        if (mayRetry && !this.headersSent) {
          // A channel that redirects does so on every try: a client's retry cannot help.
          this.noteFailure(new RelayError('upstream_unreachable', UNREADABLE_ANSWER), '', false);
          return httpReason(status);
        }
        this.fail(new RelayError('upstream_unreachable', UNREADABLE_ANSWER), httpReason(status));
        return 'done';
      }
      // The channel's own credential or account refused (routing/channel-outcomes.ts): counted
      // against it and retried elsewhere like a 5xx; the client's own bad request is passed through.
      if (isRetriedFault(fault)) return this.channelRefused(channel, status, body.model, mayRetry);
      // A 404, 405 or 410 from a channel the routing gave the model to: its model gone there, a base
      // path that is wrong. Tried on the next channel while nothing reached the client (as new-api
      // does; no provider generated anything), the last channel's passed through. Not counted against
      // the channel: a client's own dangling reference (a file id) is answered 404 by every channel.
      // Before, passed through at once: with cache affinity, the same users met the one broken
      // channel on every request while the tier's healthy one was never tried for them.
      if ((status === 404 || status === 405 || status === 410) && mayRetry && !this.headersSent) {
        logRepeated(this.ctx, 'warn', `provider-not-found:${status}`, channel.id, { channel: channel.id, requestId: this.requestId, status }, 'provider answered not found; retrying on another channel');
        this.noteFailure(new RelayError('not_found', PROVIDER_NOT_FOUND));
        return httpReason(status);
      }
      this.passThroughError(status, text, answer, provider);
      return 'done';
    }
    this.channelSentAt = sentAt;
    providerAnswered(this.ctx.health, answer instanceof StreamedAnswer ? null : this.ctx.channels.cooldown, channel, answer.headersAt - sentAt);
    if (!decodable) {
      // Nothing of it reached the client and nothing in it can be read to bill: the provider failed.
      this.ctx.log.warn({ channel: channel.id, requestId: this.requestId, coding: answer.header('content-encoding') }, 'provider answered in a content-coding the relay cannot decode');
      // Cancelled: undici's body then emits an AbortError, which, with no listener, would be thrown.
      const unread = answer.stream();
      unread.on('error', ignoreError);
      unread.destroy();
      this.fail(new RelayError('upstream_unreachable', UNREADABLE_ANSWER), REASON.bodyFailed);
      return 'done';
    }
    // A streamed body is told by its first chunk even when labelled an event stream: a JSON answer so
    // labelled (a proxy's label) holds no event, and piped as a stream it was a failed stream billed 0
    // though it stated its usage, which the same bytes folded for a request without `stream` were billed.
    const labelled = isEventStream(answer.header('content-type'));
    const streamed = answer instanceof WholeAnswer
      ? labelled || looksLikeSse(answer.body() ?? EMPTY_BODY, false)
      : await this.looksStreamed(answer as StreamedAnswer, labelled || body.stream === true, labelled);
    if (streamed === null) {
      // The body failed, ended empty, or the client left before the first byte: nothing was delivered,
      // nothing is billed. An empty body is answered as a request without `stream` has it answered.
      if (this.aborted) this.finish({ kind: 'failed', reason: REASON.clientGone });
      else if (answer.stream().readableEnded) this.fail(new RelayError('upstream_unreachable', UNREADABLE_ANSWER), REASON.bodyFailed);
      else this.fail(new RelayError('upstream_unreachable', STOPPED_ANSWERING), REASON.bodyFailed);
      return 'done';
    }
    // A stream to a request that asked for none (a provider that streams whatever it is asked) is
    // folded into the JSON answer the client waits for (sendMessage).
    if (streamed && body.stream === true) {
      const stream = answer.stream();
      this.billedByFinalUsage = billedByFinalUsage(provider.protocol, this.channel?.modelMapping?.[body.model] ?? body.model, {
        thinking: (body as { thinking?: unknown }).thinking,
        reasoningEffort: (this.chat as { reasoning_effort?: unknown } | null)?.reasoning_effort,
        promptUncountable: this.promptUncountable,
        // Any server tool loop (web_search, web_fetch, tool_search, MCP servers, a typed tool unknown
        // here; web_search uses count in its passes): its later passes' input is stated only in
        // message_delta. Only web_search was taken for one: an aborted web_fetch, tool_search or MCP
        // stream was billed its first pass (review sdk).
        serverTools: promptPasses(body, DEFAULT_WEB_SEARCH_MAX_USES) > 1,
      });
      pipeStream(this, stream, {
        provider,
        rewriter: this.streamRewriter(provider),
        failedEvent: this.protocol === 'openai' ? CHAT_STREAM_FAILED_EVENT : STREAM_FAILED_EVENT,
        closingEvent: this.protocol === 'openai' ? CHAT_RELAY_CLOSING_EVENT : RELAY_CLOSING_EVENT,
        relayClosing: this.ctx.pools,
        requestIdHeader: this.requestIdHeader,
        clientProtocol: this.protocol,
        readOnMs: this.ctx.messageHeadersTimeoutMs,
      });
      // A body paused by firstChunk flows again now that pipeStream reads it.
      if (stream.isPaused() && !stream.destroyed) stream.resume();
    } else await this.sendMessage(answer, provider, streamed || labelled);
    return 'done';
  }

  /**
   * Whether a streamed 200 is an event stream, to be metered and passed on as one, by its first chunk,
   * whatever its media type says: a proxy may relabel a stream (`application/octet-stream`, no
   * content-type at all), and a stream passed on as JSON was billed 0; or label a JSON answer
   * `text/event-stream`, which, holding no event, was billed 0 as a failed stream. It is when the chunk
   * begins as SSE does, or, for a request that asked to stream or an answer labelled a stream
   * (`asked`), ends before that can be told; a JSON answer (a provider that ignores `stream`) or a proxy's HTML page is not (an
   * answer read whole is judged by its body, in attempt()). null: the body ended or failed, or the
   * client left, before its first byte, or none came within UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS of
   * the headers (the bound of the answer it may be: a decoded body gives its first byte late).
   */
  async looksStreamed(answer: StreamedAnswer, asked: boolean, readOn: boolean): Promise<boolean | null> {
    const body = answer.stream();
    let cut: NodeJS.Timeout | null = null;
    if (readOn) {
      // `readOn` (an answer labelled a stream): a client leaving before the first chunk does not cancel
      // the provider, which is read on, as pipeStream reads on a stream before its message_start, for
      // USAGE_TAIL_WAIT_MS: the provider bills the prompt of a stream that started.
      this.usagePending = true;
      this.onAbortedWhilePending = () => {
        cut ??= setTimeout(() => body.destroy(new Error('client went away; what the provider bills did not come')), USAGE_TAIL_WAIT_MS);
      };
    }
    try {
      const first = await answer.firstChunk(this.ctx.messageHeadersTimeoutMs);
      if (first === null || (this.aborted && !readOn)) return null;
      return looksLikeSse(first, asked);
    } finally {
      if (readOn) {
        this.usagePending = false;
        this.onAbortedWhilePending = undefined;
      }
      if (cut !== null) clearTimeout(cut);
    }
  }

  /**
   * The bytes sent to the provider: the client's own when the provider speaks its protocol and
   * nothing changes, else rewritten (the channel's model name; a Chat Completions stream asked for
   * its usage, which is what it is billed by; the output bound it was reserved at) or converted. A
   * 400 when the request holds what the provider's format cannot carry. Safe to stringify: process()
   * refused bodies nested deeper than MAX_JSON_DEPTH.
   */
  convertRequest(provider: Provider, mapped: string | undefined, raw: Buffer, body: MessagesRequest, openAiApi = false): Buffer | RelayError {
    const model = mapped ?? body.model;
    if (provider.protocol === 'anthropic') {
      // A web_search tool without max_uses goes with the searches it was reserved for (reservation-bound.ts).
      const tools = boundedWebSearchTools(body, DEFAULT_WEB_SEARCH_MAX_USES);
      // `diagnostics` (Claude Code sends it): its previous_message_id makes Anthropic compare the
      // request with a message of the operator's organization, maybe another account's, and say how
      // their prompts differ; without its beta Anthropic refuses the field. Left out: the answer comes
      // without its diagnostics, as one Anthropic could not diagnose.
      const diagnostics = (body as { diagnostics?: unknown }).diagnostics !== undefined;
      if (this.protocol === 'anthropic') {
        // Edited in the bytes: written again, a tool input's integer above 2^53 reached the provider
        // changed (12345678901234567890 as 12345678901234567000), `1.10` as `1.1`.
        let edited: Buffer | null = diagnostics ? withoutTopLevelMember(raw, 'diagnostics') : raw;
        if (edited !== null && mapped) edited = withTopLevelMember(edited, 'model', JSON.stringify(model));
        if (edited !== null && tools !== null) edited = withTopLevelMember(edited, 'tools', JSON.stringify(tools));
        if (edited !== null) return edited;
      }
      let narrowed: Array<Record<string, unknown>> | undefined;
      if (this.protocol === 'openai') {
        const refused = anthropicOnlyRefusal(this.chat!, body);
        if (refused) return refused;
        narrowed = narrowedTools(this.chat!, body);
      }
      const sentTools = tools ?? narrowed;
      let sent: Record<string, unknown> = mapped || sentTools ? { ...body, model, ...(sentTools ? { tools: sentTools } : {}) } : body;
      if (diagnostics) {
        if (sent === body) sent = { ...body };
        delete sent.diagnostics;
      }
      return Buffer.from(JSON.stringify(sent));
    }
    if (this.protocol === 'openai') return forwardedChat(this.chat!, raw, model, Boolean(mapped), body.max_tokens, openAiApi);
    const converted = messagesToChat(body, model);
    if (converted instanceof RelayError) return converted;
    if (openAiApi) converted.service_tier = 'default';
    return Buffer.from(JSON.stringify(converted));
  }

  /** How a 200 stream reaches the client: as it is, or converted (or, OpenAI to OpenAI, without the usage chunk it did not ask for). */
  streamRewriter(provider: Provider): StreamRewriter | null {
    if (provider.protocol === this.protocol) {
      const chat = this.chat;
      return chat && chat.stream_options?.include_usage !== true ? new ChatUsageFilter() : null;
    }
    if (this.protocol === 'openai') return new AnthropicToChatStream(this.body!.model, this.chat!.stream_options?.include_usage === true);
    return new ChatToAnthropicStream(this.body!.model, this.body!.stop_sequences);
  }

  /** A JSON answer in the client's protocol, its usage `billed` (the ledger's figures); null when it cannot be read. */
  convertAnswer(buf: Buffer, provider: Provider, billed: StreamUsage | null = null): Buffer | string | null {
    if (provider.protocol === this.protocol) return buf;
    // Called once the answer is billed: a conversion that throws (a tool input nested deeper than
    // JSON.stringify can go, which JSON.parse took) is an answer the relay cannot read, not a crash,
    // which settled a generated answer at 0.
    try {
      return this.protocol === 'openai' ? messageToChat(buf, this.body!.model, billed) : chatToMessage(buf, this.body!.model, this.body!.stop_sequences, billed);
    } catch (err) {
      this.ctx.log.warn({ channel: this.channel?.id, requestId: this.requestId, err: (err as Error).message }, 'provider answer could not be converted');
      return null;
    }
  }

  /** The text of a JSON answer, to count (Provider.textOfBody); null when it cannot be read, a value too deep to write again included. */
  answerText(buf: Buffer, provider: Provider): string | null {
    try {
      return provider.textOfBody(buf);
    } catch (err) {
      this.ctx.log.warn({ channel: this.channel?.id, requestId: this.requestId, err: (err as Error).message }, 'provider answer text could not be read');
      return null;
    }
  }

  /** `streamed`: the answer is a stream, which the client did not ask for; it gets the stream folded. */
  async sendMessage(provided: ProviderAnswer, provider: Provider, streamed = false): Promise<void> {
    let buf: Buffer;
    this.usagePending = true;
    try {
      // A stream request answered with JSON: read within the bound of an answer read whole (a
      // request without `stream` has it from the heartbeat, reservation-heartbeat.ts).
      buf = await provided.bytes(this.ctx.messageHeadersTimeoutMs);
    } catch (err) {
      this.usagePending = false;
      if (this.aborted) return this.finish({ kind: 'failed', reason: REASON.clientGone });
      this.ctx.log.warn({ channel: this.channel?.id, requestId: this.requestId, err: (err as Error).message }, 'provider body failed');
      // Reached and answering, the provider then stopped (the body timeout, a connection lost): not
      // "could not be reached", which sent users looking at their network.
      return this.fail(new RelayError('upstream_unreachable', err === OVER_BOUND ? UNREADABLE_ANSWER : STOPPED_ANSWERING), REASON.bodyFailed);
    }
    let streamError: Record<string, unknown> | null = null;
    let outputFinal = true;
    let outputStated = true;
    let readable = true;
    let delivered: number | undefined;
    if (streamed) {
      const folded = foldStreamAnswer(buf, provider);
      if (folded !== null) {
        const events = buf;
        buf = folded.body;
        streamError = folded.error;
        outputFinal = folded.outputFinal && streamError === null;
        outputStated = folded.outputStated;
        readable = folded.readable;
        // Its output counted as the same stream's delivered text is (stream-relay.ts): the folded
        // answer's text left out what the fold does not keep (OpenAI's reasoning_content, a tool's
        // input cut before it parsed) and joined blocks otherwise (review provider2: 290 billed 0).
        if (!outputFinal) delivered = await this.deliveredTokens(events, provider);
      }
    }
    const stated = provider.usageOfBody(buf);
    // A folded stream that holds only the provider's error (a rate limit, an overload), with no usage
    // stated and nothing generated: the request failed, as the same stream to a client that asked to
    // stream does (settleStream). Its prompt was counted and billed, and the answer told both SDKs not
    // to retry a rate limit they should wait out and retry.
    if (streamError !== null && stated === null && !(delivered! > 0)) {
      const text = this.answerText(buf, provider);
      if (text === null || text === '') {
        this.usagePending = false;
        if (this.aborted) return this.finish({ kind: 'failed', reason: REASON.clientGone });
        return this.failFoldedStream(streamError, null);
      }
    }
    // What the provider states is billed where it is a count; where it is not (no usage, a count below
    // 0, no prompt, an output of 0 for an answer with text), the relay counts that side, as a stream's.
    // A folded stream whose stated output is not what it generated (it ended with an error or before
    // its final usage, or content followed the usage it stated) has its text counted, as a stream's
    // delivered text is.
    const billed = outputFinal && stated !== null && !stated.inputUnstated && !stated.outputUnstated && stated.outputTokens > 0
      ? STATED_IN_FULL : await this.billedUsage(buf, provider, stated, !outputFinal, outputStated, delivered);
    const usage = billed === STATED_IN_FULL ? stated : billed.usage;
    this.usagePending = false;
    // Generated in full: the provider bills it though the client left before it was delivered.
    if (this.aborted) return this.finish(usage ? { kind: 'partial', usage, reason: REASON.clientGoneUndelivered } : { kind: 'failed', reason: REASON.clientGone });
    if (streamError !== null) return this.failFoldedStream(streamError, usage);
    // The client's protocol's answer, or null when the body is none: passed (or converted) only when
    // it is a JSON object that states a usage or holds an answer's content (a proxy's `<html>502 Bad
    // Gateway</html>` under a 200 went to the client as its answer, billed nothing; a 200 holding
    // `{"error": …}` was converted into an empty answer, a success to the client).
    // A converted answer tells the usage billed (the ledger's figures), not the provider's claim.
    const isAnswer = readable && isJsonObject(buf) && (stated !== null || (billed.text === undefined ? this.answerText(buf, provider) : billed.text) !== null);
    const answer = !isAnswer ? null : provider.protocol !== this.protocol ? this.convertAnswer(buf, provider, usageAsBilled(usage, this.usageBound)) : buf;
    // Settled (on the spool's disk) before the answer's last byte goes out: see settlement-spool.ts.
    if (usage === null) this.finish({ kind: 'failed', reason: REASON.noUsage });
    else if (billed.counted) this.finish({ kind: 'partial', usage, reason: REASON.usageCounted });
    else this.finish({ kind: 'ok', usage });
    if (answer === null) return this.afterSettled(() => this.fail(new RelayError('upstream_unreachable', UNREADABLE_ANSWER), REASON.bodyFailed));
    // A stream was asked for and the provider ignored it: the client gets the stream it can read.
    let events: string | null = null;
    if (this.body!.stream === true) {
      try {
        events = this.protocol === 'openai' ? completionAsChunks(answer, this.chat!.stream_options?.include_usage === true) : messageAsEvents(answer);
      } catch (err) {
        // Billed already; a value too deep to write again (see convertAnswer) is an answer the relay cannot pass on.
        this.ctx.log.warn({ channel: this.channel?.id, requestId: this.requestId, err: (err as Error).message }, 'provider answer could not be written as a stream');
        return this.afterSettled(() => this.fail(new RelayError('upstream_unreachable', UNREADABLE_ANSWER), REASON.bodyFailed));
      }
    }
    if (events !== null) this.afterSettled(() => this.respond(200, 'text/event-stream; charset=utf-8', events));
    else this.afterSettled(() => this.respond(200, 'application/json', answer));
  }

  /**
   * A stream folded for a client that asked for JSON ended with the provider's error: what it
   * generated before is billed (as a stream's would be, stream-relay.ts), and the client gets the
   * error in its protocol, with the provider's words replaced as passThroughError replaces a 5xx's.
   */
  failFoldedStream(error: Record<string, unknown>, usage: StreamUsage | null): void {
    // Anthropic's error types and OpenAI's type and code alike: a rate limit, an overload, or a failure.
    const type = anthropicTypeOfOpenAIError(error);
    const reason = providerErrorReason(error.type);
    const status = type === 'overloaded_error' ? 529 : type === 'rate_limit_error' ? 429 : 502;
    this.ctx.log.warn({ channel: this.channel?.id, requestId: this.requestId, error: scrubCredentials(JSON.stringify(error), this.channel?.apiKey).slice(0, 2048) }, 'provider stream, folded for a request without stream, ended with an error');
    this.finish(usage !== null ? { kind: 'partial', usage, reason } : { kind: 'failed', reason });
    const body = this.protocol === 'openai' ? openaiProviderErrorBody(type, providerSideMessage(status)) : errorBody(type, providerSideMessage(status), this.requestId);
    // The relay's own body, naming the gateway's id: the request-id header names it too (review sdk).
    this.ownAnswer = true;
    this.afterSettled(() => this.respond(status, 'application/json', body));
  }

  /**
   * The usage a JSON answer is billed: what it states, with what it does not state as a count counted
   * by the relay (on a worker): the prompt, and the answer's text when no output count is stated, or 0
   * is for an answer with text (the larger of the two is billed), or always when `outputCut` (a stream
   * folded for a client that asked for JSON whose stated output is not what it generated: it ended by
   * an error or before its final usage, or content followed the usage it stated; folded-answer.ts).
   * null: no usage stated and no answer to count (a body that is none). `text`: the answer's text, when it was read.
   * `outputStated` false (a folded stream with no usage after its start): its stated output is
   * message_start's placeholder, not billed when `outputCut`, as a stream's settlement does not bill
   * it (stream-relay.ts settleStream); a cut stream's text is counted without the whitespace at its
   * end, as a stream's delivered text is (delivered-text-counter.ts): it would begin the next token.
   */
  async billedUsage(buf: Buffer, provider: Provider, stated: StatedUsage | null, outputCut: boolean, outputStated = true, delivered?: number): Promise<BilledUsage> {
    const text = this.answerText(buf, provider);
    if (stated === null && text === null && !(delivered! > 0)) return { usage: null, counted: false, text };
    const countInput = stated === null || stated.inputUnstated === true;
    const countOutput = delivered !== undefined
      ? outputCut || stated === null || stated.outputUnstated === true || stated.outputTokens === 0
      : text !== null && text !== '' && (stated === null || stated.outputUnstated === true || stated.outputTokens === 0 || outputCut);
    const placeholder = outputCut && !outputStated && stated !== null && stated.outputTokens > 0;
    if (!countInput && !countOutput && !placeholder) return { usage: stated, counted: false, text };
    const usage: StreamUsage = {
      inputTokens: stated?.inputTokens ?? 0, outputTokens: placeholder ? 0 : stated?.outputTokens ?? 0, cacheCreationTokens: stated?.cacheCreationTokens ?? 0,
      cacheCreation1hTokens: stated?.cacheCreation1hTokens ?? 0, cacheReadTokens: stated?.cacheReadTokens ?? 0,
    };
    if (stated?.webSearchRequests !== undefined) usage.webSearchRequests = stated.webSearchRequests;
    if (stated?.flexServed === true) usage.flexServed = true;
    try {
      const [input, output] = await Promise.all([
        countInput ? this.countPromptTokens() : null,
        !countOutput ? null : delivered !== undefined ? delivered : this.ctx.tokens.countText(outputCut ? text!.trimEnd() : text!, this.tokenEncoding),
      ]);
      // The count is of the whole prompt; input_tokens leaves out the cache reads and writes stated apart.
      if (input !== null) usage.inputTokens = Math.max(0, input - usage.cacheReadTokens - usage.cacheCreationTokens);
      if (output !== null) usage.outputTokens = Math.max(usage.outputTokens, output);
      return { usage, counted: true, text };
    } catch (err) {
      this.ctx.log.warn({ err, requestId: this.requestId }, 'count of an answer without usage failed; billing what it states');
      return { usage: stated, counted: false, text };
    }
  }

  /** The tokens of the text a provider's stream delivered, counted as stream-relay.ts counts a cut stream's (DeliveredTextCounter). */
  async deliveredTokens(events: Buffer, provider: Provider): Promise<number | undefined> {
    const counter = new DeliveredTextCounter(this.ctx.tokens, { encoding: this.tokenEncoding });
    try {
      provider.streamMeter(counter).push(events);
      return await counter.total();
    } catch (err) {
      this.ctx.log.warn({ err, requestId: this.requestId }, 'count of a folded stream\'s delivered text failed; counting its answer');
      return undefined;
    }
  }

  afterSettled(then: () => void): void {
    const spool = this.ctx.spool;
    if (spool === undefined) then();
    else spool.afterWritten(then);
  }

  passThroughError(status: number, providerText: string, answer: ProviderAnswer, provider: Provider): void {
    // A provider may quote the credential it was sent ("Incorrect API key provided: …"): the channel's
    // key, and anything key-shaped, never reach the client or the log. JSON may spell the key in
    // escapes the client's parser decodes back to it (PHP's `\/`, Go's `\u003c`, any `\uXXXX`): a
    // JSON body is parsed and its decoded strings scrubbed, and what is passed on and logged is written
    // from the scrubbed value. Any other text is scrubbed of the key in every JSON spelling of it
    // (key-forms.ts); it never reaches the client (a stable message replaces it), only the log.
    const key = this.channel?.apiKey;
    const isJson = providerText.startsWith('{') && answer.header('content-type').includes('json');
    const raw = isJson ? parseProviderError(providerText) : null;
    let parsed: ProviderErrorJson | null = null;
    let written: string | null = null;
    if (raw !== null) {
      try {
        const scrubbed = scrubValue(raw, key, 0) as ProviderErrorJson;
        if (scrubbed !== raw) written = JSON.stringify(scrubbed);
        parsed = scrubbed;
      } catch {
        // Nested too deep to write again: scrubbed as text, and passed on as no JSON.
      }
    }
    // Unchanged by the scrub (or no JSON), the provider's bytes pass scrubbed as text: JSON.parse keeps
    // the last of two members of one name, so a key in the first was never seen by scrubValue.
    const text = written ?? scrubKeyText(providerText, key);
    // A provider's JSON error in the client's protocol passes as it is; one in the other protocol
    // keeps its message in the client's shape; anything else (a proxy's HTML page, a stack trace) is
    // replaced by a stable message and logged for operators. A rate limit's or a failure's message
    // (429, 5xx) is about the operator's provider account, not the client's request (OpenAI's names
    // the organization): it is replaced too, its type and code kept, and logged.
    const providerSide = status === 429 || status >= 500;
    if ((!isJson || providerSide) && text) {
      // A provider-side failure (429, 5xx) repeats for every request while it lasts: one line per
      // channel and status an interval. Any other is about the request itself, and the log is the only
      // record of what the provider said (the client gets a stable message): every one goes out.
      const fields = { channel: this.channel?.id, requestId: this.requestId, status, body: text.slice(0, 2048) };
      const msg = 'provider answered an error; its message is not passed on';
      if (providerSide) logRepeated(this.ctx, 'warn', `provider-error-answer:${status}`, this.channel?.id, fields, msg);
      else this.ctx.log.warn(fields, msg);
    }
    const type = status === 529 ? 'overloaded_error' : status >= 500 ? 'api_error' : errorTypeForStatus(status);
    const message = providerSide ? providerSideMessage(status) : providerErrorMessage(parsed) ?? httpReason(status);
    // Passed as it is only when it is an error of the client's protocol: a provider speaking it loosely
    // (vLLM's `{"detail": …}`, Ollama's `{"error": "…"}`) would reach the client in no format its SDK reads.
    // Anthropic's errors carry a request_id (the provider's, as its request-id header): one that has
    // none gets the gateway's, as the relay's own errors do.
    // A rate limit's or a failure's type is the status's (Anthropic's SDK and users read a 500 of
    // type invalid_request_error as their own fault); an OpenAI error's type and code are kept.
    const passed = parsed !== null && provider.protocol === this.protocol && isProtocolError(parsed, this.protocol)
      ? rewrittenError(parsed, this.protocol, providerSide ? message : null, this.requestId, providerSide && this.protocol === 'anthropic' ? type : null, status === 429) : null;
    const body = passed !== null ? passed
      : this.protocol === 'openai' ? openaiProviderErrorBody(type, message)
        : errorBody(type, message, this.requestId);
    // A body the relay wrote, or an Anthropic error given the gateway's request_id for want of its
    // own: the request-id header (err.requestID in the SDKs) names the same id as the body (an HTML
    // page's rebuilt error named the provider's in the header, the gateway's in the body; review sdk).
    if (passed === null || (this.protocol === 'anthropic' && typeof (parsed as { request_id?: unknown } | null)?.request_id !== 'string')) this.ownAnswer = true;
    const retryAfter = retryAfterOf(answer.header('retry-after'));
    this.respond(status, 'application/json', body, retryAfter);
    this.finish({ kind: 'failed', reason: httpReason(status) });
  }

  /**
   * The reservation's outcome, or null when its call failed (Redis went away, or did not answer within
   * RELAY_REDIS_COMMAND_TIMEOUT_MS) and the exchange was answered 529. Redis may have made it all the
   * same (a stalled server runs the queued script once it resumes), so the exchange is settled as
   * failed: that releases such a reservation, and changes nothing when there is none
   * (settleReservations-9n.lua answers -6).
   */
  async tryReserve(r: Parameters<QuotaStore['reserve']>[0], limitWait?: RateLimitWait): Promise<Awaited<ReturnType<QuotaStore['reserve']>> | null> {
    const connection = this.ctx.quotaConnection();
    try {
      const outcome = await this.ctx.quota.reserve(r, limitWait);
      // The connection dropped while the call was out: ioredis sent it again after the reconnect, to
      // whatever server answers there now, maybe another database's (review diffreview2: another
      // database's account held 597). Not served: answered 529 and settled as failed, as a failed call.
      if (this.ctx.quotaConnection() === connection) return outcome;
      throw new Error('the quota store\'s connection was made again while the reservation was out');
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
    if (this.beforeReservation) {
      // Kept on the exchange for sendRefusal: no closure, no allocation.
      this.refusalStatus = status;
      this.refusalContentType = contentType;
      this.refusalBody = body;
      this.refusalRetryAfter = retryAfter;
      this.linger = BodyLinger.hold<Exchange>(this.declaredLength, this.bodyBytes, this.bodyEnded, sendRefusal, this);
      if (this.linger === null) setImmediate(sendRefusal, this);
      return;
    }
    this.write(status, contentType, body, retryAfter, closesConnection());
  }

  /** The answer, corked; `close` ends the connection after it. */
  write(status: number, contentType: string, body: string | Buffer, retryAfter: string | undefined, close: boolean): void {
    const res = this.res;
    res.cork(() => {
      res.writeStatus(statusLine(status)).writeHeader('content-type', contentType);
      writeCorsHeaders(res);
      // Both SDKs give this header as err.requestID / _request_id, what a user quotes to support: the
      // provider's id when the provider's answer is passed on, else (the relay's own answer, an error
      // rebuilt from a provider's too, whose body names the gateway's id) the gateway's.
      res.writeHeader(this.requestIdHeader, this.ownAnswer ? this.requestId : this.upstreamRequestId || this.requestId);
      res.writeHeader('x-gateway-request-id', this.requestId);
      if (retryAfter) res.writeHeader('retry-after', retryAfter);
      // An error answered after what the provider generated was billed: both SDKs retry a 429, 5xx or
      // 529 by default, taking it to mean nothing was done, and each try would be generated and billed
      // again. They obey this header.
      // Nor an error no retry can change (noRetry).
      if ((this.billed || this.noRetry) && status >= 400) res.writeHeader('x-should-retry', 'false');
      res.end(body, close);
    });
  }

  fail(err: RelayError, reason?: string, retryAfter?: string): void {
    this.ownAnswer = true;
    if (this.protocol === 'openai') {
      // A balance or key quota too low is OpenAI's 429 insufficient_quota (its SDK raises
      // RateLimitError, which apps check for that code; a 402 was a bare APIError), sent with
      // x-should-retry: false, which the SDKs obey: a retry cannot top the balance up.
      const quota = err.type === 'billing_error';
      if (quota) this.noRetry = true;
      this.respond(quota ? 429 : err.status, 'application/json', err.openaiBody(), retryAfter);
    } else this.respond(err.status, 'application/json', err.body(this.requestId), retryAfter);
    if (this.reserved) this.finish({ kind: 'failed', reason: reason ?? err.message });
  }

  crash(err: unknown): void {
    this.ctx.log.error({ err, requestId: this.requestId }, 'relay exchange failed');
    this.fail(new RelayError('internal'), REASON.relayError);
  }

  /** For the reservation heartbeat: the headers' time of an answer read whole whose body is still coming, else 0. */
  get wholeAnswerPendingSince(): number {
    const call = this.upstream;
    return call instanceof BufferedCall ? call.bodyPendingSince : 0;
  }

  /** The reservation heartbeat found an answer read whole still coming past its bound: cut, nothing of it is billed. */
  cutWholeAnswer(): void {
    const call = this.upstream;
    if (call instanceof BufferedCall) call.cut(WHOLE_ANSWER_TOO_SLOW);
  }

  /** The reservation heartbeat found the provider's stream silent too long: cut, it settles for what it delivered. */
  cutStalledStream(): void {
    const body = this.upstreamBody;
    if (body && !body.destroyed) body.destroy(new Error('provider stream stalled'));
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
      this.onAbortedWhilePending?.();
      return;
    }
    // A JSON answer read whole whose 200 has arrived is generated in full: it is read to its usage.
    if (this.upstream instanceof BufferedCall && this.upstream.statusCode === 200) return;
    this.upstream?.abort();
    // A stream in progress settles from its 'error' or 'end' handler with what was delivered.
    if (body && !body.destroyed) body.destroy(new Error('client went away'));
  }

  /** Settles the reservation exactly once: the actual cost, or nothing when the request failed. */
  finish(outcome: Outcome): void {
    if (this.finished || !this.reserved) return;
    this.finished = true;
    this.billed = outcome.kind !== 'failed';
    if (this.channel !== null && this.channelSentAt > 0) exchangeEnded(this.channel, performance.now() - this.channelSentAt);
    this.ctx.heartbeat.release(this);
    relayMetrics.reservationClosed();
    settleExchange(this, outcome);
  }
}

/** A channel whose provider speaks Anthropic's Messages (every type but OpenAI's, relay/providers/registry.ts). */
function isAnthropicFormat(channel: Channel): boolean {
  return providerOf(channel).protocol === 'anthropic';
}

/** Writes a refusal respond() deferred, closing its connection; nothing when the client has gone. */
function sendRefusal(ex: Exchange): void {
  if (ex.aborted) return;
  try {
    ex.write(ex.refusalStatus, ex.refusalContentType, ex.refusalBody, ex.refusalRetryAfter, true);
  } catch {
    // Answered meanwhile (guarded()'s 500 for a handler that threw after refusing); thrown out of an
    // immediate, it would take the process down.
  }
}

/** What a client is told of a provider's rate limit or failure, instead of the provider's own words. */
function providerSideMessage(status: number): string {
  if (status === 429) return 'The model provider is rate limiting requests; retry after a while.';
  if (status === 529) return 'The model provider is overloaded; retry after a while.';
  return 'The model provider failed to answer; retry after a while.';
}

/** A provider's error body as JSON: an object, or null when it is none (parsed once for the checks below). */
type ProviderErrorJson = { type?: unknown; error?: unknown; request_id?: unknown };

function parseProviderError(text: string): ProviderErrorJson | null {
  try {
    const body: unknown = JSON.parse(text);
    return body !== null && typeof body === 'object' && !Array.isArray(body) ? body as ProviderErrorJson : null;
  } catch {
    return null;
  }
}

/**
 * A provider's error JSON with its message replaced (`message`, unless null), its error type (`type`,
 * unless null) and, when it has none, a `request_id` (unless null); the text as it is when nothing changes. `body` is `text` parsed, and
 * an error as the protocol writes one (isProtocolError).
 */
function rewrittenError(body: ProviderErrorJson, protocol: 'anthropic' | 'openai', message: string | null, requestId: string | null, type: string | null = null, rateLimited = false): string {
  // Only the protocol's own members: a provider that adds its own (the request it was sent, with the
  // channel's upstream host; a debug trace) would hand them to the client.
  const error = body.error as { type?: unknown; message?: unknown; param?: unknown; code?: unknown };
  if (protocol === 'openai') {
    // A rate limit reads as OpenAI's whatever the provider wrote (Azure's `code: "429"`, `type: null`;
    // another's `server_error`): clients match `code: rate_limit_exceeded`, as an Anthropic channel's
    // 429 is converted. OpenAI's own types of it (`requests`, `tokens`) are kept.
    const limitType = error.type === 'requests' || error.type === 'tokens' ? error.type : 'rate_limit_exceeded';
    return JSON.stringify({
      error: {
        message: message ?? error.message,
        type: rateLimited ? limitType : scalarOrNull(error.type),
        param: scalarOrNull(error.param),
        code: rateLimited ? 'rate_limit_exceeded' : scalarOrNull(error.code),
      },
    });
  }
  return JSON.stringify({
    type: 'error',
    error: { type: type ?? error.type, message: message ?? error.message },
    request_id: typeof body.request_id === 'string' ? body.request_id : requestId,
  });
}

function scalarOrNull(v: unknown): string | number | null {
  return typeof v === 'string' || typeof v === 'number' ? v : null;
}

/**
 * Whether a provider's JSON is an error as the protocol writes one: Anthropic's `{"type": "error",
 * "error": {"type", "message"}}`, OpenAI's `{"error": {"message", …}}`.
 */
function isProtocolError(body: ProviderErrorJson, protocol: 'anthropic' | 'openai'): boolean {
  const error = body.error as { type?: unknown; message?: unknown } | null | undefined;
  if (!error || typeof error !== 'object' || typeof error.message !== 'string') return false;
  return protocol === 'openai' || (body.type === 'error' && typeof error.type === 'string');
}

/** The message of a provider's JSON error, Anthropic's or OpenAI's shape alike (`error.message`). */
function providerErrorMessage(body: ProviderErrorJson | null): string | null {
  const m = (body?.error as { message?: unknown } | null | undefined)?.message;
  return typeof m === 'string' && m ? m : null;
}

/** Whether a body is a JSON object by its first and last bytes (blanks aside): an HTML page, SSE, `null` or `[]` is not. */
function isJsonObject(buf: Buffer): boolean {
  let i = 0;
  let j = buf.length - 1;
  while (i <= j && isBlank(buf[i]!)) i++;
  while (j >= i && isBlank(buf[j]!)) j--;
  return i < j && buf[i] === 0x7b && buf[j] === 0x7d;
}

function isBlank(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

const EMPTY_BODY = Buffer.alloc(0);

/** A listener for the 'error' of a body the relay cancels and reads no more. */
function ignoreError(): void {}

