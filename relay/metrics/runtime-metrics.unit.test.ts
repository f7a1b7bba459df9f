// The runtime histograms: a blocked loop lands in the bucket of its delay, GC pauses are counted by
// kind, and scraping changes neither.
import { describe, expect, it } from 'vitest';
import { parsePromText } from '../../core/metrics/prom.js';
import { EventLoopDelayHistogram, GcPauseHistogram } from './runtime-metrics.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
function block(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) { /* busy */ }
}
const render = (m: { render(out: string[]): void }) => {
  const out: string[] = [];
  m.render(out);
  return parsePromText(out.join('\n'));
};

describe('event-loop delay histogram', () => {
  it('a 120 ms block is counted above 100 ms, cumulative buckets never decrease, a scrape changes nothing', async () => {
    const h = new EventLoopDelayHistogram(10, 60_000);
    try {
      await sleep(50);
      block(120);
      await sleep(30);
      h.fold();
      const first = render(h);
      expect(render(h)).toEqual(first);
      const count = first.get('nodejs_eventloop_delay_seconds_count')!;
      expect(count).toBeGreaterThan(0);
      const under100 = first.get('nodejs_eventloop_delay_seconds_bucket{le="0.1"}')!;
      const all = first.get('nodejs_eventloop_delay_seconds_bucket{le="+Inf"}')!;
      expect(all).toBe(count);
      expect(all - under100).toBeGreaterThanOrEqual(1);
      const cum = h.buckets().map(([, c]) => c);
      for (let i = 1; i < cum.length; i++) expect(cum[i]).toBeGreaterThanOrEqual(cum[i - 1]!);
      expect(first.get('nodejs_eventloop_delay_seconds_sum')).toBeGreaterThan(0.1);
    } finally {
      h.stop();
    }
  });
});

describe('GC pause histogram', () => {
  it('counts the pauses of an allocating loop by kind', async () => {
    const g = new GcPauseHistogram();
    try {
      let keep: unknown[] = [];
      for (let i = 0; i < 40; i++) {
        keep = Array.from({ length: 10_000 }, (_, j) => ({ j, s: `x${j}` }));
        if (i % 10 === 0) await sleep(1);
      }
      expect(keep.length).toBe(10_000);
      await sleep(50);
      const t = g.totals();
      expect(t.minor!.count).toBeGreaterThan(0);
      expect(t.minor!.seconds).toBeGreaterThan(0);
      const text = render(g);
      expect(text.get('nodejs_gc_duration_seconds_count{kind="minor"}')).toBe(t.minor!.count);
      expect(text.get('nodejs_gc_duration_seconds_bucket{kind="minor",le="+Inf"}')).toBe(t.minor!.count);
    } finally {
      g.stop();
    }
  });
});
