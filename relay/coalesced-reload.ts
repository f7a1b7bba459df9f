// A cache reload is a read, then an install. The relay reloads its channels and options on every
// invalidation and every 10 s. Reads run one at a time: two that overlapped on different database
// connections could resolve out of order, the older snapshot overwriting the newer (a channel just
// disabled kept being routed to, a price just changed kept being billed at the old one); and each
// announcement started a read of its own, so a storm of them (1,000 channel edits a second) ran
// reads side by side until the relay served 40 requests in 8 s where it served 5,400, and a disable
// took 1.5 s to apply. Now the calls made while a read runs share one read begun after it: at most
// one runs and one waits, and every call is answered by a read that began after it.

/**
 * `read` then `install`, one at a time. A call resolves once a read begun after it has installed
 * (and rejects if that read failed).
 */
export function coalescedReload<T>(read: () => Promise<T>, install: (value: T) => void): () => Promise<void> {
  let running: Promise<void> | null = null;
  let next: Promise<void> | null = null;
  const start = (): Promise<void> => {
    const run = (async () => install(await read()))();
    running = run;
    // Cleared whatever the outcome; the caller sees the outcome through `run`.
    run.then(() => { if (running === run) running = null; }, () => { if (running === run) running = null; });
    return run;
  };
  return () => {
    if (running === null) return start();
    if (next === null) {
      const after = running.then(() => {}, () => {});
      next = after.then(() => {
        next = null;
        return start();
      });
    }
    return next;
  };
}
