// One deadline for a whole outbound exchange (a webhook, a channel test or probe, a payment provider's
// checkout): undici's headersTimeout and bodyTimeout are idle timeouts between chunks, which an
// upstream sending a byte every few seconds never meets. A signal (AbortSignal.timeout) passed to
// undici ends the connection, the wait for headers and the body's reading alike; this ends the steps
// that take no signal (a DNS check, a mail transport) at the same deadline.

/** `work`, or the signal's reason once it aborts, whichever comes first. */
export function beforeDeadline<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
