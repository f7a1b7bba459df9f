// The billing worker's Prometheus metrics, served by billing/metrics/metrics-server.ts on
// BILLING_METRICS_PORT (default 9464).
//
//   gateway_billing_batches_total, gateway_billing_batch_failures_total
//   gateway_billing_batch_size                      usage events per settled batch (histogram)
//   gateway_billing_batch_duration_seconds          Postgres (ledger, debits, log outbox) + XACK of one batch
//   gateway_billing_events_total{result}            applied | replayed | rejected
//   gateway_billing_lag_seconds                     request end (the stream entry id's time, set by
//                                                   XADD inside the settlement script) -> its batch
//                                                   committed in Postgres and acknowledged (histogram;
//                                                   the log row reaches ClickHouse from the outbox)
//   gateway_billing_stream_length                   XLEN of the usage stream at scrape time
//   gateway_billing_stream_pending                  entries delivered and not acknowledged, at scrape time
//   gateway_billing_log_store_up                    1 while log rows reach ClickHouse, 0 since a pass failed
//   gateway_billing_log_outbox_rows                 log rows committed in Postgres and not yet sent to
//                                                   ClickHouse, after the last drain pass (grows while
//                                                   ClickHouse is down; the debits do not wait for it)
//   gateway_billing_group_recreated_total           times the consumer group was found gone (a Redis
//                                                   restart without the stream) and recreated
//   gateway_billing_consuming                       1 when the last read/settle round succeeded, 0 while
//                                                   the worker is failing (alert on 0 for more than a minute)
//   gateway_billing_last_error_timestamp_seconds    when the last round failed (0: never); GET /health
//                                                   of the metrics server carries its message
//   gateway_billing_unhandled_rejections_total      promise rejections nothing handled; logged, the worker
//                                                   kept running (infra/process-guards.ts)
import { Counter, Counter1, Gauge, Histogram, LATENCY_BUCKETS_SEC, Registry, processMetrics } from '../../core/metrics/prom.js';

export const BATCH_SIZE_BUCKETS: readonly number[] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];

/**
 * How long without a round ending before /health says 'stalled'. A round is a read that blocks for
 * BILLING_BLOCK_MS at most (100 ms by default) and the settlement of what it read: tens of seconds
 * without one is no busy worker but a stuck one.
 */
export const STALLED_AFTER_MS = 30_000;

export class BillingMetrics {
  readonly registry = new Registry();
  readonly batches = this.registry.register(new Counter('gateway_billing_batches_total', 'Batches settled.'));
  readonly failures = this.registry.register(new Counter('gateway_billing_batch_failures_total', 'Batches that failed and will be retried.'));
  readonly size = this.registry.register(new Histogram('gateway_billing_batch_size', 'Usage events per settled batch.', BATCH_SIZE_BUCKETS));
  readonly duration = this.registry.register(new Histogram('gateway_billing_batch_duration_seconds', 'Time to settle one batch (Postgres, XACK).', LATENCY_BUCKETS_SEC));
  readonly events = this.registry.register(new Counter1('gateway_billing_events_total', 'Usage events by result.', 'result'));
  readonly lag = this.registry.register(new Histogram('gateway_billing_lag_seconds', 'Request end (stream entry time) to its batch committed in Postgres.', LATENCY_BUCKETS_SEC));
  readonly streamLength = this.registry.register(new Gauge('gateway_billing_stream_length', 'Entries in the usage stream (XLEN) at scrape time.'));
  readonly streamPending = this.registry.register(new Gauge('gateway_billing_stream_pending', 'Entries delivered to the group and not acknowledged, at scrape time.'));
  readonly outboxRows = this.registry.register(new Gauge('gateway_billing_log_outbox_rows', 'Log rows committed in Postgres and not yet in ClickHouse (log_outbox), after the last drain pass.'));
  readonly logStoreUp = this.registry.register(new Gauge('gateway_billing_log_store_up', '1 while log rows reach ClickHouse, 0 since a pass failed (the rows wait in log_outbox).'));
  readonly groupsRecreated = this.registry.register(new Counter('gateway_billing_group_recreated_total', 'Times the billing consumer group was gone (Redis restarted without the stream) and was recreated.'));
  readonly consuming = this.registry.register(new Gauge('gateway_billing_consuming', '1 when the last read and settle round succeeded, 0 while failing.'));
  readonly lastErrorAt = this.registry.register(new Gauge('gateway_billing_last_error_timestamp_seconds', 'Unix time of the last failed round (0: none).'));
  readonly unhandledRejections = this.registry.register(new Counter('gateway_billing_unhandled_rejections_total', 'Promise rejections nothing handled; logged, the worker kept running.'));
  #lastError: string | null = null;
  #lastOkAt = 0;
  /** When the worker began starting (starting()): a worker whose first round never ends is stalled too. */
  #startedAt = 0;
  /** When log rows last failed to reach ClickHouse, with none reaching it since (0: they reach it). */
  #logStoreFailingSince = 0;
  #logStoreError: string | null = null;

  constructor() {
    for (const m of processMetrics()) this.registry.register(m);
    this.logStoreUp.set(1);
  }

  /** A pass of the log outbox reached ClickHouse (or had nothing to send). */
  logStoreReached(): void {
    this.#logStoreFailingSince = 0;
    this.#logStoreError = null;
    this.logStoreUp.set(1);
  }

  /** A pass of the log outbox failed: ClickHouse unreachable or refusing. */
  logStoreFailed(err: unknown, nowMs = Date.now()): void {
    if (this.#logStoreFailingSince === 0) this.#logStoreFailingSince = nowMs;
    this.#logStoreError = String((err as Error)?.message ?? err).slice(0, 500);
    this.logStoreUp.set(0);
  }

  /**
   * One settled batch. `entryIds` are the Redis stream ids ("<ms>-<seq>"): their millisecond part is
   * when the relay settled the request, so now − that is the request's billing lag, counted once per
   * event of the entry (`eventsOf[i]`, 1 when absent: a relay's entry holds a settlement call's events).
   */
  batch(entryIds: readonly string[], report: { events: number; applied: number; replayed: number; rejected: number }, startedAtMs: number, nowMs = Date.now(), eventsOf?: readonly number[]): void {
    this.batches.value++;
    this.size.observe(report.events);
    this.duration.observe((nowMs - startedAtMs) / 1000);
    if (report.applied) this.events.inc('applied', report.applied);
    if (report.replayed) this.events.inc('replayed', report.replayed);
    if (report.rejected) this.events.inc('rejected', report.rejected);
    for (let i = 0; i < entryIds.length; i++) {
      const ms = parseInt(entryIds[i]!, 10); // stops at the '-'
      if (ms > 0) this.lag.observe(Math.max(0, nowMs - ms) / 1000, eventsOf?.[i] ?? 1);
    }
  }

  batchFailed(): void {
    this.failures.value++;
  }

  /** The worker begins its start (its consumer groups, its clock: Redis is needed before any round). */
  starting(nowMs = Date.now()): void {
    this.#startedAt = nowMs;
  }

  /** A round (read, and settle if anything came) succeeded. Called once per loop: no allocation. */
  consumed(nowMs = Date.now()): void {
    this.#lastOkAt = nowMs;
    this.consuming.set(1);
  }

  failed(err: unknown, nowMs = Date.now()): void {
    this.#lastError = String((err as Error)?.message ?? err).slice(0, 500);
    this.lastErrorAt.set(nowMs / 1000);
    this.consuming.set(0);
  }

  unhandledRejection(): void {
    this.unhandledRejections.value++;
  }

  groupRecreated(): void {
    this.groupsRecreated.inc();
  }

  /**
   * GET /health: 'failing' while the last round failed, 'stalled' when no round has ended for
   * STALLED_AFTER_MS (counted from the start until the first ends; a round blocked on a Redis master and its replica both paused ended neither
   * way, and the worker answered 'ok' throughout), so a probe sees a stuck worker. `logStore` says
   * whether log rows reach ClickHouse: with it down, billing goes on (the status stays 'ok': a restart
   * of the worker would not help) while every log and stat endpoint answers 503, which the health
   * answered 'ok' without a word.
   */
  health(nowMs = Date.now()): {
    status: 'ok' | 'failing' | 'stalled'; lastOkAt: number | null; lastErrorAt: number | null; lastError: string | null; groupRecreated: number;
    logStore: { status: 'ok' | 'failing'; failingSince: number | null; lastError: string | null };
  } {
    const errAt = this.lastErrorAt.value * 1000;
    // Before its first round ends, from the start: a worker that never got past it (Redis unreachable
    // when it started) answered 'ok' for ever.
    const lastEnded = Math.max(errAt, this.#lastOkAt) || this.#startedAt;
    return {
      status: errAt > this.#lastOkAt ? 'failing' : lastEnded > 0 && nowMs - lastEnded > STALLED_AFTER_MS ? 'stalled' : 'ok',
      lastOkAt: this.#lastOkAt || null,
      lastErrorAt: errAt || null,
      lastError: this.#lastError,
      groupRecreated: this.groupsRecreated.value,
      logStore: { status: this.#logStoreFailingSince === 0 ? 'ok' : 'failing', failingSince: this.#logStoreFailingSince || null, lastError: this.#logStoreError },
    };
  }

  render(): string {
    return this.registry.render();
  }
}

export const billingMetrics = new BillingMetrics();
