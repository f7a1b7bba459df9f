// Why an exchange failed, as users read it in their log (the `content` of their row): stable wording
// from a short list, never an address or an exception message (those go to the service log).

export const REASON = {
  clientGone: 'client went away',
  clientGoneBeforeForwarding: 'client went away before forwarding',
  clientGoneMidStream: 'client went away mid-stream',
  clientGoneUndelivered: 'client went away before the answer was delivered',
  connectionFailed: 'provider connection failed',
  noAnswer: 'provider gave no answer after the request was sent; not retried, it may have been generating',
  bodyFailed: 'provider answer could not be read',
  streamFailed: 'provider stream failed',
  streamCut: 'stream ended before its end (message_stop, [DONE])',
  noUsage: 'provider answer carried no usage',
  usageCounted: 'provider answer carried no usage; its tokens counted by the relay',
  noChannel: 'no channel answered',
  notCarried: 'channel cannot carry the request in its format; another tried',
  relayError: 'relay error',
} as const;

/** `provider answered HTTP <status>`, built once per status. */
const httpReasons = new Map<number, string>();
export function httpReason(status: number): string {
  let r = httpReasons.get(status);
  if (r === undefined) httpReasons.set(status, (r = `provider answered HTTP ${status}`));
  return r;
}

/** A provider's SSE error type, if it looks like one (`overloaded_error`); anything else is not echoed. */
export function providerErrorReason(type: unknown): string {
  return typeof type === 'string' && /^[a-z_]{1,40}$/.test(type) ? `provider error event: ${type}` : 'provider error event';
}
