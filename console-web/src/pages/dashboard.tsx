import { useEffect } from 'preact/hooks';
import { api, call } from '../api/client';
import { Card, ErrorText, Loading, useLoad } from '../components/ui';
import { UsageChart } from '../components/usage-chart';
import type { PageProps } from '../app';
import { count, dollars, localDays, localOffset, quotaText } from '../format';
import type { DailyUsage } from '../api/types';

const FIGURES = ['requests', 'quota', 'prompt_tokens', 'completion_tokens'] as const;

/**
 * The figures of the `days` local days ending with today. /api/log/self/daily counts all days by one
 * fixed UTC offset, so each day is read with its own (localDays()): one request per offset among the
 * days, two when a daylight-saving change falls in the window. An answer runs without a gap up to
 * now, so its entries from a day on sum what was used from that day's start until now; a day's
 * figures are that less the same from the next day's start. That is a day's own entry, except on the
 * day of a change, 23 or 25 hours long, which no fixed offset's 24-hour entry fits: there it counts
 * neither the next day's first hour too nor loses its repeated hour. An answer is one day longer than
 * asked, as the API counts back from today by the offset given, which an hour can make tomorrow.
 */
export async function dailyUsage(nowMs: number, days: number, read: (utcOffset: number, days: number) => Promise<DailyUsage[]>,
  offsetAt: (ms: number) => number = localOffset): Promise<DailyUsage[]> {
  const wanted = localDays(nowMs, days, offsetAt);
  const offsets = [...new Set(wanted.map((d) => d.utcOffset))];
  const answers = await Promise.all(offsets.map((o) => read(o, days + 1)));
  const byOffset = new Map(offsets.map((o, i) => [o, answers[i]!]));
  const sinceStart = (day: { start: number; utcOffset: number } | undefined) => {
    const sums = { requests: 0, quota: 0, prompt_tokens: 0, completion_tokens: 0 };
    if (!day) return sums;
    for (const e of byOffset.get(day.utcOffset) ?? []) if (e.day >= day.start) for (const f of FIGURES) sums[f] += e[f];
    return sums;
  };
  // Each day's sums once: a day's are both its own "from" and the day before's "next".
  const since = [...wanted.map(sinceStart), sinceStart(undefined)];
  return wanted.map((d, i) => {
    const from = since[i]!;
    const next = since[i + 1]!;
    // Never below zero: a request logged between two answers' reads is in one of them only.
    const out: DailyUsage = { day: d.start, requests: 0, quota: 0, prompt_tokens: 0, completion_tokens: 0 };
    for (const f of FIGURES) out[f] = Math.max(0, from[f] - next[f]);
    return out;
  });
}

/** Totals of the chart's days, and today's (the last day). */
export function summarise(days: DailyUsage[]) {
  const sum = (f: (d: DailyUsage) => number) => days.reduce((n, d) => n + f(d), 0);
  const today = days[days.length - 1];
  return {
    requests: sum((d) => d.requests),
    quota: sum((d) => d.quota),
    promptTokens: sum((d) => d.prompt_tokens),
    completionTokens: sum((d) => d.completion_tokens),
    todayRequests: today?.requests ?? 0,
    todayQuota: today?.quota ?? 0,
  };
}

export function DashboardPage({ account, refreshAccount }: PageProps) {
  // The account was read at sign-in: its balance, spending and request count have moved since.
  // eslint-disable-next-line react-hooks/exhaustive-deps
  useEffect(() => refreshAccount(), []);
  const daily = useLoad(() => dailyUsage(Date.now(), 30, (utcOffset, days) => call(api.GET('/api/log/self/daily', { params: { query: { days, utc_offset: utcOffset } } }))), []);
  const stat = useLoad(() => call(api.GET('/api/log/self/stat', { params: { query: {} } })), []);
  const s = daily.data ? summarise(daily.data) : undefined;
  return (
    <>
      <div class="tiles">
        <Tile label="Balance" value={dollars(account.quota)} detail={`${account.quota.toLocaleString('en-US')} quota`} />
        <Tile label="Used" value={dollars(account.used_quota)} detail={`${account.used_quota.toLocaleString('en-US')} quota`} />
        <Tile label="Requests" value={account.request_count.toLocaleString('en-US')} detail="since the account was created" />
        {/* From the log store: when it does not answer, the tile says so rather than "…" for good. */}
        <Tile label="Today's requests" value={s ? s.todayRequests.toLocaleString('en-US') : daily.error ? 'unavailable' : '…'}
          detail={s ? `${dollars(s.todayQuota)} spent today` : daily.error ? 'the usage logs cannot be read now' : ''} />
        <Tile label="RPM / TPM" value={stat.data ? `${count(stat.data.rpm)} / ${count(stat.data.tpm)}` : stat.error ? 'unavailable' : '…'}
          detail={stat.error ? 'the usage logs cannot be read now' : 'over the last minute'} />
      </div>
      <Card title="Last 30 days">
        {daily.loading && !daily.data && <Loading what="Loading usage" />}
        <ErrorText error={daily.error} />
        {daily.data && s && (
          <>
            <dl class="totals">
              <div><dt>Spend</dt><dd>{quotaText(s.quota)}</dd></div>
              <div><dt>Requests</dt><dd>{s.requests.toLocaleString('en-US')}</dd></div>
              <div><dt>Prompt tokens</dt><dd>{s.promptTokens.toLocaleString('en-US')}</dd></div>
              <div><dt>Completion tokens</dt><dd>{s.completionTokens.toLocaleString('en-US')}</dd></div>
            </dl>
            <UsageChart days={daily.data} />
          </>
        )}
      </Card>
    </>
  );
}

function Tile({ label, value, detail }: { label: string; value: string; detail: string }) {
  return (
    <div class="tile" role="group" aria-label={label}>
      <div class="tile-label">{label}</div>
      <div class="tile-value">{value}</div>
      <div class="tile-detail">{detail}</div>
    </div>
  );
}
