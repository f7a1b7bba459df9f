// Every account's usage log (GET /api/log/ and /api/log/stat, role >= 10): the user page's filters
// and table, plus the account's login name and the channel. Without "From" the API reads the last
// 24 hours across accounts (a read of every account over all time would scan the whole log); the
// hint says so, and an account's own log has no such bound.
import { useEffect, useState } from 'preact/hooks';
import { api, call } from '../../api/client';
import type { Query } from '../../api/types';
import { Card, ErrorText, Field, Loading, Pager, Select, splitFieldError, useLoad } from '../../components/ui';
import { count, dollars } from '../../format';
import { useSearch } from '../../router';
import {
  appliedView, DEFAULT_LOG_PAGE_SIZE, EMPTY_LOG_FILTERS, filterTextError, goToSearch, LOG_PAGE_MAX, LOG_PAGE_SIZES, LogFilterFields, type LogFilterForm,
  logFormError, LogTable, logQuery, type LogView, logViewParams, paramInt, paramText, readLogView, searchOf, useCanonicalSearch,
  withPageSize, withViewTimes,
} from '../logs';

export type AdminLogQuery = Query<'/api/log/', 'get'>;

export interface AdminLogFilterForm extends LogFilterForm {
  username: string;
  channel: string;
}

export const EMPTY_ADMIN_LOG_FILTERS: AdminLogFilterForm = { ...EMPTY_LOG_FILTERS, username: '', channel: '' };

/** The longest username the API takes as a filter (login accepts 64 characters). */
const USERNAME_MAX = 64;
/** The largest channel id the API takes. */
const CHANNEL_MAX = 0xffff_ffff;

/** The filters as /api/log/'s query, or the field at fault; empty fields are left out. */
export function adminLogQuery(f: AdminLogFilterForm, page: number, pageSize: number): { query: AdminLogQuery } | { field: keyof AdminLogFilterForm; error: string } {
  const wrong = logFormError(f);
  if (wrong) return wrong;
  const username = f.username.trim();
  const usernameError = filterTextError(username, USERNAME_MAX);
  if (usernameError) return { field: 'username', error: usernameError };
  const query: AdminLogQuery = logQuery(f, page, pageSize);
  if (username) query.username = username;
  const channel = f.channel.trim();
  if (channel) {
    // Ids start at 1: the API reads 0 as no filter, which the field would have shown as one.
    if (!/^[0-9]{1,10}$/.test(channel) || Number(channel) === 0) return { field: 'channel', error: 'a channel id (digits, from 1)' };
    if (Number(channel) > CHANNEL_MAX) return { field: 'channel', error: `must be at most ${CHANNEL_MAX}` };
    query.channel = Number(channel);
  }
  return { query };
}

/**
 * The view an address names: readLogView's parameters, plus `username` (an account's login name) and
 * `channel` (an id); a value the API would refuse reads as no filter.
 */
export function readAdminLogView(search: string): LogView<AdminLogFilterForm> {
  const q = new URLSearchParams(search);
  const view = readLogView(q);
  // channel=0 is the API's "every channel": read as no filter, not shown as one (review web).
  const channel = paramInt(q, 'channel', 1, CHANNEL_MAX);
  return { ...view, filters: { ...view.filters, username: paramText(q, 'username', USERNAME_MAX), channel: channel === undefined ? '' : String(channel) } };
}

/** The view's query string: the account and channel first, as the form has them, then logViewParams'. */
export function adminLogViewSearch(view: LogView<AdminLogFilterForm>): string {
  const q = new URLSearchParams();
  const username = view.filters.username.trim();
  const channel = view.filters.channel.trim();
  if (username) q.set('username', username);
  if (/^[0-9]+$/.test(channel)) q.set('channel', String(Number(channel)));
  for (const [name, value] of logViewParams(view)) q.append(name, value);
  return searchOf(q);
}

/** The view as /api/log/'s query; one the page could not have read (never) as the unfiltered one. */
export function adminLogViewQuery(view: LogView<AdminLogFilterForm>): AdminLogQuery {
  // Without the time fields: the view's instants are sent as they are (withViewTimes).
  const built = adminLogQuery({ ...view.filters, from: '', to: '' }, view.page, view.pageSize);
  return 'query' in built ? withViewTimes(built.query, view) : logQuery(EMPTY_ADMIN_LOG_FILTERS, view.page, view.pageSize);
}

/**
 * /api/log/stat takes the list's filters but paging: the request ids too, or the line under a list
 * of one request's row summed every request of the window (review web).
 */
function statQuery(q: AdminLogQuery) {
  const { p: _p, page: _page, page_size: _size, ...rest } = q;
  return rest;
}

const FIELDS = ['username', 'channel'] as const;

export function AdminLogsPage() {
  const search = useSearch();
  const view = readAdminLogView(search);
  const key = adminLogViewSearch(view);
  useCanonicalSearch(search, key);
  const filtersKey = adminLogViewSearch({ ...view, page: 1, pageSize: DEFAULT_LOG_PAGE_SIZE });
  const [form, setForm] = useState(view.filters);
  const [formError, setFormError] = useState<{ field: keyof AdminLogFilterForm; error: string } | null>(null);
  // Other filters in the address (Back, Forward, a link, Clear): the form shows them. A page change
  // leaves alone what is being typed.
  useEffect(() => {
    setForm(view.filters);
    setFormError(null);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [filtersKey]);
  const query = adminLogViewQuery(view);
  const logs = useLoad(() => call(api.GET('/api/log/', { params: { query } })), [key]);
  // The figures do not depend on the page.
  const stat = useLoad(() => call(api.GET('/api/log/stat', { params: { query: statQuery(query) } })), [filtersKey]);
  const set = (k: keyof AdminLogFilterForm) => (v: string) => setForm((s) => ({ ...s, [k]: v }));
  const go = (next: LogView<AdminLogFilterForm>, replace = false) => goToSearch(adminLogViewSearch(next), replace);
  const [apiFieldErrors, otherError] = splitFieldError(logs.error, FIELDS);
  const fieldError = (k: (typeof FIELDS)[number]) => (formError?.field === k ? formError.error : apiFieldErrors[k]);
  // Rows and figures are shown only for the query that succeeded: after a failure, the previous ones
  // would read as the answer to the filters now shown.
  const shown = logs.error ? undefined : logs.data;
  const usage = stat.error ? undefined : stat.data;

  const apply = (next: AdminLogFilterForm) => {
    const checked = adminLogQuery(next, 1, view.pageSize);
    if ('field' in checked) {
      setFormError(checked);
      return;
    }
    setFormError(null);
    go(appliedView(next, view));
    // The same filters applied again read the log and its figures again.
    logs.reload();
    stat.reload();
  };

  return (
    <Card title="Requests and other entries of every account">
      <form class="filters" aria-label="Log filters" onSubmit={(e) => { e.preventDefault(); apply(form); }}>
        <Field label="Account username" value={form.username} onValue={set('username')} error={fieldError('username')} hint="an account's login name, exactly" />
        <Field label="Channel id" inputMode="numeric" value={form.channel} onValue={set('channel')} error={fieldError('channel')} />
        <LogFilterFields form={form} set={set} fromHint="empty: the last 24 hours (all time for one account)"
          errors={formError ? { [formError.field]: formError.error } : {}} />
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
          {/* The page of the rows shown: until the next page has loaded, the pager says which rows these are. */}
          <Pager page={shown.page} pageSize={shown.page_size} total={shown.total} maxPage={LOG_PAGE_MAX} label="Log pages"
            onPage={(p) => go({ ...view, page: p })} onPageCorrected={(p) => go({ ...view, page: p }, true)} />
          <Select label="Rows per page" value={String(view.pageSize)} onValue={(v) => go(withPageSize(view, Number(v)))} options={LOG_PAGE_SIZES.map((n) => ({ value: String(n), label: String(n) }))} />
        </div>
      )}
    </Card>
  );
}
