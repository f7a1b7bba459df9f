// The settlement of a reserved exchange: its cost from the usage it ended with, the usage event of its
// log row, and the call that settles the reservation with both, tried again while Redis fails.
// Exchange.finish() (messages-handler.ts) calls settleExchange once per reserved exchange.
import type { LogThrottle } from '../../infra/log-throttle.js';
import type { Logger } from '../../infra/logger.js';
import { encodeUsageEvent, LOG_TYPE, usageEvent } from '../../core/usage/usage-event.js';
import { describeCacheUsage, describeCost, describeLongContext, describeServiceTier, describeWebSearch, quotaCost, type CacheUse, type PriceRatios } from '../../core/pricing/quota-cost.js';
import { currentMinute, type QuotaStore } from '../../core/quota/quota-store.js';
import type { ApiKeyRecord } from '../auth/key-directory.js';
import type { Channel } from '../routing/channel-registry.js';
import type { StreamUsage } from '../stream/sse-usage-parser.js';
import { relayMetrics } from '../metrics/relay-metrics.js';
import type { MessagesRequest } from './messages-request.js';
import type { SettlementSpool } from './settlement-spool.js';
import { logRepeated } from './repeated-log.js';

/**
 * The most a request can use, as sent to the provider: `output` its max_tokens (× n choices), `input`
 * the tokens its prompt can hold (a text prompt's bytes, the model's window when known: a prompt with
 * media, images included, whose bound only sizes the reservation; Infinity when the window is a guess
 * and the prompt has media), `searches` its web
 * searches' max_uses. A provider that reports more (2^60 output tokens) is at fault; the request is
 * billed at the bound, and the excess logged and counted, never billed (it was once, to 100 million
 * tokens: 500,000,000 quota on a 1,500-quota reservation).
 */
export interface UsageBound {
  /** The most prompt tokens a provider's usage is billed (with media, the window; Infinity where it is a guess: what it states is billed). */
  input: number;
  output: number;
  searches: number;
  /**
   * The prompt cache the request could touch (its cache_control breakpoints: cache-control.ts).
   * Without a breakpoint Anthropic writes nothing, and the reservation priced its input at 1×: writes
   * reported anyway are billed as input (a 5-minute write is 1.25×, an hour's 2×: billed as such, a
   * request without a breakpoint cost more than it reserved and took the balance below zero). Without
   * an hour's breakpoint (ttl "1h") it writes for 5 minutes: an hour's writes reported anyway are
   * billed as 5 minutes' (they were billed at 2× where the request asked for 1.25×). Absent: '1h'.
   */
  cache?: CacheUse;
  /**
   * The most prompt tokens a count of the relay's own bills (a provider that states none): the input
   * the reservation covered (the model's context window with documents; images at their bound). Uncapped, 1,000 images counted at
   * their most each billed 1.6 M tokens a prompt no model takes, 16× the reservation.
   */
  countedInput: number;
}

export type Outcome =
  | { kind: 'ok'; usage: StreamUsage }
  | { kind: 'partial'; usage: StreamUsage; reason: string }
  | { kind: 'failed'; reason: string };

export interface SettlementContext {
  log: Logger;
  quota: Pick<QuotaStore, 'settle' | 'settleSoon' | 'sliceOf'>;
  /** Where settlements wait for Redis on disk (settlement-spool.ts); absent in unit tests only. */
  spool?: SettlementSpool;
  /** Holds back the lines a provider's fault repeats per request (infra/log-throttle.ts); absent: every line. */
  repeatedLog?: LogThrottle;
  /**
   * Whether the quota store's Redis is up and known to hold this database's accounts (RelayContext);
   * a settlement is sent only then. Absent (unit tests): always.
   */
  quotaReady?(): boolean;
  /**
   * The quota store's connections dropped so far, any node's of a cluster (ConnectionDrops.count: a
   * cluster client sends again what a node's dropped connection left unanswered without a reconnect
   * of its own); absent: never changes.
   */
  quotaConnectionDrops?(): number;
  /**
   * Whether a settlement that finds no reservation may be sent again as lost: a Redis, or Redis
   * Cluster, without settled markers (with replicas waited for, the settlement script bills a lost
   * one itself). Absent: no.
   */
  billsLostReservations?: boolean;
}

/** What settlement reads of an exchange: messages-handler.ts's Exchange is one, passed as it is. */
export interface SettledExchange {
  readonly ctx: SettlementContext;
  readonly requestId: string;
  readonly upstreamRequestId: string;
  readonly startedAt: number;
  readonly ip: string;
  readonly record: ApiKeyRecord | null;
  readonly body: MessagesRequest | null;
  readonly channel: Channel | null;
  readonly group: string;
  readonly price: PriceRatios;
  readonly tpmLimited: boolean;
  /** The group whose tokens-per-minute window for the account held the request's tokens, if one did. */
  readonly tpmGroup?: string;
  /** The protocol the client spoke, written to its log row. */
  readonly protocol?: 'anthropic' | 'openai';
  /** The client asked for the `flex` service tier (a Chat Completions request's service_tier). */
  readonly flexRequested?: boolean;
  /** What the reservation took; a cost above it is flagged. Absent: not checked. */
  readonly reservedAmount?: number;
  /** The most the request can use: a usage above it is billed at it. Absent: not bounded (tests). */
  readonly usageBound?: UsageBound;
}

/** The actual cost (nothing when the request failed) and its log row, settled against the reservation. */
export function settleExchange(ex: SettledExchange, outcome: Outcome): void {
  const record = ex.record!;
  const stated = outcome.kind === 'failed' ? null : outcome.usage;
  const usage = stated !== null && ex.usageBound !== undefined ? boundedUsage(ex, stated, ex.usageBound) : stated;
  // Flex is billed at the channel's flex price only when both ends say so: the client asked for it and
  // the answer says it served it (a provider that ignored the field served, and billed, standard).
  const tierRatio = usage !== null && usage.flexServed === true && ex.flexRequested === true && ex.channel !== null ? ex.channel.flexRatio : 1;
  const cost = usage ? quotaCost(usage, ex.price, tierRatio) : 0;
  // The provider charged what it reports, so an excess is billed all the same (settleReservations-9n.lua
  // debits it, and only it may take the balance below zero); it is flagged, logged and counted,
  // because it means the reservation's bound (messages-handler.ts, reservation-bound.ts) failed.
  const over = ex.reservedAmount !== undefined && cost > ex.reservedAmount ? cost - ex.reservedAmount : 0;
  if (over > 0) {
    relayMetrics.overReservation();
    logRepeated(ex.ctx, 'error', 'cost-above-reservation', ex.channel?.id, { requestId: ex.requestId, model: ex.body?.model, channel: ex.channel?.id, reserved: ex.reservedAmount, cost, usage }, 'cost exceeded the reservation; the excess is billed');
  }
  const priced = costText(ex.price);
  // The cache tokens are the only per-request part; a request without cache use builds no string.
  const cacheText = usage ? describeCacheUsage(usage) : '';
  const withCache = cacheText === '' ? priced : priced + cacheText;
  const searches = usage?.webSearchRequests ?? 0;
  const withSearch = searches === 0 ? withCache : withCache + describeWebSearch(usage!, ex.price);
  const withLongContext = usage !== null && ex.price.longContext !== undefined ? withSearch + describeLongContext(usage, ex.price) : withSearch;
  const withTier = tierRatio === 1 ? withLongContext : withLongContext + describeServiceTier(tierRatio);
  const bounded = usage !== stated ? withTier + ABOVE_BOUND + statedText(stated!) : withTier;
  const content = outcome.kind === 'ok' ? bounded : `${outcome.reason}; ${bounded}`;
  const endedAt = Date.now();
  const event = usageEvent({
    type: outcome.kind === 'ok' ? LOG_TYPE.consume : outcome.kind === 'partial' ? LOG_TYPE.consume : LOG_TYPE.error,
    request_id: ex.requestId,
    upstream_request_id: ex.upstreamRequestId,
    user_id: record.userId,
    username: record.username,
    token_id: record.tokenId,
    token_name: record.name,
    token_limited: !record.unlimitedQuota,
    channel: ex.channel?.id ?? 0,
    model_name: ex.body?.model ?? '',
    group: ex.group,
    quota: cost,
    prompt_tokens: usage ? usage.inputTokens + usage.cacheCreationTokens + usage.cacheReadTokens : 0,
    completion_tokens: usage?.outputTokens ?? 0,
    cache_tokens: usage ? usage.cacheCreationTokens + usage.cacheReadTokens : 0,
    cache_read_tokens: usage?.cacheReadTokens ?? 0,
    cache_write_5m_tokens: usage ? usage.cacheCreationTokens - usage.cacheCreation1hTokens : 0,
    cache_write_1h_tokens: usage?.cacheCreation1hTokens ?? 0,
    web_search_requests: searches > 0 ? searches : undefined,
    is_stream: ex.body?.stream === true,
    protocol: ex.protocol,
    // Wall-clock dates both ends (startedAt also dates the request elsewhere): a clock stepped back
    // during the request (NTP, a resumed VM) must not write a negative duration into an event Redis
    // debits as it is.
    use_time_ms: Math.max(0, endedAt - ex.startedAt),
    // When the request ended, as new-api dates its log: the console's rpm and tpm (rows of the last
    // minute) then count a long stream that just ended, which a start date left a minute behind.
    created_at: Math.floor(endedAt / 1000),
    content,
    ip: ex.ip,
    over_reservation: over > 0 ? over : undefined,
  });
  const tokens = ex.tpmLimited ? event.prompt_tokens + event.completion_tokens : 0;
  const settlement = {
    userId: record.userId, tokenId: record.tokenId, requestId: ex.requestId, cost, eventJson: encodeUsageEvent(event), tokens, tpmGroup: ex.tpmGroup,
    minute: currentMinute(), limited: !record.unlimitedQuota, slice: ex.ctx.quota.sliceOf(ex.requestId),
  };
  // Synchronously on disk before the caller ends the client's answer: a relay killed from here on
  // leaves the settlement to the next one's replay.
  ex.ctx.spool?.add(settlement);
  settleWithRetry(ex.ctx, settlement, 0);
}

const ABOVE_BOUND = '; usage above what the request could use, billed at its bound';

/**
 * What the provider stated, for a request billed at its bound: the row is then the one record of the
 * provider's claim (the log line saying so is held back past one per channel an interval,
 * repeated-log.ts), which reconciling its invoice needs.
 */
function statedText(u: StreamUsage): string {
  const searches = u.webSearchRequests ? `, web searches ${u.webSearchRequests}` : '';
  return ` (stated: input ${u.inputTokens}, cache writes ${u.cacheCreationTokens}, cache reads ${u.cacheReadTokens}, output ${u.outputTokens}${searches})`;
}

/**
 * The usage within the request's bound: itself when it is within, else a copy with each count above
 * the bound brought down to it (logged and counted: the provider's fault).
 */
function boundedUsage(ex: SettledExchange, u: StreamUsage, b: UsageBound): StreamUsage {
  const out = usageWithinBound(u, b);
  if (out === u) return u;
  relayMetrics.usageAboveBound();
  logRepeated(ex.ctx, 'error', 'usage-above-bound', ex.channel?.id, { requestId: ex.requestId, model: ex.body?.model, channel: ex.channel?.id, bound: b, usage: u }, 'provider reported more usage than the request could use; billed at its bound');
  return out;
}

/**
 * The usage a request is billed for the usage it ended with: itself when it is within the request's
 * bound (no allocation), else a copy with each count above the bound brought down to it. A prompt is
 * bounded as a whole, input tokens first, then the cache writes, then the cache reads. Pure: settlement
 * bills it (boundedUsage), and a converted answer tells its client the same figures (usageAsBilled).
 */
export function usageWithinBound(u: StreamUsage, b: UsageBound): StreamUsage {
  const searches = u.webSearchRequests ?? 0;
  const prompt = u.inputTokens + u.cacheCreationTokens + u.cacheReadTokens;
  const impossibleWrites = b.cache === 'none' && u.cacheCreationTokens > 0;
  const impossibleHourWrites = b.cache === '5m' && u.cacheCreation1hTokens > 0;
  if (u.outputTokens <= b.output && prompt <= b.input && searches <= b.searches && !impossibleWrites && !impossibleHourWrites) return u;
  const out: StreamUsage = { ...u, outputTokens: Math.min(u.outputTokens, b.output) };
  if (impossibleWrites) {
    out.inputTokens = u.inputTokens + u.cacheCreationTokens;
    out.cacheCreationTokens = 0;
    out.cacheCreation1hTokens = 0;
  }
  // Still writes, of 5 minutes (cacheCreationTokens counts both kinds).
  if (impossibleHourWrites) out.cacheCreation1hTokens = 0;
  if (prompt > b.input) {
    let left = b.input;
    out.inputTokens = Math.min(out.inputTokens, left);
    left -= out.inputTokens;
    out.cacheCreationTokens = Math.min(out.cacheCreationTokens, left);
    out.cacheCreation1hTokens = Math.min(out.cacheCreation1hTokens, out.cacheCreationTokens);
    left -= out.cacheCreationTokens;
    out.cacheReadTokens = Math.min(u.cacheReadTokens, left);
  }
  if (searches > b.searches) {
    if (b.searches > 0) out.webSearchRequests = b.searches;
    else delete out.webSearchRequests;
  }
  return out;
}

/**
 * What an exchange that ended with `usage` is billed (settleExchange's figures, the ledger's): the
 * usage within the request's bound; null for none. The figures a converted answer tells its client.
 */
export function usageAsBilled(usage: StreamUsage | null, bound: UsageBound | undefined): StreamUsage | null {
  return usage === null || bound === undefined ? usage : usageWithinBound(usage, bound);
}

/**
 * The settlement script is idempotent, so a failed call (Redis restarting, a network blip) is simply
 * tried again; after the last try it stays in the spool, replayed when Redis answers again or by the
 * next relay started on the spool's directory; meanwhile the reaper may release the reservation, and
 * the late settlement is still accepted (settleReservations-9n.lua).
 */
const SETTLE_RETRY_DELAYS_MS = [50, 250, 1000, 5000];

/** A settlement held back: its Redis is down, reconnecting, or not known to hold this database's accounts. */
const NOT_SENT = new Error('the quota store is not known to hold this database\'s accounts now (down, reconnecting, or another database\'s): not sent');

/**
 * `mayHaveRun`: an earlier call of this settlement was sent and failed, so Redis may have run it
 * (a command timeout, a connection lost before the answer).
 */
export function settleWithRetry(ctx: SettlementContext, settlement: Parameters<QuotaStore['settle']>[0], attempt: number, mayHaveRun = false): void {
  if (attempt === 0) settling++;
  // Never into a Redis not known to be this database's (a Redis swapped under the relay: its
  // settlement, and a lost one's debit, would move another database's money; review diffreview).
  const sent = ctx.quotaReady?.() ?? true;
  const connection = ctx.quotaConnectionDrops?.() ?? 0;
  const call = sent ? settleCall(ctx, settlement, attempt) : Promise.reject(NOT_SENT);
  call.then((settled) => {
    // A connection that dropped while the call was out: ioredis sends the unanswered call again after
    // the reconnect, so Redis may have run it twice, the second finding the reservation settled; or
    // the server there now is another (a swapped Redis, before the relay looked whose it is).
    const reconnected = (ctx.quotaConnectionDrops?.() ?? 0) !== connection;
    if (!settled && reconnected && attempt < SETTLE_RETRY_DELAYS_MS.length) {
      // Asked again, once the Redis is known to be this database's: "none" from a Redis that is not,
      // taken as final, left the request unbilled (review diffreview2). Counted in flight again (the
      // answer just counted it out).
      settling++;
      setTimeout(() => settleWithRetry(ctx, settlement, attempt + 1, true), SETTLE_RETRY_DELAYS_MS[attempt]).unref();
      return;
    }
    const ran = mayHaveRun || reconnected;
    if (settled ? settlement.lost === true && lostReservationBilled(ctx, settlement) : noReservation(ctx, settlement, ran, attempt)) return;
    ctx.spool?.settled(settlement.requestId);
  }, (err: unknown) => {
    if (!sent && !mayHaveRun && SETTLE_RETRY_DELAYS_MS[attempt] === undefined) {
      // Never sent (the Redis down, or not known to be this database's, since the answer ended): kept
      // in memory and tried every few seconds until it can be, rather than left to the spool, whose
      // replay cannot tell a lost reservation from a settled one (review diffreview2: an outage over
      // 6 s left every lost reservation unbilled). A relay stopped meanwhile leaves it to the spool.
      setTimeout(() => settleWithRetry(ctx, settlement, attempt, false), SETTLE_RETRY_DELAYS_MS[SETTLE_RETRY_DELAYS_MS.length - 1]).unref();
      return;
    }
    const delay = SETTLE_RETRY_DELAYS_MS[attempt];
    if (delay === undefined) {
      settling--;
      relayMetrics.settleFailed();
      ctx.spool?.stalled(settlement.requestId);
      ctx.log.error({ err, requestId: settlement.requestId }, 'settlement failed; kept in the spool until Redis answers again');
      return;
    }
    if (sent) ctx.log.warn({ err: (err as Error).message, requestId: settlement.requestId, attempt }, 'settlement failed; retrying');
    setTimeout(() => settleWithRetry(ctx, settlement, attempt + 1, mayHaveRun || sent), delay).unref();
  });
}

/**
 * A settlement Redis found no reservation for. On a Redis that keeps no settled markers (one Redis, no
 * replicas), when no call of it can have run before (`ran` false: none was sent and failed, and the
 * connection held while this one was out), the reservation, or the credit slice it was drawn from,
 * went with Redis's data (a restart without persistence, the last second of an AOF): the answer was
 * delivered, so it is sent again as lost, which debits the cost alone, once (SettleRequest.lost).
 * Otherwise (an earlier call Redis may have taken before its answer was lost; a replica set's
 * markers, which bill a lost one in the first call) it is not billed again, and is said with its
 * request id and counted, for an operator to reconcile should its reservation have been lost. Answers
 * true when it was sent again (the spool keeps it until that one is done).
 */
function noReservation(ctx: SettlementContext, settlement: Parameters<QuotaStore['settle']>[0], ran: boolean, attempt: number): boolean {
  if (!ran && settlement.lost !== true && ctx.billsLostReservations === true && settlement.minute !== undefined && settlement.limited !== undefined) {
    settleWithRetry(ctx, { ...settlement, lost: true }, 0);
    return true;
  }
  relayMetrics.settlementsUnmatched.value++;
  ctx.log.warn({ requestId: settlement.requestId, userId: settlement.userId, cost: settlement.cost, attempt },
    'settlement found no reservation: settled already by an earlier try, or its reservation was lost with Redis\'s data and the request is not billed');
  return false;
}

/** A lost reservation's settlement that Redis took: billed without it, said once. Answers false (done). */
function lostReservationBilled(ctx: SettlementContext, settlement: Parameters<QuotaStore['settle']>[0]): boolean {
  relayMetrics.lostReservationsBilled.value++;
  ctx.log.warn({ requestId: settlement.requestId, userId: settlement.userId, cost: settlement.cost },
    'settlement found no reservation: it was lost with Redis\'s data (a restart without persistence); the request is billed without it');
  return false;
}

/**
 * Settlements neither taken by Redis yet nor given up: a relay shutting down waits for them
 * (server.ts, RunningRelay.drain) before it closes its Redis connection.
 */
let settling = 0;

export function settlementsInFlight(): number {
  return settling;
}

/** The first try waits for the next reservation's write (QuotaStore.settleSoon); a retry goes at once. */
function settleCall(ctx: SettlementContext, settlement: Parameters<QuotaStore['settle']>[0], attempt: number): Promise<boolean> {
  const call = attempt === 0 ? ctx.quota.settleSoon(settlement) : ctx.quota.settle(settlement);
  call.then(() => { settling--; }, () => {});
  return call;
}

/** describeCost of the last price seen, kept: a gateway's traffic mostly repeats a few prices. */
let lastCost: PriceRatios & { text: string } = { model: NaN, completion: NaN, group: NaN, cacheRead: NaN, cacheWrite: NaN, cacheWrite1h: NaN, text: '' };

function costText(p: PriceRatios): string {
  const c = lastCost;
  if (c.model === p.model && c.completion === p.completion && c.group === p.group
    && c.cacheRead === p.cacheRead && c.cacheWrite === p.cacheWrite && c.cacheWrite1h === p.cacheWrite1h) return c.text;
  lastCost = { ...p, text: describeCost(p) };
  return lastCost.text;
}
