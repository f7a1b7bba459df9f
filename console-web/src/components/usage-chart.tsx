// Spend and requests per day (uPlot): two series on two axes. The canvas is described in text for
// screen readers by a visually hidden table of the same figures, one row per day.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import type { DailyUsage } from '../api/types';
import { dateTime, dollars, QUOTA_PER_DOLLAR } from '../format';

export function chartData(days: DailyUsage[]): uPlot.AlignedData {
  return [days.map((d) => d.day), days.map((d) => d.quota / QUOTA_PER_DOLLAR), days.map((d) => d.requests)];
}

/** Digits after the point a tick step needs: 1 → 0, 0.25 → 2, 0.0005 → 4 (at most 6). */
export function stepDecimals(step: number): number {
  for (let d = 0; d < 6; d++) {
    const scaled = step * 10 ** d;
    if (Math.abs(scaled - Math.round(scaled)) < 1e-9 * Math.max(1, scaled)) return d;
  }
  return 6;
}

/** The spend axis' tick labels: "$0.0025", not "$0.0025000000000000005". */
export function spendTickLabels(splits: readonly number[], step: number): string[] {
  const decimals = stepDecimals(step);
  return splits.map((v) => `$${v.toFixed(decimals)}`);
}

/**
 * Width of a y axis (uPlot's axis `size`): its ticks, the gap and its longest tick label. uPlot's fixed
 * default (50 px) let a label such as "$0.0025" run into the axis title drawn beside it.
 */
export function axisWidth(labels: readonly string[], textWidth: (text: string) => number, tickSize: number, gap: number): number {
  const longest = labels.reduce((w, l) => Math.max(w, textWidth(l)), 0);
  return Math.ceil(tickSize + gap + longest + 4);
}

/** uPlot's `size` callback: measures the labels in the axis' own font. */
const fitLabels: uPlot.Axis.Size = (u, values, axisIdx, cycleNum) => {
  const axis = u.axes[axisIdx]!;
  // uPlot sizes the axes again until they settle; past two rounds, keep what it has.
  const current = (axis as { _size?: number })._size;
  if (cycleNum > 1 && current !== undefined) return current;
  const font = (axis.font as unknown as [string, number] | undefined)?.[0];
  if (font) u.ctx.font = font;
  const ratio = globalThis.devicePixelRatio || 1;
  return axisWidth(values ?? [], (t) => u.ctx.measureText(t).width / ratio, axis.ticks?.size ?? 10, axis.gap ?? 5);
};

/** The legend's Spend: "--" where the chart has no value (no day under the cursor), not a blank. */
export function spendLegend(v: number | null | undefined): string {
  return v == null ? '--' : `$${v.toFixed(4)}`;
}

export function UsageChart({ days }: { days: DailyUsage[] }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const plot = new uPlot({
      width: Math.max(320, el.clientWidth),
      height: 260,
      series: [
        {},
        { label: 'Spend ($)', stroke: '#2563eb', width: 2, fill: 'rgba(37,99,235,0.08)', scale: '$', value: (_u, v) => spendLegend(v) },
        { label: 'Requests', stroke: '#16a34a', width: 2, scale: 'n' },
      ],
      axes: [
        {},
        { scale: '$', label: 'Spend ($)', values: (_u, splits, _axis, _space, step) => spendTickLabels(splits, step), size: fitLabels },
        { scale: 'n', label: 'Requests', side: 1, grid: { show: false }, size: fitLabels },
      ],
      scales: { x: { time: true } },
    }, chartData(days), el);
    const resize = () => plot.setSize({ width: Math.max(320, el.clientWidth), height: 260 });
    addEventListener('resize', resize);
    return () => { removeEventListener('resize', resize); plot.destroy(); };
  }, [days]);
  return (
    <>
      <div ref={box} class="chart" role="img" aria-label="Spend and requests per day over the last 30 days (figures in the table that follows)" />
      <div class="visually-hidden">
        <table>
          <caption>Spend and requests per day, last 30 days</caption>
          <thead><tr><th scope="col">Day</th><th scope="col">Spend</th><th scope="col">Requests</th></tr></thead>
          <tbody>
            {days.map((d) => (
              <tr key={d.day}><th scope="row">{dateTime(d.day).slice(0, 10)}</th><td>{dollars(d.quota)}</td><td>{d.requests.toLocaleString('en-US')}</td></tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}
