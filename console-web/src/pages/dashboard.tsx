import { useEffect } from 'preact/hooks';
import { api, call } from '../api/client';
import { Card, ErrorText, Loading, useLoad } from '../components/ui';
import { UsageChart } from '../components/usage-chart';
import type { PageProps } from '../app';
import { dollars, quotaText } from '../format';
import type { DailyUsage } from '../api/types';

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
  const offset = -new Date().getTimezoneOffset();
  const daily = useLoad(() => call(api.GET('/api/log/self/daily', { params: { query: { days: 30, utc_offset: offset } } })), []);
  const stat = useLoad(() => call(api.GET('/api/log/self/stat', { params: { query: {} } })), []);
  const s = daily.data ? summarise(daily.data) : undefined;
  return (
    <>
      <div class="tiles">
        <Tile label="Balance" value={dollars(account.quota)} detail={`${account.quota.toLocaleString('en-US')} quota`} />
        <Tile label="Used" value={dollars(account.used_quota)} detail={`${account.used_quota.toLocaleString('en-US')} quota`} />
        <Tile label="Requests" value={account.request_count.toLocaleString('en-US')} detail="since the account was created" />
        <Tile label="Today's requests" value={s ? s.todayRequests.toLocaleString('en-US') : '…'} detail={s ? `${dollars(s.todayQuota)} spent today` : ''} />
        <Tile label="RPM / TPM" value={stat.data ? `${stat.data.rpm} / ${stat.data.tpm}` : '…'} detail="over the last minute" />
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
