// OpenAI Chat Completions (and every provider that speaks it: new-api's channel type 1): POST
// {base}/v1/chat/completions, the credential as Authorization: Bearer. Usage from the answer's
// `usage` (chat-usage.ts); a stream is asked for its usage (stream_options.include_usage, forced on by
// the exchange) and read by ChatStreamMeter.
import type { Provider } from '../provider.js';
import { ChatStreamMeter, textOfChatBody, usageOfChatBody } from './chat-usage.js';

export const openaiProvider: Provider = {
  protocol: 'openai',
  path: '/v1/chat/completions',
  requestIdHeader: 'x-request-id',
  headers(channel) {
    // accept-encoding: see anthropic-provider.ts.
    return { 'content-type': 'application/json', 'accept-encoding': 'identity', authorization: `Bearer ${channel.apiKey}` };
  },
  usageOfBody: usageOfChatBody,
  textOfBody: textOfChatBody,
  streamMeter: (delivered) => new ChatStreamMeter(delivered),
};
