// The Redis side of the money: reservation before a request, settlement after it, and the deltas
// the console applies. Postgres stays the book of record; Redis holds a mirror of each balance that
// already has open reservations and unsettled debits subtracted, so checks need no Postgres round trip.
import type { Redis } from 'ioredis';
import type { RedisKeys } from '../../infra/redis/keys.js';
import { execOrThrow, resendAfterMoved, resendingMoved, retryOnMoved } from '../../infra/redis/client.js';
import { QuotaScriptCode, RESERVE_OUTCOME_OF_CODE, type ReserveOutcome } from './quota-outcomes.js';
import { batchScript, defineScripts, type BatchScriptFn } from './scripts.js';
import { CreditSlices, SLICE_HOLD_SUFFIX, sliceHoldMember, type CreditSliceOptions, type SliceDraw } from './credit-slices.js';
import type { Logger } from '../../infra/logger.js';
import { WALL_CLOCK, type ReferenceClock } from './redis-clock.js';

export type { ReserveOutcome };

export interface ReserveRequest {
  userId: number;
  tokenId: number;
  tokenLimited: boolean;
  requestId: string;
  amount: number;
  deadlineMs: number;
  /** Requests and tokens per minute the key may use, counted for the key alone; 0 means no limit. */
  rpmLimit?: number;
  tpmLimit?: number;
  /**
   * The group the request is served in, whose limits below are the account's: all its keys of the
   * group are counted together. Needed when either limit is set.
   */
  group?: string;
  /** Requests and tokens per minute of the group for one account; 0 means no limit. */
  groupRpmLimit?: number;
  groupTpmLimit?: number;
  /**
   * Tests only: the Unix ms that places the request in its key's rate-limit windows. Left out, the
   * Redis server's clock does, one clock for every relay (reserveQuota-8.lua).
   */
  nowMs?: number;
  /** Tokens the request may use (input bound + output bound): held against tpmLimit and groupTpmLimit until settled. */
  tokens?: number;
}

export interface SettleRequest {
  userId: number;
  tokenId: number;
  requestId: string;
  cost: number;
  eventJson: string;
  /** Input + output tokens, counted against the key's tokens-per-minute budget when given. */
  tokens?: number;
  /**
   * The group of ReserveRequest.group when its groupTpmLimit held the request's tokens: the account's
   * window of that group is corrected to the tokens used too. Kept in the spool, so a replay does it.
   */
  tpmGroup?: string;
  /** Unix minute the settlement was made (relay: when the answer ended); bounds the lost-reservation check. */
  minute?: number;
  /** The key is limited: a reservation lost in a failover is then also debited from the key's quota. */
  limited?: boolean;
  /**
   * Sent again because its first settlement found no reservation on a Redis that keeps no settled
   * markers (settledMarkerSec 0: one Redis, no replicas). A relay settles each request once, and the
   * reaper leaves a tombstone, so that answer means the reservation (or the credit slice it was drawn
   * from) went with Redis's data: a restart without persistence, the last second of an AOF. The cost
   * is then debited alone and its event appended, once: a marker is left for LOST_SETTLED_MARKER_SEC,
   * as with replicas (settleReservations-9n.lua). Needs `minute` and `limited`.
   */
  lost?: boolean;
  /**
   * The credit slice the request was reserved from (credit-slices.ts), when it was: it has no
   * reservation of its own and is settled against the slice. Kept in the spool, so a replay finds it.
   */
  slice?: SliceDraw;
}

export interface QuotaStoreOptions {
  /**
   * Seconds a settled reservation's marker lives (Redis with replicas; 0: none). With it a settlement
   * whose reservation a failover lost still bills (settleReservations-9n.lua), if it arrives within
   * this time minus LOST_RESERVATION_MARGIN_SEC of its `minute`.
   */
  settledMarkerSec?: number;
  /**
   * Milliseconds a settlement given to settleSoon may wait for the next reservation, to go to Redis in
   * the same write (default 2). Under load a reservation comes sooner, so settlements cost Redis no
   * wake-up of their own; a quiet relay sends them when this runs out.
   */
  settleDelayMs?: number;
  /**
   * settleDelayMs for the settlements of requests reserved from a credit slice (default 10): they
   * give back nothing a reservation waits for (the slice's part was already counted out in memory),
   * so they may wait longer and go to Redis in larger calls; only billing waits for them.
   */
  drawSettleDelayMs?: number;
  /**
   * Credit held by this process (the relay): requests of unlimited keys without rate limits are
   * reserved in memory from a slice of their account's balance (credit-slices.ts). Off with replicas
   * (settledMarkerSec > 0): a failover could lose a slice with the record of what it settled.
   */
  creditSlices?: CreditSliceOptions;
  /**
   * The reaper (billing): how long a credit slice it reaped keeps holding its amount
   * (releaseCreditSlice-4.lua 'reap'), for the requests its relay may still be running if the relay
   * was only paused. The reservations' TTL (RESERVATION_TTL_SEC; default 900 s): a relay away that
   * long has its own reservations released too.
   */
  reapedSliceHoldMs?: number;
  /**
   * The clock reservation and credit-slice deadlines are dated and reaped with (`clock`): the relay
   * and the billing worker pass one RedisClock each (redis-clock.ts), so both read Redis's clock, not
   * their hosts'. Default: this host's clock.
   */
  clock?: ReferenceClock;
  log?: Logger;
}

/** Margin for clock skew between relays and Redis in the lost-reservation bound. */
const LOST_RESERVATION_MARGIN_SEC = 60;
/**
 * Life of the marker a lost reservation's settlement leaves without replicas (SettleRequest.lost): it
 * outlives every retry and spool replay of that settlement a running relay sends.
 */
const LOST_SETTLED_MARKER_SEC = 600;

export interface ExpiredReservation {
  userId: number;
  tokenId: number;
  requestId: string;
  amount: number;
}

const ADJUSTMENT_MARKER_TTL_SEC = 30 * 24 * 3600;
/**
 * Lifetime of the mirrors of a deleted API key or account (they had none): the relay takes no new
 * request for them, and a request still running settles within a day (a reaped reservation's
 * tombstone lives as long, settleReservations-9n.lua), its INCRBY keeping the TTL. Without it a
 * create / use / delete loop grew Redis for good.
 */
export const DELETED_MIRROR_TTL_SEC = 24 * 3600;

/** How long a seeded mirror lives: a deleted row's as long as the deletion left its mirrors, else for ever (0). */
function seedTtl(seed: { deleted?: boolean }): number {
  return seed.deleted === true ? DELETED_MIRROR_TTL_SEC : 0;
}
/** EXPIREs per MULTI when mirrors of a deleted account expire: bounds one transaction on an account with many keys. */
const EXPIRE_KEYS_PER_MULTI = 1000;
/** seedBalance-2.lua: the Postgres read is older than a change already in Redis. */
const SEED_STALE = -1;
/** Reads of Postgres per seed: each stale one means a console change committed meanwhile. */
const SEED_ATTEMPTS = 3;
/**
 * Settlements per call of a settlement script: bounds how long one call holds Redis (~10 µs each), and
 * so the events of one usage stream entry (a call's events are one entry).
 */
const SETTLE_BATCH_MAX = 128;
/** Reservations per ZADD of a heartbeat: bounds one command's size on a relay with many open requests. */
const RENEW_BATCH = 1000;

/**
 * The request id of the hold an administrator's debit (ledger row `ledgerId`) takes from the account's
 * mirror before its commit (holdConsoleDebit-4.lua): derived from the ledger id, so that the mirror
 * step, the console's or the billing follow-up's, finds and consumes it (adjustAccountOnce-5.lua).
 */
export function consoleDebitHoldId(ledgerId: number): string {
  return `console-debit:${ledgerId}`;
}

/** holdConsoleDebit's outcome: `held`, or refused because the mirror is below the amount. */
export type DebitHoldOutcome = 'held' | 'insufficient_balance';

/** The member of the deadline set that names a reservation (settleReservations-9n.lua ARGV 4). */
export function deadlineMember(userId: number, requestId: string): string {
  return `${userId}:${requestId}`;
}

export const DEFAULT_REAPED_SLICE_HOLD_MS = 900_000;

export function currentMinute(nowMs = Date.now()): number {
  return Math.floor(nowMs / 60_000);
}

/** Reads the book-of-record values when a mirror is missing (first use, or after a Redis restart). */
export interface BalanceSource {
  accountQuota(userId: number): Promise<number>;
  /**
   * users.quota with the users.credit_seq of the same row read, so that a seeded mirror knows which
   * console changes it already holds. A source without it seeds with sequence 0.
   */
  accountSeed?(userId: number): Promise<{ quota: number; creditSeq: number; deleted?: boolean }>;
  /** tokens.remain_quota with the tokens.quota_seq of the same row read (see accountSeed). */
  tokenSeed?(tokenId: number): Promise<{ remain: number; quotaSeq: number; deleted?: boolean }>;
  tokenRemainQuota(tokenId: number): Promise<number>;
}

type ScriptFn = (...args: (string | number)[]) => Promise<unknown>;

/** The Redis keys of one API key that do not change between its requests. */
interface KeyKeys {
  userId: number;
  /** The account's shard's usage stream and deadline set (one global pair when unsharded). */
  stream: string;
  deadlines: string;
  balance: string;
  remain: string;
  /** The key's requests-per-minute and tokens-per-minute windows (sliding, not per clock minute). */
  rpm: string;
  tpm: string;
}

/** Filled by QuotaStore.reserve when it answers rpm_limited or tpm_limited: how long until the window has room. */
export interface RateLimitWait {
  ms: number;
  /** The window that refused was the group's for the account, not the key's own. */
  group?: boolean;
}

/** Cached KeyKeys at most; past it the cache starts over (it only saves string building). */
const KEY_CACHE_MAX = 10_000;

export class QuotaStore {
  readonly #redis: Redis;
  readonly #keys: RedisKeys;
  readonly #source: BalanceSource;
  readonly #reserve: ScriptFn;
  readonly #settleScript: BatchScriptFn;
  readonly #adjust: ScriptFn;
  readonly #adjustOnce: ScriptFn;
  readonly #adjustAccountOnce: ScriptFn;
  readonly #holdDebit: ScriptFn;
  readonly #releaseDebitHold: ScriptFn;
  readonly #seedBalance: ScriptFn;
  readonly #takeRateSlot: ScriptFn;
  readonly #keyKeys = new Map<number, KeyKeys>();
  readonly #settledMarkerSec: number;
  readonly #reapedSliceHoldMs: number;
  readonly #settleDelayMs: number;
  readonly #drawSettleDelayMs: number;
  /** When the queue's timer fires: a settlement that may not wait as long as the timer brings it forward. */
  #queueDueAt = 0;
  /** settleSoon's settlements not yet sent, with their callers' promises. */
  #queued: { s: SettleRequest; resolve: (settled: boolean) => void; reject: (err: unknown) => void }[] = [];
  #queueTimer: NodeJS.Timeout | null = null;
  readonly #settleDrawsScript: BatchScriptFn;
  readonly #releaseSlice: ScriptFn;
  /** Retires the credit slices when the connection is made again (credit-slices.ts retireAll); removed by stop(). */
  #onReady: (() => void) | null = null;
  readonly #slices: CreditSlices | null;
  /** Dates deadlines (a relay's reservations, its slices, the reaper's now): Redis's clock where one is given. */
  readonly clock: ReferenceClock;

  constructor(redis: Redis, keys: RedisKeys, source: BalanceSource, opts: QuotaStoreOptions = {}) {
    this.#redis = redis;
    this.#keys = keys;
    this.#source = source;
    this.clock = opts.clock ?? WALL_CLOCK;
    this.#settledMarkerSec = opts.settledMarkerSec ?? 0;
    this.#reapedSliceHoldMs = opts.reapedSliceHoldMs ?? DEFAULT_REAPED_SLICE_HOLD_MS;
    this.#settleDelayMs = opts.settleDelayMs ?? 2;
    this.#drawSettleDelayMs = Math.max(this.#settleDelayMs, opts.drawSettleDelayMs ?? 10);
    const defs = defineScripts(redis);
    const bind = (name: string, resendMoved = true): ScriptFn => {
      const command = defs.get(name)?.command;
      if (!command) throw new Error(`Lua script ${name} not found`);
      const script = (redis as unknown as Record<string, ScriptFn>)[command]!.bind(redis);
      // On a cluster a script answered MOVED (a slot moved under a batch ioredis does not redirect,
      // infra/redis/client.ts) is sent again once the slot table is reloaded: the node did not run it.
      return resendMoved ? resendingMoved(redis, script) : script;
    };
    // Its own resend (reserve): no closure per request on the hot path.
    this.#reserve = bind('reserveQuota', false);
    // Settlements are idempotent, so a MOVED one is sent again too, not left to the relay's retry.
    this.#settleScript = resendingMoved(redis, batchScript(redis, defs.get('settleReservations')!));
    this.#adjust = bind('adjustBalance');
    this.#adjustOnce = bind('adjustBalanceOnce');
    this.#adjustAccountOnce = bind('adjustAccountOnce');
    this.#holdDebit = bind('holdConsoleDebit');
    this.#releaseDebitHold = bind('releaseDebitHold');
    this.#seedBalance = bind('seedBalance');
    this.#takeRateSlot = bind('takeRateSlot');
    this.#settleDrawsScript = resendingMoved(redis, batchScript(redis, defs.get('settleSliceDraws')!));
    this.#releaseSlice = bind('releaseCreditSlice');
    const sliceOpts = opts.creditSlices;
    this.#slices = sliceOpts !== undefined && sliceOpts.requests > 0 && this.#settledMarkerSec === 0
      ? new CreditSlices(keys, {
        take: bind('takeCreditSlice'),
        release: this.#releaseSlice,
        renew: (held, deadlineMs) => this.#renewSlices(held, deadlineMs),
        seedAccount: (userId) => this.seedAccount(userId),
        beforeTake: () => { if (this.#queued.length > 0) this.#sendQueued(); },
      }, sliceOpts, opts.log, this.clock)
      : null;
    const slices = this.#slices;
    if (slices !== null) {
      this.#onReady = () => slices.retireAll();
      redis.on('ready', this.#onReady);
    }
  }

  /** The keys of (userId, tokenId), built once per key. */
  #keysOf(userId: number, tokenId: number): KeyKeys {
    let kk = this.#keyKeys.get(tokenId);
    if (kk === undefined || kk.userId !== userId) {
      if (this.#keyKeys.size >= KEY_CACHE_MAX) this.#keyKeys.clear();
      const k = this.#keys;
      const shard = k.shardOf(userId);
      kk = {
        userId, stream: k.usageStream(shard), deadlines: k.reservationDeadlines(shard),
        balance: k.accountBalance(userId), remain: k.tokenRemain(userId, tokenId),
        rpm: k.keyRequestsInWindow(userId, tokenId), tpm: k.keyTokensInWindow(userId, tokenId),
      };
      this.#keyKeys.set(tokenId, kk);
    }
    return kk;
  }

  /**
   * `limitWait`, when given, learns on rpm_limited or tpm_limited how long until the window that
   * refused has room, and whether it was the group's.
   */
  async reserve(r: ReserveRequest, limitWait?: RateLimitWait): Promise<ReserveOutcome> {
    const groupRpm = r.groupRpmLimit ?? 0;
    const groupTpm = r.groupTpmLimit ?? 0;
    const groupLimited = groupRpm > 0 || groupTpm > 0;
    // Per-key quotas and rate limits are checked in Redis per request; everything else may come from a slice.
    if (this.#slices !== null && !r.tokenLimited && (r.rpmLimit ?? 0) <= 0 && (r.tpmLimit ?? 0) <= 0 && !groupLimited && await this.#slices.draw(r)) return 'reserved';
    const k = this.#keys;
    const kk = this.#keysOf(r.userId, r.tokenId);
    if (groupLimited && r.group === undefined) throw new Error('reserve: a group limit needs the group');
    // Without group limits the script reads neither group window: the key's stand in (one slot).
    const keys = [
      kk.balance, kk.remain, k.reservation(r.userId, r.requestId), kk.rpm, kk.tpm, kk.deadlines,
      groupRpm > 0 ? k.accountRequestsInGroupWindow(r.userId, r.group!) : kk.rpm,
      groupTpm > 0 ? k.accountTokensInGroupWindow(r.userId, r.group!) : kk.tpm,
    ];
    const args = [
      r.amount, r.tokenLimited ? '1' : '0', r.deadlineMs, r.tokenId, r.rpmLimit ?? 0, r.tpmLimit ?? 0,
      r.userId, deadlineMember(r.userId, r.requestId), r.tokens ?? 0, r.nowMs ?? '', groupRpm, groupTpm,
    ];
    // Queued settlements go first, in the same write: their refunds count for this reservation.
    if (this.#queued.length > 0) this.#sendQueued();
    // At most one seed per mirror, then the script's answer is final.
    for (let attempt = 0; attempt < 3; attempt++) {
      let reply: unknown;
      try {
        reply = await this.#reserve(...keys, ...args);
      } catch (err) {
        // A MOVED: the node did not run the script. A slot moved (CLUSTER FAILOVER, a reshard) under a
        // batch that ioredis does not redirect (infra/redis/client.ts): sent again once the slot table
        // follows the MOVED, the request is served instead of refused with 529.
        reply = await resendAfterMoved(this.#redis, err, () => this.#reserve(...keys, ...args));
      }
      // A refusal by a rate-limit window comes with its wait and scope: [-7 or -8, ms, 1 if the group's].
      let code: number;
      if (Array.isArray(reply)) {
        code = Number(reply[0]);
        if (limitWait !== undefined) {
          limitWait.ms = Number(reply[1]);
          limitWait.group = Number(reply[2]) === 1;
        }
      } else {
        code = Number(reply);
      }
      const outcome = RESERVE_OUTCOME_OF_CODE.get(code);
      if (outcome !== undefined) return outcome;
      switch (code) {
        case QuotaScriptCode.BalanceNotLoaded:
          await this.seedAccount(r.userId);
          break;
        case QuotaScriptCode.TokenQuotaNotLoaded:
          await this.seedToken(r.userId, r.tokenId);
          break;
        default: throw new Error(`reserveQuota returned unexpected ${code}`);
      }
    }
    throw new Error('reserveQuota: balance mirror could not be loaded');
  }

  /**
   * Takes one of the key's `perMinute` token counts of `minute` (count_tokens, and prompt counts for
   * a reservation): false when they are spent. Moves no money.
   */
  async takeCountSlot(userId: number, tokenId: number, perMinute: number, minute = currentMinute()): Promise<boolean> {
    return Number(await this.#takeRateSlot(this.#keys.keyCountsInMinute(userId, tokenId, minute), perMinute, 120)) === 1;
  }

  /** Returns false when the reservation was already settled: the caller's second finish is a no-op. */
  async settle(s: SettleRequest): Promise<boolean> {
    return (await this.#settleShard([s]))[0]!;
  }

  /** The credit slice `requestId` was reserved from, for its settlement record; undefined when it has a reservation of its own. */
  sliceOf(requestId: string): SliceDraw | undefined {
    return this.#slices?.sliceOf(requestId);
  }

  /** Returns every credit slice this store holds whose requests are settled (a relay draining; tests before reading a balance). */
  returnSlices(): Promise<void> {
    return this.#slices?.returnAll() ?? Promise.resolve();
  }

  /** The account changed in the console: the slice its requests reserve from goes back (credit-slices.ts). */
  retireSlicesOf(userId: number): void {
    this.#slices?.retireAccount(userId);
  }

  /** Credit slices not yet returned. */
  get slicesHeld(): number {
    return this.#slices?.liveCount ?? 0;
  }

  /** Stops the credit slices' clock and listener (the connection is the caller's to close). */
  stop(): void {
    this.#slices?.stop();
    if (this.#onReady !== null) this.#redis.off('ready', this.#onReady);
    this.#onReady = null;
  }

  /**
   * settle, sent with the next reservation this store makes or after settleDelayMs (drawSettleDelayMs
   * for a request reserved from a credit slice), whichever comes first, together with the other
   * settlements queued meanwhile: one script call per shard. The relay
   * settles this way (its spool holds each settlement until Redis answers); a failed call fails every
   * settlement it carried, and each is tried again on its own.
   */
  settleSoon(s: SettleRequest): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.#queued.push({ s, resolve, reject });
      if (this.#queued.length >= SETTLE_BATCH_MAX) return this.#sendQueued();
      const delay = s.slice !== undefined || this.#slices?.isDraw(s.requestId) === true ? this.#drawSettleDelayMs : this.#settleDelayMs;
      const dueAt = Date.now() + delay;
      if (this.#queueTimer !== null) {
        if (dueAt >= this.#queueDueAt) return;
        clearTimeout(this.#queueTimer);
      }
      this.#queueDueAt = dueAt;
      this.#queueTimer = setTimeout(() => this.#sendQueued(), delay);
    });
  }

  #sendQueued(): void {
    if (this.#queueTimer !== null) {
      clearTimeout(this.#queueTimer);
      this.#queueTimer = null;
    }
    const queued = this.#queued;
    this.#queued = [];
    // A call per shard, each answering its own callers: one shard failing holds up no other.
    for (const list of this.#byShard(queued, (q) => q.s.userId).values()) {
      this.#settleShard(list.map((q) => q.s)).then(
        (settled) => { for (let i = 0; i < list.length; i++) list[i]!.resolve(settled[i]!); },
        (err: unknown) => { for (const q of list) q.reject(err); },
      );
    }
  }

  /** Settles several reservations, one script call per shard and SETTLE_BATCH_MAX. For each, in order, false when it was already settled. */
  async settleMany(list: readonly SettleRequest[]): Promise<boolean[]> {
    const settled: boolean[] = new Array<boolean>(list.length);
    const groups = this.#byShard(list.map((s, at) => ({ s, at })), (x) => x.s.userId);
    await Promise.all([...groups.values()].map(async (group) => {
      const results = await this.#settleShard(group.map((x) => x.s));
      for (let i = 0; i < group.length; i++) settled[group[i]!.at] = results[i]!;
    }));
    return settled;
  }

  /**
   * settleMany for the settlements of one shard (a script's keys must share a slot on a cluster):
   * those of requests reserved alone by settleReservations-9n.lua, those reserved from a credit slice
   * by settleSliceDraws-4n.lua, both calls in the same write.
   */
  async #settleShard(list: readonly SettleRequest[], attempt = 0): Promise<boolean[]> {
    const settled: boolean[] = new Array<boolean>(list.length);
    const calls: Promise<void>[] = [];
    // Lost reservations whose mirror the failover lost too (settleReservations-9n.lua -1, -2): at
    // their index, the mirror to load before they are sent again.
    const unloaded = new Map<number, number>();
    for (let i = 0; i < list.length; i += SETTLE_BATCH_MAX) {
      const end = Math.min(list.length, i + SETTLE_BATCH_MAX);
      const keys: string[] = [];
      const args: (string | number)[] = [];
      const at: number[] = [];
      let drawKeys: string[] | undefined;
      let drawArgs: (string | number)[] | undefined;
      const drawAt: number[] = [];
      for (let j = i; j < end; j++) {
        const s = list[j]!;
        // A lost draw's slice went with Redis's data: it is settled against the balance, as a reservation.
        const slice = s.lost === true ? undefined : s.slice ?? this.#slices?.sliceOf(s.requestId);
        if (slice === undefined) {
          this.#settleItem(s, 0, keys, args);
          at.push(j);
        } else {
          this.#settleDrawItem(s, slice, drawKeys ??= [], drawArgs ??= []);
          drawAt.push(j);
        }
      }
      if (at.length > 0) {
        calls.push((this.#settleScript(keys, args) as Promise<unknown[]>).then((results) => {
          for (let r = 0; r < results.length; r++) {
            const code = results[r];
            if (code === QuotaScriptCode.BalanceNotLoaded || code === QuotaScriptCode.TokenQuotaNotLoaded) unloaded.set(at[r]!, code);
            else settled[at[r]!] = code !== QuotaScriptCode.NoSuchReservation;
          }
        }));
      }
      if (drawAt.length > 0) {
        calls.push((this.#settleDrawsScript(drawKeys!, drawArgs!) as Promise<number[]>).then((results) => {
          for (let r = 0; r < results.length; r++) {
            const code = Number(results[r]);
            settled[drawAt[r]!] = code !== QuotaScriptCode.NoSuchReservation;
            this.#slices?.settled(list[drawAt[r]!]!.requestId, code);
          }
        }));
      }
    }
    await Promise.all(calls);
    if (unloaded.size > 0) {
      // At most one seed per mirror, as reserve() does; a failure leaves the call to be retried whole.
      if (attempt >= 2) throw new Error('settleReservations: a lost reservation\'s mirror could not be loaded');
      const again = [...unloaded.keys()];
      for (const [at, code] of unloaded) {
        const s = list[at]!;
        if (code === QuotaScriptCode.BalanceNotLoaded) await this.seedAccount(s.userId);
        else await this.seedToken(s.userId, s.tokenId);
      }
      const results = await this.#settleShard(again.map((at) => list[at]!), attempt + 1);
      for (let i = 0; i < again.length; i++) settled[again[i]!] = results[i]!;
    }
    return settled;
  }

  /** Appends one settlement of a request reserved from a credit slice: 4 keys and 3 arguments (settleSliceDraws-4n.lua). */
  #settleDrawItem(s: SettleRequest, slice: SliceDraw, keys: string[], args: (string | number)[]): void {
    const k = this.#keys;
    keys.push(k.accountBalance(s.userId), k.reservation(s.userId, slice.id), k.reapedReservation(s.userId, slice.id), this.usageStreamOf(s.userId));
    args.push(s.cost, s.eventJson, slice.draw);
  }

  /** Items grouped by their account's shard, in order within each. */
  #byShard<T>(items: readonly T[], userIdOf: (item: T) => number): Map<number, T[]> {
    const groups = new Map<number, T[]>();
    for (const item of items) {
      const shard = this.#keys.shardOf(userIdOf(item));
      const group = groups.get(shard);
      if (group === undefined) groups.set(shard, [item]);
      else group.push(item);
    }
    return groups;
  }

  /** `reaperNowMs` > 0: the reaper releasing, unless a relay renewed the deadline past it meanwhile. */
  async #settleOrRelease(s: SettleRequest, reaperNowMs: number, groupTpmWindow?: string): Promise<unknown> {
    const keys: string[] = [];
    const args: (string | number)[] = [];
    this.#settleItem(s, reaperNowMs, keys, args, groupTpmWindow);
    return ((await this.#settleScript(keys, args)) as unknown[])[0];
  }

  /**
   * Appends one settlement's 9 keys and 9 arguments (settleReservations-9n.lua). `groupTpmWindow`: the
   * reaper's, read from the reservation; otherwise built from s.tpmGroup.
   */
  #settleItem(s: SettleRequest, reaperNowMs: number, keys: string[], args: (string | number)[], groupTpmWindow?: string): void {
    const k = this.#keys;
    const kk = this.#keysOf(s.userId, s.tokenId);
    // Without a group window the key's stands in (one slot): the reservation names none, so none is corrected.
    const groupWindow = groupTpmWindow ?? (s.tpmGroup !== undefined ? k.accountTokensInGroupWindow(s.userId, s.tpmGroup) : kk.tpm);
    keys.push(kk.balance, kk.remain, k.reservation(s.userId, s.requestId), kk.stream, kk.tpm, kk.deadlines, k.reapedReservation(s.userId, s.requestId), k.settledReservations(s.userId), groupWindow);
    args.push(s.cost, s.eventJson, s.tokens ?? 0, deadlineMember(s.userId, s.requestId));
    if (reaperNowMs > 0) args.push('1', reaperNowMs, '', '', '');
    else if (this.#settledMarkerSec > 0 || s.lost === true) {
      const markerSec = this.#settledMarkerSec > 0 ? this.#settledMarkerSec : LOST_SETTLED_MARKER_SEC;
      // A settlement without both (spooled by an older relay) is never taken for a lost reservation.
      const lostUntil = s.limited === undefined || s.minute === undefined ? '' : s.minute * 60_000 + (markerSec - LOST_RESERVATION_MARGIN_SEC) * 1000;
      args.push('0', '', s.limited ? '1' : '0', markerSec, lostUntil);
    } else args.push('0', '', '', '', '');
  }

  /**
   * Releases reservations whose deadline passed (their relay died, or stopped renewing them for
   * RESERVATION_TTL_SEC): the whole amount goes back, and a late settlement still bills the actual
   * cost. `event` builds the error event logged for each release. Returns how many were released.
   */
  async releaseExpired(nowMs: number, limit: number, event: (r: ExpiredReservation) => string): Promise<number> {
    let released = 0;
    let failure: unknown = null;
    for (let shard = 0; shard < this.#keys.streamShards; shard++) {
      try {
        // A shard's pass is safe to run again whole (each release is idempotent): sent again after a
        // MOVED, a slot being moved, or a batch whose slots' groups split (a reshard).
        released += await retryOnMoved(this.#redis, () => this.#releaseExpiredOf(shard, nowMs, limit, event));
      } catch (err) {
        // One shard whose node fails holds back no other's releases (before, the first stopped the
        // pass: 15-24 s of reshard in which no shard's expired reservation came back).
        failure ??= err;
      }
    }
    if (failure !== null) throw failure;
    return released;
  }

  async #releaseExpiredOf(shard: number, nowMs: number, limit: number, event: (r: ExpiredReservation) => string): Promise<number> {
    const deadlines = this.#keys.reservationDeadlines(shard);
    const members = await this.#redis.zrangebyscore(deadlines, '-inf', nowMs, 'LIMIT', 0, limit);
    let released = 0;
    for (const member of members) {
      const sep = member.indexOf(':');
      const userId = Number(member.slice(0, sep));
      const requestId = member.slice(sep + 1);
      if (requestId.endsWith(SLICE_HOLD_SUFFIX)) {
        // What a reaped slice's tombstone held goes back: its relay did not come back to settle.
        const k = this.#keys;
        const sliceId = requestId.slice(0, -SLICE_HOLD_SUFFIX.length);
        const [code] = await this.#releaseSlice(
          k.reservation(userId, sliceId), k.accountBalance(userId), deadlines, k.reapedReservation(userId, sliceId), 'expire', 0, '', nowMs, member, 0,
        ) as [number, number];
        if (code === QuotaScriptCode.Ok) released++;
        else if (code === QuotaScriptCode.NoSuchReservation) await this.#redis.zrem(deadlines, member);
        continue;
      }
      const fields = await this.#redis.hmget(this.#keys.reservation(userId, requestId), 'token', 'amount', 'slice', 'hold', 'group_tpm_key');
      if (fields[3] === '1') {
        // A console debit hold whose console died before its commit's outcome was known: the amount
        // goes back unless the mirror step consumed it first (then this finds no hold); a debit that
        // did commit is applied by the billing follow-up, which finds no hold. No log row (no request).
        const [code] = await this.#releaseHold(userId, requestId, 'reap', nowMs);
        if (code === QuotaScriptCode.Ok) released++;
        else if (code === QuotaScriptCode.NoSuchReservation) await this.#redis.zrem(deadlines, member);
        continue;
      }
      if (fields[2] === '1') {
        // A relay's credit slice: its tombstone keeps what it settled, and holds its amount a while
        // longer for the requests its relay, if only paused, still runs; no log row (no request).
        const k = this.#keys;
        const [code] = await this.#releaseSlice(
          k.reservation(userId, requestId), k.accountBalance(userId), deadlines, k.reapedReservation(userId, requestId), 'reap', 0, member, nowMs,
          sliceHoldMember(userId, requestId), this.#reapedSliceHoldMs,
        ) as [number, number];
        if (code === QuotaScriptCode.Ok) released++;
        else if (code === QuotaScriptCode.NoSuchReservation) await this.#redis.zrem(deadlines, member);
        continue;
      }
      const expired: ExpiredReservation = { userId, requestId, tokenId: Number(fields[0] ?? 0), amount: Number(fields[1] ?? 0) };
      // The hold its group's tokens-per-minute window took goes too (a name the reservation wrote, in its slot).
      const result = await this.#settleOrRelease({ userId, tokenId: expired.tokenId, requestId, cost: 0, eventJson: event(expired) }, nowMs, fields[4] ?? undefined);
      if (result === QuotaScriptCode.DeadlineRenewed) continue;
      if (result !== QuotaScriptCode.NoSuchReservation) released++;
      else await this.#redis.zrem(deadlines, member);
    }
    return released;
  }

  /**
   * Loads a missing account mirror from Postgres with the credit sequence it was read with; a loaded
   * mirror is left alone. Returns whether it seeded. A read that a console change overtook is read
   * again (seedBalance-2.lua).
   */
  async seedAccount(userId: number): Promise<boolean> {
    const k = this.#keys;
    for (let attempt = 0; attempt < SEED_ATTEMPTS; attempt++) {
      const seed = this.#source.accountSeed !== undefined
        ? await this.#source.accountSeed(userId)
        : { quota: await this.#source.accountQuota(userId), creditSeq: 0 };
      const code = Number(await this.#seedBalance(k.accountBalance(userId), k.accountCreditSeq(userId), seed.quota, seed.creditSeq, seedTtl(seed)));
      if (code !== SEED_STALE) return code === 1;
    }
    return false;
  }

  /**
   * Moves the deadlines of open reservations to `deadlineMs` (the relay's heartbeat,
   * relay/messages/reservation-heartbeat.ts). XX: a reservation settled or released meanwhile is not
   * brought back. One ZADD per RENEW_BATCH reservations.
   */
  async renewDeadlines(held: readonly { userId: number; requestId: string }[], deadlineMs: number): Promise<void> {
    const slices = this.#slices;
    // A request reserved from a slice has no deadline of its own; the slices renew theirs on their own clock.
    return this.#renewDeadlines(slices === null ? held : held.filter((h) => !slices.isDraw(h.requestId)), deadlineMs);
  }

  /**
   * A relay's heartbeat for its credit slices: their deadlines, and those of the holds of any the
   * reaper took (their relay was paused, not dead), which only ever move later (GT): a hold runs
   * RESERVATION_TTL_SEC, far past a slice's deadline.
   */
  #renewSlices(held: readonly { userId: number; requestId: string }[], deadlineMs: number): Promise<void> {
    return this.#moveDeadlines(held, deadlineMs, (h) => [deadlineMember(h.userId, h.requestId), sliceHoldMember(h.userId, h.requestId)], 'GT');
  }

  #renewDeadlines(held: readonly { userId: number; requestId: string }[], deadlineMs: number): Promise<void> {
    return this.#moveDeadlines(held, deadlineMs, (h) => [deadlineMember(h.userId, h.requestId)]);
  }

  /** ZADD XX (and `gt`) of `membersOf` each held, to deadlineMs: one deadline set per shard, RENEW_BATCH held a call. */
  async #moveDeadlines(
    held: readonly { userId: number; requestId: string }[], deadlineMs: number,
    membersOf: (h: { userId: number; requestId: string }) => string[], gt?: 'GT',
  ): Promise<void> {
    for (const [shard, group] of this.#byShard(held, (h) => h.userId)) {
      for (let i = 0; i < group.length; i += RENEW_BATCH) {
        const args: (string | number)[] = [];
        for (let j = i; j < Math.min(group.length, i + RENEW_BATCH); j++) for (const m of membersOf(group[j]!)) args.push(deadlineMs, m);
        const key = this.#keys.reservationDeadlines(shard);
        await (gt === undefined ? this.#redis.zadd(key, 'XX', ...args) : this.#redis.zadd(key, 'XX', gt, ...args));
      }
    }
  }

  /** The usage stream an account's events go to (its shard's). */
  usageStreamOf(userId: number): string {
    return this.#keys.usageStream(this.#keys.shardOf(userId));
  }

  /** Applies a console-side change (top-up, admin quota edit) to a loaded account mirror. */
  adjustAccount(userId: number, delta: number): Promise<void> {
    return this.#adjustKey(this.#keys.accountBalance(userId), delta);
  }

  /**
   * Applies the account change recorded as ledger row `ledgerId` to a loaded mirror, once however
   * often it is called (the marker outlives any retry by far), and not at all when the mirror was
   * seeded after the change committed (`creditSeq` at most the seed's; null: a row without one). An
   * administrator's debit that took a hold before its commit (holdConsoleDebit) is already in the
   * mirror: its hold is consumed instead, with nothing given back (adjustAccountOnce-5.lua).
   */
  async adjustAccountOnce(userId: number, delta: number, ledgerId: number, creditSeq: number | null = null): Promise<void> {
    const k = this.#keys;
    const holdId = consoleDebitHoldId(ledgerId);
    await this.#adjustAccountOnce(
      k.accountBalance(userId), k.adjustmentApplied(userId, ledgerId), k.accountCreditSeq(userId),
      k.reservation(userId, holdId), k.reservationDeadlines(k.shardOf(userId)),
      delta, ADJUSTMENT_MARKER_TTL_SEC, creditSeq === null ? '' : creditSeq, deadlineMember(userId, holdId),
    );
  }

  /**
   * Takes a console debit hold of `amount` (> 0) from the account's mirror for ledger row `ledgerId`,
   * atomically against every reservation and credit slice (holdConsoleDebit-4.lua), until `deadlineMs`
   * (this store's clock). An unloaded mirror is seeded first, as reserve() does: from `committed` when
   * given (the account's committed users.quota and credit_seq, which the caller's transaction knows
   * under its row lock: no second Postgres connection from inside a transaction), else from Postgres.
   * 'insufficient_balance': nothing held.
   */
  async holdConsoleDebit(userId: number, ledgerId: number, amount: number, deadlineMs: number, committed?: { quota: number; creditSeq: number }): Promise<DebitHoldOutcome> {
    if (!Number.isSafeInteger(amount) || amount <= 0) throw new Error(`holdConsoleDebit: amount must be a whole number > 0, got ${amount}`);
    const k = this.#keys;
    const requestId = consoleDebitHoldId(ledgerId);
    for (let attempt = 0; attempt < SEED_ATTEMPTS; attempt++) {
      const code = Number(await this.#holdDebit(
        k.accountBalance(userId), k.reservation(userId, requestId), k.reservationDeadlines(k.shardOf(userId)), k.accountCreditSeq(userId),
        amount, deadlineMs, userId, deadlineMember(userId, requestId),
      ));
      if (code === QuotaScriptCode.Ok) return 'held';
      if (code === QuotaScriptCode.InsufficientBalance) return 'insufficient_balance';
      if (code !== QuotaScriptCode.BalanceNotLoaded) throw new Error(`holdConsoleDebit returned unexpected ${code}`);
      // A seed refused as stale (a later change reached Redis: not while the caller holds the row) falls back to Postgres.
      if (committed === undefined || attempt > 0 || Number(await this.#seedBalance(k.accountBalance(userId), k.accountCreditSeq(userId), committed.quota, committed.creditSeq)) === SEED_STALE) {
        await this.seedAccount(userId);
      }
    }
    throw new Error('holdConsoleDebit: balance mirror could not be loaded');
  }

  /**
   * Gives a console debit hold back (its transaction rolled back): once, with no log row. Returns what
   * went back to the mirror; 0 when there was no hold (never taken, consumed, released) or the mirror
   * is not the one it was taken from (releaseDebitHold-4.lua).
   */
  async releaseConsoleDebit(userId: number, ledgerId: number): Promise<number> {
    const [code, amount] = await this.#releaseHold(userId, consoleDebitHoldId(ledgerId), 'release', 0);
    return code === QuotaScriptCode.Ok ? amount : 0;
  }

  async #releaseHold(userId: number, requestId: string, mode: 'release' | 'reap', nowMs: number): Promise<[number, number]> {
    const k = this.#keys;
    const [code, amount] = await this.#releaseDebitHold(
      k.reservation(userId, requestId), k.accountBalance(userId), k.reservationDeadlines(k.shardOf(userId)), k.accountCreditSeq(userId),
      mode, deadlineMember(userId, requestId), nowMs,
    ) as [number, number];
    return [Number(code), Number(amount)];
  }

  /** seedAccount for a limited key's mirror, with the tokens.quota_seq it was read with. */
  async seedToken(userId: number, tokenId: number): Promise<boolean> {
    const k = this.#keys;
    for (let attempt = 0; attempt < SEED_ATTEMPTS; attempt++) {
      const seed = this.#source.tokenSeed !== undefined
        ? await this.#source.tokenSeed(tokenId)
        : { remain: await this.#source.tokenRemainQuota(tokenId), quotaSeq: 0 };
      const code = Number(await this.#seedBalance(k.tokenRemain(userId, tokenId), k.tokenQuotaSeq(userId, tokenId), seed.remain, seed.quotaSeq, seedTtl(seed)));
      if (code !== SEED_STALE) return code === 1;
    }
    return false;
  }

  /**
   * adjustAccountOnce for a key's remain_quota edit (key_quota_edits row `editId`, its tokens.quota_seq
   * `quotaSeq`): once however often the console and the follow-up try, not at all on a mirror seeded
   * after the edit committed.
   */
  async adjustTokenOnce(userId: number, tokenId: number, delta: number, editId: number, quotaSeq: number): Promise<void> {
    const k = this.#keys;
    await this.#adjustOnce(
      k.tokenRemain(userId, tokenId), k.keyQuotaEditApplied(userId, editId), k.tokenQuotaSeq(userId, tokenId),
      delta, ADJUSTMENT_MARKER_TTL_SEC, quotaSeq,
    );
  }

  /**
   * Debits a limited key's mirror by `debit` once (marker: the key and `ledgerId`), unless the mirror
   * was seeded from a Postgres state whose tokens.quota_seq is at least `quotaSeq` (it holds the debit
   * already); an unloaded mirror is only marked, and raises the sequence a seed must reach. The
   * billing worker's repair of debits a Redis restart took out of the mirror (billing/mirror-repair.ts);
   * adjustAccountOnce with a negative delta is its account side.
   */
  async debitTokenOnce(userId: number, tokenId: number, debit: number, ledgerId: number, quotaSeq: number): Promise<void> {
    const k = this.#keys;
    await this.#adjustOnce(
      k.tokenRemain(userId, tokenId), k.keyDebitApplied(userId, tokenId, ledgerId), k.tokenQuotaSeq(userId, tokenId),
      -debit, ADJUSTMENT_MARKER_TTL_SEC, quotaSeq,
    );
  }

  async #adjustKey(key: string, delta: number): Promise<void> {
    if (delta !== 0) await this.#adjust(key, delta);
  }

  /**
   * The account's mirror less the committed console debits it does not hold yet (`pending`: ledger
   * rows still follow_up_pending), or null when it is not loaded. A debit is held once its change
   * marker is set (adjustAccountOnce-5.lua), while its console debit hold is still there (the hold
   * took it from the mirror before the commit: holdConsoleDebit), or when the mirror was seeded from a
   * Postgres state that had it (its credit_seq at most the seed's). Read in one MULTI: the keys share
   * the account's slot.
   */
  async accountSpendable(userId: number, pending: readonly { ledgerId: number; creditSeq: number | null; delta: number }[]): Promise<number | null> {
    const k = this.#keys;
    return this.#mirrorLessPending('accountSpendable', k.accountBalance(userId), k.accountCreditSeq(userId),
      pending.map((p) => ({
        marker: k.adjustmentApplied(userId, p.ledgerId), seq: p.creditSeq, delta: p.delta,
        // A debit whose hold is still there (committed, its mirror step not run yet) is in the mirror.
        hold: p.delta < 0 ? k.reservation(userId, consoleDebitHoldId(p.ledgerId)) : undefined,
      })));
  }

  /**
   * accountSpendable for a limited key: its mirror (open reservations already taken off) less the
   * committed remain_quota edits it does not hold yet (`pending`: key_quota_edits rows still
   * follow_up_pending), or null when it is not loaded. An edit is held once its marker is set or when
   * the mirror was seeded from a tokens.quota_seq at least the edit's. One MULTI: one slot.
   */
  async tokenSpendable(userId: number, tokenId: number, pending: readonly { editId: number; quotaSeq: number; delta: number }[]): Promise<number | null> {
    const k = this.#keys;
    return this.#mirrorLessPending('tokenSpendable', k.tokenRemain(userId, tokenId), k.tokenQuotaSeq(userId, tokenId),
      pending.map((p) => ({ marker: k.keyQuotaEditApplied(userId, p.editId), seq: p.quotaSeq, delta: p.delta })));
  }

  /**
   * A mirror's value plus the committed changes it does not hold yet: those whose marker is unset and
   * whose sequence (null: none) is above the one the mirror was seeded at. Null when the mirror is not
   * loaded. The keys share one slot (an account's hash tag): one MULTI.
   */
  async #mirrorLessPending(label: string, mirrorKey: string, seqKey: string, pending: readonly { marker: string; seq: number | null; delta: number; hold?: string | undefined }[]): Promise<number | null> {
    const multi = this.#redis.multi().get(mirrorKey).get(seqKey);
    // One EXISTS per change: its marker, or its hold (a hash `hold` field) where it may have one.
    for (const p of pending) {
      if (p.hold === undefined) multi.exists(p.marker);
      else multi.exists(p.marker, p.hold);
    }
    const replies = await execOrThrow(multi, label);
    const value = replies[0]![1] as string | null;
    if (value === null) return null;
    const seededSeq = Number((replies[1]![1] as string | null) ?? -1);
    let missing = 0;
    pending.forEach((p, i) => {
      const held = Number(replies[2 + i]![1]) > 0 || (p.seq !== null && p.seq <= seededSeq);
      if (!held) missing += p.delta;
    });
    return Number(value) + missing;
  }

  /** The mirror's current value, or null when not loaded: for the relay after a refusal for balance (countCanHelp), tests and the bench audit. */
  async accountBalance(userId: number): Promise<number | null> {
    const v = await retryOnMoved(this.#redis, () => this.#redis.get(this.#keys.accountBalance(userId)));
    return v === null ? null : Number(v);
  }

  async tokenRemain(userId: number, tokenId: number): Promise<number | null> {
    const v = await retryOnMoved(this.#redis, () => this.#redis.get(this.#keys.tokenRemain(userId, tokenId)));
    return v === null ? null : Number(v);
  }

  /**
   * Takes one of the `perMinute` API-key writes (create, update, delete) an account may make in
   * `minute` (Unix minutes of the console's clock); false when they are spent. A refused write still
   * counts (takeRateSlot-1.lua). Bounds the key_quota_edits rows, adjustment markers and relay cache
   * invalidations one account can cause.
   */
  async takeApiKeyWriteSlot(userId: number, perMinute: number, minute: number): Promise<boolean> {
    return Number(await this.#takeRateSlot(this.#keys.apiKeyWritesInMinute(userId, minute), perMinute, 120)) === 1;
  }

  /** After a key's deletion committed: its mirror and seed sequence expire (DELETED_MIRROR_TTL_SEC). */
  async expireDeletedToken(userId: number, tokenId: number): Promise<void> {
    await this.#expireMirrors(userId, [], [tokenId]);
  }

  /**
   * After an account's deletion committed: its mirror, its seed sequence and those of its keys
   * (`tokenIds`) expire (DELETED_MIRROR_TTL_SEC). A key without a mirror (unlimited) costs a no-op.
   */
  async expireDeletedAccount(userId: number, tokenIds: readonly number[]): Promise<void> {
    const k = this.#keys;
    await this.#expireMirrors(userId, [k.accountBalance(userId), k.accountCreditSeq(userId)], tokenIds);
  }

  async #expireMirrors(userId: number, accountKeys: readonly string[], tokenIds: readonly number[]): Promise<void> {
    const k = this.#keys;
    const all = [...accountKeys, ...tokenIds.flatMap((tokenId) => [k.tokenRemain(userId, tokenId), k.tokenQuotaSeq(userId, tokenId)])];
    // Every key is in the account's slot: a MULTI is valid on a cluster too.
    for (let i = 0; i < all.length; i += EXPIRE_KEYS_PER_MULTI) {
      const multi = this.#redis.multi();
      for (const key of all.slice(i, i + EXPIRE_KEYS_PER_MULTI)) multi.expire(key, DELETED_MIRROR_TTL_SEC);
      await execOrThrow(multi, 'expiring mirrors');
    }
  }

  /**
   * Removes the markers of key quota edits (adjustTokenOnce) whose key_quota_edits rows were pruned:
   * done, so neither the console nor the follow-up applies them again (billing/key-quota-edit-pruning.ts).
   * One UNLINK per account (its keys share a slot); returns how many markers existed.
   */
  async forgetKeyQuotaEdits(edits: readonly { userId: number; editId: number }[]): Promise<number> {
    const byUser = new Map<number, string[]>();
    for (const e of edits) {
      const list = byUser.get(e.userId) ?? [];
      list.push(this.#keys.keyQuotaEditApplied(e.userId, e.editId));
      byUser.set(e.userId, list);
    }
    const removed = await Promise.all([...byUser.values()].map((markers) => this.#redis.unlink(...markers)));
    return removed.reduce((a, b) => a + b, 0);
  }
}
