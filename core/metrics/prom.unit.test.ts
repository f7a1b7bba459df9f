import { describe, expect, it } from 'vitest';
import { BillingMetrics } from '../../billing/metrics/billing-metrics.js';
import { Counter2, Histogram, Registry, parsePromText } from './prom.js';
import { RelayMetrics, errorTypeForStatus } from './relay-metrics.js';

describe('prometheus text exposition', () => {
  it('renders counters with labels and cumulative histogram buckets', () => {
    const r = new Registry();
    const c = r.register(new Counter2('x_total', 'help', ['status', 'type']));
    const h = r.register(new Histogram('lat_seconds', 'help', [0.001, 0.01]));
    c.inc(200, '');
    c.inc(200, '');
    c.inc(529, 'overloaded_error');
    h.observe(0.0005);
    h.observe(0.005);
    h.observe(5);
    const m = parsePromText(r.render());
    expect(m.get('x_total{status="200",type=""}')).toBe(2);
    expect(m.get('x_total{status="529",type="overloaded_error"}')).toBe(1);
    expect(m.get('lat_seconds_bucket{le="0.001"}')).toBe(1);
    expect(m.get('lat_seconds_bucket{le="0.01"}')).toBe(2);
    expect(m.get('lat_seconds_bucket{le="+Inf"}')).toBe(3);
    expect(m.get('lat_seconds_count')).toBe(3);
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

  it('billing lag comes from the stream entry ids', () => {
    const m = new BillingMetrics();
    m.batch(['1000-0', '1900-3'], { applied: 2, replayed: 0, rejected: 0 }, 1950, 2000);
    const text = parsePromText(m.render());
    expect(text.get('gateway_billing_lag_seconds_bucket{le="0.1"}')).toBe(1); // 100 ms
    expect(text.get('gateway_billing_lag_seconds_bucket{le="1"}')).toBe(2); // 1000 ms
    expect(text.get('gateway_billing_events_total{result="applied"}')).toBe(2);
  });
});
