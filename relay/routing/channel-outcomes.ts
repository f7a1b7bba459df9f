// What the exchange tells the routing about each provider attempt: one call per attempt from the
// handler's failure and success paths (relay/messages/messages-handler.ts), so the handler stays a
// request lifecycle and the rules live here. Into the per-channel metrics always; into the channel's
// health (channel-health.ts) when it is the channel's fault or a success. Allocation-free on success.
import { classifyProviderError, type ProviderFault } from '../../core/channels/provider-fault.js';
import { channelMetrics } from '../metrics/channel-metrics.js';
import type { ChannelHealth } from './channel-health.js';
import type { Channel } from './channel-registry.js';

/** The provider answered a non-2xx status: its class (provider-fault.ts), recorded against the channel. */
export function providerFailed(health: ChannelHealth | undefined, channel: Channel, requestId: string, status: number, body: string, ttfbMs: number): ProviderFault {
  const fault = classifyProviderError(status, body);
  channelMetrics.attempt(channel.id, fault, ttfbMs);
  if (fault === 'channel') void health?.faulted(channel, requestId, `provider answered HTTP ${status}`);
  return fault;
}

/** The provider answered 2xx: a success for the channel's health (counted locally, no Redis call). */
export function providerAnswered(health: ChannelHealth | undefined, channel: Channel, ttfbMs: number): void {
  channelMetrics.attempt(channel.id, 'ok', ttfbMs);
  health?.succeeded(channel);
}

/** The provider could not be reached, or gave no answer: metrics only (not the channel's credential). */
export function providerUnreachable(channel: Channel): void {
  channelMetrics.attempt(channel.id, 'connection', undefined);
}

/** The exchange a channel answered ended, `ms` after it was forwarded there. */
export function exchangeEnded(channel: Channel, ms: number): void {
  channelMetrics.finished(channel.id, ms);
}
