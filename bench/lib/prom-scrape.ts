// Reads a Prometheus histogram from a /metrics endpoint and gives percentiles of what was observed
// between two scrapes (upper bucket bound, as Prometheus' histogram_quantile would without
// interpolation). Used for the billing worker's gateway_billing_lag_seconds when it is exposed.
import { parsePromText } from '../../core/metrics/prom.js';

export type Buckets = Array<[le: number, cumulative: number]>;

export async function scrapeHistogram(url: string, name: string): Promise<Buckets | null> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    if (!res.ok) return null;
    const m = parsePromText(await res.text());
    const out: Buckets = [];
    for (const [k, v] of m) {
      const b = new RegExp(`^${name}_bucket\\{le="([^"]+)"\\}$`).exec(k);
      if (b) out.push([b[1] === '+Inf' ? Infinity : Number(b[1]), v]);
    }
    return out.length ? out.sort((a, b) => a[0] - b[0]) : null;
  } catch {
    return null;
  }
}

/** Percentile (0..1) of the observations between `before` and `after`, as a bucket upper bound. */
export function histogramQuantile(before: Buckets | null, after: Buckets, q: number): { value: number; count: number } {
  const diff = after.map(([le, c], i) => [le, c - (before?.[i]?.[1] ?? 0)] as [number, number]);
  const total = diff[diff.length - 1]?.[1] ?? 0;
  if (total <= 0) return { value: NaN, count: 0 };
  const rank = q * total;
  for (const [le, c] of diff) if (c >= rank) return { value: le, count: total };
  return { value: Infinity, count: total };
}
