// Whose fault a provider's answer is. The relay decides from it whether to try the next channel and
// whether the failure counts against the channel (relay/routing/channel-health.ts); the console's
// prober decides from it whether a disabled channel is well again (console-api/channels/
// channel-prober.ts). One classification for both, so a probe re-enables exactly what the relay
// would not disable again.
//
//   channel     the channel's own credential or account: 401, 403, 402, and the "your credit
//               balance is too low" / "insufficient quota" kind of answer whatever its status.
//               Retried on the next channel while nothing reached the client; counted against it.
//   rate_limit  429 (not a quota exhaustion): retried, not counted.
//   overloaded  529: retried, not counted.
//   server      other 5xx: retried, not counted.
//   client      other 4xx: the request itself (a bad body, an unknown model); passed through, not
//               counted: a client sending bad requests must not take a channel out of the rotation.

export type ProviderFault = 'channel' | 'rate_limit' | 'overloaded' | 'server' | 'client';

/** Every class, for metrics labels (a fixed, small set). */
export const PROVIDER_FAULTS: readonly ProviderFault[] = ['channel', 'rate_limit', 'overloaded', 'server', 'client'];

/**
 * The account behind the credential cannot pay: Anthropic answers 400 invalid_request_error "Your
 * credit balance is too low to access the Anthropic API"; OpenAI-style providers 429
 * insufficient_quota ("You exceeded your current quota"); others speak of billing or a suspended or
 * deactivated account. Matched on the error body's text, which is read anyway before any retry.
 */
const CHANNEL_ACCOUNT_TROUBLE = /credit balance is too low|insufficient[_ ](quota|balance|credit)|exceeded your current quota|billing (hard )?limit|payment required|account (has been |is )?(suspended|deactivated|disabled)|api key (has been |was )?(revoked|disabled)|organization (has been )?(disabled|deactivated)/i;

/** Largest prefix of an error body looked at: the marker phrases sit in the first lines of the message. */
const SCAN_LIMIT = 4096;

/** Class of a provider's non-2xx answer, from its status and the start of its body. */
export function classifyProviderError(status: number, body: string): ProviderFault {
  if (status === 401 || status === 403 || status === 402) return 'channel';
  if (status >= 400 && status < 500 && body && CHANNEL_ACCOUNT_TROUBLE.test(body.length > SCAN_LIMIT ? body.slice(0, SCAN_LIMIT) : body)) return 'channel';
  if (status === 429) return 'rate_limit';
  if (status === 529) return 'overloaded';
  if (status >= 500) return 'server';
  return 'client';
}

/** Whether the relay tries another channel for this class (while nothing has reached the client). */
export function isRetriedFault(fault: ProviderFault): boolean {
  return fault !== 'client';
}
