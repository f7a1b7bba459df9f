// Spend and requests per day (uPlot): two series on two axes. The canvas is described in text for
// screen readers by the table the dashboard shows beside it.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import type { DailyUsage } from '../api/types';
import { QUOTA_PER_DOLLAR } from '../format';

export function chartData(days: DailyUsage[]): uPlot.AlignedData {
  return [days.map((d) => d.day), days.map((d) => d.quota / QUOTA_PER_DOLLAR), days.map((d) => d.requests)];
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
        { label: 'Spend ($)', stroke: '#2563eb', width: 2, fill: 'rgba(37,99,235,0.08)', scale: '$', value: (_u, v) => (v == null ? '' : `$${v.toFixed(4)}`) },
        { label: 'Requests', stroke: '#16a34a', width: 2, scale: 'n' },
      ],
      axes: [
        {},
        { scale: '$', label: 'Spend ($)', values: (_u, vals) => vals.map((v) => `$${v}`) },
        { scale: 'n', label: 'Requests', side: 1, grid: { show: false } },
      ],
      scales: { x: { time: true } },
    }, chartData(days), el);
    const resize = () => plot.setSize({ width: Math.max(320, el.clientWidth), height: 260 });
    addEventListener('resize', resize);
    return () => { removeEventListener('resize', resize); plot.destroy(); };
  }, [days]);
  return <div ref={box} class="chart" role="img" aria-label="Spend and requests per day over the last 30 days" />;
}
