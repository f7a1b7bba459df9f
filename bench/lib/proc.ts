// Per-process accounting from /proc (Linux): CPU time (utime + stime of /proc/<pid>/stat, the
// process's own accounting, all threads) and resident memory (VmRSS of /proc/<pid>/status).
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

let ticks = 100;
try {
  ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
} catch {
  // Linux' USER_HZ is 100 everywhere that matters
}

/** CPU seconds (user + system) the process has used so far; NaN when it is gone. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces: fields are counted after its closing paren.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // rest[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (Number(rest[11]) + Number(rest[12])) / ticks;
  } catch {
    return NaN;
  }
}

/** Resident memory in bytes; NaN when the process is gone. */
export function rssBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** Busy and total jiffies of the whole machine (all cores), from /proc/stat. */
export function machineJiffies(): { busy: number; total: number } {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
    const v = line.trim().split(/\s+/).slice(1).map(Number);
    const total = v.reduce((a, b) => a + b, 0);
    const idle = (v[3] ?? 0) + (v[4] ?? 0); // idle + iowait
    return { busy: total - idle, total };
  } catch {
    return { busy: NaN, total: NaN };
  }
}

/** Names of the synthetic rows ProcSampler adds. */
export const MACHINE = 'machine (all processes)';
export const OTHERS = 'other processes';

/** PIDs of processes whose command name (/proc/<pid>/comm) is exactly `comm`. */
export function pidsByComm(comm: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/comm`, 'utf8').trim() === comm) out.push(Number(d));
    } catch {
      // gone
    }
  }
  return out;
}

/**
 * PIDs of the processes with a TCP socket listening on `port` (any address, IPv4 or IPv6): the
 * LISTEN rows of /proc/net/tcp{,6} give the socket inodes, /proc/<pid>/fd the processes holding them.
 * Empty when nothing listens or the processes belong to another user (their fds are unreadable).
 */
export function pidsListeningOn(port: number): number[] {
  const inodes = new Set<string>();
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(f, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const c = line.trim().split(/\s+/);
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      if (c.length < 10 || c[3] !== '0A') continue;
      const local = c[1]!;
      if (parseInt(local.slice(local.lastIndexOf(':') + 1), 16) === port && c[9] !== '0') inodes.add(c[9]!);
    }
  }
  if (inodes.size === 0) return [];
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${d}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let link = '';
      try {
        link = readlinkSync(`/proc/${d}/fd/${fd}`);
      } catch {
        continue;
      }
      const m = /^socket:\[(\d+)\]$/.exec(link);
      if (m && inodes.has(m[1]!)) {
        out.push(Number(d));
        break;
      }
    }
  }
  return out;
}

export interface Watched {
  name: string;
  pids: number[];
  /**
   * Found again by command name at each end of a window, for servers that fork a process per
   * connection (Postgres: a pool reconnecting after its idle timeout gets new backends mid-run). A
   * process found only at the end started within the window: all of its CPU time is counted.
   */
  comm?: string;
}

export interface ProcUsage {
  name: string;
  cpuSec: number;
  /** CPU time over wall time, in percent of one core. */
  cpuPct: number;
  rssStartMb: number;
  rssMaxMb: number;
  rssEndMb: number;
  /** RSS samples (MB) over the window, for the memory-flatness check. */
  rssSamplesMb: number[];
}

/** Samples the watched processes between start() and stop(). */
export class ProcSampler {
  readonly #watched: Watched[];
  #cpu0: Array<Map<number, number>> = [];
  #t0 = 0;
  #samples: number[][] = [];
  #machine0 = { busy: 0, total: 0 };
  #timer: NodeJS.Timeout | undefined;

  constructor(watched: Watched[]) {
    this.#watched = watched.filter((w) => w.pids.length > 0 || w.comm !== undefined);
  }

  /** CPU seconds per pid; a pid gone at the end counts nothing, one new at the end counts it all (Watched.comm). */
  #readCpu(w: Watched): Map<number, number> {
    const m = new Map<number, number>();
    if (w.comm !== undefined) w.pids = pidsByComm(w.comm);
    for (const p of w.pids) {
      const c = cpuSeconds(p);
      if (Number.isFinite(c)) m.set(p, c);
    }
    return m;
  }

  #delta(w: Watched, before: Map<number, number>, after: Map<number, number>): number {
    let s = 0;
    for (const [pid, c] of after) {
      const b = before.get(pid);
      if (b !== undefined) s += c - b;
      else if (w.comm !== undefined) s += c;
    }
    return s;
  }

  #sumRss(w: Watched): number {
    let s = 0;
    for (const p of w.pids) {
      const r = rssBytes(p);
      if (Number.isFinite(r)) s += r;
    }
    return s / 1048576;
  }

  start(intervalMs = 250): void {
    this.#t0 = performance.now();
    this.#machine0 = machineJiffies();
    this.#cpu0 = this.#watched.map((w) => this.#readCpu(w));
    this.#samples = this.#watched.map((w) => [this.#sumRss(w)]);
    this.#timer = setInterval(() => {
      this.#watched.forEach((w, i) => this.#samples[i]!.push(this.#sumRss(w)));
    }, intervalMs);
    this.#timer.unref();
  }

  /** The watched processes, then MACHINE (every process on the host) and OTHERS (machine − watched). */
  stop(): ProcUsage[] {
    clearInterval(this.#timer);
    const wall = (performance.now() - this.#t0) / 1000;
    const m1 = machineJiffies();
    const usages = this.#watched.map((w, i) => {
      const cpuSec = this.#delta(w, this.#cpu0[i]!, this.#readCpu(w));
      const s = this.#samples[i]!;
      s.push(this.#sumRss(w));
      return {
        name: w.name,
        cpuSec,
        cpuPct: wall > 0 ? (cpuSec / wall) * 100 : 0,
        rssStartMb: s[0]!,
        rssMaxMb: Math.max(...s),
        rssEndMb: s[s.length - 1]!,
        rssSamplesMb: s,
      };
    });
    const machineSec = (m1.busy - this.#machine0.busy) / ticks;
    const watchedSec = usages.reduce((a, u) => a + u.cpuSec, 0);
    const synthetic = (name: string, sec: number): ProcUsage => ({
      name, cpuSec: sec, cpuPct: wall > 0 ? (sec / wall) * 100 : 0, rssStartMb: NaN, rssMaxMb: NaN, rssEndMb: NaN, rssSamplesMb: [],
    });
    return [...usages, synthetic(MACHINE, machineSec), synthetic(OTHERS, Math.max(0, machineSec - watchedSec))];
  }
}
