import { describe, expect, it } from 'vitest';
import { ConsoleError } from '../http/errors.js';
import { createPasswordGate } from './password-gate.js';
import { scryptParams } from './password.js';

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('password gate', () => {
  it('runs at most `concurrency` jobs, queues `maxWaiting`, refuses the next at once with RATE_LIMITED', async () => {
    const gate = createPasswordGate(2, 1);
    let running = 0;
    let peak = 0;
    const release = deferred();
    const job = async () => {
      running++;
      peak = Math.max(peak, running);
      await release.promise;
      running--;
      return 'done';
    };
    const accepted = [gate.run(job), gate.run(job), gate.run(job)];
    expect(gate.inFlight).toBe(3);
    const refused = await gate.run(job).then(() => undefined, (e: unknown) => e);
    expect(refused).toBeInstanceOf(ConsoleError);
    expect(refused).toMatchObject({ code: 'RATE_LIMITED', status: 429, retryAfterSec: 1 });
    release.resolve();
    expect(await Promise.all(accepted)).toEqual(['done', 'done', 'done']);
    expect(peak).toBe(2);
    expect(gate.inFlight).toBe(0);
    // Room again once the queue drained; a failing job frees its slot too.
    await expect(gate.run(async () => { throw new Error('boom'); })).rejects.toThrow('boom');
    expect(await gate.run(async () => 'again')).toBe('again');
    expect(gate.inFlight).toBe(0);
  });

  it('hashes at its cost (PASSWORD_SCRYPT_LOG2N), verifies any stored cost, and an unknown account is false', async () => {
    const gate = createPasswordGate(2, 4, scryptParams(11));
    const hash = await gate.hash('correct horse');
    expect(hash.startsWith('scrypt$11$8$3$')).toBe(true);
    expect(await gate.verify('correct horse', hash)).toBe(true);
    expect(await gate.verify('wrong horse', hash)).toBe(false);
    // A hash made at another cost (before PASSWORD_SCRYPT_LOG2N changed) still verifies.
    const older = await createPasswordGate(1, 0, scryptParams(10)).hash('correct horse');
    expect(await gate.verify('correct horse', older)).toBe(true);
    // No stored hash (no such account): false, after a check of the gate's cost.
    expect(await gate.verify('correct horse', undefined)).toBe(false);
    expect(gate.inFlight).toBe(0);
  });
});
