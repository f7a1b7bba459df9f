// The relay-against-bare comparison behind the relay CPU verdict: shares of each profile's busy time,
// the runtime's areas apart from each process's own code, weighed with measured CPU per request.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/project-root.js';
import { compareProfiles, summarizeProfile } from './cpu-profile.js';
import { ownCodeVerdict, weighProfiles } from './report.js';

const dir = mkdtempSync(join(tmpdir(), 'cpu-profile-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A .cpuprofile whose frames have the given self times (µs): one sample per frame. */
function profileFile(name: string, frames: Array<{ fn: string; url: string; us: number }>): string {
  const nodes = [{ id: 1, callFrame: { functionName: '(root)', url: '', lineNumber: -1 }, children: frames.map((_, i) => i + 2) },
    ...frames.map((f, i) => ({ id: i + 2, callFrame: { functionName: f.fn, url: f.url, lineNumber: 0 } }))];
  const file = join(dir, `${name}.cpuprofile`);
  writeFileSync(file, JSON.stringify({ nodes, samples: frames.map((_, i) => i + 2), timeDeltas: frames.map((f) => f.us), startTime: 0, endTime: 1 }));
  return file;
}

const dist = (path: string): string => `file://${projectRoot()}/dist/${path}`;
const mod = (pkg: string): string => `file://${projectRoot()}/node_modules/${pkg}/index.js`;

describe('compareProfiles', () => {
  // Relay: 1,000 µs busy, 600 of it its own code (relay, core, ioredis); bare: 500 busy, 100 its own.
  const relay = summarizeProfile(profileFile('relay', [
    { fn: 'respond', url: dist('relay/messages/messages-handler.js'), us: 300 },
    { fn: 'settle', url: dist('core/quota/quota-store.js'), us: 200 },
    { fn: 'sendCommand', url: mod('ioredis'), us: 100 },
    { fn: 'writev', url: '', us: 250 },
    { fn: '(garbage collector)', url: '', us: 100 },
    { fn: 'Request', url: mod('undici'), us: 50 },
    { fn: '(idle)', url: '', us: 5_000 },
  ]));
  const bare = summarizeProfile(profileFile('bare', [
    { fn: 'sendWhole', url: dist('bench/bare-proxy.js'), us: 100 },
    { fn: 'writev', url: '', us: 300 },
    { fn: 'Request', url: mod('undici'), us: 100 },
  ]));
  const c = compareProfiles(relay, bare);

  it("gives each process's own code as a share of its busy time, idle and the runtime left out", () => {
    expect(c.ownCodeShare.relay).toBeCloseTo(0.6, 9);
    expect(c.ownCodeShare.bare).toBeCloseTo(0.2, 9);
    const area = (name: string) => c.areas.find((a) => a.area === name)!;
    expect(area('(native)')).toMatchObject({ relay: 0.25, bare: 0.6 });
    expect(area('undici').relay).toBeCloseTo(0.05, 9);
    expect(area('bench/bare-proxy')).toMatchObject({ relay: 0, bare: 0.2 });
    // The relay's largest excess first.
    expect(c.areas[0]!.area).toBe('relay/messages');
  });

  it('weighs the shares with each process\'s CPU per request and names the excess in the verdict', () => {
    const w = weighProfiles(c, 200, 100)!;
    expect(w.ownUs.relay).toBeCloseTo(120, 9);
    expect(w.ownUs.bare).toBeCloseTo(20, 9);
    expect(w.areas.find((a) => a.area === 'relay/messages')!.relayUs).toBeCloseTo(60, 9);
    const text = ownCodeVerdict(w);
    // 120 − 20 = 100 µs beyond the bare hop's own code: 1.00× a bare hop of 100 µs; the other 0 µs are the runtime's.
    expect(text).toContain('cost 100.0 µs per request more than the bare hop');
    expect(text).toContain('1.00× the bare hop');
    expect(text).toContain('more than the 0.3×');
    expect(text).toContain('the other 0.0 µs');
    // 0.6 × 80 − 20 = 28 µs: 0.28× the bare hop.
    expect(ownCodeVerdict(weighProfiles(c, 80, 100))).toContain('within the 0.3×');
  });

  it('weighs nothing without both CPU figures, and the verdict says how to get the profile', () => {
    expect(weighProfiles(c, null, 100)).toBeNull();
    expect(weighProfiles(c, 200, 0)).toBeNull();
    expect(weighProfiles(null, 200, 100)).toBeNull();
    expect(ownCodeVerdict(null)).toContain('BENCH_CPU_PROF=1');
  });
});

describe('summarizeProfile from a time on', () => {
  // Samples at 100, 300, 600 and 1,000 µs of the process's monotonic clock (startTime 0 plus the
  // deltas): start-up's schema compiling, then the hot path.
  const file = profileFile('windowed', [
    { fn: 'compileSchema', url: mod('ajv'), us: 100 },
    { fn: 'compileSchema', url: mod('ajv'), us: 200 },
    { fn: 'respond', url: dist('relay/messages/messages-handler.js'), us: 300 },
    { fn: 'respond', url: dist('relay/messages/messages-handler.js'), us: 400 },
  ]);

  it('counts every sample without a start, and only those taken from it with one', () => {
    const area = (s: ReturnType<typeof summarizeProfile>, name: string) => s.byArea.find((a) => a.area === name)?.selfMs ?? 0;
    const whole = summarizeProfile(file);
    expect({ ajv: area(whole, 'ajv'), relay: area(whole, 'relay/messages') }).toEqual({ ajv: 0.3, relay: 0.7 });
    // From 600 µs: the warm-up's end falls after start-up's compiling.
    const runs = summarizeProfile(file, 25, 600);
    expect({ ajv: area(runs, 'ajv'), relay: area(runs, 'relay/messages'), busyMs: runs.busyMs }).toEqual({ ajv: 0, relay: 0.7, busyMs: 0.7 });
  });
});
