// Builds the relay from its parts and serves it on uWebSockets.js.
import { randomUUID } from 'node:crypto';
import uws from 'uWebSockets.js';
import type { Config } from '../infra/config.js';
import { createLogger, type Logger } from '../infra/logger.js';
import { LogThrottle } from '../infra/log-throttle.js';
import { createSql } from '../infra/postgres/client.js';
import { createRedis, redisKeysFor, settleWaitReplicas } from '../infra/redis/client.js';
import { checkRedisPersistence } from '../infra/redis/persistence.js';
import { createApiKeyCrypto } from '../infra/secrets/api-key-crypto.js';
import { ClientAddressResolver } from './auth/client-address.js';
import { KeyDirectory } from './auth/key-directory.js';
import { countListHeaderLine, startListHeaderCount } from './header-lines.js';
import { errorBody, openaiErrorBody, RelayError, statusLine } from './errors.js';
import { closeConnectionsAfterAnswer } from './connection-draining.js';
import { declaredLengthOf, Reply } from './free-request.js';
import { subscribeInvalidations } from './invalidation.js';
import { coalescedReload } from './coalesced-reload.js';
import { handleChatCompletions, handleMessages } from './messages/messages-handler.js';
import { settlementsInFlight } from './messages/settlement.js';
import type { RelayContext } from './relay-context.js';
import { startRelayMetricsServer, type RelayMetricsServer } from './metrics/metrics-server.js';
import { relayMetrics } from './metrics/relay-metrics.js';
import { assertNativeUws } from './native-binding.js';
import { loadOptions } from '../core/options/options-source.js';
import { ratiosFromOptions, type Ratios } from '../core/pricing/ratios.js';
import { inputBoundsFromOptions, type InputBounds } from '../core/pricing/input-bound.js';
import { postgresBalanceSource } from '../core/quota/postgres-balance-source.js';
import { QuotaStore } from '../core/quota/quota-store.js';
import { databaseInstanceId, foreignRedisError, RedisBindingWatch } from '../core/quota/database-binding.js';
import { ConnectionDrops } from '../core/quota/connection-drops.js';
import { RedisClock } from '../core/quota/redis-clock.js';
import { creditSliceOptions } from '../core/quota/credit-slices.js';
import { ChannelRegistry } from './routing/channel-registry.js';
import { applyAnnouncedAside, ChannelCooldown } from './routing/channel-cooldown.js';
import { ChannelHealth, healthSettingsFromConfig } from './routing/channel-health.js';
import { channelMetrics } from './metrics/channel-metrics.js';
import { publishInvalidation } from '../core/invalidation/invalidation.js';
import { groupPolicyFromOptions, type GroupPolicy } from '../core/groups/group-policy.js';
import { UpstreamPools } from './upstream/upstream-pools.js';
import { handleCountTokens } from './messages/count-tokens-handler.js';
import { handleListModels, handleRetrieveModel, wantsOpenAI } from './models/models-route.js';
import { TokenCounter } from './token-count/token-counter.js';
import { ReservationHeartbeat } from './messages/reservation-heartbeat.js';
import { SettlementSpool } from './messages/settlement-spool.js';
import { replicationCheck } from './messages/settlement-confirm.js';
import { join } from 'node:path';
import { preflightHeaders, writeCorsHeaders } from './cors.js';

export interface RunningRelay {
  port: number;
  /** The port of GET /metrics, or null when RELAY_METRICS_PORT is off. */
  metricsPort: number | null;
  /** Whether the routes include this enabled channel: lets a caller wait for a reload to land. */
  hasChannel(id: number): boolean;
  /** Whether the loaded ratios price this model (Ratios.priced): lets a caller wait for an options reload. */
  hasPrice(model: string): boolean;
  /** Closes the listening socket: exchanges in progress go on, new connections are refused. */
  stopAccepting(): void;
  /**
   * Stops accepting, then waits until no exchange is in progress and every settlement was taken by
   * Redis or given up, for graceMs at most: true when all finished. Exchanges are counted per process
   * (gateway_relay_requests_in_flight), so a test process running several relays waits for them all.
   */
  drain(graceMs: number): Promise<boolean>;
  /**
   * Returns the credit slices whose requests are all settled (core/quota/credit-slices.ts), as a
   * drain does; the test harness calls it before it reads balances, which slices hold back.
   */
  returnCreditSlices(): Promise<void>;
  close(): Promise<void>;
}

type Handler = (res: uws.HttpResponse, req: uws.HttpRequest) => void;

/**
 * Every route's handler runs inside this: an exception it throws synchronously would otherwise unwind
 * through uWS's native code and take the process (and every user's requests) down. It is answered
 * instead, as Anthropic's error JSON: 400 for a malformed path (URIError), 500 otherwise. An answer
 * the handler already sent, or an aborted response, makes the write throw: that is ignored, as there
 * is nobody left to tell; the answer closes its connection. A request its framing or coding headers
 * refuse (framingRefusal) never reaches the handler.
 */
export function guarded(log: Logger, route: string, handler: Handler, format: 'anthropic' | 'openai' = 'anthropic'): Handler {
  return (res, req) => {
    const refusal = framingRefusal(req);
    if (refusal === 'lengths') return refuseFraming(res, format, FRAMING_BODY);
    if (refusal === 'transfer') return refuseFraming(res, format, CODING_FRAMING_BODY);
    if (refusal === 'coded') return refuseCoding(res, req, format);
    try {
      handler(res, req);
    } catch (err) {
      relayMetrics.handlerError();
      const malformed = err instanceof URIError;
      if (malformed) log.warn({ route, err: (err as Error).message }, 'malformed request path');
      else log.error({ route, err }, 'route handler threw');
      const e = malformed
        ? new RelayError('invalid_request', 'The request path holds a malformed percent-escape.')
        : new RelayError('internal');
      try {
        res.cork(() => {
          res.writeStatus(statusLine(e.status)).writeHeader('content-type', 'application/json');
          writeCorsHeaders(res);
          res.end(format === 'openai' ? e.openaiBody() : e.body(), true);
        });
      } catch {
        // Already answered or aborted.
      }
    }
  };
}

/** Header lines counted by countFramingLines: module state, so the count allocates no closure. */
let contentLengthLines = 0;
let transferEncodingLines = 0;
/** Content-Encoding lines other than identity. */
let codedLines = 0;

function countFramingLines(name: string, value: string): void {
  // uWS hands header names lowercased.
  if (name === 'content-length') contentLengthLines++;
  else if (name === 'transfer-encoding') transferEncodingLines++;
  else if (name === 'content-encoding' && value !== '' && !isIdentity(value)) codedLines++;
  // The same walk counts the list headers the handler reads over all their lines (header-lines.ts).
  else countListHeaderLine(name);
}

function isIdentity(coding: string): boolean {
  return coding.trim().toLowerCase() === 'identity';
}

/**
 * Why the request's framing or coding headers refuse it, or null; uWS's getHeader reads a header's
 * first line only, so the lines are counted in one walk, made only when one of them is there (a GET
 * without them skips it; so does a request whose first Content-Length is empty, which uWS takes
 * as no body: the handler answers its empty body 400 "not valid JSON" in the route's format):
 *   - 'lengths': more than one Content-Length line (equal values too: RFC 9110 §8.6 lets a recipient
 *     refuse them, and one rule is simpler to reason about). uWS frames the body by the first and
 *     parses what follows as the next request, where a proxy in front may have framed it by another:
 *     the request smuggling shape.
 *   - 'transfer': a Transfer-Encoding other than one line of `chunked` alone. uWS frames a body as
 *     chunked whatever the header says (`foo`, `xchunked`, `chunked, gzip`, `gzip, chunked`), where a
 *     proxy in front that reads transfer codings as RFC 9112 §6.1 does frames it otherwise or refuses
 *     it: the smuggling shape again. The relay takes no transfer coding but chunked.
 *   - 'coded': a body in a content-coding (gzip, br, zstd…), on any Content-Encoding line (a proxy
 *     joins `identity` and `gzip` lines into `identity, gzip`). The relay reads bodies as JSON bytes
 *     and forwards them, and no SDK compresses requests: read as it stood, a gzip body was "not valid
 *     JSON"; a zstd label on a plain body was ignored.
 */
function framingRefusal(req: uws.HttpRequest): 'lengths' | 'transfer' | 'coded' | null {
  const length = req.getHeader('content-length');
  const transfer = req.getHeader('transfer-encoding');
  const coding = req.getHeader('content-encoding');
  contentLengthLines = 0;
  transferEncodingLines = 0;
  codedLines = 0;
  const walk = length !== '' || transfer !== '' || (coding !== '' && isIdentity(coding));
  startListHeaderCount(walk);
  if (walk) req.forEach(countFramingLines);
  if (length !== '' && contentLengthLines > 1) return 'lengths';
  if (transfer !== '' && (transfer.trim().toLowerCase() !== 'chunked' || transferEncodingLines > 1)) return 'transfer';
  if (coding !== '' && (!isIdentity(coding) || codedLines > 0)) return 'coded';
  return null;
}

const FRAMING_ERROR = new RelayError('invalid_request', 'The request has more than one Content-Length header: its body cannot be framed.');
const FRAMING_BODY = { anthropic: FRAMING_ERROR.body(), openai: FRAMING_ERROR.openaiBody() } as const;
const CODING_FRAMING_ERROR = new RelayError('invalid_request', 'The request\'s Transfer-Encoding is not "chunked" alone: its body cannot be framed.');
const CODING_FRAMING_BODY = { anthropic: CODING_FRAMING_ERROR.body(), openai: CODING_FRAMING_ERROR.openaiBody() } as const;

/**
 * RFC 9112 §6.3: a 400, then the connection closed. The answer is deferred (Reply): bytes after the
 * first Content-Length's body that uWS has already read (a smuggled request) find it pending, and uWS
 * closes the connection before they run, unanswered; otherwise the 400 goes out with the close.
 * Answered at once, uWS would go on to parse and run them before it closed anything.
 */
function refuseFraming(res: uws.HttpResponse, format: 'anthropic' | 'openai', body: typeof FRAMING_BODY): void {
  new Reply(res).json(400, body[format]);
}

const CODING_ERROR = new RelayError('unsupported_encoding');
const CODING_BODY = { anthropic: CODING_ERROR.body(), openai: CODING_ERROR.openaiBody() } as const;

/** The 415 (RFC 9110 §15.5.16, an unsupported coding), once the body is read (BodyLinger), so that the client reads it. */
function refuseCoding(res: uws.HttpResponse, req: uws.HttpRequest, format: 'anthropic' | 'openai'): void {
  new Reply(res, declaredLengthOf(req)).json(415, CODING_BODY[format]);
}

const HEALTH_BODY = '{"status":"ok"}';
const NOT_READY_UNREACHABLE = '{"status":"unavailable","reason":"quota_store_unavailable"}';
const NOT_READY_FOREIGN = '{"status":"unavailable","reason":"quota_store_foreign"}';

/**
 * Paths of OpenAI's API (/v1/models aside, which both APIs have and the relay serves): a client
 * calling one is OpenAI's SDK or a tool built on it, which reads OpenAI's error shape, unless it says
 * it is Anthropic's (/v1/files is Anthropic's Files API too); so are those paths without /v1 (an SDK
 * whose base URL left it out). Every other path is answered in Anthropic's.
 */
const OPENAI_PATH = /^(?:\/v1)?\/(?:chat|completions|embeddings|images|audio|moderations|responses|assistants|threads|batches|uploads|vector_stores|fine_tuning|fine-tunes|realtime|evals|containers|conversations|videos|files)(?:\/|$)/;

/** /v1/models with a trailing slash or another method (OpenAI's model delete): both APIs have the path. */
const MODELS_PATH = /^\/v1\/models(?:\/|$)/;

/**
 * The 404 of a path the relay does not serve, in the error shape of the API the path belongs to; under
 * /v1/models, which both have, the shape /v1/models itself answers the client in (wantsOpenAI).
 */
function notFoundBody(req: uws.HttpRequest, notFound: RelayError, reply: Reply): string {
  const method = req.getMethod().toUpperCase();
  const url = req.getUrl();
  if (MODELS_PATH.test(url) ? wantsOpenAI(req) : OPENAI_PATH.test(url) && !req.getHeader('anthropic-version')) {
    reply.openai = true;
    // An SDK given the gateway's address without /v1 as its base URL (a common slip) is told so.
    const hint = url.startsWith('/v1/') ? '' : ' OpenAI\'s API is served under /v1: a client\'s base URL ends in /v1.';
    return openaiErrorBody('invalid_request_error', `Invalid URL (${method} ${url}): this gateway does not serve it.${hint}`, 'unknown_url');
  }
  return errorBody(notFound.type, `${method} ${url} does not exist.`, reply.requestId());
}

/** How often a draining relay looks whether its exchanges and settlements are done. */
const DRAIN_POLL_MS = 25;
/**
 * How long nothing must be in flight before a draining relay closes. A client that sent its request on
 * a kept-alive connection just before the drain began (its answer before had no `Connection: close`)
 * has it on the wire; closing at the first idle instant would reset it unanswered.
 */
const DRAIN_QUIET_MS = 100;
/**
 * How long close() waits, once it has cut the provider calls still open, for their exchanges to
 * settle (their settlements written to the spool and taken by Redis); what is left then is the spool's
 * to replay and the reaper's to release.
 */
const CLOSE_SETTLE_WAIT_MS = 5_000;

/** Backstop for a missed invalidation message: channels and options are re-read this often. */
const RELOAD_INTERVAL_MS = 10_000;
/** Life of a settled reservation's marker with replicas (docs/scaling.md, "Failover"). */
const SETTLED_MARKER_SEC = 600;

export async function startRelay(config: Config, log: Logger = createLogger(config, 'relay')): Promise<RunningRelay> {
  assertNativeUws();
  // No array parameters on the relay: its connections skip the type fetch (infra/postgres/client.ts).
  const sql = createSql(config, { fetchTypes: false });
  // Read before anything else is opened: a database its migrations have not reached (026) fails the
  // start with nothing to release but this connection.
  const databaseId = await databaseInstanceId(sql).catch(async (err: unknown) => {
    await sql.end({ timeout: 1 });
    throw err;
  });
  const redis = createRedis(config, 'relay', { commandTimeoutMs: config.RELAY_REDIS_COMMAND_TIMEOUT_MS });
  const sub = createRedis(config, 'relay-sub', { blocking: true });
  // Not awaited: a warning, never a reason to start later.
  void checkRedisPersistence(redis, log, 'relay');
  const keys = redisKeysFor(config);
  const crypto = createApiKeyCrypto(config.KEY_SECRET);
  const keyDirectory = new KeyDirectory(sql, crypto, config.KEY_CACHE_TTL_MS, config.KEY_CACHE_MAX_ENTRIES, config.KEY_CACHE_STALE_MS, log);
  // Names this relay's own channel_aside announcements, which it ignores when they come back.
  const relayInstance = randomUUID();
  const cooldown = new ChannelCooldown({
    failures: config.CHANNEL_COOLDOWN_FAILURES, ms: config.CHANNEL_COOLDOWN_SEC * 1000, maxMs: config.CHANNEL_COOLDOWN_MAX_SEC * 1000,
  }, (id, ms) => {
    channelMetrics.setAside(id);
    log.warn({ channel: id, seconds: ms / 1000 }, 'channel set aside: its provider keeps failing to serve; the other channels of its routes are tried first');
    // The other relays set it aside too (setAside, on the announcement): not awaited, a failure path.
    publishInvalidation(redis, keys, { kind: 'channel_aside', id, ms, from: relayInstance })
      .catch((err: unknown) => log.warn({ err, channel: id }, 'channel set aside: announcing it to the other relays failed'));
  });
  const channels = new ChannelRegistry(sql, crypto, (id, err) =>
    log.error({ channel: id, err: err.message }, 'channel credential cannot be opened with KEY_SECRET; channel skipped'),
  (id, joined) => channelMetrics.routeChanged(id, joined), cooldown);
  const pools = new UpstreamPools({
    connections: config.UPSTREAM_CONNECTIONS,
    headersTimeoutMs: config.UPSTREAM_HEADERS_TIMEOUT_MS,
    bodyTimeoutMs: config.UPSTREAM_BODY_TIMEOUT_MS,
  });
  // With replicas a settled reservation leaves a marker, so that one a failover lost still bills
  // (settleReservations-9n.lua); it outlives the replays of a relay restarted within minutes.
  const waitReplicas = settleWaitReplicas(config);
  // Reservation and slice deadlines are dated with Redis's clock, which the billing worker's reaper
  // reads too: never with this host's (core/quota/redis-clock.ts). Its first sample is waited for
  // before the relay listens, as the connection is.
  const clock = new RedisClock(redis, keys, { log });
  const clockStarted = clock.start(STARTUP_REDIS_WAIT_MS);
  const quota = new QuotaStore(redis, keys, postgresBalanceSource(sql), {
    clock,
    settledMarkerSec: waitReplicas > 0 ? SETTLED_MARKER_SEC : 0,
    settleDelayMs: config.RELAY_SETTLE_DELAY_MS,
    drawSettleDelayMs: config.RELAY_CREDIT_SLICE_SETTLE_DELAY_MS,
    creditSlices: creditSliceOptions(config.RELAY_CREDIT_SLICE_REQUESTS, config.RELAY_CREDIT_SLICE_TTL_MS),
    log,
  });
  const health = new ChannelHealth({
    redis, keys, sql, settings: healthSettingsFromConfig(config), log, metrics: channelMetrics,
    announce: (id) => publishInvalidation(redis, keys, { kind: 'channel', id }),
  });
  health.start();

  let ratios: Ratios;
  let groups: GroupPolicy;
  let inputBounds: InputBounds;
  // One read at a time, the calls made meanwhile sharing one after it (coalesced-reload.ts): the
  // periodic reload and invalidations' would otherwise overlap.
  const reloadOptions = coalescedReload(() => loadOptions(sql), (options) => {
    ratios = ratiosFromOptions(options);
    inputBounds = inputBoundsFromOptions(options);
    groups = groupPolicyFromOptions(options, ratios);
    pools.allowPrivateNetworks(options.get('ChannelAllowPrivateNetworks') === 'true');
  });
  await reloadOptions();
  await channels.reload();
  // A relay whose KEY_SECRET opens none of the channels' credentials would start, report healthy and
  // answer every key 401 (keys are looked up by an HMAC under the same secret): refused here, loudly.
  const locked = channels.openedNoCredential();
  if (locked !== null) {
    clock.stop();
    await Promise.allSettled([health.stop(), sql.end({ timeout: 1 }), redis.quit(), sub.quit()]);
    throw new Error(`KEY_SECRET opens none of the ${locked.unreadable} enabled channels' credentials: it is not the KEY_SECRET they were sealed with (the console's); refusing to start`);
  }
  // Not awaited unbounded: the subscription waits for Redis, and a relay started while its Redis is
  // down must still listen (and answer 529) rather than hang until Redis returns.
  const subscribed = subscribeInvalidations(sub, keys.invalidationChannel(), {
    token: (id) => keyDirectory.invalidate({ tokenId: id }),
    user: (id) => {
      keyDirectory.invalidate({ userId: id });
      quota.retireSlicesOf(id);
    },
    channels: () => channels.reload(),
    options: reloadOptions,
    channelAside: (id, ms, from) => applyAnnouncedAside(cooldown, channels, relayInstance, { id, ms, from }),
  }, log).catch((err: unknown) => log.error({ err }, 'invalidation subscription failed'));
  const timer = setInterval(() => {
    keyDirectory.purgeStale();
    // A check that failed with the connection up gets no 'ready' to retry it.
    if (!binding.owned() && redis.status === 'ready') void binding.check().then(replaySpool);
    Promise.all([channels.reload(), reloadOptions()]).catch((err: unknown) => log.error({ err }, 'periodic reload failed'));
  }, RELOAD_INTERVAL_MS);
  timer.unref();

  const heartbeat = new ReservationHeartbeat(quota, config.RESERVATION_TTL_SEC * 1000, log, config.UPSTREAM_BODY_TIMEOUT_MS,
    // An answer read whole gets as long for its body as it had for its headers.
    config.UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS);
  const spool = SettlementSpool.open(join(config.RELAY_SPOOL_DIR, config.REDIS_PREFIX), log, { database: databaseId });
  // WAIT holds its connection until the replicas answer: never the hot path's.
  const replication = waitReplicas > 0 ? createRedis(config, 'relay-settle-wait', { blocking: true }) : null;
  if (replication) {
    spool.confirmReplicationWith(replicationCheck(replication, keys, waitReplicas, config.REDIS_SETTLE_WAIT_MS, log, {
      giveUpMs: config.REDIS_SETTLE_WAIT_GIVE_UP_MS, onUnreplicated: (n) => relayMetrics.unreplicatedSettlements.inc(n),
    }));
  }
  relayMetrics.watchSpool(() => spool.pendingCount);
  // A settlement out while a connection dropped may have run twice (settlement.ts, noReservation).
  const quotaConnectionDrops = new ConnectionDrops(redis);
  // Whose money the Redis holds (core/quota/database-binding.ts), known afresh after each reconnect:
  // nothing is reserved in, or replayed into, a Redis not known to hold this database's accounts (a
  // Redis swapped under the relay is taken for its own by no request: until the check answers, about
  // a round trip after the connection comes back, requests are refused 529).
  const binding = new RedisBindingWatch(redis, keys, databaseId, () => {
    log.fatal(`${foreignRedisError(keys, config.REDIS_PREFIX).message.replace(/\n\s*/g, ' ')}; reservations refused (529)`);
  });
  const settleInOwnRedis = (s: Parameters<typeof quota.settle>[0]): ReturnType<typeof quota.settle> =>
    binding.owned() ? quota.settle(s) : Promise.reject(new Error('the Redis is not known to hold this database\'s accounts'));
  const replaySpool = (): void => {
    if (!binding.owned()) return;
    spool.replay(settleInOwnRedis).catch((err: unknown) => log.error({ err }, 'settlement spool replay failed'));
  };
  // Redis answering again: what its outage stalled goes through, in order, once it is known to be ours.
  redis.on('ready', () => void binding.check().then(replaySpool));
  // A Redis resuming on the same connection (SIGSTOP/SIGCONT) sends no 'ready': retried while any is stalled.
  spool.replayEvery(config.RELAY_SPOOL_REPLAY_INTERVAL_MS, settleInOwnRedis);
  const tokens = new TokenCounter({
    minThreads: 1, maxThreads: config.TOKEN_WORKERS, maxQueue: config.TOKEN_QUEUE_MAX, maxPerOwner: config.COUNT_TOKENS_IN_FLIGHT_PER_ACCOUNT,
  });
  const ctx: RelayContext = {
    log,
    repeatedLog: new LogThrottle(config.RELAY_REPEATED_LOG_INTERVAL_MS),
    keys: keyDirectory,
    channels,
    health,
    quota,
    quotaReady: () => binding.owned(),
    quotaForeign: () => binding.foreign(),
    quotaConnection: () => binding.connection,
    quotaConnectionDrops: () => quotaConnectionDrops.count,
    // Without settled markers only: with them (replicas waited for) the settlement script bills a lost
    // one itself. On a cluster too: every node's dropped connection is counted (connection-drops.ts),
    // so a settlement a node's connection may have run before it dropped is never taken for lost
    // (review diffreview2 found the mirrors debited twice when only the cluster client's was).
    billsLostReservations: waitReplicas === 0,
    pools,
    ratios: () => ratios,
    inputBounds: () => inputBounds,
    groups: () => groups,
    clientAddress: new ClientAddressResolver(config.TRUSTED_PROXIES),
    maxBodyBytes: config.MAX_BODY_BYTES,
    maxTries: config.RELAY_MAX_TRIES,
    streamHeadersTimeoutMs: config.UPSTREAM_HEADERS_TIMEOUT_MS,
    messageHeadersTimeoutMs: config.UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS,
    reservationTtlMs: config.RESERVATION_TTL_SEC * 1000,
    heartbeat,
    spool,
    tokens,
    countPromptAboveBytes: config.COUNT_PROMPT_ABOVE_BYTES,
    countsPerMinute: config.COUNT_TOKENS_PER_MINUTE,
    countsInFlightPerAccount: config.COUNT_TOKENS_IN_FLIGHT_PER_ACCOUNT,
    tokenEstimateFactor: config.TOKEN_ESTIMATE_FACTOR,
    deliveredFlushBytes: config.DELIVERED_FLUSH_BYTES,
  };

  const notFound = new RelayError('not_found');
  const readiness = (): [number, string] => {
    if (binding.owned()) return [200, HEALTH_BODY];
    if (binding.foreign()) return [503, NOT_READY_FOREIGN];
    return [503, NOT_READY_UNREACHABLE];
  };
  const app = uws.App()
    .post('/v1/messages', guarded(log, 'messages', (res, req) => handleMessages(ctx, res, req)))
    .post('/v1/chat/completions', guarded(log, 'chat_completions', (res, req) => handleChatCompletions(ctx, res, req), 'openai'))
    .post('/v1/messages/count_tokens', guarded(log, 'count_tokens', (res, req) => handleCountTokens(ctx, res, req)))
    .get('/v1/models', guarded(log, 'list_models', (res, req) => handleListModels(ctx, res, req)))
    .get('/v1/models/:model_id', guarded(log, 'retrieve_model', (res, req) => handleRetrieveModel(ctx, res, req)))
    // HEAD wherever GET is (RFC 9110 9.3.2): a monitor or a client checking a key answered as GET, without the body.
    .head('/v1/models', guarded(log, 'list_models', (res, req) => handleListModels(ctx, res, req, true)))
    .head('/v1/models/:model_id', guarded(log, 'retrieve_model', (res, req) => handleRetrieveModel(ctx, res, req, true)))
    // Both answer from the request alone, inside uWS's parser callback: deferred (Reply), so that a
    // client pipelining them without reading gets its connection closed rather than every answer
    // buffered. A probe that keeps its connection alive keeps it; a 404 closes it.
    .get('/health', guarded(log, 'health', (res) => {
      new Reply(res).json(200, HEALTH_BODY);
    }))
    // Load balancers that check with HEAD.
    .head('/health', guarded(log, 'health', (res) => {
      const reply = new Reply(res);
      reply.headOnly = true;
      reply.json(200, HEALTH_BODY);
    }))
    // Readiness, apart from liveness: whether a request would be served now. A relay whose Redis is
    // down or holds another database's accounts answers every request 529; restarting it (what a
    // failed liveness check does) changes nothing, taking it out of rotation does.
    .get('/ready', guarded(log, 'ready', (res) => {
      new Reply(res).json(...readiness());
    }))
    .head('/ready', guarded(log, 'ready', (res) => {
      const reply = new Reply(res);
      reply.headOnly = true;
      reply.json(...readiness());
    }))
    .options('/*', guarded(log, 'preflight', (res, req) => new Reply(res).noContent(preflightHeaders(req))))
    .any('/*', guarded(log, 'not_found', (res, req) => {
      // A body sent to a path that does not exist (an SDK's endpoint the gateway does not serve) is
      // read to its end before the 404, so that the client reads the 404 (BodyLinger).
      const reply = new Reply(res, declaredLengthOf(req));
      reply.headOnly = req.getMethod() === 'head';
      reply.json(404, notFoundBody(req, notFound, reply));
    }));

  const releaseAll = async (): Promise<void> => {
    clearInterval(timer);
    heartbeat.stop();
    quota.stop();
    clock.stop();
    await health.stop().catch(() => {});
    await pools.close();
    await tokens.close();
    sub.disconnect();
    replication?.disconnect();
    // A Redis that does not answer (stopped, partitioned) times QUIT out: the connection is dropped
    // instead, and the close goes on. What could not settle is in the spool, closed below whatever
    // happens, for the next relay to replay; the stop is no failure of this relay's.
    await redis.quit().catch(() => redis.disconnect());
    try {
      await sql.end({ timeout: 5 });
    } finally {
      spool.close();
    }
  };

  let listenSocket: uws.us_listen_socket;
  let metrics: RelayMetricsServer | null = null;
  try {
    // Listen once the quota store's connection is up: a request arriving before would be refused
    // with 529 although nothing is wrong. Bounded, so a relay whose Redis is down still starts (and
    // answers 529 until Redis is back) rather than hanging.
    await Promise.race([
      Promise.all([redisReady(redis, STARTUP_REDIS_WAIT_MS), subscribed, clockStarted]),
      new Promise((resolve) => setTimeout(resolve, STARTUP_REDIS_WAIT_MS).unref()),
    ]);
    // Another database's Redis is a configuration to fix: the start fails, naming it. One not
    // reachable yet is checked when it answers (the 'ready' handler above).
    if (redis.status === 'ready' && await binding.check() === false) throw foreignRedisError(keys, config.REDIS_PREFIX);
    replaySpool();
    listenSocket = await listenRelay(app, config.RELAY_HOST, config.RELAY_PORT, config.RELAY_REUSE_PORT);
    if (config.RELAY_METRICS_PORT !== 'off') {
      try {
        metrics = await startRelayMetricsServer(config.RELAY_METRICS_HOST, config.RELAY_METRICS_PORT, relayMetrics);
      } catch (err) {
        uws.us_listen_socket_close(listenSocket);
        throw err;
      }
    }
  } catch (err) {
    await releaseAll();
    throw err;
  }
  const port = uws.us_socket_local_port(listenSocket);
  log.info({ host: config.RELAY_HOST, port, metricsPort: metrics?.port ?? 'off' }, 'relay listening');

  let listening = true;
  const stopAccepting = (): void => {
    if (!listening) return;
    listening = false;
    uws.us_listen_socket_close(listenSocket);
  };

  /** Exchanges in progress, or their settlements not yet taken (and confirmed) by Redis. */
  const exchangesOpen = (): boolean =>
    relayMetrics.inFlight.value > 0 || heartbeat.size > 0 || settlementsInFlight() > 0 || spool.confirming;

  return {
    port,
    metricsPort: metrics?.port ?? null,
    hasChannel: (id) => channels.has(id),
    hasPrice: (model) => ratios.priced(model),
    stopAccepting,
    async drain(graceMs) {
      stopAccepting();
      closeConnectionsAfterAnswer();
      const deadline = Date.now() + graceMs;
      let quietSince = 0;
      for (;;) {
        let busy = exchangesOpen();
        // Settled: the credit slices go back now rather than to the reaper after RESERVATION_TTL_SEC.
        if (!busy && quota.slicesHeld > 0) {
          await quota.returnSlices().catch((err: unknown) => log.warn({ err: (err as Error).message }, 'credit slices not returned; the reaper will'));
          busy = quota.slicesHeld > 0 && Date.now() < deadline;
        }
        const now = Date.now();
        if (busy) quietSince = 0;
        else if (quietSince === 0) quietSince = now;
        else if (now - quietSince >= DRAIN_QUIET_MS) return true;
        if (now >= deadline) return !busy;
        await new Promise((r) => setTimeout(r, DRAIN_POLL_MS));
      }
    },
    returnCreditSlices: () => quota.returnSlices(),
    async close() {
      stopAccepting();
      await metrics?.close();
      if (exchangesOpen()) {
        // The grace is over (drain gave up): the provider calls still open are cut, so that each of
        // their exchanges settles now, for what it delivered, while the heartbeat still holds its
        // reservation. Waiting for them instead (undici's close does) kept the process up as long as
        // the longest stream, for ever for one that trickles, its reservation no longer renewed.
        await pools.destroy();
        const until = Date.now() + CLOSE_SETTLE_WAIT_MS;
        while (exchangesOpen() && Date.now() < until) await new Promise((r) => setTimeout(r, DRAIN_POLL_MS));
      }
      await releaseAll();
    },
  };
}

/** uWS's listen options (its TypeScript declarations only type them for the port-only form). */
const LIBUS_LISTEN_DEFAULT = 0;
const LIBUS_LISTEN_EXCLUSIVE_PORT = 1;

/**
 * Listens on host:port. uWS sets SO_REUSEPORT by default, so a port another process (another relay
 * left running, a second `make run`) already holds would be shared without a word, each taking part of
 * the connections. Unless sharing was asked for, the port is taken exclusively, and a taken port is a
 * start-up error naming it.
 */
/** How long start-up waits for the relay's Redis connection before listening anyway. */
const STARTUP_REDIS_WAIT_MS = 5_000;

function redisReady(redis: ReturnType<typeof createRedis>, timeoutMs: number): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      redis.off('ready', done);
      resolve();
    };
    const timer = setTimeout(done, timeoutMs);
    redis.once('ready', done);
  });
}

function listenRelay(app: uws.TemplatedApp, host: string, port: number, reusePort: boolean): Promise<uws.us_listen_socket> {
  const options = reusePort ? LIBUS_LISTEN_DEFAULT : LIBUS_LISTEN_EXCLUSIVE_PORT;
  const listen = app.listen as unknown as (host: string, port: number, options: number, cb: (s: uws.us_listen_socket | false) => void) => void;
  return new Promise((resolve, reject) => {
    listen.call(app, host, port, options, (socket) => {
      if (socket) return resolve(socket);
      const why = reusePort
        ? 'the port is held by a process that does not share it, or the address is not this host\'s'
        : 'the port is in use, or the address is not this host\'s (RELAY_REUSE_PORT=true shares a port with other relays on purpose)';
      reject(new Error(`relay could not listen on ${host}:${port}: ${why}`));
    });
  });
}
