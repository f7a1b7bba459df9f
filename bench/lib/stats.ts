// Exact percentiles over recorded samples (a scenario records at most a few hundred thousand values),
// so sub-millisecond differences between the relay and its baselines are not lost to bucketing.
export class Recorder {
  #v = new Float64Array(1024);
  #n = 0;
  record(v: number): void {
    if (this.#n === this.#v.length) {
      const next = new Float64Array(this.#v.length * 2);
      next.set(this.#v);
      this.#v = next;
    }
    this.#v[this.#n++] = v;
  }
  get count(): number {
    return this.#n;
  }
  summary(): Summary {
    return summarize(this.#v.subarray(0, this.#n));
  }
}

export interface Summary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

export const EMPTY_SUMMARY: Summary = { count: 0, mean: NaN, p50: NaN, p90: NaN, p99: NaN, p999: NaN, max: NaN };

export function summarize(values: ArrayLike<number>): Summary {
  const n = values.length;
  if (n === 0) return { ...EMPTY_SUMMARY };
  const s = Float64Array.from(values).sort();
  let sum = 0;
  for (let i = 0; i < n; i++) sum += s[i]!;
  const q = (p: number): number => s[Math.min(n - 1, Math.max(0, Math.ceil(p * n) - 1))]!;
  return { count: n, mean: sum / n, p50: q(0.5), p90: q(0.9), p99: q(0.99), p999: q(0.999), max: s[n - 1]! };
}

export function round(v: number, digits = 3): number {
  if (!Number.isFinite(v)) return v;
  const f = 10 ** digits;
  return Math.round(v * f) / f;
}
