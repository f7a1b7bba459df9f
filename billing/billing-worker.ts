// Consumes the usage stream through a consumer group and settles each batch: Postgres (the money,
// idempotent by request id, and the batch's log rows into log_outbox in the same transaction), then
// XACK + XDEL. An entry is acknowledged only after Postgres committed; if this process dies in
// between, the entry stays pending and another worker claims it after BILLING_CLAIM_IDLE_MS, and
// replaying it is harmless. A separate loop drains log_outbox into ClickHouse, so a ClickHouse outage
// delays the log rows only, never the debits or the acknowledgements.
//
// Sharded key layout (REDIS_SHARDS > 0, a Redis Cluster): each shard has its own stream. The worker
// holds leases on a fair share of the shards (shard-leases.ts: no shard read by two workers at once),
// reads each held stream without blocking (a blocking read would hold a cluster node's connection),
// settles what all of them gave in one Postgres batch, and acknowledges each shard's entries by a
// script on that shard's slot; with nothing to read it waits BILLING_BLOCK_MS. A shard whose read fails
// (its node failing over) is read again after a backoff of its own while the others are billed on
// (#nextSharded, #shardReadsFailed). A shard it gains is read from its pending entries first: those
// the worker that held it before read and never acknowledged are claimed at once, not after
// BILLING_CLAIM_IDLE_MS (the lease says their reader no longer holds the shard; if it is still
// finishing a batch, the ledger's unique request id makes the overlap harmless).
//
// Redis at maxmemory (noeviction): billing is what frees Redis memory (settled entries are deleted), so
// everything it needs to go on runs there too. Its reads, acknowledgements and group creation are Lua
// scripts flagged allow-oom (billing/lua/), none of them a MULTI (Redis refuses every command queued in
// one at the limit, EXECABORT); a dead letter, which may take memory, is refused then, and its entry
// stays pending until billing has freed enough (docs/billing.md, "Redis memory").
import { randomUUID } from 'node:crypto';
import type { ClickHouseClient } from '@clickhouse/client';
import type { Redis } from 'ioredis';
import { isMoved, pointSlotAsMoved, refreshSlots, retryOnMoved } from '../infra/redis/client.js';
import type { Logger } from '../infra/logger.js';
import type { Sql } from '../infra/postgres/client.js';
import type { RedisKeys } from '../infra/redis/keys.js';
import { ShardLeases } from './shard-leases.js';
import { drainLogOutbox, LogStoreError, logOutboxBacklog, OUTBOX_VACUUM_ROWS, vacuumLogOutbox } from './log-outbox.js';
import { settleBatch, type SettledEvent } from './settle-batch.js';
import { decodeUsageEvent, encodedUsageEventOf, encodedUsageEventsOf, withEncodedUsageEvent, type UsageEvent } from '../core/usage/usage-event.js';
import { billingMetrics } from './metrics/billing-metrics.js';
import { INCARNATION_FIELD, lostDebits, repairMirrors, type LostDebit } from './mirror-repair.js';
import type { QuotaStore } from '../core/quota/quota-store.js';
import type { ReferenceClock } from '../core/quota/redis-clock.js';
import { usageScripts, type DeadLetterFields, type UsageRead, type UsageScripts } from './usage-scripts.js';
import { ConsumerPruner } from './consumer-pruning.js';

export const BILLING_GROUP = 'billing';

export interface BillingWorkerOptions {
  stream: string;
  deadLetterStream: string;
  consumer: string;
  batchSize: number;
  blockMs: number;
  claimIdleMs: number;
  /**
   * Shortest time between the starts of two partial batches. Under steady load this turns many
   * inserts of a few rows into fewer, larger ones (ClickHouse prefers that, and an embedded one on the
   * same cores competes with the relay for CPU), at the price of up to this much billing lag.
   */
  minBatchIntervalMs: number;
  /**
   * The log outbox's own clock: queued log rows go to ClickHouse once per this many ms (a row waits at
   * most about this long), in inserts of up to `logBatchSize` rows, apart from the settlements'
   * cadence above. ClickHouse's cost is per insert statement, so a slower clock here saves its CPU
   * without touching the billing lag, which ends at the Postgres commit. 0 (the default): a pass after
   * every settled batch.
   */
  logFlushIntervalMs?: number;
  /**
   * Rows per ClickHouse insert; this many rows settled by this worker since the last pass start one
   * at once, without waiting for the clock. Default max(batchSize, 5000).
   */
  logBatchSize?: number;
  /**
   * The log outbox is vacuumed by this worker once it has sent this many rows since its last vacuum
   * (log-outbox.ts vacuumLogOutbox). Default OUTBOX_VACUUM_ROWS.
   */
  outboxVacuumRows?: number;
  /**
   * Sharded layout: consume the shards' streams (keys.usageStream(shard)) under leases of this length
   * instead of `stream`; `redis` must then be an ordinary (non-blocking) connection.
   */
  /** `clock` dates the workers' registrations (billing/service.ts: Redis's, as the reaper's). */
  sharded?: { keys: RedisKeys; leaseMs: number; clock?: ReferenceClock };
  /**
   * Each read learns, in the same script, which Redis data (keys.redisIncarnation) its entries were
   * debited in, and debits that a Redis restart took out of the mirrors before the commit are put back
   * after it (mirror-repair.ts). Without it, batches are settled with no such repair.
   */
  mirrors?: { keys: RedisKeys; quota: QuotaStore };
  /**
   * Whether the Redis read from (and the mirrors' Redis) holds this database's accounts, asked of the
   * current servers when a connection came back since the last answer (core/quota/database-binding.ts
   * RedisBindingWatch). Nothing read is settled, nor any mirror repaired, while it answers false: a
   * Redis swapped under the worker (another gateway's backup restored, an address naming another
   * server) holds another database's usage, which settled here would move this database's money.
   */
  ownRedis?: () => Promise<boolean>;
}

/** Entries read from one stream, acknowledged together. */
interface StreamBatch {
  stream: string;
  deadLetterStream: string;
  entries: Entry[];
  /** The shard it was read from (sharded layout). */
  shard?: number;
  /** The Redis data the entries were read from (mirrors configured), and the key naming it. */
  incarnation?: string;
  incarnationKey?: string;
}

type Entry = [id: string, fields: string[]];
/** An entry as a read returns it: fields null for a pending entry deleted from the stream (#withoutDeleted). */
type ReadEntry = [id: string, fields: string[] | null];

function groupLost(err: unknown): boolean {
  const m = String((err as Error)?.message ?? err);
  return m.startsWith('NOGROUP') || m.startsWith('UNBLOCKED');
}

/** Redis refused a command for want of memory (maxmemory reached under noeviction). */
export function isOutOfMemory(err: unknown): boolean {
  return String((err as Error)?.message ?? err).startsWith('OOM');
}

/**
 * How long entries whose dead letters could not be written wait before they are read again, doubled
 * at each failure up to the maximum: they must not be read first at every round, which would hold
 * back the entries behind them (and, at maxmemory, the very acknowledgements that free memory).
 */
const DEAD_LETTER_RETRY_MS = 500;
const DEAD_LETTER_RETRY_MAX_MS = 30_000;

/** A shard whose read failed is read again after this long, doubled at each failure in a row up to the maximum. */
const SHARD_RETRY_MS = 100;
const SHARD_RETRY_MAX_MS = 5000;

export interface BatchReport {
  /** Stream entries read (a relay's settlement call appends its events as one entry). */
  entries: number;
  /** Events in them, decodable or not. */
  events: number;
  applied: number;
  replayed: number;
  rejected: number;
}

export class BillingWorker {
  readonly #redis: Redis;
  readonly #scripts: UsageScripts;
  /** The data id each incarnation key held at this worker's last read (readUsageEntries-2.lua ARGV[7]). */
  readonly #lastIncarnation = new Map<string, string>();
  readonly #sql: Sql;
  readonly #ch: ClickHouseClient;
  readonly #log: Logger;
  readonly #opts: BillingWorkerOptions;
  #running = false;
  #loop: Promise<void> | null = null;
  #lastClaim = 0;
  #drainLoop: Promise<void> | null = null;
  #drainRequested = false;
  /** Log rows this worker queued since its last outbox pass started (a full insert's worth starts one). */
  #queuedSincePass = 0;
  /** ClickHouse failing: batches do not cut the backoff short, and stop skips the last pass. */
  #drainFailing = false;
  /** Rows this worker sent to ClickHouse since it last vacuumed the outbox. */
  #sentSinceVacuum = 0;
  #wake: (() => void) | null = null;
  /**
   * Events per stream entry in the last batch read: a relay's settlement call appends its events as
   * one entry (up to SETTLE_BATCH_MAX; about a dozen at 2,000 req/s in the bench), a console change or
   * the reaper one each. Reads ask for about batchSize events' worth of entries (#entriesPerRead).
   * Before the first batch it is taken as 16: a first read into a backlog of full entries then holds
   * at most SETTLE_BATCH_MAX / 16 = 8 times batchSize events, and a first read of single events does
   * not count as a full batch (which would skip minBatchIntervalMs).
   */
  #eventsPerEntry = 16;
  #leases: ShardLeases | null = null;
  #nextLeaseRefresh = 0;
  /** Held shards whose own pending entries are read before new ones (just gained, or after a failure). */
  readonly #readPending = new Set<number>();
  readonly #lastClaimOf = new Map<number, number>();
  /** Shards gained since their pending entries were last all claimed (#nextSharded). */
  readonly #claimOnGain = new Set<number>();
  /** Shards whose last read failed: when each is read again, and the wait that set (doubled at each failure). */
  readonly #shardRetry = new Map<number, { at: number; wait: number }>();
  /** Mirror repairs whose Redis call failed: tried again before each batch. */
  #repairs: LostDebit[] = [];
  /**
   * Entries whose dead letters could not be written stay pending; until this time the stream's own
   * pending entries are not read first (unsharded: the stream; sharded: per shard, #pendingHeldUntil).
   */
  #pendingHeldUntil = 0;
  readonly #pendingHeldUntilOf = new Map<number, number>();
  #deadLetterRetryMs = DEAD_LETTER_RETRY_MS;
  /** Called after each settled batch; the tests and metrics listen here. */
  onBatch: (report: BatchReport) => void = () => {};
  /** Removes consumers of dead workers from the group (consumer-pruning.ts), at claim time. */
  readonly #pruner: ConsumerPruner;
  /** Called after each pass over the log outbox, with the rows it sent (tests listen here). */
  onLogPass: (sent: number) => void = () => {};

  constructor(redis: Redis, sql: Sql, ch: ClickHouseClient, log: Logger, opts: BillingWorkerOptions) {
    this.#redis = redis;
    this.#scripts = usageScripts(redis);
    this.#sql = sql;
    this.#ch = ch;
    this.#log = log;
    this.#opts = opts;
    this.#pruner = new ConsumerPruner(this.#scripts, BILLING_GROUP, opts.consumer, log);
  }

  async start(): Promise<void> {
    this.#running = true;
    if (this.#opts.sharded) {
      const { keys, leaseMs, clock } = this.#opts.sharded;
      this.#leases = new ShardLeases(this.#redis, keys, this.#opts.consumer, leaseMs, clock);
      await this.#refreshLeases();
      this.#loop = this.#runSharded();
    } else {
      await this.#ensureGroupAtStart();
      this.#loop = this.#run();
    }
    this.#drainLoop = this.#drainOutbox();
  }

  /** The shards this worker consumes now (sharded layout; empty otherwise). */
  heldShards(): number[] {
    return this.#leases?.held() ?? [];
  }

  async stop(): Promise<void> {
    this.#running = false;
    await this.#loop;
    this.#requestDrain();
    await this.#drainLoop;
  }

  /**
   * Sends the queued log rows to ClickHouse until none is left (waiting for another worker's drain
   * to end); throws if ClickHouse fails (the rows stay queued). For callers that settle with
   * processEntries and no running loop (tests, tools).
   */
  async drainOutbox(): Promise<number> {
    let sent = 0;
    for (let n; (n = await drainLogOutbox(this.#sql, this.#ch, this.#outboxLimit(), { wait: true })) > 0;) sent += n;
    return sent;
  }

  // Catching up on an outage's backlog in fewer, larger inserts, which ClickHouse prefers.
  #outboxLimit(): number {
    return this.#opts.logBatchSize ?? Math.max(this.#opts.batchSize, 5000);
  }

  /**
   * After a settled batch (`rows` queued) and on stop (a last pass); never lost mid-pass. On its own
   * clock (logFlushIntervalMs > 0) a batch wakes the pass only once a full insert's worth is queued.
   */
  #requestDrain(rows = 0): void {
    this.#queuedSincePass += rows;
    const clocked = (this.#opts.logFlushIntervalMs ?? 0) > 0;
    if (clocked && this.#running && this.#queuedSincePass < this.#outboxLimit()) return;
    this.#drainRequested = true;
    if (!this.#drainFailing || !this.#running) this.#wake?.();
  }

  async #drainOutbox(): Promise<void> {
    const interval = this.#opts.logFlushIntervalMs ?? 0;
    let backoff = 100;
    let stopping = false;
    while (!stopping) {
      stopping = !this.#running; // one last pass after stop, then out
      if (stopping && this.#drainFailing) break;
      this.#drainRequested = false;
      this.#queuedSincePass = 0;
      const startedAt = Date.now();
      // Without a clock of its own: rows queued by other workers, or left by a failed pass.
      let wait = interval > 0 ? interval : 1000;
      try {
        const limit = this.#outboxLimit();
        const sent = await drainLogOutbox(this.#sql, this.#ch, limit);
        // A full batch (one left open may have been claimed under a larger limit): more may be queued.
        if (sent >= limit) wait = 0;
        // Another worker holds the drain (DRAIN_BUSY): the backlog is its to report.
        if (sent >= 0) billingMetrics.outboxRows.set(sent === 0 ? 0 : await logOutboxBacklog(this.#sql));
        // On its own clock the next pass starts `interval` after this one started, not after it ended.
        if (wait > 0 && interval > 0) wait = Math.max(1, interval - (Date.now() - startedAt));
        backoff = 100;
        this.#drainFailing = false;
        if (sent >= 0) billingMetrics.logStoreReached();
        if (sent > 0) this.#sentSinceVacuum += sent;
        if (this.#sentSinceVacuum >= (this.#opts.outboxVacuumRows ?? OUTBOX_VACUUM_ROWS)) {
          this.#sentSinceVacuum = 0;
          // Its failure costs the queue's speed, not a row: logged, and tried again after as many rows.
          await vacuumLogOutbox(this.#sql).catch((err: unknown) => this.#log.warn({ err }, 'log outbox vacuum failed'));
        }
        this.onLogPass(Math.max(sent, 0));
      } catch (err) {
        this.#drainFailing = true;
        if (err instanceof LogStoreError) {
          billingMetrics.logStoreFailed(err.cause);
          this.#log.error({ err: err.cause }, 'log rows could not be sent to ClickHouse; they stay in log_outbox and are retried');
        } else {
          // Postgres failed the pass (a connection terminated, a restart): ClickHouse was not at fault,
          // and the health says nothing against it.
          this.#log.error({ err }, 'a log outbox pass failed in Postgres; its rows stay in log_outbox and are retried');
        }
        await logOutboxBacklog(this.#sql).then((n) => billingMetrics.outboxRows.set(n), () => undefined);
        wait = backoff;
        backoff = Math.min(backoff * 2, 5000);
      }
      if (wait === 0) stopping = false; // a full chunk: more may be queued, stopping or not
      if (stopping || wait === 0 || (this.#drainRequested && !this.#drainFailing)) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, wait);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wake = null;
    }
  }

  /**
   * Whether the group exists now; true when this call created it. By a script that runs at maxmemory
   * (ensureUsageGroup-1.lua): XGROUP CREATE alone is refused there, even for a group that exists, and
   * a worker that cannot start cannot free the memory either.
   */
  async #ensureGroup(stream = this.#opts.stream): Promise<boolean> {
    // From the stream's start, so events appended before the group existed are billed too (after a
    // Redis restart: the settlements the relay appended since, which recreated the stream alone).
    return this.#scripts.ensureGroup(stream, BILLING_GROUP, '0');
  }

  /**
   * The group at start-up. Redis refusing it for want of memory all the same (an OOM answer) is waited
   * out, logged, with backoff, not a reason to exit: a worker restarted by its supervisor would meet
   * the same refusal, and nothing else frees that memory. Any other error still fails the start.
   */
  async #ensureGroupAtStart(): Promise<void> {
    for (let wait = 100; ; wait = Math.min(wait * 2, 5000)) {
      try {
        await this.#ensureGroup();
        return;
      } catch (err) {
        if (!isOutOfMemory(err) || !this.#running) throw err;
        this.#log.warn({ err, stream: this.#opts.stream, retryInMs: wait }, 'Redis is at maxmemory: the billing consumer group could not be made sure of yet; retrying');
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  /** Stream entries a read asks for: about batchSize events (#eventsPerEntry). */
  #entriesPerRead(): number {
    return Math.max(1, Math.floor(this.#opts.batchSize / this.#eventsPerEntry));
  }

  async #run(): Promise<void> {
    let backoff = 100;
    while (this.#running) {
      try {
        const startedAt = Date.now();
        // Before reading too: entries read from another database's Redis would stay pending under this
        // worker's name, out of reach of that gateway's own worker (review diffreview).
        await this.#assertOwnRedis();
        await this.#retryRepairs();
        const asked = this.#entriesPerRead();
        const batch = await this.#next(asked);
        const entries = batch.entries;
        if (entries.length) {
          // And after: the connection may have come back on another server during a blocking read.
          await this.#assertOwnRedis();
          await this.#settle([batch]);
        }
        billingMetrics.consumed();
        backoff = 100;
        const rest = this.#opts.minBatchIntervalMs - (Date.now() - startedAt);
        if (entries.length > 0 && entries.length < asked && rest > 0 && this.#running) {
          await new Promise((r) => setTimeout(r, rest));
        }
      } catch (err) {
        billingMetrics.failed(err);
        // A Redis that restarted without persistence has no group (NOGROUP), or dropped the stream
        // under a blocked read (UNBLOCKED): retrying alone would never bill again.
        if (groupLost(err)) {
          try {
            if (await this.#ensureGroup()) {
              billingMetrics.groupRecreated();
              this.#log.warn({ err, stream: this.#opts.stream }, 'billing consumer group was gone (Redis restarted without the stream?); recreated it from the stream start');
              continue;
            }
          } catch (createErr) {
            this.#log.error({ err: createErr }, 'billing consumer group could not be recreated; retrying');
          }
        }
        // What was not acknowledged stays pending and is read again first, held-back entries too.
        this.#pendingHeldUntil = 0;
        billingMetrics.batchFailed();
        this.#log.error({ err }, 'billing batch failed; retrying');
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }

  /**
   * Own pending entries first (a batch that failed; not while held back after dead letters were
   * refused, #pendingHeldUntil), then entries idle at dead consumers, then new ones.
   */
  async #next(readCount: number): Promise<StreamBatch> {
    const { stream, deadLetterStream, blockMs, claimIdleMs } = this.#opts;
    const batch: StreamBatch = { stream, deadLetterStream, entries: [] };
    if (this.#opts.mirrors) batch.incarnationKey = this.#opts.mirrors.keys.redisIncarnation();
    const now = Date.now();
    if (now >= this.#pendingHeldUntil) {
      batch.entries = this.#opts.mirrors
        ? await this.#readIn(batch, { mode: 'read', id: '0' }, readCount)
        : await this.#read('0', undefined, readCount);
      if (batch.entries.length) return batch;
    }
    if (now - this.#lastClaim >= Math.min(claimIdleMs, 5000)) {
      this.#lastClaim = now;
      this.#pruner.maybePrune(stream, now);
      batch.entries = await this.#readIn(batch, { mode: 'claim', minIdleMs: claimIdleMs }, readCount);
      if (batch.entries.length) return batch;
    }
    if (!this.#opts.mirrors) {
      batch.entries = await this.#read('>', blockMs, readCount);
      return batch;
    }
    // A blocking read cannot run in a script: wait until the stream grows past its last id, then read.
    batch.entries = await this.#readIn(batch, { mode: 'read', id: '>' }, readCount);
    if (batch.entries.length) return batch;
    const info = (await this.#redis.xinfo('STREAM', stream).catch(() => [])) as unknown[];
    const at = info.indexOf('last-generated-id');
    await this.#redis.xread('COUNT', 1, 'BLOCK', blockMs, 'STREAMS', stream, at >= 0 ? String(info[at + 1]) : '0-0');
    batch.entries = await this.#readIn(batch, { mode: 'read', id: '>' }, readCount);
    return batch;
  }

  /**
   * Runs one read (XREADGROUP without BLOCK, or XAUTOCLAIM from the start) with the Redis data's id,
   * created when missing, into batch.incarnation, in one script (readUsageEntries-2.lua): exact even
   * when Redis restarts around it, and run at maxmemory too (a MULTI with SET NX was refused there,
   * and billing stopped for good). Without mirrors, the read alone, which Redis lets through there.
   */
  async #readIn(batch: StreamBatch, read: UsageRead, count: number): Promise<Entry[]> {
    const { consumer } = this.#opts;
    const key = batch.incarnationKey;
    for (;;) {
      // Just before each read that takes entries: a blocking wait before it (#next) may have ended on
      // another server than the one the loop looked at (a Redis swapped under it, the wait sent again
      // after the reconnect).
      await this.#assertOwnRedis();
      let reply: unknown;
      if (key !== undefined) {
        const [incarnation, r, otherData] = await this.#scripts.read(batch.stream, key, randomUUID(), BILLING_GROUP, consumer, count, read, this.#lastIncarnation.get(key) ?? '');
        this.#lastIncarnation.set(key, String(incarnation));
        // Not the data the loop checked before the read (review CI: a read sent just before a Redis was
        // swapped went again, after the reconnect, to the other database's Redis and took its entry):
        // nothing was read; checked again first.
        if (otherData === 1) continue;
        batch.incarnation = String(incarnation);
        reply = r;
      } else if (read.mode === 'claim') {
        reply = await this.#redis.xautoclaim(batch.stream, BILLING_GROUP, consumer, read.minIdleMs, '0-0', 'COUNT', count);
      } else {
        reply = await this.#redis.xreadgroup('GROUP', BILLING_GROUP, consumer, 'COUNT', count, 'STREAMS', batch.stream, read.id);
      }
      if (reply === null || reply === undefined) return [];
      // XAUTOCLAIM answers [next id, entries, deleted ids]; XREADGROUP [[stream, entries]].
      const got = typeof (reply as unknown[])[0] === 'string'
        ? (reply as [string, ReadEntry[]])[1]
        : (reply as [string, ReadEntry[]][])[0]?.[1] ?? [];
      const live = await this.#withoutDeleted(batch.stream, got);
      if (live !== null) return live;
    }
  }

  /**
   * A read's entries that are still in the stream. A pending entry deleted from the stream without
   * its XACK (an operator's XDEL of a bad entry) comes back from a read of pending entries (XREADGROUP
   * from '0'; XAUTOCLAIM before Redis 7) as [id, null]: it holds no event to settle, and settling it
   * threw a TypeError at every round, so the worker that held it (or a restart under its
   * BILLING_CONSUMER) billed nothing again. Such entries are acknowledged (ackUsageEntries-1.lua:
   * XACK, and an XDEL that finds nothing), logged once each, and dropped. Null when every entry read
   * was such a one: the caller reads again, as more pending entries may follow them.
   */
  async #withoutDeleted(stream: string, entries: readonly ReadEntry[]): Promise<Entry[] | null> {
    let deleted: string[] | undefined;
    for (const e of entries) if (e[1] === null) (deleted ??= []).push(e[0]);
    if (deleted === undefined) return entries as Entry[];
    await this.#scripts.acknowledge(stream, BILLING_GROUP, deleted);
    this.#log.warn({ stream, ids: deleted }, 'pending usage stream entries deleted from the stream without their acknowledgement (XDEL by hand?) acknowledged and skipped: they hold no event to bill');
    const live = entries.filter((e): e is Entry => e[1] !== null);
    return live.length ? live : null;
  }

  async #retryRepairs(): Promise<void> {
    if (this.#repairs.length === 0 || !this.#opts.mirrors) return;
    await this.#assertOwnRedis();
    this.#repairs = await repairMirrors(this.#opts.mirrors.quota, this.#repairs, this.#log);
  }

  /** Throws unless the Redis is known to hold this database's accounts (BillingWorkerOptions.ownRedis). */
  async #assertOwnRedis(): Promise<void> {
    if (this.#opts.ownRedis && !await this.#opts.ownRedis()) {
      throw new Error('the Redis is not known to hold this database\'s accounts (a swapped or foreign Redis, see the fatal log line): nothing read from it is settled, its entries stay pending there');
    }
  }

  async #read(id: string, blockMs: number | undefined, readCount: number): Promise<Entry[]> {
    const { stream, consumer } = this.#opts;
    for (;;) {
      await this.#assertOwnRedis();
      const res = (blockMs === undefined
        ? await this.#redis.xreadgroup('GROUP', BILLING_GROUP, consumer, 'COUNT', readCount, 'STREAMS', stream, id)
        : await this.#redis.xreadgroup('GROUP', BILLING_GROUP, consumer, 'COUNT', readCount, 'BLOCK', blockMs, 'STREAMS', stream, id)) as
        [string, ReadEntry[]][] | null;
      const live = await this.#withoutDeleted(stream, res?.[0]?.[1] ?? []);
      if (live !== null) return live;
    }
  }

  async #refreshLeases(): Promise<void> {
    const leases = this.#leases!;
    const { gained, lost, errors } = await leases.refresh();
    this.#nextLeaseRefresh = Date.now() + Math.max(1, Math.floor(this.#opts.sharded!.leaseMs / 3));
    if (errors.length) this.#log.warn({ errors, held: leases.held().length }, 'billing shard leases: some Redis calls failed; tried again at the next refresh');
    for (const s of lost) {
      this.#shardRetry.delete(s);
      this.#readPending.delete(s);
      this.#lastClaimOf.delete(s);
      this.#claimOnGain.delete(s);
    }
    for (const s of gained) {
      // Refused for want of memory all the same: logged, and the shard read anyway; its NOGROUP makes
      // the loop try again with backoff (#runSharded), as for a group lost in a restart.
      await this.#ensureGroup(this.#opts.sharded!.keys.usageStream(s)).catch((err: unknown) => {
        if (!isOutOfMemory(err)) throw err;
        this.#log.warn({ err, shard: s }, 'Redis is at maxmemory: the billing consumer group of a gained shard could not be made sure of yet; retrying');
      });
      this.#readPending.add(s);
      this.#claimOnGain.add(s);
    }
    if (gained.length || lost.length) this.#log.info({ gained, lost, held: leases.held().length }, 'billing shards changed hands');
  }

  async #runSharded(): Promise<void> {
    let backoff = 100;
    while (this.#running) {
      try {
        await this.#assertOwnRedis();
        if (Date.now() >= this.#nextLeaseRefresh) await this.#refreshLeases();
        await this.#retryRepairs();
        const startedAt = Date.now();
        const asked = this.#entriesPerRead();
        const { batches, failed } = await this.#nextSharded(asked);
        const count = batches.reduce((n, b) => n + b.entries.length, 0);
        // What the other shards gave is settled even when some shard's read failed: one node failing
        // over must not hold up the billing of the shards on the others.
        if (count) {
          await this.#assertOwnRedis();
          await this.#settle(batches);
        }
        if (failed.length) await this.#shardReadsFailed(failed);
        // Not while a shard waits out its backoff: GET /health says failing until every shard reads.
        else if (this.#shardRetry.size === 0) billingMetrics.consumed();
        backoff = 100;
        const rest = (count === 0 ? this.#opts.blockMs : this.#opts.minBatchIntervalMs) - (Date.now() - startedAt);
        if (count < asked && rest > 0 && this.#running) await new Promise((r) => setTimeout(r, rest));
      } catch (err) {
        billingMetrics.failed(err);
        billingMetrics.batchFailed();
        // Whatever was read stays pending: read it again first. A shard whose group is gone gets it back.
        for (const s of this.heldShards()) this.#readPending.add(s);
        this.#pendingHeldUntilOf.clear();
        if (groupLost(err)) {
          for (const s of this.heldShards()) {
            if (await this.#ensureGroup(this.#opts.sharded!.keys.usageStream(s)).catch(() => false)) billingMetrics.groupRecreated();
          }
        }
        this.#log.error({ err }, 'billing batch failed; retrying');
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 5000);
      }
    }
    await this.#leases!.releaseAll().catch((err: unknown) => this.#log.warn({ err }, 'billing shard leases not released; they run out'));
  }

  /**
   * Shards whose reads failed this round (a node failing over, a batch of commands MOVED, a group
   * gone): each is read again from its own pending entries, after its own backoff, while the other
   * shards go on at the loop's pace.
   */
  async #shardReadsFailed(failed: { shard: number; err: unknown }[]): Promise<void> {
    const now = Date.now();
    let moved = false;
    for (const { shard, err } of failed) {
      this.#readPending.add(shard);
      const wait = Math.min((this.#shardRetry.get(shard)?.wait ?? SHARD_RETRY_MS / 2) * 2, SHARD_RETRY_MAX_MS);
      this.#shardRetry.set(shard, { at: now + wait, wait });
      billingMetrics.failed(err, now);
      moved ||= isMoved(err);
      if (groupLost(err) && await this.#ensureGroup(this.#opts.sharded!.keys.usageStream(shard)).catch(() => false)) billingMetrics.groupRecreated();
    }
    billingMetrics.batchFailed();
    // ioredis redirects a batch of commands only when all of its errors are one message: after a slot
    // move, reads of several shards of that node are MOVED each to its own slot and not followed.
    // The reload, then each MOVED's own answer (followMoved, infra/redis/client.ts).
    if (moved) {
      await refreshSlots(this.#redis).catch(() => undefined);
      for (const { err } of failed) pointSlotAsMoved(this.#redis, err);
    }
    this.#log.error({ shards: failed.map((f) => f.shard), err: failed[0]!.err, retryInMs: this.#shardRetry.get(failed[0]!.shard)!.wait },
      'billing reads of some shards failed; their entries stay pending and are read again, the other shards are billed meanwhile');
  }

  /**
   * Per held shard: own pending entries first (not while held back after dead letters were refused,
   * #pendingHeldUntilOf), then entries idle at other consumers, then new ones. The batches of the
   * shards whose reads succeeded, and the shards whose reads failed; it returns only when every
   * shard's reads have ended. (Returning at the first failure left the other shards' reads running:
   * one that delivered entries after the round had been given up left them pending under this
   * consumer and off #readPending, where only a claim after BILLING_CLAIM_IDLE_MS found them.)
   */
  async #nextSharded(count: number): Promise<{ batches: StreamBatch[]; failed: { shard: number; err: unknown }[] }> {
    const { claimIdleMs } = this.#opts;
    const keys = this.#opts.sharded!.keys;
    const now = Date.now();
    // A shard whose read failed waits out its backoff; the others are read at every round.
    const held = this.heldShards().filter((s) => (this.#shardRetry.get(s)?.at ?? 0) <= now);
    // A full batch from each shard: traffic is uneven (one busy account is one busy shard), and a share
    // of the batch per shard starved a hot shard to batchSize / shards entries per round (the bench on
    // make cluster-up: 8 s of billing lag at 1,250 req/s). Several busy shards make a larger batch.
    const results = await Promise.allSettled(held.map(async (shard): Promise<StreamBatch> => {
      const stream = keys.usageStream(shard);
      const batch: StreamBatch = { stream, deadLetterStream: keys.usageDeadLetterStream(shard), entries: [], shard };
      if (this.#opts.mirrors) batch.incarnationKey = this.#opts.mirrors.keys.redisIncarnation(shard);
      if (this.#readPending.has(shard) && now >= (this.#pendingHeldUntilOf.get(shard) ?? 0)) {
        batch.entries = await this.#readIn(batch, { mode: 'read', id: '0' }, count);
        if (batch.entries.length) return batch;
        this.#readPending.delete(shard);
      }
      if (this.#claimOnGain.has(shard)) {
        // Whatever idle time: the consumer that read these lost the shard (a worker that died, or one
        // cut off from the shard's master in a failover). Claimed a batch a round until none is left.
        batch.entries = await this.#readIn(batch, { mode: 'claim', minIdleMs: 0 }, count);
        if (batch.entries.length) return batch;
        this.#claimOnGain.delete(shard);
        this.#lastClaimOf.set(shard, now);
      }
      if (now - (this.#lastClaimOf.get(shard) ?? 0) >= Math.min(claimIdleMs, 5000)) {
        this.#lastClaimOf.set(shard, now);
        this.#pruner.maybePrune(stream, now);
        batch.entries = await this.#readIn(batch, { mode: 'claim', minIdleMs: claimIdleMs }, count);
        if (batch.entries.length) return batch;
      }
      batch.entries = await this.#readIn(batch, { mode: 'read', id: '>' }, count);
      return batch;
    }));
    const batches: StreamBatch[] = [];
    const failed: { shard: number; err: unknown }[] = [];
    results.forEach((r, i) => {
      if (r.status === 'rejected') return void failed.push({ shard: held[i]!, err: r.reason });
      this.#shardRetry.delete(held[i]!);
      batches.push(r.value);
    });
    return { batches, failed };
  }

  async processEntries(entries: Entry[]): Promise<BatchReport> {
    const { stream, deadLetterStream } = this.#opts;
    return this.#settle([{ stream, deadLetterStream, entries }]);
  }

  /** One Postgres batch for the entries of every stream, then its acknowledgement per stream (its slot). */
  async #settle(batches: StreamBatch[]): Promise<BatchReport> {
    const startedAt = Date.now();
    const events: UsageEvent[] = [];
    /** Per event: the Redis data its debit was made in, when known, and its batch. */
    const madeIn: (string | undefined)[] = [];
    const batchOf: number[] = [];
    let rejectedCount = 0;
    let eventCount = 0;
    /** Per event: its entry and its text, for a dead letter of it alone (deadLetterOf). */
    const entryOf: Entry[] = [];
    const textOf: string[] = [];
    /** Per entry, in the order of `ids` below: its events, each of which the lag metric counts. */
    const eventsOf: number[] = [];
    const rejectedOf = batches.map((b, bi) => {
      const rejected: Entry[] = [];
      for (const entry of b.entries) {
        const texts = encodedUsageEventsOf(entry[1]);
        eventsOf.push(texts?.length ?? 1);
        if (texts === undefined) {
          this.#log.error({ id: entry[0], stream: b.stream }, 'usage stream entry without an event moved to the dead-letter stream');
          rejected.push(entry);
          continue;
        }
        const made = incarnationOf(entry[1], b.incarnation);
        eventCount += texts.length;
        for (const text of texts) {
          try {
            events.push(decodeUsageEvent(text));
            madeIn.push(made);
            batchOf.push(bi);
            entryOf.push(entry);
            textOf.push(text);
          } catch (err) {
            this.#log.error({ err, id: entry[0], stream: b.stream }, 'undecodable usage event moved to the dead-letter stream');
            rejected.push(deadLetterOf(entry, text));
          }
        }
      }
      rejectedCount += rejected.length;
      return rejected;
    });
    const { settled, refused } = await this.#settleRefusingBadData(events);
    for (const { at: i, reason } of refused) {
      const b = batches[batchOf[i]!]!;
      this.#log.error({ id: entryOf[i]![0], stream: b.stream, requestId: events[i]!.request_id, reason }, 'usage event Postgres refuses moved to the dead-letter stream');
      rejectedOf[batchOf[i]!]!.push(deadLetterOf(entryOf[i]!, textOf[i]!));
      rejectedCount += 1;
    }
    if (this.#opts.mirrors) await this.#repairLostDebits(batches, events, madeIn, batchOf, settled);
    const ids: string[] = [];
    for (const b of batches) for (const e of b.entries) ids.push(e[0]);
    const acks = await Promise.all(batches.map((b, i): Promise<{ unwritten: string[]; err?: unknown }> | { unwritten: string[] } => (
      b.entries.length === 0 ? { unwritten: [] } : this.#acknowledge(b, rejectedOf[i]!))));
    // Entries whose dead letters Redis refused stay pending: read again later, counted then.
    let unwrittenCount = 0;
    acks.forEach((a: { unwritten: string[]; err?: unknown }, i) => {
      if (!a.unwritten.length) return;
      const b = batches[i]!;
      unwrittenCount += a.unwritten.length;
      rejectedCount -= rejectedOf[i]!.length;
      const retryInMs = this.#deadLetterRetryMs;
      if (b.shard === undefined) this.#pendingHeldUntil = Date.now() + retryInMs;
      else {
        this.#pendingHeldUntilOf.set(b.shard, Date.now() + retryInMs);
        this.#readPending.add(b.shard);
      }
      billingMetrics.failed(a.err);
      this.#log.error({ err: a.err, stream: b.stream, deadLetterStream: b.deadLetterStream, ids: a.unwritten, retryInMs },
        'dead letters not written (Redis refused them): their entries stay pending, unacknowledged, and are tried again');
    });
    this.#deadLetterRetryMs = unwrittenCount ? Math.min(this.#deadLetterRetryMs * 2, DEAD_LETTER_RETRY_MAX_MS) : DEAD_LETTER_RETRY_MS;
    let ackedIds = ids;
    let ackedEventsOf = eventsOf;
    if (unwrittenCount) {
      // By position, batch by batch: two shards' streams may hold the same entry id.
      const acked: boolean[] = [];
      batches.forEach((b, i) => {
        const left = new Set(acks[i]!.unwritten);
        for (const [id] of b.entries) acked.push(!left.has(id));
      });
      ackedIds = ids.filter((_, i) => acked[i]);
      ackedEventsOf = eventsOf.filter((_, i) => acked[i]);
    }
    const applied = settled.filter((s) => s.applied).length;
    if (ackedIds.length > 0) this.#eventsPerEntry = Math.max(1, eventCount / ackedIds.length);
    const report = { entries: ackedIds.length, events: eventCount, applied, replayed: settled.length - applied, rejected: rejectedCount };
    billingMetrics.batch(ackedIds, report, startedAt, Date.now(), ackedEventsOf);
    if (settled.length) this.#requestDrain(settled.length);
    this.onBatch(report);
    return report;
  }

  /**
   * Acknowledges one stream's entries after the commit. Those whose events were all settled: XACK +
   * XDEL by ackUsageEntries-1.lua, which Redis runs at maxmemory too (acknowledging is what frees its
   * memory; a MULTI was refused there). Those with a dead letter: deadLetterUsageEntries-2.lua writes
   * the dead letters, then acknowledges and deletes the entries, all or nothing, so an entry is never
   * acknowledged without its dead letter (a MULTI whose replies went unread acknowledged it when the
   * XADD failed, and the dead letter and its Redis debit were lost). Redis refusing that script (at
   * maxmemory, or a dead-letter key of another type) leaves those entries pending, returned as
   * `unwritten`; the settled ones are acknowledged all the same. A failure to acknowledge the settled
   * ones throws: the batch is read again, and Postgres takes it as replays.
   */
  async #acknowledge(b: StreamBatch, rejected: readonly Entry[]): Promise<{ unwritten: string[]; err?: unknown }> {
    const deadIds = [...new Set(rejected.map(([id]) => id))];
    const dead = new Set(deadIds);
    const settledIds = dead.size ? b.entries.map(([id]) => id).filter((id) => !dead.has(id)) : b.entries.map(([id]) => id);
    const letters: DeadLetterFields[] = rejected.map(([id, fields]) => {
      // With the data its debit was made in: replayed after a restart, it is repaired too.
      const made = incarnationOf(fields, b.incarnation);
      const tag = made !== undefined && made !== incarnationOf(fields, undefined) ? [INCARNATION_FIELD, made] : [];
      return ['source_id', id, ...fields, ...tag];
    });
    const [acked, lettered] = await Promise.allSettled([
      settledIds.length ? this.#scripts.acknowledge(b.stream, BILLING_GROUP, settledIds) : 0,
      deadIds.length ? this.#scripts.deadLetter(b.stream, b.deadLetterStream, BILLING_GROUP, deadIds, letters) : 0,
    ]);
    if (acked.status === 'rejected') throw acked.reason;
    if (lettered.status === 'rejected') return { unwritten: deadIds, err: lettered.reason };
    return { unwritten: [] };
  }

  /**
   * Settles the events in one transaction; when Postgres refuses it for the data of an event (a
   * number past its column's range, text with a NUL, a value past one of its limits, an account with
   * no users row: refusedForItsData), in halves, down to the events it refuses alone. Without this,
   * one such event failed its batch at every read, and billing stopped for every event behind it; now
   * it goes to the dead-letter stream (its Redis debit stays visible there, for an operator to mend
   * and replay, replay-dead-letters.ts). A transaction that fails for any other reason (Postgres away
   * or shutting down, a deadlock, a serialization failure, a statement timeout, resources exhausted)
   * throws: the batch is read again. Halves committed before such a failure are replays when it is
   * (ON CONFLICT): no money moves twice.
   */
  async #settleRefusingBadData(events: UsageEvent[]): Promise<{ settled: SettledEvent[]; refused: { at: number; reason: string }[] }> {
    const settled: SettledEvent[] = [];
    const refused: { at: number; reason: string }[] = [];
    const settle = async (from: number, to: number): Promise<void> => {
      try {
        // The whole batch, the usual case, as it is: no copy of it.
        settled.push(...await settleBatch(this.#sql, from === 0 && to === events.length ? events : events.slice(from, to)));
      } catch (err) {
        if (!refusedForItsData(err)) throw err;
        if (to - from === 1) {
          refused.push({ at: from, reason: (err as Error).message });
          return;
        }
        const middle = from + Math.ceil((to - from) / 2);
        await settle(from, middle);
        await settle(middle, to);
      }
    };
    await settle(0, events.length);
    return { settled, refused };
  }

  /**
   * After the commit, debits made in Redis data other than the current one (a restart took them out of
   * the mirrors) go to the mirrors refilled before the commit (mirror-repair.ts). The data is read
   * after the commit: a restart from then on refills from a Postgres that has the batch.
   */
  /** The current value of an incarnation key (null: gone with the data), retried while Redis fails. */
  async #incarnationNow(key: string): Promise<string | null> {
    const giveUpAt = Date.now() + INCARNATION_READ_RETRY_MS;
    for (let wait = 100; ; wait = Math.min(wait * 2, 2000)) {
      try {
        return await retryOnMoved(this.#redis, () => this.#redis.get(key));
      } catch (err) {
        // Unacknowledged, the batch is read again: Postgres takes it as a replay, moving nothing.
        if (Date.now() > giveUpAt) throw err;
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  async #repairLostDebits(batches: StreamBatch[], events: UsageEvent[], madeIn: (string | undefined)[], batchOf: number[], settled: SettledEvent[]): Promise<void> {
    const current = await Promise.all(batches.map((b) => (b.incarnationKey === undefined ? null : this.#incarnationNow(b.incarnationKey))));
    // settleBatch kept the first of repeated request ids.
    const first = new Map<string, number>();
    events.forEach((e, i) => { if (!first.has(e.request_id)) first.set(e.request_id, i); });
    const lost = settled.filter((s) => {
      const i = first.get(s.event.request_id)!;
      return madeIn[i] !== undefined && madeIn[i] !== current[batchOf[i]!];
    });
    if (lost.length === 0) return;
    const debits = lostDebits(lost);
    this.#repairs.push(...await repairMirrors(this.#opts.mirrors!.quota, debits, this.#log));
  }
}

/**
 * How long a failed read of the Redis data's id is retried after a commit (a cluster failover takes a
 * few seconds). A read that fails is not an answer: taking it for "the data is gone" applied the
 * batch's debits to mirrors that still held them (tests/cluster: a master killed under load left the
 * mirror below users.quota).
 */
const INCARNATION_READ_RETRY_MS = 30_000;

/**
 * The dead letter of one event of an entry: the entry itself when it holds that event alone, else the
 * entry narrowed to it, under the entry's id. The entry's other events are settled, and a replay of
 * this one cannot repeat them.
 */
function deadLetterOf(entry: Entry, text: string): Entry {
  const fields = entry[1];
  return encodedUsageEventOf(fields) === text ? entry : [entry[0], withEncodedUsageEvent(fields, text)];
}

/**
 * SQLSTATE classes of a statement Postgres refused for the values it was given, which it would refuse
 * again however often retried: the event's fault, so the event is dead-lettered alone.
 *   22 data exception: a number out of range, invalid text (a NUL);
 *   23 integrity constraint violation, and settleBatch's own 23503 for an account with no users row
 *      (AccountMissingError);
 *   54 program limit exceeded: a value past one of Postgres's limits (54000: a request id too long for
 *      the ledger's unique btree index, "index row size ... exceeds maximum"). Halving also settles a
 *      batch refused whole for its size.
 * Every other class is the database's or the moment's, and the batch is read again, never
 * dead-lettered: 08 connection exceptions, 25 (a read-only standby after a failover), 28 and 42
 * (roles, a schema not migrated), 40 (40001 serialization failure, 40P01 deadlock), 53 insufficient
 * resources (disk full, out of memory, too many connections), 55 (a lock not available), 57
 * (57014 statement timeout or cancel, 57P01-57P05 shutdowns and a database that cannot take
 * connections now), 58 and XX (I/O, internal errors), and postgres.js's own codes, which are no
 * SQLSTATE (CONNECTION_CLOSED, ECONNREFUSED...).
 */
const REFUSED_FOR_ITS_DATA = new Set(['22', '23', '54']);

function refusedForItsData(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && REFUSED_FOR_ITS_DATA.has(code.slice(0, 2));
}

/** The Redis data an entry's debit was made in: its `i` field (a replayed dead letter), else `read`'s. */
function incarnationOf(fields: readonly string[], read: string | undefined): string | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === INCARNATION_FIELD) return fields[i + 1];
  return read;
}
