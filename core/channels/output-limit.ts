// Which field bounds the output of a Chat Completions request, for the relay (the bound a request was
// reserved at, relay/messages/messages-handler.ts) and console-api (the one-token channel test and
// probe). OpenAI's reasoning models (o1, o3, o4-mini, gpt-5 and their dated or suffixed names, with
// or without a vendor prefix such as `openai/`) refuse `max_tokens` with a 400 and take
// `max_completion_tokens` (reasoning included); many OpenAI-compatible providers (older vLLM,
// DeepSeek, Ollama, most proxies) know only `max_tokens` and ignore the other, which would leave the
// output unbounded. So `max_completion_tokens` is written for a reasoning model's name and
// `max_tokens` for every other, as new-api and LiteLLM decide it. A client's `max_tokens` is kept; its
// `max_completion_tokens` alone becomes `max_tokens` for every other model, since the reservation
// counted it and a provider that ignores it would generate up to its own default.
const REASONING_MODEL = /^(?:[\w.-]+\/)?(?:o\d|gpt-5)/i;

export type OutputLimitField = 'max_tokens' | 'max_completion_tokens';

export function outputLimitField(model: string): OutputLimitField {
  return REASONING_MODEL.test(model) ? 'max_completion_tokens' : 'max_tokens';
}

/** new-api's channel type of an OpenAI-format (Chat Completions) provider. */
export const OPENAI_CHANNEL_TYPE = 1;

/**
 * The cheapest generation a channel's provider accepts, one output token, in its own format: Chat
 * Completions with a Bearer key for an OpenAI-format channel, Anthropic Messages with x-api-key for
 * every other type (as the relay routes them, relay/providers/registry.ts).
 */
export function oneTokenRequest(type: number, baseUrl: string, key: string, model: string, prompt: string): { url: string; headers: Record<string, string>; body: string } {
  const messages = [{ role: 'user', content: prompt }];
  if (type === OPENAI_CHANNEL_TYPE) {
    return {
      url: `${baseUrl}/v1/chat/completions`,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ model, [outputLimitField(model)]: 1, messages }),
    };
  }
  return {
    url: `${baseUrl}/v1/messages`,
    headers: { 'content-type': 'application/json', 'x-api-key': key, 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model, max_tokens: 1, messages }),
  };
}
