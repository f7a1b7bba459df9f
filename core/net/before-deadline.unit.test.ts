import { describe, expect, it } from 'vitest';
import { beforeDeadline } from './before-deadline.js';

describe('beforeDeadline', () => {
  it('settles with the work when it comes first', async () => {
    await expect(beforeDeadline(Promise.resolve(7), new AbortController().signal)).resolves.toBe(7);
    await expect(beforeDeadline(Promise.reject(new Error('failed')), new AbortController().signal)).rejects.toThrow('failed');
  });

  it('rejects with the signal\'s reason when the deadline comes first, or has passed already', async () => {
    const never = new Promise<number>(() => undefined);
    const controller = new AbortController();
    const pending = beforeDeadline(never, controller.signal);
    controller.abort(new Error('deadline'));
    await expect(pending).rejects.toThrow('deadline');
    await expect(beforeDeadline(never, controller.signal)).rejects.toThrow('deadline');
  });
});
