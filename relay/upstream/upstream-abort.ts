// The handle that cancels one request to a provider: what undici's request() needs of an AbortSignal,
// without an AbortController.
//
// Why: an AbortController per request cost ~1.5% of the relay's event loop under the bench
// (createAbortSignal and the EventTarget's addEventListener/removeEventListener with their options
// handling; docs/performance.md), for a signal that is almost never fired. undici's request() only
// asks a signal for `aborted`, `reason` and addEventListener/removeEventListener('abort', fn)
// (undici/lib/core/util.js addAbortListener; an EventTarget is recognized by `addEventListener`), so a
// plain object with those does the same. abort() behaves as AbortController's: the reason is the same
// DOMException AbortError, listeners run once, a second abort() does nothing.
export class UpstreamAbort {
  aborted = false;
  reason: unknown = undefined;
  /** undici registers one listener per request; more are kept in order should any caller add them. */
  #listeners: (() => void)[] | null = null;

  addEventListener(type: string, listener: () => void): void {
    if (type !== 'abort' || this.aborted) return;
    (this.#listeners ??= []).push(listener);
  }

  removeEventListener(type: string, listener: () => void): void {
    const list = this.#listeners;
    if (type !== 'abort' || list === null) return;
    const i = list.indexOf(listener);
    if (i >= 0) list.splice(i, 1);
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = new DOMException('This operation was aborted', 'AbortError');
    const list = this.#listeners;
    this.#listeners = null;
    if (list !== null) for (const listener of list) listener();
  }

  /** Listeners still registered (tests: undici removes its own once the request is over). */
  get listenerCount(): number {
    return this.#listeners?.length ?? 0;
  }
}
