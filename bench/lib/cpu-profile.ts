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

export function summarizeProfile(file: string, topN = 25): ProfileSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) {
    const id = p.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0));
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
  const byArea = [...areaTime.entries()].sort((a, b) => b[1] - a[1]).slice(0, 20).map(([area, us]) => ({
    area, selfMs: us / 1000, pctOfBusy: busy > 0 ? (us / busy) * 100 : 0,
  }));
  return { file, thread, totalMs: total / 1000, busyMs: busy / 1000, top, byArea };
}

export function summarizeProfileDir(dir: string): ProfileSummary[] {
  let files: string[] = [];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  } catch {
    return [];
  }
  // The event loop's profile first: the one the hot path runs on.
  return files.map((f) => summarizeProfile(join(dir, f))).sort((a, b) => (a.thread === b.thread ? b.busyMs - a.busyMs : a.thread === 'main' ? -1 : 1));
}
