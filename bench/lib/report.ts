// The report: JSON (everything), Markdown (the tables an SRE reads) and an SVG chart of latency
// against offered load.
import { mkdirSync, rmSync, cpSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import type { AuditResult } from './audit.js';
import type { CannonResult } from './cannon.js';
import type { ScaleResult } from './console-scale.js';
import type { ProfileSummary } from './cpu-profile.js';
import type { DriveResult } from './driver.js';
import { MACHINE, OTHERS, type ProcUsage } from './proc.js';
import type { Summary } from './stats.js';

export interface CurvePoint {
  rate: number;
  mock: { rps: number; p50: number; p99: number };
  relay: { rps: number; p50: number; p99: number };
  addedP50: number;
  addedP99: number;
  relayCpuPct: number;
  loadgenCpuPct: number;
  held: boolean;
}

export interface RunFigures {
  target: string;
  offered: number;
  driver: DriveResult;
  procs: ProcUsage[];
  cpuUsPerReq: number | null;
}

export interface ScenarioReport {
  id: string;
  title: string;
  /** Which of the scenario's requests carry images or documents, when any do. */
  media?: string | null;
  stream: boolean;
  rate: number;
  connections: number;
  runs: RunFigures[];
  audit: AuditResult | null;
  auditPaused: AuditResult | null;
  lag: { lagMs: Summary; missing: number; pollQueryMs: Summary } | null;
  /** From the billing worker's gateway_billing_lag_seconds, when it exposes /metrics: bucket upper bounds, ms. */
  lagMetric: { p50Ms: number; p99Ms: number; count: number } | null;
}

export interface SaturationRun { target: string; result: CannonResult; procs: ProcUsage[]; cpuUsPerReq: number | null }

/** What the bench ran against, as the report's header and report.json's `target` show it. */
export interface ReportTarget {
  mode: 'own' | 'attached';
  relayUrl: string;
  mockUrl: string;
  databaseUrl: string;
  redisPrefix: string;
  clickhouse: string;
  pids: Record<string, { pids: number[]; how: string }>;
}

/** The run's settings the Markdown quotes. */
export interface ReportRun { stamp: string; warmupMs: number; durationMs: number; scaleDurationSec: number }

/** A figure with `d` decimals; '–' when there is none. */
export const fmt = (v: number | null | undefined, d = 2): string => (v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(d));

export function svgChart(points: CurvePoint[]): string {
  const W = 760, H = 420, L = 70, R = 160, T = 30, B = 50;
  const maxX = Math.max(1, ...points.map((p) => p.rate));
  const ys = points.flatMap((p) => [p.mock.p99, p.relay.p99, p.relay.p50, p.mock.p50]).filter(Number.isFinite);
  const maxY = Math.max(1, ...ys) * 1.1;
  const x = (v: number): number => L + (v / maxX) * (W - L - R);
  const y = (v: number): number => H - B - (Math.min(v, maxY) / maxY) * (H - T - B);
  const line = (get: (p: CurvePoint) => number, color: string, dash = ''): string => {
    const pts = points.filter((p) => Number.isFinite(get(p))).map((p) => `${x(p.rate).toFixed(1)},${y(get(p)).toFixed(1)}`).join(' ');
    return `<polyline fill="none" stroke="${color}" stroke-width="2" ${dash ? `stroke-dasharray="${dash}"` : ''} points="${pts}"/>` +
      points.filter((p) => Number.isFinite(get(p))).map((p) => `<circle cx="${x(p.rate).toFixed(1)}" cy="${y(get(p)).toFixed(1)}" r="3" fill="${color}"/>`).join('');
  };
  const ticks: string[] = [];
  for (let i = 0; i <= 5; i++) {
    const vy = (maxY * i) / 5;
    const vx = (maxX * i) / 5;
    ticks.push(`<line x1="${L}" x2="${W - R}" y1="${y(vy)}" y2="${y(vy)}" stroke="#eee"/><text x="${L - 8}" y="${y(vy) + 4}" text-anchor="end" font-size="11">${vy.toFixed(1)}</text>`);
    ticks.push(`<text x="${x(vx)}" y="${H - B + 18}" text-anchor="middle" font-size="11">${Math.round(vx)}</text>`);
  }
  const legend = [['relay p99', '#d62728', ''], ['relay p50', '#d62728', '4 3'], ['mock direct p99', '#1f77b4', ''], ['mock direct p50', '#1f77b4', '4 3']]
    .map(([name, color, dash], i) => `<line x1="${W - R + 15}" x2="${W - R + 45}" y1="${T + 15 + i * 20}" y2="${T + 15 + i * 20}" stroke="${color}" stroke-width="2" ${dash ? `stroke-dasharray="${dash}"` : ''}/><text x="${W - R + 50}" y="${T + 19 + i * 20}" font-size="12">${name}</text>`).join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="${L}" y="18" font-size="14">Latency vs offered load (non-streaming small request)</text>
${ticks.join('\n')}
<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="black"/><line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="black"/>
<text x="${(L + W - R) / 2}" y="${H - 10}" text-anchor="middle" font-size="12">offered load (requests/s)</text>
<text x="16" y="${(T + H - B) / 2}" transform="rotate(-90 16 ${(T + H - B) / 2})" text-anchor="middle" font-size="12">latency (ms)</text>
${line((p) => p.mock.p99, '#1f77b4')}${line((p) => p.mock.p50, '#1f77b4', '4 3')}
${line((p) => p.relay.p99, '#d62728')}${line((p) => p.relay.p50, '#d62728', '4 3')}
${legend}
</svg>
`;
}

export function writeReport(resultsRoot: string, stamp: string, json: unknown, markdown: string, svg: string): string {
  const dir = join(resultsRoot, stamp);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'report.json'), JSON.stringify(json, null, 2));
  writeFileSync(join(dir, 'report.md'), markdown);
  writeFileSync(join(dir, 'latency-vs-load.svg'), svg);
  const latest = join(resultsRoot, 'latest');
  rmSync(latest, { recursive: true, force: true });
  cpSync(dir, latest, { recursive: true, filter: (src) => !src.endsWith('.cpuprofile') });
  return dir;
}

/** Which process ran out of CPU in a run, and how busy the machine was. */
export function saturated(procs: ProcUsage[]): string {
  const real = procs.filter((p) => p.name !== MACHINE && p.name !== OTHERS);
  const top = [...real].sort((a, b) => b.cpuPct - a.cpuPct)[0];
  const machine = procs.find((p) => p.name === MACHINE)?.cpuPct;
  const total = machine ?? real.reduce((a, p) => a + p.cpuPct, 0);
  if (!top) return '–';
  const who = top.cpuPct >= 85 ? `${top.name} (${top.cpuPct.toFixed(0)}% of a core)` : `none (top: ${top.name} ${top.cpuPct.toFixed(0)}%)`;
  const cores = cpus().length;
  return total >= 90 * cores ? `${who}; all ${cores} cores busy (${total.toFixed(0)}%)` : `${who}; machine ${total.toFixed(0)}% of ${cores * 100}%`;
}

export function reportMarkdown(
  opts: ReportRun,
  scenarios: ScenarioReport[],
  saturation: SaturationRun[],
  curve: CurvePoint[],
  profiles: ProfileSummary[],
  scale: ScaleResult | null,
  target: ReportTarget,
  notes: string[],
): string {
  const L: string[] = [];
  const run = (s: ScenarioReport, t: string): RunFigures | undefined => s.runs.find((r) => r.target === t);
  L.push(`# Gateway benchmark ${opts.stamp}`, '');
  if (target.mode === 'attached') {
    const pids = Object.entries(target.pids).map(([k, v]) => `${k} ${v.pids.join(',')} (${v.how})`).join('; ');
    L.push(`Attached to a running stack: relay ${target.relayUrl}, mock ${target.mockUrl}, Postgres ${target.databaseUrl}, Redis prefix \`${target.redisPrefix}\`, ClickHouse ${target.clickhouse}. Processes watched: ${pids || 'none of the stack\'s'}.`, '');
  } else {
    L.push('Own stack: every service spawned by the bench on its own database, Redis prefix and ClickHouse database.', '');
  }
  if (notes.length) L.push(...notes.map((n) => `- ${n}`), '');
  L.push(`Machine: ${cpus().length} cores, Node ${process.version}, one host for load generator and every service. Durations: warm-up ${opts.warmupMs / 1000} s, measure ${opts.durationMs / 1000} s per run.`);
  L.push('Latencies in ms from the load generator (request written → last byte); "added" = relay − mock direct at the same offered load; TTFB = request written → first body byte.', '');
  L.push('## Scenarios', '');
  L.push('| scenario | offered req/s | relay req/s | mock p50 / p99 | bare p50 / p99 | relay p50 / p99 | added p50 / p99 | added p50 / p99, billing paused | TTFB added p50 / p99 | CPU µs/req relay / bare (×) | relay RSS MB start → max → end | saturated (relay run) | audit | billing lag p50 / p99 ms |');
  L.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const s of scenarios.filter((x) => x.runs.length)) {
    const m = run(s, 'mock'), b = run(s, 'bare'), r = run(s, 'relay');
    const lat = (x?: RunFigures): string => (x ? `${fmt(x.driver.latency.p50)} / ${fmt(x.driver.latency.p99)}` : '–');
    const added = r && m ? `${fmt(r.driver.latency.p50 - m.driver.latency.p50)} / ${fmt(r.driver.latency.p99 - m.driver.latency.p99)}` : '–';
    const rp0 = run(s, 'relay-billing-paused');
    const addedPaused = rp0 && m ? `${fmt(rp0.driver.latency.p50 - m.driver.latency.p50)} / ${fmt(rp0.driver.latency.p99 - m.driver.latency.p99)}` : '–';
    const stream = s.stream;
    const ttfb = stream && r && m && r.driver.ttfb.count && m.driver.ttfb.count ? `${fmt(r.driver.ttfb.p50 - m.driver.ttfb.p50)} / ${fmt(r.driver.ttfb.p99 - m.driver.ttfb.p99)}` : '–';
    const cpu = r?.cpuUsPerReq != null && b?.cpuUsPerReq != null ? `${fmt(r.cpuUsPerReq, 0)} / ${fmt(b.cpuUsPerReq, 0)} (${fmt(r.cpuUsPerReq / b.cpuUsPerReq, 2)}×)` : '–';
    const rp = r?.procs.find((p) => p.name === 'relay');
    const rss = rp ? `${fmt(rp.rssStartMb, 0)} → ${fmt(rp.rssMaxMb, 0)} → ${fmt(rp.rssEndMb, 0)}` : '–';
    const audit = s.audit ? (s.audit.pass ? 'PASS' : 'FAIL') : '–';
    const lag = (s.lag && s.lag.lagMs.count ? `${fmt(s.lag.lagMs.p50, 0)} / ${fmt(s.lag.lagMs.p99, 0)}` : '–') +
      (s.lagMetric ? ` (metric ≤ ${fmt(s.lagMetric.p50Ms, 0)} / ≤ ${fmt(s.lagMetric.p99Ms, 0)})` : '');
    L.push(`| ${s.id}: ${s.title} | ${s.rate || 'closed loop'} | ${r ? fmt(r.driver.rps, 0) : '–'} | ${lat(m)} | ${lat(b)} | ${lat(r)} | ${added} | ${addedPaused} | ${ttfb} | ${cpu} | ${rss} | ${r ? saturated(r.procs) : '–'} | ${audit} | ${lag} |`);
  }
  L.push('');
  L.push('## Money audit', '');
  L.push('After each relay run, once the usage stream is drained and no reservation is open: the Postgres debit (users.quota), Σ ledger.quota, Σ ClickHouse logs.quota FINAL, the Redis balance movement and the formula over the usage the mock returned must all be equal.', '');
  for (const s of scenarios) if (s.media) L.push(`- ${s.id} carries media: ${s.media}; the formula includes the input tokens the mock charges for each block.`);
  if (scenarios.some((s) => s.media)) L.push('');
  L.push('| run | result | users.quota debit | Σ ledger | Σ ClickHouse | Redis movement | formula | rows complete / partial / error (with media) | drain ms |');
  L.push('|---|---|---|---|---|---|---|---|---|');
  for (const s of scenarios) for (const [name, a] of [[s.id, s.audit], [`${s.id} (billing paused, then drained)`, s.auditPaused]] as const) {
    if (!a) continue;
    L.push(`| ${name} | ${a.pass ? 'PASS' : `FAIL: ${a.problems.join('; ')}`} | ${a.pgDebit} | ${a.ledgerSum} | ${a.chSum} | ${a.redisMovement ?? '–'} | ${a.formula} | ${a.rows.complete} / ${a.rows.partial} / ${a.rows.error}${a.rows.media ? ` (${a.rows.media})` : ''} | ${a.drainMs} |`);
  }
  const allPass = scenarios.every((s) => (!s.audit || s.audit.pass) && (!s.auditPaused || s.auditPaused.pass));
  L.push('', `**Audit: ${allPass ? 'PASS' : 'FAIL'}**`, '');
  L.push('Billing lag = client saw the response end → its row is visible in ClickHouse (`logs`), polled every 50 ms (resolution: poll interval + one query; the polls themselves queue in ClickHouse with the worker\'s inserts). In parentheses, when the billing worker exposes /metrics: its gateway_billing_lag_seconds (stream entry time → batch committed in Postgres; the ClickHouse row follows from the log outbox, which the polled figure includes), as bucket upper bounds.', '');
  for (const s of scenarios) if (s.lag) L.push(`- ${s.id}: ${s.lag.lagMs.count} requests sampled, ${s.lag.missing} not found, poll query p50 ${fmt(s.lag.pollQueryMs.p50, 1)} ms / p99 ${fmt(s.lag.pollQueryMs.p99, 1)} ms`);
  L.push('');

  L.push(`## CPU per process during each run (% of one core; ${cpus().length} cores = ${cpus().length * 100}%)`, '', `"${OTHERS}" is whatever else ran on the host meanwhile (the machine's busy time from /proc/stat minus the processes listed).`, '');
  const names = [...new Set(scenarios.flatMap((s) => s.runs.flatMap((r) => r.procs.map((p) => p.name))))];
  L.push(`| run | ${names.join(' | ')} |`, `|---|${names.map(() => '---').join('|')}|`);
  for (const s of scenarios) for (const r of s.runs) {
    L.push(`| ${s.id} → ${r.target} | ${names.map((n) => fmt(r.procs.find((p) => p.name === n)?.cpuPct, 0)).join(' | ')} |`);
  }
  for (const r of saturation) {
    L.push(`| saturation → ${r.target} | ${names.map((n) => fmt(r.procs.find((p) => p.name === n)?.cpuPct, 0)).join(' | ')} |`);
  }
  L.push('');
  if (saturation.length) {
    L.push('## Saturation (autocannon, 64 connections, closed loop, non-streaming)', '');
    L.push('| target | req/s | p50 / p99 ms | CPU µs/req (own process) | saturated |', '|---|---|---|---|---|');
    for (const s of saturation) L.push(`| ${s.target} | ${fmt(s.result.rps, 0)} | ${fmt(s.result.latency.p50)} / ${fmt(s.result.latency.p99)} | ${fmt(s.cpuUsPerReq, 0)} | ${saturated(s.procs)} |`);
    L.push('');
  }
  if (curve.length) {
    L.push('## Load curve (non-streaming, paced)', '', '![latency vs load](latency-vs-load.svg)', '');
    L.push('| offered req/s | mock req/s | relay req/s | mock p50 / p99 | relay p50 / p99 | added p50 / p99 | relay CPU % | load generator CPU % | held |', '|---|---|---|---|---|---|---|---|---|');
    for (const p of curve) L.push(`| ${p.rate} | ${fmt(p.mock.rps, 0)} | ${fmt(p.relay.rps, 0)} | ${fmt(p.mock.p50)} / ${fmt(p.mock.p99)} | ${fmt(p.relay.p50)} / ${fmt(p.relay.p99)} | ${fmt(p.addedP50)} / ${fmt(p.addedP99)} | ${fmt(p.relayCpuPct, 0)} | ${fmt(p.loadgenCpuPct, 0)} | ${p.held ? 'yes' : 'no'} |`);
    const best = curve.filter((p) => p.held && p.addedP99 < 1).map((p) => p.rate);
    L.push('', `**Highest rate held with p99 added latency < 1 ms: ${best.length ? Math.max(...best) : 'none'} req/s.**`, '');
  }
  if (scale) {
    L.push(`## Console queries at ${scale.rows.toLocaleString('en')} log rows`, '');
    L.push(`Heaviest account: ${scale.heavyUserRows.toLocaleString('en')} rows. ${scale.loadSec !== null ? `Rows generated in ${scale.loadSec.toFixed(1)} s.` : 'Rows already present.'} 4 concurrent connections, ${opts.scaleDurationSec} s per query.`, '');
    L.push('| query | req/s | p50 ms | p99 ms | non-2xx |', '|---|---|---|---|---|');
    for (const q of scale.queries) {
      const non2xx = Object.entries(q.result.status).filter(([k]) => !k.startsWith('2')).reduce((a, [, v]) => a + v, 0);
      L.push(`| ${q.name} | ${fmt(q.result.rps, 1)} | ${fmt(q.result.latency.p50, 1)} | ${fmt(q.result.latency.p99, 1)} | ${non2xx} |`);
    }
    L.push('');
  }
  if (profiles.length) {
    L.push('## Relay CPU profile (self time)', '');
    for (const p of profiles) {
      L.push(`Busy ${fmt(p.busyMs / 1000, 1)} s of ${fmt(p.totalMs / 1000, 1)} s sampled.`, '');
      L.push('| area | self ms | % of busy |', '|---|---|---|');
      for (const a of p.byArea.slice(0, 12)) L.push(`| ${a.area} | ${fmt(a.selfMs, 0)} | ${fmt(a.pctOfBusy, 1)} |`);
      L.push('', '| function | location | self ms | % of busy |', '|---|---|---|---|');
      for (const t of p.top.slice(0, 20)) L.push(`| ${t.function} | ${t.location} | ${fmt(t.selfMs, 0)} | ${fmt(t.selfPct, 1)} |`);
      L.push('');
    }
  }
  // Targets of issue 5, reported (never asserted).
  const small = scenarios.find((s) => s.id === 'small');
  const sm = small && run(small, 'mock'), sr = small && run(small, 'relay'), sb = small && run(small, 'bare');
  const streamTtfb = scenarios.filter((s) => s.id === 'stream64' || s.id === 'long').map((s) => {
    const r = run(s, 'relay'), m = run(s, 'mock');
    return r && m ? r.driver.ttfb.p99 - m.driver.ttfb.p99 : NaN;
  });
  const long = scenarios.find((s) => s.id === 'long');
  const lr = long && run(long, 'relay')?.procs.find((p) => p.name === 'relay');
  const lags = scenarios.filter((s) => s.lag?.lagMs.count).map((s) => s.lag!.lagMs.p99);
  const maxQ = scale ? Math.max(...scale.queries.map((q) => q.result.latency.p99)) : NaN;
  const check = (ok: boolean | null): string => (ok === null ? '–' : ok ? 'met' : 'not met');
  L.push('## Targets (issue 5)', '', '| target | measured | |', '|---|---|---|');
  const addedP99 = sr && sm ? sr.driver.latency.p99 - sm.driver.latency.p99 : NaN;
  L.push(`| p99 added latency < 1 ms at 2,000 req/s (small) | ${fmt(addedP99)} ms | ${check(Number.isFinite(addedP99) ? addedP99 < 1 : null)} |`);
  const ttfbMax = Math.max(...streamTtfb.filter(Number.isFinite));
  L.push(`| TTFB added < 0.5 ms on streams (p99) | ${fmt(ttfbMax)} ms | ${check(Number.isFinite(ttfbMax) ? ttfbMax < 0.5 : null)} |`);
  const ratio = sr?.cpuUsPerReq != null && sb?.cpuUsPerReq != null ? sr.cpuUsPerReq / sb.cpuUsPerReq : NaN;
  L.push(`| relay CPU/request ≤ 2× bare proxy (small) | ${fmt(ratio)}× | ${check(Number.isFinite(ratio) ? ratio <= 2 : null)} |`);
  const growth = lr ? lr.rssEndMb - lr.rssStartMb : NaN;
  L.push(`| RSS flat during the long stream | ${lr ? `${fmt(lr.rssStartMb, 0)} → ${fmt(lr.rssEndMb, 0)} MB (max ${fmt(lr.rssMaxMb, 0)})` : '–'} | ${check(Number.isFinite(growth) ? growth < Math.max(20, lr!.rssStartMb * 0.1) : null)} |`);
  const lagMax = lags.length ? Math.max(...lags) : NaN;
  L.push(`| billing lag p99 < 1 s | ${fmt(lagMax, 0)} ms (worst scenario) | ${check(Number.isFinite(lagMax) ? lagMax < 1000 : null)} |`);
  L.push(`| log queries p99 < 50 ms at 10 M rows | ${fmt(maxQ, 1)} ms (worst query) | ${check(Number.isFinite(maxQ) ? maxQ < 50 : null)} |`);
  L.push('');
  return L.join('\n');
}
