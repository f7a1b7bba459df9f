import { describe, expect, it } from 'vitest';
import { parsePromText, Registry } from '../../core/metrics/prom.js';
import { ChannelMetrics, MAX_CHANNEL_LABELS } from './channel-metrics.js';

describe('ChannelMetrics', () => {
  it('labels attempts, TTFB and latency by channel id', () => {
    const registry = new Registry();
    const m = new ChannelMetrics(registry);
    m.attempt(7, 'ok', 12);
    m.attempt(7, 'channel', 3);
    m.attempt(7, 'connection', undefined);
    m.finished(7, 250);
    m.statusChanged(7, 'auto_disabled');
    const out = parsePromText(registry.render());
    expect(out.get('gateway_relay_channel_attempts_total{channel="7",outcome="ok"}')).toBe(1);
    expect(out.get('gateway_relay_channel_attempts_total{channel="7",outcome="channel"}')).toBe(1);
    expect(out.get('gateway_relay_channel_attempts_total{channel="7",outcome="connection"}')).toBe(1);
    expect(out.get('gateway_relay_channel_ttfb_seconds_count{channel="7"}')).toBe(2);
    expect(out.get('gateway_relay_channel_ttfb_seconds_bucket{channel="7",le="0.005"}')).toBe(1);
    expect(out.get('gateway_relay_channel_ttfb_seconds_bucket{channel="7",le="+Inf"}')).toBe(2);
    expect(out.get('gateway_relay_channel_latency_seconds_sum{channel="7"}')).toBe(0.25);
    expect(out.get('gateway_relay_channel_status_changes_total{channel="7",status="auto_disabled"}')).toBe(1);
  });

  it('bounds its label set: channels past the cap share "other"', () => {
    const registry = new Registry();
    const m = new ChannelMetrics(registry);
    for (let id = 1; id <= MAX_CHANNEL_LABELS + 50; id++) m.attempt(id, 'ok', 1);
    const out = parsePromText(registry.render());
    const labels = new Set([...out.keys()].filter((k) => k.startsWith('gateway_relay_channel_attempts_total')).map((k) => /channel="([^"]+)"/.exec(k)![1]));
    expect(labels.size).toBe(MAX_CHANNEL_LABELS + 1);
    expect(out.get('gateway_relay_channel_attempts_total{channel="other",outcome="ok"}')).toBe(50);
    // A channel keeps the label it was given.
    m.attempt(1, 'ok', 1);
    expect(parsePromText(registry.render()).get('gateway_relay_channel_attempts_total{channel="1",outcome="ok"}')).toBe(2);
  });
});
