// Every account's usage log (GET /api/log/ and /api/log/stat, role >= 10): the user page's filters
// and table, plus the account's login name and the channel. Without "From" the API reads the last
// 24 hours across accounts (a read of every account over all time would scan the whole log); the
// hint says so, and an account's own log has no such bound.
import { useState } from 'preact/hooks';
import { api, call } from '../../api/client';
import type { Query } from '../../api/types';
import { Card, ErrorText, Field, Loading, Pager, Select, splitFieldError, useLoad } from '../../components/ui';
import { count, dollars } from '../../format';
import { EMPTY_LOG_FILTERS, LogFilterFields, type LogFilterForm, logFilterError, LogTable, logQuery } from '../logs';

export type AdminLogQuery = Query<'/api/log/', 'get'>;

export interface AdminLogFilterForm extends LogFilterForm {
  username: string;
  channel: string;
}

export const EMPTY_ADMIN_LOG_FILTERS: AdminLogFilterForm = { ...EMPTY_LOG_FILTERS, username: '', channel: '' };

/** The filters as /api/log/'s query, or the field at fault; empty fields are left out. */
export function adminLogQuery(f: AdminLogFilterForm, page: number, pageSize: number): { query: AdminLogQuery } | { field: 'channel' | 'from' | 'to'; error: string } {
  const range = logFilterError(f);
  if (range) return range;
  const query: AdminLogQuery = logQuery(f, page, pageSize);
  if (f.username.trim()) query.username = f.username.trim();
  const channel = f.channel.trim();
  if (channel) {
    if (!/^[0-9]{1,10}$/.test(channel)) return { field: 'channel', error: 'a channel id (digits)' };
    query.channel = Number(channel);
  }
  return { query };
}

/** /api/log/stat takes the list's filters but paging and the request ids. */
function statQuery(q: AdminLogQuery) {
  const { p: _p, page: _page, page_size: _size, request_id: _r, upstream_request_id: _u, ...rest } = q;
  return rest;
}

const FIELDS = ['username', 'channel'] as const;

export function AdminLogsPage() {
  const [form, setForm] = useState(EMPTY_ADMIN_LOG_FILTERS);
  const [applied, setApplied] = useState(EMPTY_ADMIN_LOG_FILTERS);
  const [formError, setFormError] = useState<{ field: string; error: string } | null>(null);
  const [page, setPage] = useState(1);
  const [pageSize, setPageSize] = useState(20);
  const built = adminLogQuery(applied, page, pageSize);
  const query = 'query' in built ? built.query : logQuery(EMPTY_ADMIN_LOG_FILTERS, page, pageSize);
  const logs = useLoad(() => call(api.GET('/api/log/', { params: { query } })), [applied, page, pageSize]);
  const stat = useLoad(() => call(api.GET('/api/log/stat', { params: { query: statQuery(query) } })), [applied]);
  const set = (k: keyof AdminLogFilterForm) => (v: string) => setForm((s) => ({ ...s, [k]: v }));
  const [apiFieldErrors, otherError] = splitFieldError(logs.error, FIELDS);
  const fieldError = (k: (typeof FIELDS)[number]) => (formError?.field === k ? formError.error : apiFieldErrors[k]);
  // Rows and figures are shown only for the query that succeeded: after a failure, the previous ones
  // would read as the answer to the filters now shown.
  const shown = logs.error ? undefined : logs.data;
  const usage = stat.error ? undefined : stat.data;

  const apply = (next: AdminLogFilterForm) => {
    const checked = adminLogQuery(next, 1, pageSize);
    if ('field' in checked) {
      setFormError(checked);
      return;
    }
    setFormError(null);
    setPage(1);
    setApplied(next);
    logs.reload();
    stat.reload();
  };

  return (
    <Card title="Requests and other entries of every account">
      <form class="filters" aria-label="Log filters" onSubmit={(e) => { e.preventDefault(); apply(form); }}>
        <Field label="Account username" value={form.username} onValue={set('username')} error={fieldError('username')} hint="an account's login name, exactly" />
        <Field label="Channel id" inputMode="numeric" value={form.channel} onValue={set('channel')} error={fieldError('channel')} />
        <LogFilterFields form={form} set={set} fromHint="empty: the last 24 hours (all time for one account)"
          fromError={formError?.field === 'from' ? formError.error : undefined} toError={formError?.field === 'to' ? formError.error : undefined} />
        <div class="buttons">
          <button type="submit" class="primary">Apply filters</button>
          <button type="button" onClick={() => { setForm(EMPTY_ADMIN_LOG_FILTERS); apply(EMPTY_ADMIN_LOG_FILTERS); }}>Clear</button>
        </div>
      </form>
      {usage && (
        <p aria-label="Usage of the filtered entries">
          Consumed: {dollars(usage.quota)} · {count(usage.rpm)} requests and {count(usage.tpm)} tokens in the last minute
        </p>
      )}
      {logs.loading && <Loading what="Loading logs" />}
      <ErrorText error={otherError} />
      {shown && <LogTable items={shown.items} everyAccount />}
      {shown && (
        <div class="pager-row">
          <Pager page={page} pageSize={shown.page_size} total={shown.total} onPage={setPage} label="Log pages" />
          <Select label="Rows per page" value={String(pageSize)} onValue={(v) => { setPageSize(Number(v)); setPage(1); }} options={['10', '20', '50', '100'].map((v) => ({ value: v, label: v }))} />
        </div>
      )}
    </Card>
  );
}
