// Whose fault a provider's answer is. The relay decides from it whether to try the next channel and
// whether the failure counts against the channel (relay/routing/channel-health.ts); the console's
// prober decides from it whether a disabled channel is well again (console-api/channels/
// channel-prober.ts). One classification for both, so a probe re-enables exactly what the relay
// would not disable again.
//
//   channel     the channel's own credential, account or address: 401, 403, 402, the "your credit
//               balance is too low" / "insufficient quota" kind of answer whatever its status (by
//               the provider's error code, or its message's start: never the client's text), and a
//               1xx or 3xx (a redirect: the base URL moved, or leads to a login page).
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
 * credit balance is too low to access the Anthropic API" (or type billing_error); OpenAI-style
 * providers 429 insufficient_quota ("You exceeded your current quota"); others speak of billing or a
 * suspended or deactivated account.
 *
 * Told by the provider's own error code or type, or by a message that starts with such a phrase:
 * never by a phrase anywhere in the body, since providers quote the client's request back in their
 * errors (Anthropic repeats a tool_use id the client chose, a model name it asked for). A client
 * naming its tool_use id "insufficient_quota" made every channel's answer to it count as the
 * channel's fault, and a few such requests, costing it nothing, took every channel out of the rotation.
 */
const ACCOUNT_TROUBLE_CODES = new Set([
  'insufficient_quota', 'insufficient_balance', 'insufficient_credit', 'billing_error', 'billing_hard_limit_reached',
  'billing_not_active', 'account_deactivated', 'account_suspended', 'access_terminated', 'payment_required',
]);
const ACCOUNT_TROUBLE_MESSAGE = new RegExp(
  '^\\W*(?:your credit balance is too low|insufficient[_ ](?:quota|balance|credit)|you exceeded your current quota' +
  '|billing (?:hard )?limit|payment required' +
  '|(?:your |this |the )?(?:account|api key|organization)\\b[^.]{0,60}?\\b(?:suspended|deactivated|disabled|revoked))',
  'i',
);

/** The provider's message, code and type, from the usual error shapes ({error: {message, type, code}}, {message}); else the text itself. */
function errorParts(body: string): { message: string; codes: unknown[] } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return { message: body, codes: [] };
  }
  if (typeof parsed !== 'object' || parsed === null) return { message: '', codes: [] };
  const top = parsed as { error?: unknown; message?: unknown; code?: unknown; type?: unknown };
  const e = (typeof top.error === 'object' && top.error !== null ? top.error : top) as { message?: unknown; code?: unknown; type?: unknown };
  const message = typeof e.message === 'string' ? e.message : typeof top.error === 'string' ? top.error : '';
  return { message, codes: [e.code, e.type] };
}

/**
 * Whether a provider's error text (an error answer's body, or an error event's data) says the
 * channel's own account cannot pay; a text longer than SCAN_LIMIT is not read.
 */
export function isAccountTrouble(body: string): boolean {
  if (body.length > SCAN_LIMIT) return false;
  const { message, codes } = errorParts(body);
  for (const c of codes) if (typeof c === 'string' && ACCOUNT_TROUBLE_CODES.has(c.toLowerCase())) return true;
  return ACCOUNT_TROUBLE_MESSAGE.test(message.length > MESSAGE_SCAN_LIMIT ? message.slice(0, MESSAGE_SCAN_LIMIT) : message);
}

/** Largest error body parsed: the providers' error objects are far smaller; a larger body is a page, not one. */
const SCAN_LIMIT = 4096;
/** The start of a message looked at for the phrases. */
const MESSAGE_SCAN_LIMIT = 200;

/** Class of a provider's non-2xx answer, from its status and the start of its body. */
export function classifyProviderError(status: number, body: string): ProviderFault {
  // A 1xx or 3xx is no answer of either protocol: a base URL that moved or leads to a login page, the
  // channel's own setup (the request never reached a model, so another channel may carry it).
  if (status < 200 || (status >= 300 && status < 400)) return 'channel';
  if (status === 401 || status === 403 || status === 402) return 'channel';
  if (status >= 400 && status < 500 && body && isAccountTrouble(body)) return 'channel';
  if (status === 429) return 'rate_limit';
  if (status === 529) return 'overloaded';
  if (status >= 500) return 'server';
  return 'client';
}

/** Whether the relay tries another channel for this class (while nothing has reached the client). */
export function isRetriedFault(fault: ProviderFault): boolean {
  return fault !== 'client';
}
