// What the relay waited on during a run, from two snapshots taken around it: its event-loop delay
// and GC pauses (nodejs_eventloop_delay_seconds and nodejs_gc_duration_seconds of its /metrics,
// relay/metrics/runtime-metrics.ts) and Redis' own accounting (INFO commandstats and INFO cpu), each
// divided by the requests the run handled. Redis is the whole server's: on a Redis shared with other
// work, its figures include that work (the report says so). And the scheduler's accounting of the
// relay's event-loop thread (/proc/<pid>/task/<pid>/schedstat: time on a core, time runnable but
// waiting for one), which tells a relay busy with its own work from one waiting for a core.
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { parsePromText } from '../../core/metrics/prom.js';
import { histogramQuantile, type Buckets } from './prom-scrape.js';

export interface RuntimeSnapshot {
  loop: Buckets | null;
  loopSum: number;
  gc: Map<string, { count: number; seconds: number }>;
  /** The event-loop thread's schedstat (ns on a core, ns waiting for one) and when it was read; null off Linux. */
  sched: { onCpuNs: number; waitNs: number; atMs: number } | null;
}

/** /proc/<pid>/task/<pid>/schedstat of a process's main thread, or null when it cannot be read. */
export function mainThreadSchedstat(pid: number | undefined): RuntimeSnapshot['sched'] {
  if (!pid) return null;
  try {
    const [onCpu, wait] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').trim().split(/\s+/).map(Number);
    return Number.isFinite(onCpu) && Number.isFinite(wait) ? { onCpuNs: onCpu!, waitNs: wait!, atMs: performance.now() } : null;
  } catch {
    return null;
  }
}

/**
 * What the two ends of a measured request waited for a core over a run: the load generator (the
 * bench's own main thread, which times every request) and the mock (which answers it), ms per second
 * runnable but not scheduled. A latency measured end to end includes their waits: on shared cores
 * the processes of billing delay them as they delay the relay.
 */
export interface EndWaits {
  loadGeneratorMsPerSec: number;
  mockMsPerSec: number;
}

export interface EndWaitSnapshot {
  loadGenerator: RuntimeSnapshot['sched'];
  mock: RuntimeSnapshot['sched'];
}

export function endWaitSnapshot(mockPid: number | undefined): EndWaitSnapshot {
  return { loadGenerator: mainThreadSchedstat(process.pid), mock: mainThreadSchedstat(mockPid) };
}

/** Ms per second a thread spent runnable but waiting for a core between two schedstat reads; NaN without both. */
function waitMsPerSec(a: RuntimeSnapshot['sched'], b: RuntimeSnapshot['sched']): number {
  return a && b && b.atMs > a.atMs ? (b.waitNs - a.waitNs) / 1e6 / ((b.atMs - a.atMs) / 1000) : NaN;
}

export function endWaits(before: EndWaitSnapshot, after: EndWaitSnapshot): EndWaits {
  return { loadGeneratorMsPerSec: waitMsPerSec(before.loadGenerator, after.loadGenerator), mockMsPerSec: waitMsPerSec(before.mock, after.mock) };
}

export interface RuntimeFigures {
  /** Event-loop delay over the run (bucket upper bounds, ms), and its mean. */
  loopP50Ms: number;
  loopP99Ms: number;
  loopMeanMs: number;
  loopSamples: number;
  /** GC pauses during the run, by kind. */
  gc: Array<{ kind: string; count: number; ms: number }>;
  gcCount: number;
  gcMs: number;
  /** GC pause time per request, µs. */
  gcUsPerReq: number;
  /**
   * The event-loop thread over the run: ms per second on a core and ms per second runnable but waiting
   * for a core (another process or thread had it), and that wait per request (µs). NaN without schedstat.
   */
  mainOnCpuMsPerSec: number;
  mainWaitMsPerSec: number;
  mainWaitUsPerReq: number;
}

export async function runtimeSnapshot(metricsUrl: string | undefined, pid?: number): Promise<RuntimeSnapshot | null> {
  if (!metricsUrl) return null;
  const sched = mainThreadSchedstat(pid);
  try {
    const res = await fetch(metricsUrl, { signal: AbortSignal.timeout(2000) });
    if (!res.ok) return null;
    const m = parsePromText(await res.text());
    const loop: Buckets = [];
    const gc = new Map<string, { count: number; seconds: number }>();
    for (const [k, v] of m) {
      const b = /^nodejs_eventloop_delay_seconds_bucket\{le="([^"]+)"\}$/.exec(k);
      if (b) loop.push([b[1] === '+Inf' ? Infinity : Number(b[1]), v]);
      const g = /^nodejs_gc_duration_seconds_(count|sum)\{kind="([^"]+)"\}$/.exec(k);
      if (g) {
        const e = gc.get(g[2]!) ?? { count: 0, seconds: 0 };
        if (g[1] === 'count') e.count = v;
        else e.seconds = v;
        gc.set(g[2]!, e);
      }
    }
    return { loop: loop.length ? loop.sort((a, b) => a[0] - b[0]) : null, loopSum: m.get('nodejs_eventloop_delay_seconds_sum') ?? 0, gc, sched };
  } catch {
    return null;
  }
}

export function runtimeDelta(before: RuntimeSnapshot | null, after: RuntimeSnapshot | null, requests: number): RuntimeFigures | null {
  if (!before || !after || !after.loop) return null;
  const p50 = histogramQuantile(before.loop, after.loop, 0.5);
  const p99 = histogramQuantile(before.loop, after.loop, 0.99);
  const gc = [...after.gc].map(([kind, a]) => {
    const b = before.gc.get(kind) ?? { count: 0, seconds: 0 };
    return { kind, count: a.count - b.count, ms: (a.seconds - b.seconds) * 1000 };
  }).filter((g) => g.count > 0);
  const gcCount = gc.reduce((s, g) => s + g.count, 0);
  const gcMs = gc.reduce((s, g) => s + g.ms, 0);
  const s0 = before.sched, s1 = after.sched;
  const wallSec = s0 && s1 ? (s1.atMs - s0.atMs) / 1000 : NaN;
  const waitMs = s0 && s1 ? (s1.waitNs - s0.waitNs) / 1e6 : NaN;
  return {
    loopP50Ms: p50.value * 1000, loopP99Ms: p99.value * 1000,
    loopMeanMs: p50.count ? ((after.loopSum - before.loopSum) / p50.count) * 1000 : NaN, loopSamples: p50.count,
    gc, gcCount, gcMs, gcUsPerReq: requests ? (gcMs * 1000) / requests : NaN,
    mainOnCpuMsPerSec: s0 && s1 && wallSec > 0 ? (s1.onCpuNs - s0.onCpuNs) / 1e6 / wallSec : NaN,
    mainWaitMsPerSec: waitMsPerSec(s0, s1),
    mainWaitUsPerReq: requests > 0 ? (waitMs * 1000) / requests : NaN,
  };
}

export interface RedisSnapshot {
  cpuSec: number;
  commands: Map<string, { calls: number; usec: number }>;
}

export interface RedisFigures {
  /** Redis server CPU (user + system) per request, µs. */
  cpuUsPerReq: number;
  /** Commands per request (scripts' inner commands included, as Redis counts them). */
  callsPerReq: number;
  /** Time Redis spent executing commands per request, µs (commandstats usec). */
  execUsPerReq: number;
  top: Array<{ command: string; callsPerReq: number; usPerCall: number; usPerReq: number }>;
}

export async function redisSnapshot(redis: Redis): Promise<RedisSnapshot | null> {
  try {
    const [stats, cpu] = await Promise.all([redis.info('commandstats'), redis.info('cpu')]);
    const commands = new Map<string, { calls: number; usec: number }>();
    for (const m of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) commands.set(m[1]!, { calls: Number(m[2]), usec: Number(m[3]) });
    const num = (k: string): number => Number(new RegExp(`^${k}:([\\d.]+)`, 'm').exec(cpu)?.[1] ?? NaN);
    return { cpuSec: num('used_cpu_user') + num('used_cpu_sys'), commands };
  } catch {
    return null;
  }
}

export function redisDelta(before: RedisSnapshot | null, after: RedisSnapshot | null, requests: number): RedisFigures | null {
  if (!before || !after || requests <= 0) return null;
  // The bench's own INFO calls are left out.
  const rows = [...after.commands].filter(([c]) => c !== 'info').map(([command, a]) => {
    const b = before.commands.get(command) ?? { calls: 0, usec: 0 };
    return { command, calls: a.calls - b.calls, usec: a.usec - b.usec };
  }).filter((r) => r.calls > 0);
  const calls = rows.reduce((s, r) => s + r.calls, 0);
  const usec = rows.reduce((s, r) => s + r.usec, 0);
  return {
    cpuUsPerReq: ((after.cpuSec - before.cpuSec) * 1e6) / requests,
    callsPerReq: calls / requests,
    execUsPerReq: usec / requests,
    top: rows.sort((a, b) => b.usec - a.usec).slice(0, 8).map((r) => ({
      command: r.command, callsPerReq: r.calls / requests, usPerCall: r.usec / r.calls, usPerReq: r.usec / requests,
    })),
  };
}
