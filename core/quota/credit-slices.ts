// Credit held by the relay: instead of one Redis round trip per request to reserve its estimate, a
// relay takes a slice of an account's balance (takeCreditSlice-3.lua) and reserves the account's next
// requests from it in memory. On this machine a round trip costs Redis more CPU than any script in it
// (docs/performance.md, "the Redis round-trip floor"), so fewer round trips than requests is what brings
// Redis's work per request down; it also spares the relay an ioredis command per request.
//
// Money stays exact because a slice is a reservation like any other: its amount left the balance when
// it was taken, each request reserved from it is settled against it (settleSliceDraws-4n.lua: the cost
// debited from the slice, the usage event appended, once per request), and what is left goes back when
// the slice is returned (releaseCreditSlice-4.lua). A relay that stops renewing its slices leaves
// them to the reaper, which makes each a tombstone, so a late settlement (the resumed relay's, or a
// replay from its spool) bills once, and holds its amount for the reservations' TTL before giving it
// back: a relay only paused (a SIGSTOP, a VM frozen, cut from Redis) still runs requests reserved
// from it that Redis knows nothing of, and given back at once the amount was spent twice (the
// balance went below zero).
//
// What a slice does not do: limited keys and keys with rate limits reserve per request (their checks
// are per key, in Redis); nor do accounts whose balance is below `balanceShare` slices (the script
// refuses, the caller reserves the request alone), so a relay never sits on a large share of an
// account near its end, and "insufficient balance" is decided by Redis for those. A slice is
// retired once it is idle for `idleMs`, older than `maxAgeMs`, too small for the next request, or its
// account changed in the console; a retired slice keeps only what its running requests reserved
// ('trim') and is returned once they are settled.
import type { Logger } from '../../infra/logger.js';
import type { RedisKeys } from '../../infra/redis/keys.js';
import { QuotaScriptCode } from './quota-outcomes.js';
import { WALL_CLOCK, type ReferenceClock } from './redis-clock.js';

export interface CreditSliceOptions {
  /**
   * A slice holds this many times the estimate of the request that takes it; 0 turns slices off. An
   * account that spends its slice within `idleMs` gets one twice as large next time, up to
   * SLICE_GROWTH_MAX times this: a busy account costs a round trip per hundreds of requests, a quiet
   * one holds little.
   */
  requests: number;
  /** A slice is only taken from a balance of at least this many slices. */
  balanceShare: number;
  /** A slice nothing reserved from for this long is returned. */
  idleMs: number;
  /** A slice is retired this long after it was taken, however busy. */
  maxAgeMs: number;
  /**
   * A slice's deadline is this far ahead, renewed every third of it while the relay lives: past it
   * (plus the reaper's interval) the reaper takes the slice, which no request is reserved from any
   * more; what it held comes back once the relay settles its requests, or after RESERVATION_TTL_SEC
   * if the relay does not come back.
   */
  ttlMs: number;
  /**
   * An account takes a slice once this many of its requests came each within `busyGapMs` of the one
   * before: a quiet account's requests are reserved one by one, since a slice would cost it a take
   * and a return (two round trips) for the one or two requests it serves.
   */
  busyStreak: number;
  busyGapMs: number;
}

export const DEFAULT_CREDIT_SLICE_OPTIONS: CreditSliceOptions = {
  requests: 16, balanceShare: 8, idleMs: 1000, maxAgeMs: 10_000, ttlMs: 15_000, busyStreak: 4, busyGapMs: 100,
};

/**
 * The options a relay runs with: `requests` per slice and a deadline `ttlMs` ahead (its
 * configuration), the rest the defaults. A slice is reserved from for two thirds of its deadline at
 * most (10 s of the default 15 s): a deadline set shorter than the default age must shorten the age
 * too, or the reaper would take a slice its relay is still reserving from when nothing paused it.
 */
export function creditSliceOptions(requests: number, ttlMs: number): CreditSliceOptions {
  const maxAgeMs = Math.min(DEFAULT_CREDIT_SLICE_OPTIONS.maxAgeMs, Math.floor((ttlMs * 2) / 3));
  return { ...DEFAULT_CREDIT_SLICE_OPTIONS, requests, ttlMs, maxAgeMs };
}

/** What a draw needs of a reservation request (QuotaStore's ReserveRequest). */
export interface SliceDrawRequest {
  userId: number;
  requestId: string;
  amount: number;
}

type ScriptFn = (...args: (string | number)[]) => Promise<unknown>;

export interface CreditSliceScripts {
  take: ScriptFn;
  release: ScriptFn;
  /** Moves the deadlines of these reservations (the live slices) to deadlineMs, only where they exist. */
  renew(held: readonly { userId: number; requestId: string }[], deadlineMs: number): Promise<void>;
  /** Loads a missing account mirror from Postgres (QuotaStore.seedAccount). */
  seedAccount(userId: number): Promise<boolean>;
  /** Called before a slice is taken: settlements waiting to go go in the same write (their refunds count). */
  beforeTake(): void;
}

interface Slice {
  readonly userId: number;
  /** The slice's reservation id (`slice-<relay>-<n>`): its hash is keys.reservation(userId, id). */
  readonly id: string;
  /** How many estimates it was taken for (CreditSliceOptions.requests, grown for a busy account). */
  readonly requests: number;
  /** What requests may still reserve from it. */
  available: number;
  /** Requests reserved from it so far: each one's number is its record in the slice (settleSliceDraws-4n.lua). */
  drawn: number;
  /** Requests reserved from it whose settlement Redis has not yet taken, and what they reserved. */
  open: number;
  openAmount: number;
  readonly takenAt: number;
  lastDrawAt: number;
  retired: boolean;
  /** The trim or return call on its way, if any. */
  releasing: Promise<void> | null;
  trimmed: boolean;
}

interface Draw {
  readonly slice: Slice;
  readonly amount: number;
  /** Its settlement's reference to the slice: the slice's id and the draw's number in it. */
  readonly ref: SliceDraw;
}

/** Which slice a request was reserved from, and its number there (its record in the slice's hash). */
export interface SliceDraw {
  readonly id: string;
  readonly draw: number;
}

/** What ends the request id of a reaped slice's hold in the deadline set (never a request's or a slice's id). */
export const SLICE_HOLD_SUFFIX = '~held';

/**
 * The member of the deadline set that names what a reaped slice's tombstone holds
 * (releaseCreditSlice-4.lua 'reap'), as quota-store.ts's deadlineMember names a reservation.
 */
export function sliceHoldMember(userId: number, sliceId: string): string {
  return `${userId}:${sliceId}${SLICE_HOLD_SUFFIX}`;
}

/** How many times `requests` a slice may grow to for a busy account. */
export const SLICE_GROWTH_MAX = 16;

export class CreditSlices {
  readonly #keys: RedisKeys;
  readonly #scripts: CreditSliceScripts;
  readonly #opts: CreditSliceOptions;
  readonly #log: Logger | undefined;
  /** Dates the slices' deadlines (Redis's clock on a relay: the reaper compares them with it); the rest of their timing is local. */
  readonly #clock: ReferenceClock;
  /** Slice ids are unique per process and time, so a restarted relay never takes an id its predecessor held. */
  readonly #idPrefix = `slice-${process.pid.toString(36)}${Date.now().toString(36)}-`;
  #seq = 0;
  /** The slice each account's requests reserve from now. */
  readonly #current = new Map<number, Slice>();
  /** Every slice not yet returned: current, retired with running requests, or being returned. */
  readonly #live = new Set<Slice>();
  readonly #draws = new Map<string, Draw>();
  /** A take in flight per account: the requests arriving meanwhile wait for it rather than take their own. */
  readonly #taking = new Map<number, Promise<Slice | null>>();
  /** Accounts without a slice: when their last request came, and how many came each within busyGapMs of the last. */
  readonly #arrivals = new Map<number, { at: number; streak: number }>();
  readonly #timer: NodeJS.Timeout;
  #renewedAt = Date.now();
  #renewing = false;

  constructor(keys: RedisKeys, scripts: CreditSliceScripts, opts: CreditSliceOptions, log?: Logger, clock: ReferenceClock = WALL_CLOCK) {
    this.#keys = keys;
    this.#clock = clock;
    this.#scripts = scripts;
    this.#opts = opts;
    this.#log = log;
    this.#timer = setInterval(() => this.sweep(Date.now()), Math.max(10, Math.floor(Math.min(opts.idleMs / 4, opts.ttlMs / 3))));
    this.#timer.unref();
  }

  /**
   * Reserves `r.amount` from the account's slice, taking one when there is none or it is too small.
   * False: no slice could be had (balance too low for one, or the amount is 0); the caller reserves
   * the request alone. Throws when Redis fails.
   */
  async draw(r: SliceDrawRequest): Promise<boolean> {
    if (r.amount <= 0) return false;
    const now = Date.now();
    const current = this.#current.get(r.userId);
    if (current !== undefined && this.#drawFrom(current, r, now)) return true;
    if (current === undefined && !this.#busy(r.userId, now)) return false;
    // Spent within idleMs of its take: the account is busy, and its next slice twice as large.
    const base = this.#opts.requests;
    const requests = current !== undefined && now - current.takenAt < this.#opts.idleMs ? Math.min(current.requests * 2, base * SLICE_GROWTH_MAX) : base;
    for (let attempt = 0; attempt < 2; attempt++) {
      const taken = await this.#take(r, requests);
      if (taken === null) return false;
      if (this.#drawFrom(taken, r, Date.now())) return true;
    }
    return false;
  }

  /** Counts a request of an account without a slice: true once the account is busy enough for one. */
  #busy(userId: number, now: number): boolean {
    const a = this.#arrivals.get(userId);
    if (a === undefined) {
      this.#arrivals.set(userId, { at: now, streak: 1 });
      return this.#opts.busyStreak <= 1;
    }
    a.streak = now - a.at <= this.#opts.busyGapMs ? a.streak + 1 : 1;
    a.at = now;
    return a.streak >= this.#opts.busyStreak;
  }

  #drawFrom(s: Slice, r: SliceDrawRequest, now: number): boolean {
    if (s.retired) return false;
    if (s.available < r.amount || now - s.takenAt >= this.#opts.maxAgeMs) {
      this.#retire(s);
      return false;
    }
    s.available -= r.amount;
    s.open++;
    s.openAmount += r.amount;
    s.lastDrawAt = now;
    this.#draws.set(r.requestId, { slice: s, amount: r.amount, ref: { id: s.id, draw: ++s.drawn } });
    return true;
  }

  #take(r: SliceDrawRequest, requests: number): Promise<Slice | null> {
    const inFlight = this.#taking.get(r.userId);
    if (inFlight !== undefined) return inFlight;
    const taking = this.#takeSlice(r, requests).finally(() => this.#taking.delete(r.userId));
    this.#taking.set(r.userId, taking);
    return taking;
  }

  async #takeSlice(r: SliceDrawRequest, grownRequests: number): Promise<Slice | null> {
    let requests = grownRequests;
    const id = this.#idPrefix + (++this.#seq).toString(36);
    const k = this.#keys;
    const shard = k.shardOf(r.userId);
    for (let attempt = 0; attempt < 3; attempt++) {
      const size = r.amount * requests;
      if (!Number.isSafeInteger(size * this.#opts.balanceShare)) return null;
      this.#scripts.beforeTake();
      let code: number;
      try {
        code = Number(await this.#scripts.take(
          k.accountBalance(r.userId), k.reservation(r.userId, id), k.reservationDeadlines(shard),
          size, size * this.#opts.balanceShare, this.#clock.now() + this.#opts.ttlMs, r.userId, `${r.userId}:${id}`,
        ));
      } catch (err) {
        // Timed out or cut off: Redis may still run the script (a stalled server runs what it queued
        // once it resumes). The slice is given back as one that may exist: returning one that does not
        // changes nothing.
        const maybe = this.#newSlice(r.userId, id, 0, requests);
        maybe.retired = true;
        this.#live.add(maybe);
        this.#release(maybe);
        throw err;
      }
      if (code === QuotaScriptCode.BalanceNotLoaded) {
        await this.#scripts.seedAccount(r.userId);
        continue;
      }
      if (code === QuotaScriptCode.InsufficientBalance && requests > this.#opts.requests) {
        // Too much of this balance for a grown slice: one of the first size may still be had.
        requests = this.#opts.requests;
        continue;
      }
      if (code !== QuotaScriptCode.Ok) return null;
      const s = this.#newSlice(r.userId, id, size, requests);
      const before = this.#current.get(r.userId);
      if (before !== undefined) this.#retire(before);
      this.#current.set(r.userId, s);
      this.#live.add(s);
      return s;
    }
    return null;
  }

  #newSlice(userId: number, id: string, size: number, requests: number): Slice {
    const now = Date.now();
    return { userId, id, requests, available: size, drawn: 0, open: 0, openAmount: 0, takenAt: now, lastDrawAt: now, retired: false, releasing: null, trimmed: false };
  }

  /** The slice a request was reserved from (its settlement names it, so a replay from the spool finds it), or undefined. */
  sliceOf(requestId: string): SliceDraw | undefined {
    return this.#draws.get(requestId)?.ref;
  }

  /**
   * Redis took a draw's settlement (settleSliceDraws-4n.lua's `code`): the slice no longer waits for
   * it. A slice the reaper had released is retired and forgotten.
   */
  settled(requestId: string, code: number): void {
    const d = this.#draws.get(requestId);
    if (d === undefined) return;
    this.#draws.delete(requestId);
    const s = d.slice;
    s.open--;
    s.openAmount -= d.amount;
    // Reaped: retired; once its last request is settled, its return gives back what its tombstone holds.
    if (code === QuotaScriptCode.SettledAgainstBalance) this.#retire(s);
    else if (s.retired && s.open === 0) this.#release(s);
  }

  /** Whether the request was reserved from a slice (it has no reservation of its own). */
  isDraw(requestId: string): boolean {
    return this.#draws.has(requestId);
  }

  /**
   * Retires every slice: the connection to Redis was made again, and a Redis that restarted without
   * its data no longer has them, so none may be reserved from on faith. Those Redis still has go back.
   */
  retireAll(): void {
    for (const s of this.#live) this.#retire(s);
  }

  /** The account changed in the console (a lowered quota, a disabled user): its slice goes back. */
  retireAccount(userId: number): void {
    const s = this.#current.get(userId);
    if (s !== undefined) this.#retire(s);
  }

  /** Retires idle and old slices, trims retired ones to their running requests, returns finished ones, renews the rest. */
  sweep(now: number): void {
    if (now - this.#renewedAt >= this.#opts.ttlMs / 3) this.#renew(now);
    for (const [userId, a] of this.#arrivals) if (now - a.at > this.#opts.busyGapMs) this.#arrivals.delete(userId);
    for (const s of this.#live) {
      if (!s.retired && (now - s.lastDrawAt >= this.#opts.idleMs || now - s.takenAt >= this.#opts.maxAgeMs)) this.#retire(s);
      else if (s.retired && s.releasing === null) this.#release(s);
    }
  }

  /**
   * Retires every slice and returns those with no running request, waiting for Redis's answers: a
   * draining relay calls it once its settlements are taken, and the test harness before it reads
   * balances. A slice still busy is left to the next sweep (or the reaper).
   */
  async returnAll(): Promise<void> {
    for (const s of this.#live) this.#markRetired(s);
    // A call already on its way (the sweep's, or a trim whose last request settled meanwhile) is
    // waited for, and what it left to return returned.
    for (let pass = 0; pass < 3; pass++) {
      const idle = [...this.#live].filter((s) => s.open === 0);
      if (idle.length === 0) return;
      await Promise.all(idle.map((s) => this.#releaseNow(s)));
    }
  }

  /** Slices not yet returned (for metrics and tests). */
  get liveCount(): number {
    return this.#live.size;
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  #renew(now: number): void {
    if (this.#renewing || this.#live.size === 0) return;
    this.#renewing = true;
    const held: { userId: number; requestId: string }[] = [];
    for (const s of this.#live) held.push({ userId: s.userId, requestId: s.id });
    this.#scripts.renew(held, this.#clock.now() + this.#opts.ttlMs).then(
      () => { this.#renewedAt = now; },
      (err: unknown) => this.#log?.warn({ err: (err as Error).message, slices: held.length }, 'credit slice deadlines not renewed; the next sweep tries again'),
    ).finally(() => { this.#renewing = false; });
  }

  /** No request is reserved from the slice any more (returnAll, #retire). */
  #markRetired(s: Slice): void {
    s.retired = true;
    if (this.#current.get(s.userId) === s) this.#current.delete(s.userId);
  }

  /** Retires the slice and gives back what it need not keep (trim or return). */
  #retire(s: Slice): void {
    this.#markRetired(s);
    if (s.releasing === null) this.#release(s);
  }

  #forget(s: Slice): void {
    this.#live.delete(s);
    this.#markRetired(s);
  }

  /** Trims a retired slice with running requests to what they reserved, or returns one without. */
  #release(s: Slice): void {
    // A call on its way already has its own warning; #releaseNow decides whether one is due.
    if (s.releasing !== null) return;
    this.#releaseNow(s).catch((err: unknown) => {
      this.#log?.warn({ err: (err as Error).message, slice: s.id }, 'credit slice not returned yet; the next sweep tries again');
    });
  }

  #releaseNow(s: Slice): Promise<void> {
    if (s.releasing !== null) return s.releasing;
    if (s.open > 0 && s.trimmed) return Promise.resolve();
    const trim = s.open > 0;
    s.releasing = this.#releaseCall(s, trim).finally(() => {
      s.releasing = null;
      // Its last request settled while the trim was on its way: the return follows.
      if (trim && s.trimmed && s.open === 0 && this.#live.has(s)) this.#release(s);
    });
    return s.releasing;
  }

  async #releaseCall(s: Slice, trim: boolean): Promise<void> {
    const k = this.#keys;
    await this.#scripts.release(
      k.reservation(s.userId, s.id), k.accountBalance(s.userId), k.reservationDeadlines(k.shardOf(s.userId)),
      k.reapedReservation(s.userId, s.id), trim ? 'trim' : 'return', trim ? s.openAmount : 0, `${s.userId}:${s.id}`, '',
      sliceHoldMember(s.userId, s.id), 0,
    );
    if (!trim) return this.#forget(s);
    s.trimmed = true;
    s.available = 0;
    // A trim that found the slice reaped meanwhile ("no such slice": its tombstone holds the amount)
    // does not forget it: the return that follows its last settlement (#releaseNow's finally, or
    // settled()) gives the hold back, or finds nothing and forgets it. Forgotten here, the hold stayed
    // until the reaper's expire (RESERVATION_TTL_SEC) when the last draws settled while the trim was
    // on its way (review of this change).
  }
}
