// A cache reload is a read, then an install. The relay reloads its channels and options on every
// invalidation and every 10 s. Reads run one at a time: two that overlapped on different database
// connections could resolve out of order, the older snapshot overwriting the newer (a channel just
// disabled kept being routed to, a price just changed kept being billed at the old one); and each
// announcement started a read of its own, so a storm of them (1,000 channel edits a second) ran
// reads side by side until the relay served 40 requests in 8 s where it served 5,400, and a disable
// took 1.5 s to apply. Now the calls made while a read runs share one read begun after it: at most
// one runs and one waits, and every call is answered by a read that began after it.
//
// A read that never ends (a database connection that went silent) would hold every later reload,
// the periodic one included: it is given up after RELOAD_READ_TIMEOUT_MS (its callers hear so) and
// the next read runs. Should it end after all, it installs only if no read begun after it has.

/** How long a reload's read may take before the next one runs. */
export const RELOAD_READ_TIMEOUT_MS = 15_000;

const ignore = (): void => {};

/**
 * `read` then `install`, one at a time. A call resolves once a read begun after it has installed
 * (and rejects if that read failed or took longer than `timeoutMs`).
 */
export function coalescedReload<T>(read: () => Promise<T>, install: (value: T) => void, timeoutMs = RELOAD_READ_TIMEOUT_MS): () => Promise<void> {
  let begun = 0;
  let installed = 0;
  let running: Promise<void> | null = null;
  let next: Promise<void> | null = null;
  const start = (): Promise<void> => {
    const ticket = ++begun;
    const done = read().then((value) => {
      if (ticket < installed) return;
      installed = ticket;
      install(value);
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`reload read gave up after ${timeoutMs} ms`)), timeoutMs);
      timer.unref();
    });
    const run = Promise.race([done, late]).finally(() => clearTimeout(timer));
    // A read given up may still fail later: nobody waits for it then.
    done.catch(ignore);
    running = run;
    const clear = (): void => {
      if (running === run) running = null;
    };
    run.then(clear, clear);
    return run;
  };
  return () => {
    // Between a read's end and the waiting one's start, a call joins the waiting one.
    if (running === null && next === null) return start();
    if (next === null) {
      const after = running === null ? Promise.resolve() : running.then(ignore, ignore);
      next = after.then(() => {
        next = null;
        return start();
      });
    }
    return next;
  };
}
