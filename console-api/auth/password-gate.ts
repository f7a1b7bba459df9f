// The one door to password hashing (register) and verification (login). scrypt costs ~32 MiB and tens
// of milliseconds on one of libuv's few pool threads, which DNS lookups and file reads share: without
// a cap, a burst of logins starves the process and grows memory with every request that waits. At
// most `concurrency` hashes run at once (p-limit) and at most `maxWaiting` more wait; a request beyond
// that is refused at once (429 with Retry-After) rather than queued without bound.
import pLimit from 'p-limit';
import { ConsoleError } from '../http/errors.js';

export interface PasswordGate {
  /** Runs `work` when a slot is free; throws RATE_LIMITED at once when too many are already waiting. */
  run<T>(work: () => Promise<T>): Promise<T>;
  /** Hashes running or waiting now. */
  readonly inFlight: number;
}

export const PASSWORD_GATE_RETRY_AFTER_SEC = 1;

export function createPasswordGate(concurrency: number, maxWaiting: number): PasswordGate {
  const limit = pLimit(concurrency);
  // Counted here rather than read from limit.pendingCount: p-limit moves a job from pending to active
  // a microtask later, so its counters lag behind calls made in the same tick.
  let inFlight = 0;
  return {
    get inFlight() {
      return inFlight;
    },
    async run<T>(work: () => Promise<T>): Promise<T> {
      if (inFlight >= concurrency + maxWaiting) {
        throw new ConsoleError('RATE_LIMITED', `the server is busy checking passwords; retry in ${PASSWORD_GATE_RETRY_AFTER_SEC} s`, {
          retryAfterSec: PASSWORD_GATE_RETRY_AFTER_SEC,
        });
      }
      inFlight++;
      try {
        return await limit(work);
      } finally {
        inFlight--;
      }
    },
  };
}
