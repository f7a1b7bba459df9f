// The relay's Prometheus metrics, served on GET /metrics of RELAY_METRICS_PORT (relay/metrics/
// metrics-server.ts), not on the public port. A scrape only reads: no metric changes because it was
// scraped, so two scrapers (or a curl during an incident) see the same figures. One module-level instance
// (`relayMetrics`) so that each observation on the hot path is a one-line call with numbers and
// interned strings: no label objects, no closures, no Date objects.
//
//   gateway_relay_requests_total{status,error_type}     finished exchanges ('' = success, 'client_closed')
//   gateway_relay_request_duration_seconds              request received -> response ended
//   gateway_relay_upstream_latency_seconds              forwarded -> provider response headers
//   gateway_relay_stream_first_byte_seconds             request received -> first SSE byte written
//   gateway_relay_requests_in_flight                    exchanges started and not yet answered
//   gateway_relay_reservations_outstanding              reservations made and not yet settled
//   gateway_relay_reservations_{opened,closed}_total
//   gateway_relay_stream_pauses_total                   provider body paused on client backpressure
//   gateway_relay_upstream_retries_total                attempts retried on another channel
//   gateway_relay_settle_failures_total                 settlements that failed (left to the reaper)
//   gateway_relay_over_reservation_total                settlements that cost more than was reserved
//   gateway_relay_usage_above_bound_total               settlements whose provider reported more than the request could use (billed at its bound)
//   gateway_relay_spool_pending                         settlements in the spool: not yet taken by Redis, or not yet confirmed on a replica
//   gateway_relay_settlements_unreplicated_total        settlements confirmed on their master alone (no replica confirmed for REDIS_SETTLE_WAIT_GIVE_UP_MS)
//   gateway_relay_prompt_counts_total                   prompts sent to the token-counting workers
//   gateway_relay_handler_errors_total                  exceptions a route handler threw (answered 4xx/5xx)
//   gateway_relay_unhandled_rejections_total            promise rejections nothing handled (logged, kept serving)
//   nodejs_eventloop_delay_p99_seconds                  p99 of the last completed window (EVENT_LOOP_WINDOW_MS)
//   nodejs_eventloop_delay_max_seconds                  largest delay since start
//   nodejs_eventloop_delay_seconds                      event-loop delay histogram (relay/metrics/runtime-metrics.ts)
//   nodejs_gc_duration_seconds{kind}                    GC pauses by kind (minor, major, incremental, weakcb)
//   process_*                                           process health
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

/** The event-loop p99 is that of the last completed window of this length, rotated by a timer. */
export const EVENT_LOOP_WINDOW_MS = 15_000;
const LOOP_RESOLUTION_MS = 20;
const LOOP_RESOLUTION_NS = LOOP_RESOLUTION_MS * 1e6;
import {
  Counter, Counter2, Gauge, Histogram, LATENCY_BUCKETS_SEC, PROM_CONTENT_TYPE, Registry, processMetrics,
} from '../../core/metrics/prom.js';
import { EventLoopDelayHistogram, GcPauseHistogram } from './runtime-metrics.js';

export { PROM_CONTENT_TYPE };

export class RelayMetrics {
  readonly registry = new Registry();
  readonly requests = this.registry.register(new Counter2('gateway_relay_requests_total', 'Finished exchanges (/v1/messages and /v1/chat/completions) by HTTP status and error type (empty = success).', ['status', 'error_type']));
  readonly duration = this.registry.register(new Histogram('gateway_relay_request_duration_seconds', 'Time from request received to response ended.', LATENCY_BUCKETS_SEC));
  readonly upstream = this.registry.register(new Histogram('gateway_relay_upstream_latency_seconds', 'Time from forwarding to the provider\'s response headers.', LATENCY_BUCKETS_SEC));
  readonly firstByte = this.registry.register(new Histogram('gateway_relay_stream_first_byte_seconds', 'Streams: time from request received to the first SSE byte written to the client.', LATENCY_BUCKETS_SEC));
  readonly inFlight = this.registry.register(new Gauge('gateway_relay_requests_in_flight', 'Exchanges started and not yet answered.'));
  readonly opened = this.registry.register(new Counter('gateway_relay_reservations_opened_total', 'Credit reservations made.'));
  readonly closed = this.registry.register(new Counter('gateway_relay_reservations_closed_total', 'Credit reservations settled.'));
  readonly outstanding = this.registry.register(new Gauge('gateway_relay_reservations_outstanding', 'Reservations made and not yet settled.', () => this.opened.value - this.closed.value));
  #spoolPending: () => number = () => 0;
  readonly spoolPending = this.registry.register(new Gauge('gateway_relay_spool_pending', 'Settlements in the spool: not yet taken by Redis, or not yet confirmed on a replica.', () => this.#spoolPending()));
  readonly unreplicatedSettlements = this.registry.register(new Counter('gateway_relay_settlements_unreplicated_total', 'Settlements confirmed on their master alone: no replica confirmed their shard for REDIS_SETTLE_WAIT_GIVE_UP_MS.'));
  readonly pauses = this.registry.register(new Counter('gateway_relay_stream_pauses_total', 'Times a provider stream was paused because the client socket was full.'));
  readonly retries = this.registry.register(new Counter('gateway_relay_upstream_retries_total', 'Provider attempts retried on another channel.'));
  readonly settleFailures = this.registry.register(new Counter('gateway_relay_settle_failures_total', 'Settlements that failed; their reservation waits for the reaper.'));
  readonly lostReservationsBilled = this.registry.register(new Counter('gateway_relay_lost_reservations_billed_total', 'Settlements whose reservation or credit slice Redis had lost with its data (a restart without persistence), billed without it: the cost debited alone, once.'));
  readonly settlementsUnmatched = this.registry.register(new Counter('gateway_relay_settlements_unmatched_total', 'Settlements that found no reservation and were not billed: settled already by an earlier try, or lost with Redis\'s data (logged with their request ids, to reconcile).'));
  readonly overReservations = this.registry.register(new Counter('gateway_relay_over_reservation_total', 'Settlements whose cost exceeded the reservation (the bound failed; the excess was still billed).'));
  readonly usageAboveBounds = this.registry.register(new Counter('gateway_relay_usage_above_bound_total', 'Settlements whose provider reported more usage than the request could use (max_tokens x n, a text prompt\'s bytes); billed at that bound.'));
  readonly promptCounts = this.registry.register(new Counter('gateway_relay_prompt_counts_total', 'Prompts sent to the token-counting workers (count_tokens, and reservations the byte bound did not fit).'));
  readonly handlerErrors = this.registry.register(new Counter('gateway_relay_handler_errors_total', 'Exceptions thrown by a route handler, caught and answered.'));
  readonly unhandledRejections = this.registry.register(new Counter('gateway_relay_unhandled_rejections_total', 'Promise rejections nothing handled; logged, the relay kept serving.'));
  readonly #loop: IntervalHistogram;
  /** Since start, never reset: the all-time maximum. */
  readonly #loopAllTime: IntervalHistogram;
  #loopWindowP99 = 0;

  /** `windowMs`: the event-loop p99's window (tests shorten it). */
  constructor(windowMs = EVENT_LOOP_WINDOW_MS) {
    this.#loop = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
    this.#loop.enable();
    this.#loopAllTime = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
    this.#loopAllTime.enable();
    // The window is rotated by a timer, never by a scrape: scraping changes nothing.
    setInterval(() => {
      // A sample is the time between two ticks of the 20 ms timer: the delay is what exceeds it.
      this.#loopWindowP99 = Math.max(0, this.#loop.percentile(99) - LOOP_RESOLUTION_NS) / 1e9;
      this.#loop.reset();
    }, windowMs).unref();
    this.registry.register(new Gauge('nodejs_eventloop_delay_p99_seconds', `Event loop delay p99 over the last completed ${windowMs / 1000} s window.`, () => this.#loopWindowP99));
    this.registry.register(new Gauge('nodejs_eventloop_delay_max_seconds', 'Largest event loop delay since the process started.', () => Math.max(0, this.#loopAllTime.max - LOOP_RESOLUTION_NS) / 1e9));
    this.loopDelay = this.registry.register(new EventLoopDelayHistogram());
    this.gcPauses = this.registry.register(new GcPauseHistogram());
    for (const m of processMetrics()) this.registry.register(m);
  }

  /** The event-loop delay and GC pause histograms: what the loop waited on, for the bench's report. */
  readonly loopDelay: EventLoopDelayHistogram;
  readonly gcPauses: GcPauseHistogram;

  overReservation(): void {
    this.overReservations.value++;
  }

  /** The spool whose pending settlements gateway_relay_spool_pending reports. */
  watchSpool(pending: () => number): void {
    this.#spoolPending = pending;
  }

  usageAboveBound(): void {
    this.usageAboveBounds.value++;
  }

  requestStarted(): void {
    this.inFlight.value++;
  }

  /** Once per exchange. errorType: '' on success, the Anthropic error type otherwise, 'client_closed' on abort. */
  requestDone(status: number, errorType: string, durationMs: number): void {
    this.inFlight.value--;
    this.requests.inc(status, errorType);
    this.duration.observe(durationMs / 1000);
  }

  upstreamLatency(ms: number): void {
    this.upstream.observe(ms / 1000);
  }

  streamFirstByte(ms: number): void {
    this.firstByte.observe(ms / 1000);
  }

  reservationOpened(): void {
    this.opened.value++;
  }

  reservationClosed(): void {
    this.closed.value++;
  }

  streamPaused(): void {
    this.pauses.value++;
  }

  upstreamRetry(): void {
    this.retries.value++;
  }

  settleFailed(): void {
    this.settleFailures.value++;
  }

  promptCounted(): void {
    this.promptCounts.value++;
  }

  handlerError(): void {
    this.handlerErrors.value++;
  }

  unhandledRejection(): void {
    this.unhandledRejections.value++;
  }

  render(): string {
    return this.registry.render();
  }
}

export const relayMetrics = new RelayMetrics();

const ERROR_TYPE_BY_STATUS: Record<number, string> = {
  400: 'invalid_request_error', 401: 'authentication_error', 402: 'billing_error', 403: 'permission_error',
  404: 'not_found_error', 413: 'request_too_large', 429: 'rate_limit_error', 500: 'api_error', 529: 'overloaded_error',
};

/** The Anthropic error type of a relay status ('' below 400), for requestDone's label. */
export function errorTypeForStatus(status: number): string {
  return status < 400 ? '' : (ERROR_TYPE_BY_STATUS[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error'));
}
