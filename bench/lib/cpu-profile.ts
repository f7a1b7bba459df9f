// Summarises V8 .cpuprofile files (node --cpu-prof): self time per function, and per package
// (node_modules/<name>, node: internals, the project's own folders, GC, idle), from the samples and
// their time deltas.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { projectRoot } from '../../infra/project-root.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface HotFunction {
  function: string;
  location: string;
  selfMs: number;
  selfPct: number;
}

export interface ProfileSummary {
  file: string;
  /** 'main' (the event loop) or 'worker' (a token-counting thread: its wait for work counts as idle). */
  thread: 'main' | 'worker';
  totalMs: number;
  /** Self time outside (idle). */
  busyMs: number;
  top: HotFunction[];
  byArea: Array<{ area: string; selfMs: number; pctOfBusy: number }>;
}

function areaOf(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  if (url.startsWith('node:')) return 'node: internals';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1]!;
  const m = /\/dist\/([^/]+\/[^/]+)/.exec(url);
  if (m) return m[1]!.replace(/\.js$/, '');
  return url;
}

/**
 * This process's monotonic clock in µs: the time base of a profile's startTime and samples (V8's and
 * libuv's clocks are both CLOCK_MONOTONIC), so a time taken here places itself among another
 * process's samples.
 */
export function monotonicMicros(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/**
 * `fromUs` (monotonicMicros): only the samples taken from then on count. The bench passes the end of
 * its JIT warm-up, so that start-up (module loading, the schemas' compilation) and V8's compiling of
 * the hot path are not weighed as if each request paid for them.
 */
export function summarizeProfile(file: string, topN = 25, fromUs = 0): ProfileSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  let at = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    const delta = p.timeDeltas[i] ?? 0;
    at += delta;
    if (at < fromUs) continue;
    const id = p.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + delta);
  }
  const root = projectRoot();
  const fnTime = new Map<string, { fn: string; loc: string; us: number }>();
  const areaTime = new Map<string, number>();
  let total = 0, idle = 0;
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const { functionName, url, lineNumber } = n.callFrame;
    total += us;
    // A piscina worker blocks in Atomics.wait between tasks: waiting, not working.
    if (functionName === '(idle)' || functionName === 'atomicsWaitLoop') {
      idle += us;
      continue;
    }
    const fn = functionName || '(anonymous)';
    const file = url.startsWith('file://') ? relative(root, url.slice(7)) : url;
    const loc = file ? `${file}:${lineNumber + 1}` : '';
    const key = `${fn}@${loc}`;
    const e = fnTime.get(key);
    if (e) e.us += us;
    else fnTime.set(key, { fn, loc, us });
    const area = areaOf(url, fn);
    areaTime.set(area, (areaTime.get(area) ?? 0) + us);
  }
  const busy = total - idle;
  const thread = p.nodes.some((n) => n.callFrame.functionName === 'atomicsWaitLoop') ? 'worker' : 'main';
  const top = [...fnTime.values()].sort((a, b) => b.us - a.us).slice(0, topN).map((e) => ({
    function: e.fn, location: e.loc, selfMs: e.us / 1000, selfPct: busy > 0 ? (e.us / busy) * 100 : 0,
  }));
  const byArea = [...areaTime.entries()].sort((a, b) => b[1] - a[1]).map(([area, us]) => ({
    area, selfMs: us / 1000, pctOfBusy: busy > 0 ? (us / busy) * 100 : 0,
  }));
  return { file, thread, totalMs: total / 1000, busyMs: busy / 1000, top, byArea };
}

export function summarizeProfileDir(dir: string, fromUs = 0): ProfileSummary[] {
  let files: string[] = [];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  } catch {
    return [];
  }
  // The event loop's profile first: the one the hot path runs on.
  return files.map((f) => summarizeProfile(join(dir, f), 25, fromUs)).sort((a, b) => (a.thread === b.thread ? b.busyMs - a.busyMs : a.thread === 'main' ? -1 : 1));
}

/**
 * Areas any Node HTTP hop spends its time in whatever it does per request: V8 and Node themselves,
 * native calls (uWS writes count under the JS function that makes them, so not here), the garbage
 * collector and undici with its llhttp (WebAssembly).
 */
const RUNTIME_AREAS = new Set(['(native)', 'node: internals', '(garbage collector)', '(program)', 'undici']);
const isRuntimeArea = (area: string): boolean => RUNTIME_AREAS.has(area) || area.startsWith('wasm://');

export interface ProfileComparison {
  /** The process's own code and the libraries only it loads (every area but the runtime's), share of busy time. */
  ownCodeShare: { relay: number; bare: number };
  /** Every area of either profile as a share of its process's busy time, the relay's largest excess first. */
  areas: Array<{ area: string; relay: number; bare: number }>;
}

/**
 * The relay's event loop against the bare hop's: where each spends its busy time, as shares, so that
 * the report can weigh them with each process's measured CPU per request. Shares rather than sampled
 * time per request, because the profiler samples on the thread's clock: time spent waiting for a core
 * lands in whatever was running, and the relay (with billing beside it) waits more than the bare hop.
 * Both profiles cover the same window: the bench's runs, after its JIT warm-up (summarizeProfile's fromUs).
 */
export function compareProfiles(relay: ProfileSummary, bare: ProfileSummary): ProfileComparison {
  const byArea = new Map<string, { relay: number; bare: number }>();
  for (const a of relay.byArea) byArea.set(a.area, { relay: a.pctOfBusy / 100, bare: 0 });
  for (const a of bare.byArea) {
    const e = byArea.get(a.area);
    if (e) e.bare = a.pctOfBusy / 100;
    else byArea.set(a.area, { relay: 0, bare: a.pctOfBusy / 100 });
  }
  const areas = [...byArea.entries()].map(([area, e]) => ({ area, ...e })).sort((x, y) => (y.relay - y.bare) - (x.relay - x.bare));
  const own = (pick: (a: { relay: number; bare: number }) => number): number =>
    areas.filter((a) => !isRuntimeArea(a.area)).reduce((s, a) => s + pick(a), 0);
  return { ownCodeShare: { relay: own((a) => a.relay), bare: own((a) => a.bare) }, areas };
}

/** What the bench's profiles show: the relay's threads, and its event loop against the bare hop's. */
export interface CpuProfiles {
  relay: ProfileSummary[];
  /** Null unless the bare hop was profiled too. */
  comparison: ProfileComparison | null;
}
