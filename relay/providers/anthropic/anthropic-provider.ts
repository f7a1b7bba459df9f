// Anthropic Messages API: POST {base}/v1/messages, the credential in x-api-key, the client's
// anthropic-version (2023-06-01 when it sent none) and anthropic-beta passed on. Usage read from the
// answer's `usage` (message-usage.ts) or, streamed, by SseUsageParser.
import { textOfMessageBody, usageOfMessageBody } from '../../messages/message-usage.js';
import { SseUsageParser } from '../../stream/sse-usage-parser.js';
import type { Provider } from '../provider.js';

const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

export const anthropicProvider: Provider = {
  protocol: 'anthropic',
  path: '/v1/messages',
  requestIdHeader: 'request-id',
  headers(channel, client) {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      // No coding, please: undici asks for none, so a proxy in front of the provider may pick one
      // (it did: gzip). What still comes coded is decoded (upstream/provider-response.ts).
      'accept-encoding': 'identity',
      'x-api-key': channel.apiKey,
      'anthropic-version': client.version || DEFAULT_ANTHROPIC_VERSION,
    };
    if (client.beta) headers['anthropic-beta'] = client.beta;
    return headers;
  },
  usageOfBody: usageOfMessageBody,
  textOfBody: textOfMessageBody,
  streamMeter: (delivered) => new SseUsageParser(delivered),
};
