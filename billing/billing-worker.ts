// Consumes the usage stream through a consumer group and settles each batch: Postgres (the money,
// idempotent by request id, and the batch's log rows into log_outbox in the same transaction), then
// XACK + XDEL. An entry is acknowledged only after Postgres committed; if this process dies in
// between, the entry stays pending and another worker claims it after BILLING_CLAIM_IDLE_MS, and
// replaying it is harmless. A separate loop drains log_outbox into ClickHouse, so a ClickHouse outage
// delays the log rows only, never the debits or the acknowledgements.
import type { ClickHouseClient } from '@clickhouse/client';
import type { Redis } from 'ioredis';
import type { Logger } from '../infra/logger.js';
import type { Sql } from '../infra/postgres/client.js';
import { drainLogOutbox, logOutboxBacklog } from './log-outbox.js';
import { settleBatch } from './settle-batch.js';
import { decodeUsageEvent, encodedUsageEventOf, type UsageEvent } from '../core/usage/usage-event.js';
import { billingMetrics } from './metrics/billing-metrics.js';

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
}

type Entry = [id: string, fields: string[]];

function groupLost(err: unknown): boolean {
  const m = String((err as Error)?.message ?? err);
  return m.startsWith('NOGROUP') || m.startsWith('UNBLOCKED');
}

export interface BatchReport {
  entries: number;
  applied: number;
  replayed: number;
  rejected: number;
}

export class BillingWorker {
  readonly #redis: Redis;
  readonly #sql: Sql;
  readonly #ch: ClickHouseClient;
  readonly #log: Logger;
  readonly #opts: BillingWorkerOptions;
  #running = false;
  #loop: Promise<void> | null = null;
  #lastClaim = 0;
  #drainLoop: Promise<void> | null = null;
  #drainRequested = false;
  /** ClickHouse failing: batches do not cut the backoff short, and stop skips the last pass. */
  #drainFailing = false;
  #wake: (() => void) | null = null;
  /** Called after each settled batch; the tests and metrics listen here. */
  onBatch: (report: BatchReport) => void = () => {};

  constructor(redis: Redis, sql: Sql, ch: ClickHouseClient, log: Logger, opts: BillingWorkerOptions) {
    this.#redis = redis;
    this.#sql = sql;
    this.#ch = ch;
    this.#log = log;
    this.#opts = opts;
  }

  async start(): Promise<void> {
    await this.#ensureGroup();
    this.#running = true;
    this.#loop = this.#run();
    this.#drainLoop = this.#drainOutbox();
  }

  async stop(): Promise<void> {
    this.#running = false;
    await this.#loop;
    this.#requestDrain();
    await this.#drainLoop;
  }

  /**
   * Sends the queued log rows to ClickHouse until none is left; throws if ClickHouse fails (the rows
   * stay queued). For callers that settle with processEntries and no running loop (tests, tools).
   */
  async drainOutbox(): Promise<number> {
    let sent = 0;
    for (let n; (n = await drainLogOutbox(this.#sql, this.#ch, this.#outboxLimit())) > 0;) sent += n;
    return sent;
  }

  // Catching up on an outage's backlog in fewer, larger inserts, which ClickHouse prefers.
  #outboxLimit(): number {
    return Math.max(this.#opts.batchSize, 5000);
  }

  /** After a settled batch (its rows are queued) and on stop (a last pass); never lost mid-pass. */
  #requestDrain(): void {
    this.#drainRequested = true;
    if (!this.#drainFailing || !this.#running) this.#wake?.();
  }

  async #drainOutbox(): Promise<void> {
    let backoff = 100;
    let stopping = false;
    while (!stopping) {
      stopping = !this.#running; // one last pass after stop, then out
      if (stopping && this.#drainFailing) break;
      this.#drainRequested = false;
      let wait = 1000; // rows queued by other workers, or left by a failed pass
      try {
        const limit = this.#outboxLimit();
        const sent = await drainLogOutbox(this.#sql, this.#ch, limit);
        if (sent === limit) wait = 0;
        billingMetrics.outboxRows.set(sent === 0 ? 0 : await logOutboxBacklog(this.#sql));
        backoff = 100;
        this.#drainFailing = false;
      } catch (err) {
        this.#drainFailing = true;
        this.#log.error({ err }, 'log rows could not be sent to ClickHouse; they stay in log_outbox and are retried');
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

  /** Whether the group exists now; true when this call created it. */
  async #ensureGroup(): Promise<boolean> {
    try {
      // From the stream's start, so events appended before the group existed are billed too (after a
      // Redis restart: the settlements the relay appended since, which recreated the stream alone).
      await this.#redis.xgroup('CREATE', this.#opts.stream, BILLING_GROUP, '0', 'MKSTREAM');
      return true;
    } catch (err) {
      if (!String((err as Error).message).includes('BUSYGROUP')) throw err;
      return false;
    }
  }

  async #run(): Promise<void> {
    let backoff = 100;
    while (this.#running) {
      try {
        const startedAt = Date.now();
        const entries = await this.#next();
        if (entries.length) await this.processEntries(entries);
        billingMetrics.consumed();
        backoff = 100;
        const rest = this.#opts.minBatchIntervalMs - (Date.now() - startedAt);
        if (entries.length > 0 && entries.length < this.#opts.batchSize && rest > 0 && this.#running) {
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
        // Nothing was acknowledged: the entries stay pending and are read again.
        billingMetrics.batchFailed();
        this.#log.error({ err }, 'billing batch failed; retrying');
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }

  /** Own pending entries first (a batch that failed), then entries idle at dead consumers, then new ones. */
  async #next(): Promise<Entry[]> {
    const { stream, consumer, batchSize, blockMs, claimIdleMs } = this.#opts;
    const pending = await this.#read('0', undefined);
    if (pending.length) return pending;
    const now = Date.now();
    if (now - this.#lastClaim >= Math.min(claimIdleMs, 5000)) {
      this.#lastClaim = now;
      const claimed = (await this.#redis.xautoclaim(stream, BILLING_GROUP, consumer, claimIdleMs, '0-0', 'COUNT', batchSize)) as [string, Entry[], string[]?];
      const live = claimed[1].filter((e) => e[1] !== null);
      if (live.length) return live;
    }
    return this.#read('>', blockMs);
  }

  async #read(id: string, blockMs: number | undefined): Promise<Entry[]> {
    const { stream, consumer, batchSize } = this.#opts;
    const res = (blockMs === undefined
      ? await this.#redis.xreadgroup('GROUP', BILLING_GROUP, consumer, 'COUNT', batchSize, 'STREAMS', stream, id)
      : await this.#redis.xreadgroup('GROUP', BILLING_GROUP, consumer, 'COUNT', batchSize, 'BLOCK', blockMs, 'STREAMS', stream, id)) as
      [string, Entry[]][] | null;
    return res?.[0]?.[1] ?? [];
  }

  async processEntries(entries: Entry[]): Promise<BatchReport> {
    const { stream, deadLetterStream } = this.#opts;
    const startedAt = Date.now();
    const events: UsageEvent[] = [];
    const rejected: Entry[] = [];
    for (const entry of entries) {
      const raw = encodedUsageEventOf(entry[1]);
      try {
        if (raw === undefined) throw new Error('entry has no event field');
        events.push(decodeUsageEvent(raw));
      } catch (err) {
        this.#log.error({ err, id: entry[0] }, 'undecodable usage event moved to the dead-letter stream');
        rejected.push(entry);
      }
    }
    const settled = await settleBatch(this.#sql, events);
    const ids = entries.map((e) => e[0]);
    const multi = this.#redis.multi();
    for (const [id, fields] of rejected) multi.xadd(deadLetterStream, '*', 'source_id', id, ...fields);
    multi.xack(stream, BILLING_GROUP, ...ids).xdel(stream, ...ids);
    await multi.exec();
    const applied = settled.filter((s) => s.applied).length;
    const report = { entries: entries.length, applied, replayed: settled.length - applied, rejected: rejected.length };
    billingMetrics.batch(ids, report, startedAt);
    if (settled.length) this.#requestDrain();
    this.onBatch(report);
    return report;
  }
}
