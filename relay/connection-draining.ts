// Once the relay drains (SIGTERM: RunningRelay.drain), every answer ends its connection. Closing the
// listen socket stops new connections only: uWS keeps a kept-alive one open, so clients under load
// kept sending new requests on it, and the drain never saw zero exchanges in flight (the chaos suite,
// issue 15, waited out the whole 30 s grace with its load's 8-9 requests in progress). Per process,
// like the in-flight count the drain waits on (relayMetrics): a process runs one relay outside tests.
let draining = false;

/** From now on each answer closes its connection; the client's next request opens a new one elsewhere. */
export function closeConnectionsAfterAnswer(): void {
  draining = true;
}

/** uWS's `closeConnection` argument of res.end(). */
export function closesConnection(): boolean {
  return draining;
}
