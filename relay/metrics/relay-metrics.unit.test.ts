// Scraping reads, never writes: two scrapes in a row give the same event-loop figures.
import { describe, expect, it } from 'vitest';
import { parsePromText } from './prom.js';
import { RelayMetrics } from './relay-metrics.js';

function block(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) { /* busy */ }
}

describe('relay metrics', () => {
  it('a scrape does not reset the event-loop delay: two scrapes report the same p99', async () => {
    const m = new RelayMetrics(200);
    await new Promise((r) => setTimeout(r, 30));
    block(80);
    await new Promise((r) => setTimeout(r, 250));
    const first = parsePromText(m.render());
    const second = parsePromText(m.render());
    const p99 = first.get('nodejs_eventloop_delay_p99_seconds')!;
    expect(p99).toBeGreaterThan(0);
    expect(second.get('nodejs_eventloop_delay_p99_seconds')).toBe(p99);
    expect(second.get('nodejs_eventloop_delay_max_seconds')).toBe(first.get('nodejs_eventloop_delay_max_seconds'));
    expect(first.get('nodejs_eventloop_delay_max_seconds')).toBeGreaterThan(0.05);
  });
});
