// Which provider format a channel speaks, by its `type` as new-api numbers them: 1 is OpenAI (Chat
// Completions), 14 Anthropic (the console's default). Any other type is served as Anthropic, as every
// channel was before OpenAI-format channels existed.
import type { Channel } from '../routing/channel-registry.js';
import { anthropicProvider } from './anthropic/anthropic-provider.js';
import { openaiProvider } from './openai/openai-provider.js';
import type { Provider } from './provider.js';

export const CHANNEL_TYPE = { openai: 1, anthropic: 14 } as const;

const PROVIDERS: ReadonlyMap<number, Provider> = new Map([
  [CHANNEL_TYPE.openai, openaiProvider],
  [CHANNEL_TYPE.anthropic, anthropicProvider],
]);

export function providerOf(channel: Pick<Channel, 'type'>): Provider {
  return PROVIDERS.get(channel.type) ?? anthropicProvider;
}
