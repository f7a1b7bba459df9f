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

describe('coalescedReload, a read that never ends', () => {
  it('is given up after the timeout: the waiting read runs, and the late one installs nothing over it', async () => {
    const pending: Array<(v: string) => void> = [];
    const installed: string[] = [];
    const reload = coalescedReload(() => new Promise<string>((resolve) => pending.push(resolve)), (v) => installed.push(v), 30);
    const stuck = reload().catch((e: Error) => e.message);
    const waiting = reload();
    expect(await stuck).toMatch(/gave up after 30 ms/);
    await tick();
    expect(pending).toHaveLength(2);
    pending[1]!('newer');
    await waiting;
    pending[0]!('older');
    await tick();
    expect(installed).toEqual(['newer']);
  });

  it('a call made as the running read ends joins the waiting read: never two at once', async () => {
    let inFlight = 0;
    let most = 0;
    const pending: Array<(v: string) => void> = [];
    const installed: string[] = [];
    const reload = coalescedReload(() => {
      inFlight++;
      most = Math.max(most, inFlight);
      return new Promise<string>((resolve) => pending.push((v) => { inFlight--; resolve(v); }));
    }, (v) => installed.push(v));
    const first = reload();
    const queued = reload();
    const chained = first.then(() => reload());
    pending[0]!('r1');
    await first;
    await tick();
    expect(pending).toHaveLength(2);
    pending[1]!('r2');
    await Promise.all([queued, chained]);
    expect(most).toBe(1);
    expect(installed).toEqual(['r1', 'r2']);
  });
});
