// The relay's runtime figures around a run: event-loop delay, GC, and its main thread's time on a core
// and waiting for one (the kernel's schedstat), per second of the run and per request.
import { describe, expect, it } from 'vitest';
import { mainThreadSchedstat, runtimeDelta, type RuntimeSnapshot } from './runtime-figures.js';

const snapshot = (over: Partial<RuntimeSnapshot>): RuntimeSnapshot => ({
  loop: [[0.001, 0], [0.01, 0], [Infinity, 0]], loopSum: 0, gc: new Map(), sched: null, ...over,
});

describe('runtimeDelta', () => {
  it('gives the main thread\'s time on a core and waiting for one, per second and per request', () => {
    const before = snapshot({ sched: { onCpuNs: 1e9, waitNs: 2e8, atMs: 10_000 } });
    // 2 s later: 0.8 s more on a core, 0.05 s more waiting, 4,000 requests.
    const after = snapshot({
      loop: [[0.001, 150], [0.01, 199], [Infinity, 200]], loopSum: 0.1,
      gc: new Map([['minor', { count: 4, seconds: 0.008 }]]),
      sched: { onCpuNs: 1.8e9, waitNs: 2.5e8, atMs: 12_000 },
    });
    const f = runtimeDelta(before, after, 4000)!;
    expect(f.mainOnCpuMsPerSec).toBeCloseTo(400, 6);
    expect(f.mainWaitMsPerSec).toBeCloseTo(25, 6);
    expect(f.mainWaitUsPerReq).toBeCloseTo(12.5, 6);
    expect(f.gcCount).toBe(4);
    expect(f.gcUsPerReq).toBeCloseTo(2, 6);
  });

  it('leaves the scheduler figures out when a snapshot has none', () => {
    const f = runtimeDelta(snapshot({}), snapshot({ loop: [[0.001, 10], [Infinity, 10]] }), 100)!;
    expect(Number.isNaN(f.mainWaitMsPerSec)).toBe(true);
    expect(Number.isNaN(f.mainWaitUsPerReq)).toBe(true);
  });
});

describe('mainThreadSchedstat', () => {
  it('reads a live process\'s main thread, and nothing for one that is not there', () => {
    const s = mainThreadSchedstat(process.pid);
    if (process.platform !== 'linux') {
      expect(s).toBeNull();
      return;
    }
    expect(s!.onCpuNs).toBeGreaterThan(0);
    expect(s!.waitNs).toBeGreaterThanOrEqual(0);
    expect(mainThreadSchedstat(2 ** 22 + 7)).toBeNull();
    expect(mainThreadSchedstat(undefined)).toBeNull();
  });
});
