// Per-channel metrics of the relay, labelled by channel id. Cardinality is bounded: the first
// MAX_CHANNEL_LABELS channels seen get a label of their own, later ones share channel="other", so a
// deployment with thousands of channels cannot blow up the scrape (the routes cap what is real anyway).
//
//   gateway_relay_channel_attempts_total{channel,outcome}       provider attempts: ok, or the class of
//                                                               failure (core/channels/provider-fault.ts:
//                                                               channel, rate_limit, overloaded, server,
//                                                               client), or connection
//   gateway_relay_channel_ttfb_seconds{channel}                 forwarded -> provider response headers
//   gateway_relay_channel_latency_seconds{channel}              forwarded -> exchange finished
//   gateway_relay_channel_status_changes_total{channel,status}  status changes this relay made (auto_disabled)
//   gateway_relay_channel_route_changes_total{channel,change}   channels this relay saw join or leave its
//                                                               routes on a reload (whoever changed them:
//                                                               a probe re-enabling, an administrator, ...)
//   gateway_relay_channel_health_flush_failures_total           success batches Redis did not take
import { Counter, Counter2, LATENCY_BUCKETS_SEC, type Metric, type Registry } from '../../core/metrics/prom.js';
import { relayMetrics } from './relay-metrics.js';

export const MAX_CHANNEL_LABELS = 200;
const OTHER = 'other';

/** A histogram per label value (one label), buckets as prom.ts's Histogram. */
class LabelledHistogram implements Metric {
  readonly #bounds: Float64Array;
  readonly #children = new Map<string, { counts: Float64Array; sum: number; count: number }>();
  constructor(readonly name: string, readonly help: string, readonly label: string, bounds: readonly number[]) {
    this.#bounds = Float64Array.from(bounds);
  }
  observe(labelValue: string, v: number): void {
    let child = this.#children.get(labelValue);
    if (!child) this.#children.set(labelValue, (child = { counts: new Float64Array(this.#bounds.length + 1), sum: 0, count: 0 }));
    const b = this.#bounds;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    child.counts[i]!++;
    child.sum += v;
    child.count++;
  }
  count(labelValue: string): number {
    return this.#children.get(labelValue)?.count ?? 0;
  }
  render(out: string[]): void {
    out.push(`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`);
    for (const [value, child] of this.#children) {
      let acc = 0;
      for (let i = 0; i < child.counts.length; i++) {
        acc += child.counts[i]!;
        const le = i < this.#bounds.length ? String(this.#bounds[i]) : '+Inf';
        out.push(`${this.name}_bucket{${this.label}="${value}",le="${le}"} ${acc}`);
      }
      out.push(`${this.name}_sum{${this.label}="${value}"} ${child.sum}`, `${this.name}_count{${this.label}="${value}"} ${child.count}`);
    }
  }
}

export class ChannelMetrics {
  readonly attempts: Counter2;
  readonly ttfb: LabelledHistogram;
  readonly latency: LabelledHistogram;
  readonly statusChanges: Counter2;
  readonly routeChanges: Counter2;
  readonly setAsides: Counter2;
  readonly flushFailures: Counter;
  /** Channel id → its label (its id as a string, or 'other' past the cap), made once per channel. */
  readonly #labels = new Map<number, string>();

  constructor(registry: Registry) {
    this.attempts = registry.register(new Counter2('gateway_relay_channel_attempts_total', 'Provider attempts per channel by outcome: ok, or the failure class (channel, rate_limit, overloaded, server, client, connection).', ['channel', 'outcome']));
    this.ttfb = registry.register(new LabelledHistogram('gateway_relay_channel_ttfb_seconds', 'Per channel: time from forwarding to the provider\'s response headers.', 'channel', LATENCY_BUCKETS_SEC));
    this.latency = registry.register(new LabelledHistogram('gateway_relay_channel_latency_seconds', 'Per channel: time from forwarding to the end of the exchange.', 'channel', LATENCY_BUCKETS_SEC));
    this.statusChanges = registry.register(new Counter2('gateway_relay_channel_status_changes_total', 'Channel status changes this relay made (auto_disabled).', ['channel', 'status']));
    this.routeChanges = registry.register(new Counter2('gateway_relay_channel_route_changes_total', 'Channels this relay saw join or leave its routes on a reload (enabled again, disabled, created, deleted).', ['channel', 'change']));
    this.setAsides = registry.register(new Counter2('gateway_relay_channel_set_aside_total', 'Times this relay set a channel aside as its provider kept failing to serve (relay/routing/channel-cooldown.ts).', ['channel', 'reason']));
    this.flushFailures = registry.register(new Counter('gateway_relay_channel_health_flush_failures_total', 'Batches of channel successes Redis did not take (the fault-rate window then undercounts them).'));
  }

  label(channelId: number): string {
    let l = this.#labels.get(channelId);
    if (l === undefined) {
      l = this.#labels.size < MAX_CHANNEL_LABELS ? String(channelId) : OTHER;
      // Past the cap the map still grows by one entry per channel id (ids are bounded by the
      // channels table), never the metric's label set.
      this.#labels.set(channelId, l);
    }
    return l;
  }

  /** One provider attempt: its outcome ('ok', a fault class, 'connection') and, when headers came, its TTFB. */
  attempt(channelId: number, outcome: string, ttfbMs: number | undefined): void {
    const l = this.label(channelId);
    this.attempts.inc(l, outcome);
    if (ttfbMs !== undefined) this.ttfb.observe(l, ttfbMs / 1000);
  }

  /** The exchange a channel answered ended, `ms` after it was forwarded there. */
  finished(channelId: number, ms: number): void {
    this.latency.observe(this.label(channelId), ms / 1000);
  }

  statusChanged(channelId: number, status: 'auto_disabled'): void {
    this.statusChanges.inc(this.label(channelId), status);
  }

  routeChanged(channelId: number, joined: boolean): void {
    this.routeChanges.inc(this.label(channelId), joined ? 'joined' : 'left');
  }

  setAside(channelId: number): void {
    this.setAsides.inc(this.label(channelId), 'failures');
  }
}

/** The relay's instance, in the same registry as relayMetrics (one /metrics). */
export const channelMetrics = new ChannelMetrics(relayMetrics.registry);
