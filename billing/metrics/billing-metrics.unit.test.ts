import { describe, expect, it } from 'vitest';
import { parsePromText } from '../../core/metrics/prom.js';
import { BillingMetrics, STALLED_AFTER_MS } from './billing-metrics.js';

describe('billing metrics', () => {
  it('health: ok, failing while the last round failed, stalled when no round has ended for a while', () => {
    const m = new BillingMetrics();
    // Before its first round a worker is starting, not stuck.
    expect(m.health(1_000_000).status).toBe('ok');
    m.consumed(1_000_000);
    expect(m.health(1_000_000 + STALLED_AFTER_MS).status).toBe('ok');
    // A round blocked on a paused Redis ends neither way: before, 'ok' with lastOkAt frozen, for ever.
    expect(m.health(1_000_001 + STALLED_AFTER_MS)).toMatchObject({ status: 'stalled', lastOkAt: 1_000_000 });
    m.failed(new Error('ECONNREFUSED'), 1_000_002 + STALLED_AFTER_MS);
    expect(m.health(1_000_003 + STALLED_AFTER_MS)).toMatchObject({ status: 'failing', lastError: 'ECONNREFUSED' });
    m.consumed(1_000_004 + STALLED_AFTER_MS);
    expect(m.health(1_000_005 + STALLED_AFTER_MS).status).toBe('ok');
  });

  // Before: 'ok' for ever, lastOkAt null (a worker started while Redis was unreachable never ends a round).
  it('health: a worker whose first round never ends is stalled, counted from its start', () => {
    const m = new BillingMetrics();
    m.starting(2_000_000);
    expect(m.health(2_000_000 + STALLED_AFTER_MS).status).toBe('ok');
    expect(m.health(2_000_001 + STALLED_AFTER_MS)).toMatchObject({ status: 'stalled', lastOkAt: null });
    m.consumed(2_000_002 + STALLED_AFTER_MS);
    expect(m.health(2_000_003 + STALLED_AFTER_MS).status).toBe('ok');
  });

  it('billing lag comes from the stream entry ids', () => {
    const m = new BillingMetrics();
    m.batch(['1000-0', '1900-3'], { events: 2, applied: 2, replayed: 0, rejected: 0 }, 1950, 2000);
    const text = parsePromText(m.render());
    expect(text.get('gateway_billing_lag_seconds_bucket{le="0.1"}')).toBe(1); // 100 ms
    expect(text.get('gateway_billing_lag_seconds_bucket{le="1"}')).toBe(2); // 1000 ms
    expect(text.get('gateway_billing_events_total{result="applied"}')).toBe(2);
  });

  it('counts an entry\'s lag once per event it holds', () => {
    const m = new BillingMetrics();
    m.batch(['1000-0', '1900-3'], { events: 15, applied: 15, replayed: 0, rejected: 0 }, 1950, 2000, [14, 1]);
    const text = parsePromText(m.render());
    expect(text.get('gateway_billing_lag_seconds_bucket{le="0.1"}')).toBe(1);
    expect(text.get('gateway_billing_lag_seconds_bucket{le="1"}')).toBe(15);
    expect(text.get('gateway_billing_lag_seconds_count')).toBe(15);
    expect(text.get('gateway_billing_lag_seconds_sum')).toBeCloseTo(14 * 1 + 0.1);
    expect(text.get('gateway_billing_batch_size_sum')).toBe(15);
  });
});
