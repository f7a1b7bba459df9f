// A minimal Prometheus text exposition (format 0.0.4), hand-rolled: counters, gauges and histograms
// with fixed buckets, no label allocation on the hot path (label sets are looked up in nested Maps
// keyed by the raw values, created once), and the text built only when /metrics is scraped.
// Shared by relay/metrics and billing/metrics.
import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';

export const PROM_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export interface Metric {
  render(out: string[]): void;
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function fmt(v: number): string {
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  if (Number.isNaN(v)) return 'NaN';
  return String(v);
}

function header(out: string[], name: string, help: string, type: string): void {
  out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
}

/** A counter without labels. */
export class Counter implements Metric {
  value = 0;
  constructor(readonly name: string, readonly help: string) {}
  inc(by = 1): void {
    this.value += by;
  }
  render(out: string[]): void {
    header(out, this.name, this.help, 'counter');
    out.push(`${this.name} ${fmt(this.value)}`);
  }
}

/** A gauge without labels; `collect` (when given) sets the value at scrape time. */
export class Gauge implements Metric {
  value = 0;
  constructor(readonly name: string, readonly help: string, readonly collect?: () => number) {}
  set(v: number): void {
    this.value = v;
  }
  inc(by = 1): void {
    this.value += by;
  }
  dec(by = 1): void {
    this.value -= by;
  }
  render(out: string[]): void {
    if (this.collect) this.value = this.collect();
    header(out, this.name, this.help, 'gauge');
    out.push(`${this.name} ${fmt(this.value)}`);
  }
}

/** A counter with two labels, e.g. {status, error_type}; children are created on first use. */
export class Counter2 implements Metric {
  readonly #children = new Map<string | number, Map<string, { v: number }>>();
  constructor(readonly name: string, readonly help: string, readonly labels: readonly [string, string]) {}
  inc(a: string | number, b: string, by = 1): void {
    let inner = this.#children.get(a);
    if (!inner) this.#children.set(a, (inner = new Map()));
    const cell = inner.get(b);
    if (cell) cell.v += by;
    else inner.set(b, { v: by });
  }
  get(a: string | number, b: string): number {
    return this.#children.get(a)?.get(b)?.v ?? 0;
  }
  render(out: string[]): void {
    header(out, this.name, this.help, 'counter');
    const [la, lb] = this.labels;
    for (const [a, inner] of this.#children) {
      for (const [b, cell] of inner) {
        out.push(`${this.name}{${la}="${escapeLabel(String(a))}",${lb}="${escapeLabel(b)}"} ${fmt(cell.v)}`);
      }
    }
  }
}

/** A counter with one label. */
export class Counter1 implements Metric {
  readonly #children = new Map<string, { v: number }>();
  constructor(readonly name: string, readonly help: string, readonly label: string) {}
  inc(a: string, by = 1): void {
    const cell = this.#children.get(a);
    if (cell) cell.v += by;
    else this.#children.set(a, { v: by });
  }
  get(a: string): number {
    return this.#children.get(a)?.v ?? 0;
  }
  render(out: string[]): void {
    header(out, this.name, this.help, 'counter');
    for (const [a, cell] of this.#children) out.push(`${this.name}{${this.label}="${escapeLabel(a)}"} ${fmt(cell.v)}`);
  }
}

/** Latency buckets in seconds, from 100 µs (the relay's own overhead) to 5 minutes (long streams). */
export const LATENCY_BUCKETS_SEC: readonly number[] = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
];

/** A histogram without labels; observe() is a bucket scan and two additions. */
export class Histogram implements Metric {
  readonly #bounds: Float64Array;
  readonly #counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(readonly name: string, readonly help: string, bounds: readonly number[]) {
    this.#bounds = Float64Array.from(bounds);
    this.#counts = new Float64Array(bounds.length + 1);
  }
  /** `times` observations of the same value (a batch's events that share one timestamp). */
  observe(v: number, times = 1): void {
    const b = this.#bounds;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    this.#counts[i]! += times;
    this.sum += v * times;
    this.count += times;
  }
  /** Cumulative bucket counts with their upper bounds (the last is +Inf). For tests and the bench. */
  buckets(): Array<[le: number, cumulative: number]> {
    const out: Array<[number, number]> = [];
    let acc = 0;
    for (let i = 0; i < this.#counts.length; i++) {
      acc += this.#counts[i]!;
      out.push([i < this.#bounds.length ? this.#bounds[i]! : Infinity, acc]);
    }
    return out;
  }
  render(out: string[]): void {
    header(out, this.name, this.help, 'histogram');
    for (const [le, c] of this.buckets()) out.push(`${this.name}_bucket{le="${fmt(le)}"} ${fmt(c)}`);
    out.push(`${this.name}_sum ${fmt(this.sum)}`, `${this.name}_count ${fmt(this.count)}`);
  }
}

/** Process figures every Prometheus client exports, read at scrape time. */
export function processMetrics(prefix = 'process'): Metric[] {
  return [
    new Gauge(`${prefix}_cpu_user_seconds_total`, 'User CPU time spent, seconds.', () => process.cpuUsage().user / 1e6),
    new Gauge(`${prefix}_cpu_system_seconds_total`, 'System CPU time spent, seconds.', () => process.cpuUsage().system / 1e6),
    new Gauge(`${prefix}_resident_memory_bytes`, 'Resident memory size, bytes.', () => process.memoryUsage.rss()),
    new Gauge('nodejs_heap_used_bytes', 'V8 heap used, bytes.', () => process.memoryUsage().heapUsed),
  ];
}

export class Registry {
  readonly #metrics: Metric[] = [];
  register<M extends Metric>(m: M): M {
    this.#metrics.push(m);
    return m;
  }
  render(): string {
    const out: string[] = [];
    for (const m of this.#metrics) m.render(out);
    out.push('');
    return out.join('\n');
  }
}

/**
 * Parses a text exposition into `name{labels}` → value (for tests and the bench's scrapes). Comments
 * and blank lines are skipped.
 */
export function parsePromText(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const sp = line.lastIndexOf(' ');
    const v = line.slice(sp + 1);
    out.set(line.slice(0, sp), v === '+Inf' ? Infinity : Number(v));
  }
  return out;
}

/**
 * A metrics server answers CONNECT as any other method on no route: Node hands CONNECT to the
 * server's 'connect' listeners, not to the request handler, and destroys the socket unanswered when
 * there is none.
 */
export function answerConnectNotFound(server: Server): void {
  server.on('connect', (_request: unknown, socket: Duplex) => {
    socket.end('HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 10\r\nConnection: close\r\n\r\nnot found\n');
  });
}
