// The saturation verdict's bound: what metering costs per request on the shared cores, added to what
// the bare hop's run costs, caps even a relay as cheap as the bare hop.
import { cpus } from 'node:os';
import { describe, expect, it } from 'vitest';
import type { ProcUsage } from './proc.js';
import type { ScaleQuery } from './console-scale.js';
import { addedVerdict, bareHopAdded, closedLoopWait, coreWait, curveFloor, type CurvePoint, meteredCeiling, type SaturationRun } from './report.js';
import type { RuntimeFigures } from './runtime-figures.js';

function run(target: string, completed: number, rps: number, cpuSec: Record<string, number>): SaturationRun {
  const procs = Object.entries(cpuSec).map(([name, sec]) => ({ name, cpuSec: sec, cpuPct: 0, rssStartMb: 0, rssMaxMb: 0, rssEndMb: 0, rssSamples: [] }) as unknown as ProcUsage);
  return { target, cpuUsPerReq: null, procs, result: { durationSec: 5, completed, rps, errors: 0, timeouts: 0, status: {}, latency: {} as SaturationRun['result']['latency'] } };
}

describe('meteredCeiling', () => {
  const cores = cpus().length;
  // Bare: 100,000 requests for 3 + 3 + 1 s of CPU (load generator, hop, mock): 70 µs each.
  const bare = run('bare', 100_000, 20_000, { 'load generator': 3, 'bare proxy': 3, mock: 1, 'machine (all processes)': 7.5, 'other processes': 0.5 });

  it('says the target is out of reach when metering alone leaves less than 0.8× bare', () => {
    // Metering: 1 + 1 + 0.6 + 0.4 s for 20,000 requests = 150 µs each; with the bare run's 70 µs, 220 µs a request.
    const relay = run('relay', 20_000, 4_000, { relay: 5, billing: 1, postgres: 1, clickhouse: 0.6, 'redis-server': 0.4, 'machine (all processes)': 9 });
    const ceiling = (cores * 1e6) / 220;
    const text = meteredCeiling(relay, bare);
    expect(text).toContain('took 150 µs of CPU per request');
    expect(text).toContain(`near ${ceiling.toFixed(0)} req/s`);
    expect(ceiling / 20_000 < 0.8 ? text.startsWith(' (not reachable') : text.startsWith(' (metering took')).toBe(true);
  });

  it('says nothing without both runs', () => {
    expect(meteredCeiling(undefined, bare)).toBe('');
    expect(meteredCeiling(run('relay', 0, 0, {}), bare)).toBe('');
  });
});

describe('closedLoopWait', () => {
  const cores = cpus().length;
  const query = (cpuMsPerRequest?: Record<string, number>): ScaleQuery => ({
    name: 'list, deep page', path: '/api/log/self?p=9', probe: { status: 200, success: true, message: '' },
    result: { rps: 70, latency: { p50: 52.4, p99: 91 } } as unknown as ScaleQuery['result'],
    single: {} as ScaleQuery['single'],
    ...(cpuMsPerRequest ? { cpuMsPerRequest } : {}),
  });

  it("bounds the mean latency by Little's law from the machine's CPU per request", () => {
    const text = closedLoopWait(query({ 'machine (all processes)': 25, clickhouse: 17, 'console-api': 4, postgres: 1, 'load generator': 2 }), 4);
    expect(text).toContain('25.0 ms of the machine\'s CPU per request, ClickHouse 17.0, console-api 4.0, Postgres 1.0, load generator 2.0');
    expect(text).toContain(`with 4 requests in flight on ${cores} cores a request takes ≥ ${((4 * 25) / cores).toFixed(1)} ms on average`);
    expect(text).toContain('its p50 was 52.4 ms');
  });

  it('says nothing without CPU figures', () => {
    expect(closedLoopWait(query(), 4)).toBe('');
    expect(closedLoopWait(query({ 'machine (all processes)': 0 }), 4)).toBe('');
  });
});

describe('coreWait', () => {
  const figures = (mainWaitMsPerSec: number) => ({ runtime: { mainWaitMsPerSec } as RuntimeFigures });

  it('gives the event-loop thread\'s wait for a core, running and with billing paused', () => {
    const text = coreWait(figures(264.8), figures(125.9));
    expect(text).toContain('waited for a core 265 ms of every second, 126 ms with billing paused');
  });

  it('adds what the load generator and the mock waited, against the direct run', () => {
    const ends = (loadGeneratorMsPerSec: number, mockMsPerSec: number) => ({ endWaits: { loadGeneratorMsPerSec, mockMsPerSec } });
    const text = coreWait({ ...figures(1.6), ...ends(180.4, 95.2) }, figures(1.2), ends(12.1, 8.9));
    expect(text).toContain('waited for a core 2 ms of every second, 1 ms with billing paused; the load generator and the mock waited 180 and 95 ms of every second, against 12 and 9 in the direct run:');
    expect(coreWait({ ...figures(40), endWaits: null }, undefined, undefined)).not.toContain('load generator');
  });

  it('says nothing without the running figure, and leaves out a missing paused one', () => {
    expect(coreWait(undefined, figures(10))).toBe('');
    expect(coreWait(figures(NaN), figures(10))).toBe('');
    expect(coreWait(figures(40), { runtime: null })).toContain('40 ms of every second:');
  });
});

describe('addedVerdict', () => {
  it('takes a negative added latency for a disturbed direct run, not for the target met', () => {
    expect(addedVerdict(-0.1, 1, 7.2, 7.3)).toBe("not measured (the mock's own p99, 7.30 ms, exceeded the relay's, 7.20 ms: the direct run was disturbed)");
    expect(addedVerdict(0.4, 1, 1.5, 1.1)).toBe('met');
    expect(addedVerdict(1.4, 1, 2.5, 1.1)).toBe('not met');
    expect(addedVerdict(NaN, 1, undefined, undefined)).toBe('–');
  });
});

describe('curveFloor', () => {
  const point = (rate: number, addedP99: number, relayCpuPct: number): CurvePoint => ({
    rate, mock: { rps: rate, p50: 0, p99: 0 }, relay: { rps: rate, p50: 0, p99: 0 }, addedP50: 0, addedP99, relayCpuPct, loadgenCpuPct: 0, held: true,
  });

  it('gives the added p99 at the lowest rate tried, whatever the order of the points', () => {
    const text = curveFloor([point(2000, 9.5, 40), point(500, 3.25, 11), point(1000, 4, 20)]);
    expect(text).toContain('at the lowest rate tried, 500 req/s, the added p99 was 3.25 ms with the relay at 11% of a core');
  });

  it('says nothing without a curve', () => {
    expect(curveFloor([])).toBe('');
    expect(curveFloor([point(500, NaN, 10)])).toBe('');
  });
});

describe('curveFloor with the bare hop', () => {
  const point = (rate: number, addedP99: number, bareAddedP99: number): CurvePoint => ({
    rate, mock: { rps: rate, p50: 0, p99: 0 }, relay: { rps: rate, p50: 0, p99: 0 }, bare: { rps: rate, p50: 0, p99: bareAddedP99 },
    addedP50: 0, addedP99, bareAddedP99, relayCpuPct: 30, loadgenCpuPct: 0, held: true,
  });

  it("adds the bare hop's added p99 at the lowest rate, and says when it alone misses the target", () => {
    expect(curveFloor([point(1000, 5, 4), point(500, 3.5, 2.25)])).toContain('the bare hop added 2.25 ms at that rate, itself over the target');
    const under = curveFloor([point(500, 3.5, 0.4)]);
    expect(under).toContain('the bare hop added 0.40 ms at that rate');
    expect(under).not.toContain('over the target');
  });
});

describe('bareHopAdded', () => {
  it('says no hop meets a bound the bare hop itself exceeds in the same run', () => {
    const text = bareHopAdded(4.09, 1, 'added');
    expect(text).toBe(" (the bare hop, which does none of the relay's work, added 4.09 ms p99 at the same load in this run, itself over the 1 ms target: on these shared cores no hop meets it)");
  });

  it("gives the bare hop's figure without a conclusion when it is within the bound", () => {
    expect(bareHopAdded(0.5, 1, 'TTFB added')).toBe(' (the bare hop TTFB added 0.50 ms p99 at the same load in this run)');
  });

  it('says nothing without a bare run', () => {
    expect(bareHopAdded(NaN, 2, 'added')).toBe('');
  });
});
