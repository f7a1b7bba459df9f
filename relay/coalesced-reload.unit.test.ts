import { describe, expect, it } from 'vitest';
import { coalescedReload } from './coalesced-reload.js';

/** A read whose result the test hands over when it chooses. */
function controlledReads() {
  const pending: Array<(v: string) => void> = [];
  return { read: () => new Promise<string>((resolve) => pending.push(resolve)), pending };
}
const tick = () => new Promise((r) => setImmediate(r));

describe('coalescedReload', () => {
  it('runs one read at a time: the calls made while one runs share one read begun after it', async () => {
    const { read, pending } = controlledReads();
    const installed: string[] = [];
    const reload = coalescedReload(read, (v) => installed.push(v));
    const first = reload();
    const during = [reload(), reload(), reload()];
    expect(pending).toHaveLength(1);
    pending[0]!('old');
    await first;
    await tick();
    // One more read, begun after the first ended, answers the three.
    expect(pending).toHaveLength(2);
    let answered = false;
    void Promise.all(during).then(() => { answered = true; });
    await tick();
    expect(answered).toBe(false);
    pending[1]!('new');
    await Promise.all(during);
    expect(installed).toEqual(['old', 'new']);
  });

  it('installs in the order the reads began', async () => {
    const { read, pending } = controlledReads();
    const installed: string[] = [];
    const reload = coalescedReload(read, (v) => installed.push(v));
    const a = reload();
    const b = reload();
    pending[0]!('a');
    await a;
    await tick();
    pending[1]!('b');
    await b;
    const c = reload();
    pending[2]!('c');
    await c;
    expect(installed).toEqual(['a', 'b', 'c']);
  });

  it('lets a failed read install nothing and the next one install', async () => {
    let fail = true;
    const installed: string[] = [];
    const reload = coalescedReload(async () => {
      if (fail) throw new Error('connection lost');
      return 'ok';
    }, (v) => installed.push(v));
    await expect(reload()).rejects.toThrow('connection lost');
    fail = false;
    await reload();
    expect(installed).toEqual(['ok']);
  });

  it('runs the waiting read after a failed one', async () => {
    let calls = 0;
    const installed: string[] = [];
    let fail!: (e: Error) => void;
    const reload = coalescedReload(() => {
      calls++;
      return calls === 1 ? new Promise<string>((_, reject) => { fail = reject; }) : Promise.resolve('after');
    }, (v) => installed.push(v));
    const first = reload().catch((e: Error) => e.message);
    const waiting = reload();
    fail(new Error('lost'));
    expect(await first).toBe('lost');
    await waiting;
    expect(installed).toEqual(['after']);
  });
});
