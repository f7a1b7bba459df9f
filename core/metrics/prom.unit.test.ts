import { describe, expect, it } from 'vitest';
import { Counter2, Histogram, Registry, parsePromText } from './prom.js';

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
});
