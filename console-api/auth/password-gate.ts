// The one door to password hashing (register) and verification (login). scrypt costs ~32 MiB and tens
// of milliseconds on one of libuv's few pool threads, which DNS lookups and file reads share: without
// a cap, a burst of logins starves the process and grows memory with every request that waits. At
// most `concurrency` hashes run at once (p-limit) and at most `maxWaiting` more wait; a request beyond
// that is refused at once (429 with Retry-After) rather than queued without bound.
import pLimit from 'p-limit';
import { ConsoleError } from '../http/errors.js';
import { burnPasswordCheck, DEFAULT_SCRYPT_PARAMS, hashPassword, type ScryptParams, verifyPassword } from './password.js';

export interface PasswordGate {
  /** Runs `work` when a slot is free; throws RATE_LIMITED at once when too many are already waiting. */
  run<T>(work: () => Promise<T>): Promise<T>;
  /** A new password's hash at the gate's cost (PASSWORD_SCRYPT_LOG2N), run through the gate. */
  hash(password: string): Promise<string>;
  /**
   * Whether `password` matches the stored hash, run through the gate; with none (no such account),
   * false after the same work, so that the answer's time does not tell.
   */
  verify(password: string, stored: string | undefined): Promise<boolean>;
  /** Hashes running or waiting now. */
  readonly inFlight: number;
}

export const PASSWORD_GATE_RETRY_AFTER_SEC = 1;

export function createPasswordGate(concurrency: number, maxWaiting: number, params: ScryptParams = DEFAULT_SCRYPT_PARAMS): PasswordGate {
  const limit = pLimit(concurrency);
  // Counted here rather than read from limit.pendingCount: p-limit moves a job from pending to active
  // a microtask later, so its counters lag behind calls made in the same tick.
  let inFlight = 0;
  const gate: PasswordGate = {
    get inFlight() {
      return inFlight;
    },
    hash: (password) => gate.run(() => hashPassword(password, params)),
    verify: (password, stored) => gate.run(() => (stored === undefined ? burnPasswordCheck(password, params) : verifyPassword(password, stored))),
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
  return gate;
}
