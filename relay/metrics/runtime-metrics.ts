// The runtime's own waits as Prometheus histograms, so that a scrape (or the bench, from two scrapes)
// tells how long the event loop was held and how often and how long the garbage collector paused it:
//
//   nodejs_eventloop_delay_seconds{_bucket,_sum,_count}   event-loop delay, perf_hooks.monitorEventLoopDelay
//   nodejs_gc_duration_seconds{kind}{_bucket,_sum,_count}  GC pauses by kind (minor, major, incremental, weakcb)
//
// monitorEventLoopDelay keeps an HDR histogram that only answers percentiles, and Prometheus wants
// cumulative bucket counters that never go back: a timer folds each completed interval's histogram
// into the buckets (count × the share of samples at or under each bound) and resets it. Node records
// each sample as the time between two of its timer's ticks, so the timer's own interval (the
// resolution) is subtracted: an idle loop reads ~0, not 10 ms. The timer
// runs whatever the scrapes do, so a scrape never changes a figure. GC pauses come one by one from a
// PerformanceObserver (delivered in batches off the hot path) and are counted exactly.
import { monitorEventLoopDelay, PerformanceObserver, constants, type IntervalHistogram } from 'node:perf_hooks';
import type { Metric } from '../../core/metrics/prom.js';

/** From one sampling interval of the loop (resolution) to a second: what a request's latency feels. */
export const EVENT_LOOP_BUCKETS_SEC: readonly number[] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1];
/** A scavenge takes ~0.1-2 ms, a full mark-compact of a small heap ~5-50 ms. */
export const GC_BUCKETS_SEC: readonly number[] = [0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

const fmt = (v: number): string => (v === Infinity ? '+Inf' : String(v));

/** Cumulative bucket counts with a sum; rendered as one Prometheus histogram series. */
class Buckets {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }
  observe(v: number): void {
    let i = 0;
    while (i < this.bounds.length && v > this.bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += v;
    this.count++;
  }
  render(out: string[], name: string, labels: string): void {
    let acc = 0;
    const sep = labels ? `${labels},` : '';
    for (let i = 0; i < this.counts.length; i++) {
      acc += this.counts[i]!;
      out.push(`${name}_bucket{${sep}le="${fmt(i < this.bounds.length ? this.bounds[i]! : Infinity)}"} ${acc}`);
    }
    const l = labels ? `{${labels}}` : '';
    out.push(`${name}_sum${l} ${this.sum}`, `${name}_count${l} ${this.count}`);
  }
}

/**
 * nodejs_eventloop_delay_seconds. Each `foldMs` the interval's samples are distributed over the
 * buckets by the HDR histogram's percentiles (exact at the bucket bounds to the HDR's precision).
 */
export class EventLoopDelayHistogram implements Metric {
  readonly name = 'nodejs_eventloop_delay_seconds';
  readonly #h: IntervalHistogram;
  readonly #b = new Buckets(EVENT_LOOP_BUCKETS_SEC);
  readonly #timer: NodeJS.Timeout;
  readonly #resolutionNs: number;

  constructor(resolutionMs = 10, foldMs = 1000) {
    this.#resolutionNs = resolutionMs * 1e6;
    this.#h = monitorEventLoopDelay({ resolution: resolutionMs });
    this.#h.enable();
    this.#timer = setInterval(() => this.fold(), foldMs);
    this.#timer.unref();
  }

  /** Moves the samples taken since the last fold into the buckets. */
  fold(): void {
    const h = this.#h;
    const n = h.count;
    if (n > 0) {
      // percentiles: percentile → value (ns), ascending; the share at or under a bound is the
      // largest percentile whose value does not exceed it.
      const pts = [...h.percentiles.entries()];
      let prev = 0;
      for (let i = 0; i < this.#b.bounds.length; i++) {
        const boundNs = this.#b.bounds[i]! * 1e9 + this.#resolutionNs;
        let share = 0;
        for (const [p, v] of pts) if (v <= boundNs) share = p;
        const cum = Math.round((n * share) / 100);
        this.#b.counts[i]! += Math.max(0, cum - prev);
        prev = Math.max(prev, cum);
      }
      this.#b.counts[this.#b.bounds.length]! += Math.max(0, n - prev);
      this.#b.sum += (Math.max(0, h.mean - this.#resolutionNs) * n) / 1e9;
      this.#b.count += n;
    }
    h.reset();
  }

  /** Cumulative counts per upper bound (seconds; the last is +Inf), for tests. */
  buckets(): Array<[number, number]> {
    let acc = 0;
    return [...this.#b.counts].map((c, i) => [i < this.#b.bounds.length ? this.#b.bounds[i]! : Infinity, (acc += c)]);
  }

  get count(): number {
    return this.#b.count;
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#h.disable();
  }

  render(out: string[]): void {
    out.push(`# HELP ${this.name} Event loop delay (perf_hooks.monitorEventLoopDelay), folded into buckets every second.`, `# TYPE ${this.name} histogram`);
    this.#b.render(out, this.name, '');
  }
}

const GC_KINDS: ReadonlyArray<[number, string]> = [
  [constants.NODE_PERFORMANCE_GC_MINOR, 'minor'],
  [constants.NODE_PERFORMANCE_GC_MAJOR, 'major'],
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL, 'incremental'],
  [constants.NODE_PERFORMANCE_GC_WEAKCB, 'weakcb'],
];

/** nodejs_gc_duration_seconds{kind}: every GC pause, by kind. */
export class GcPauseHistogram implements Metric {
  readonly name = 'nodejs_gc_duration_seconds';
  readonly #byKind = new Map<string, Buckets>(GC_KINDS.map(([, k]) => [k, new Buckets(GC_BUCKETS_SEC)]));
  readonly #observer: PerformanceObserver;

  constructor() {
    this.#observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const kind = (e as unknown as { detail?: { kind?: number } | null }).detail?.kind ?? 0;
        this.observe(kind, e.duration / 1000);
      }
    });
    this.#observer.observe({ entryTypes: ['gc'] });
  }

  observe(kind: number, seconds: number): void {
    const name = GC_KINDS.find(([k]) => k === kind)?.[1] ?? 'other';
    let b = this.#byKind.get(name);
    if (!b) this.#byKind.set(name, (b = new Buckets(GC_BUCKETS_SEC)));
    b.observe(seconds);
  }

  /** Pauses and their total seconds, by kind, for tests. */
  totals(): Record<string, { count: number; seconds: number }> {
    return Object.fromEntries([...this.#byKind].map(([k, b]) => [k, { count: b.count, seconds: b.sum }]));
  }

  stop(): void {
    this.#observer.disconnect();
  }

  render(out: string[]): void {
    out.push(`# HELP ${this.name} Garbage collection pauses by kind (PerformanceObserver 'gc').`, `# TYPE ${this.name} histogram`);
    for (const [kind, b] of this.#byKind) b.render(out, this.name, `kind="${kind}"`);
  }
}
