// What the exchange tells the routing about each provider attempt: one call per attempt from the
// handler's failure and success paths (relay/messages/messages-handler.ts), so the handler stays a
// request lifecycle and the rules live here. Into the per-channel metrics always; into the channel's
// health (channel-health.ts) when it is the channel's fault or a success. Allocation-free on success.
import { classifyProviderError, type ProviderFault } from '../../core/channels/provider-fault.js';
import { channelMetrics } from '../metrics/channel-metrics.js';
import type { ChannelCooldown } from './channel-cooldown.js';
import type { ChannelHealth } from './channel-health.js';
import type { Channel } from './channel-registry.js';

/**
 * The provider answered a non-2xx status: its class (provider-fault.ts), recorded against the channel.
 * A provider failing to serve (5xx, 529) counts toward setting the channel aside (channel-cooldown.ts).
 * A channel fault does not: its health disables it within a few faults, which setting it aside would
 * spread over minutes. Nor a 429: one client's oversized prompts (OpenAI's "Request too large … tokens
 * per min") would move every user of the route off its preferred channel, three requests at a time.
 */
export function providerFailed(health: ChannelHealth | undefined, cooldown: ChannelCooldown, channel: Channel, requestId: string, status: number, body: string, ttfbMs: number): ProviderFault {
  const fault = classifyProviderError(status, body);
  channelMetrics.attempt(channel.id, fault, ttfbMs);
  if (fault === 'channel') void health?.faulted(channel, requestId, `provider answered HTTP ${status}`);
  if (fault === 'server' || fault === 'overloaded') cooldown.failed(channel.id);
  return fault;
}

/**
 * The provider answered 2xx: a success for the channel's health (counted locally, no Redis call), and
 * for its cooldown unless `cooldown` is null: a stream's is counted when it ends (stream-relay.ts),
 * since a 200 may carry an overload error before any content.
 */
export function providerAnswered(health: ChannelHealth | undefined, cooldown: ChannelCooldown | null, channel: Channel, ttfbMs: number): void {
  channelMetrics.attempt(channel.id, 'ok', ttfbMs);
  health?.succeeded(channel);
  cooldown?.succeeded(channel.id);
}

/**
 * The provider could not be reached, or gave no answer within the headers timeout: metrics, and
 * toward setting the channel aside; not its health (not the channel's credential).
 */
export function providerUnreachable(cooldown: ChannelCooldown, channel: Channel): void {
  channelMetrics.attempt(channel.id, 'connection', undefined);
  cooldown.failed(channel.id);
}

/** The exchange a channel answered ended, `ms` after it was forwarded there. */
export function exchangeEnded(channel: Channel, ms: number): void {
  channelMetrics.finished(channel.id, ms);
}
