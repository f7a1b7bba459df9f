// Scraping reads, never writes: two scrapes in a row give the same event-loop figures.
import { describe, expect, it } from 'vitest';
import { parsePromText } from '../../core/metrics/prom.js';
import { RelayMetrics, errorTypeForStatus } from './relay-metrics.js';

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

  it('relay metrics: in flight, outstanding reservations, error types', () => {
    const m = new RelayMetrics();
    m.requestStarted();
    m.requestStarted();
    m.reservationOpened();
    m.requestDone(200, '', 1.5);
    const text = parsePromText(m.render());
    expect(text.get('gateway_relay_requests_in_flight')).toBe(1);
    expect(text.get('gateway_relay_reservations_outstanding')).toBe(1);
    expect(text.get('gateway_relay_requests_total{status="200",error_type=""}')).toBe(1);
    expect(errorTypeForStatus(529)).toBe('overloaded_error');
    expect(errorTypeForStatus(200)).toBe('');
  });
});
