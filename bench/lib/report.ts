// The report: JSON (everything), Markdown (the tables an SRE reads) and an SVG chart of latency
// against offered load.
import { mkdirSync, rmSync, cpSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

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

const f = (v: number | null | undefined, d = 2): string => (v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(d));

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

export { f as fmt };
