import { useEffect, useState } from 'preact/hooks';
import { api, call } from '../api/client';
import type { LogEntry, LogQuery } from '../api/types';
import { Card, ErrorText, Field, Loading, Pager, Select, Table, useLoad } from '../components/ui';
import { count, dateTime, dollars, fromLocalInput, LOG_TYPE, LOG_TYPES, logDetails, quotaUnits, toLocalInput } from '../format';
import { navigate, useSearch } from '../router';

export interface LogFilterForm {
  type: string;
  tokenName: string;
  modelName: string;
  group: string;
  from: string;
  to: string;
  requestId: string;
  upstreamRequestId: string;
}

export const EMPTY_LOG_FILTERS: LogFilterForm = { type: '0', tokenName: '', modelName: '', group: '', from: '', to: '', requestId: '', upstreamRequestId: '' };

/**
 * The last second a datetime-local value covers: its minute's last second (the fields show minutes),
 * so that "To 10:05" includes what happened at 10:05:30.
 */
export function lastSecondOf(value: string): number | undefined {
  const at = fromLocalInput(value);
  if (at === undefined) return undefined;
  return /T\d{2}:\d{2}$/.test(value) ? at + 59 : at;
}

/**
 * The times the log API takes (start_timestamp, end_timestamp): Unix seconds from 0 to 2^32 - 1,
 * 1970-01-01 00:00:00 to 2106-02-07 06:28:15 UTC. A date picker offers years far outside that range.
 */
export const LOG_TIME_MIN = 0;
export const LOG_TIME_MAX = 0xffff_ffff;
const TOO_EARLY = 'must be 1970-01-01 00:00 UTC or later';
const TOO_LATE = 'must be 2106-02-07 06:28 UTC or earlier';

/**
 * What is wrong with the time range, as an error for its field, before the API is asked: a time
 * before 1970 (the API would answer "start_timestamp: must be at least 0"), a "From" after the last
 * time the log can hold, or a range that ends before it starts. Null when the range is fine. A "To"
 * past the last time reads as no end (logQuery).
 */
export function logFilterError(f: Pick<LogFilterForm, 'from' | 'to'>): { field: 'from' | 'to'; error: string } | null {
  const from = fromLocalInput(f.from);
  const to = lastSecondOf(f.to);
  if (f.from && from === undefined) return { field: 'from', error: 'is not a date and time' };
  if (f.to && to === undefined) return { field: 'to', error: 'is not a date and time' };
  if (from !== undefined && from < LOG_TIME_MIN) return { field: 'from', error: TOO_EARLY };
  if (from !== undefined && from > LOG_TIME_MAX) return { field: 'from', error: TOO_LATE };
  if (to !== undefined && to < LOG_TIME_MIN) return { field: 'to', error: TOO_EARLY };
  if (from !== undefined && to !== undefined && to < from) return { field: 'to', error: 'must not be before "From"' };
  return null;
}

/** The filters as /api/log/self's query: empty fields are left out. */
export function logQuery(f: LogFilterForm, page: number, pageSize: number): LogQuery {
  const q: LogQuery = { p: page, page_size: pageSize };
  if (f.type !== '0') q.type = Number(f.type);
  if (f.tokenName.trim()) q.token_name = f.tokenName.trim();
  if (f.modelName.trim()) q.model_name = f.modelName.trim();
  if (f.group.trim()) q.group = f.group.trim();
  const from = fromLocalInput(f.from);
  const to = lastSecondOf(f.to);
  if (from !== undefined) q.start_timestamp = from;
  if (to !== undefined) q.end_timestamp = Math.min(to, LOG_TIME_MAX);
  if (f.requestId.trim()) q.request_id = f.requestId.trim();
  if (f.upstreamRequestId.trim()) q.upstream_request_id = f.upstreamRequestId.trim();
  return q;
}

/** The filter fields both log pages show; `fromHint` says what an empty "From" reads. */
export function LogFilterFields<F extends LogFilterForm>({ form, set, fromHint, errors = {} }: {
  form: F;
  set: (k: keyof LogFilterForm) => (v: string) => void;
  fromHint?: string;
  errors?: Partial<Record<keyof LogFilterForm, string>>;
}) {
  return (
    <>
      <Select label="Type" value={form.type} onValue={set('type')} options={[{ value: '0', label: 'All' }, ...Object.entries(LOG_TYPES).map(([v, l]) => ({ value: v, label: l }))]} />
      <Field label="API key name" value={form.tokenName} onValue={set('tokenName')} error={errors.tokenName} />
      <Field label="Model" value={form.modelName} onValue={set('modelName')} error={errors.modelName} />
      <Field label="Group" value={form.group} onValue={set('group')} error={errors.group} />
      <Field label="From" type="datetime-local" value={form.from} onValue={set('from')} hint={fromHint} error={errors.from} />
      <Field label="To" type="datetime-local" value={form.to} onValue={set('to')} error={errors.to} />
      <Field label="Request ID" value={form.requestId} onValue={set('requestId')} error={errors.requestId} />
      <Field label="Upstream request ID" value={form.upstreamRequestId} onValue={set('upstreamRequestId')} error={errors.upstreamRequestId} />
    </>
  );
}

/** The page sizes the log pages offer (the API serves at most 100 a page). */
export const LOG_PAGE_SIZES: readonly number[] = [10, 20, 50, 100];
export const DEFAULT_LOG_PAGE_SIZE = 20;
/** The API's last page number (its `p` is at most 1,000,000). */
export const LOG_PAGE_MAX = 1_000_000;
/** The API's longest filter text; a longer one is refused with a 400. */
export const LOG_TEXT_MAX = 200;
// The API refuses NUL in a query; the other control characters go with it, as a link carrying one
// was damaged on its way rather than meant to match a name.
const CONTROL = /\p{Cc}/u;

/** The text filters: the form's field, the parameter of the API and of the address. */
const TEXT_PARAMS = [
  ['tokenName', 'token_name'], ['modelName', 'model_name'], ['group', 'group'], ['requestId', 'request_id'], ['upstreamRequestId', 'upstream_request_id'],
] as const satisfies readonly (readonly [keyof LogFilterForm, string])[];

/** What is wrong with a text filter's value, or null: what the address could not carry to the API. */
export function filterTextError(value: string, max = LOG_TEXT_MAX): string | null {
  const v = value.trim();
  if (v.length > max) return `must be at most ${max} characters`;
  if (CONTROL.test(v)) return 'must not contain control characters';
  return null;
}

/** logFilterError, and the text filters' own errors: everything the form is refused for before it is applied. */
export function logFormError(f: LogFilterForm): { field: keyof LogFilterForm; error: string } | null {
  const range = logFilterError(f);
  if (range) return range;
  for (const [field] of TEXT_PARAMS) {
    const error = filterTextError(f[field]);
    if (error) return { field, error };
  }
  return null;
}

/**
 * A log page's view, as its address keeps it (so that Back, a reload and a shared link show it
 * again): the applied filters as the form shows them, the page and the page size. `start` and `end`
 * are the instants the time filters name, to the second: the form shows them to the minute in the
 * browser's time zone, and the query sends them as they are, so that a link means the same rows
 * wherever it is opened.
 */
export interface LogView<F extends LogFilterForm = LogFilterForm> {
  filters: F;
  start: number | undefined;
  end: number | undefined;
  page: number;
  pageSize: number;
}

export const DEFAULT_LOG_VIEW: LogView = { filters: EMPTY_LOG_FILTERS, start: undefined, end: undefined, page: 1, pageSize: DEFAULT_LOG_PAGE_SIZE };

/** A parameter of the address as a whole number from `min` to `max`, else undefined (absent, "abc", "-1", "1e3", "2.5", too large). */
export function paramInt(q: URLSearchParams, name: string, min: number, max: number): number | undefined {
  const v = q.get(name);
  if (v === null || !/^\d+$/.test(v)) return undefined;
  const n = Number(v);
  return n >= min && n <= max ? n : undefined;
}

/** A text parameter of the address, trimmed, or '' when it is absent or one the API would refuse. */
export function paramText(q: URLSearchParams, name: string, max = LOG_TEXT_MAX): string {
  const v = q.get(name)?.trim() ?? '';
  return filterTextError(v, max) ? '' : v;
}

/**
 * The view an address's query string names. Parameters are the API's own (`type`, `token_name`,
 * `model_name`, `group`, `start_timestamp` and `end_timestamp` in Unix seconds, `request_id`,
 * `upstream_request_id`, `p`, `page_size`); a value the API or the page would not take (a page of
 * "-1" or "abc", a page size not offered, an unknown type, a time that is no Unix time in the log's
 * range) reads as its default rather than being sent, and an end before the start is dropped.
 */
export function readLogView(search: string | URLSearchParams): LogView {
  const q = typeof search === 'string' ? new URLSearchParams(search) : search;
  const type = paramInt(q, 'type', 1, Number.MAX_SAFE_INTEGER);
  const filters: LogFilterForm = { ...EMPTY_LOG_FILTERS, type: type !== undefined && LOG_TYPES[type] ? String(type) : '0' };
  for (const [field, name] of TEXT_PARAMS) filters[field] = paramText(q, name);
  // 0 would be shown as an empty field (toLocalInput); the API reads a start of 0 as none anyway.
  const start = paramInt(q, 'start_timestamp', LOG_TIME_MIN + 1, LOG_TIME_MAX);
  let end = paramInt(q, 'end_timestamp', LOG_TIME_MIN + 1, LOG_TIME_MAX);
  if (start !== undefined && end !== undefined && end < start) end = undefined;
  filters.from = start === undefined ? '' : toLocalInput(start);
  filters.to = end === undefined ? '' : toLocalInput(end);
  const size = paramInt(q, 'page_size', 1, Math.max(...LOG_PAGE_SIZES));
  return {
    filters, start, end,
    page: paramInt(q, 'p', 1, LOG_PAGE_MAX) ?? 1,
    pageSize: size !== undefined && LOG_PAGE_SIZES.includes(size) ? size : DEFAULT_LOG_PAGE_SIZE,
  };
}

/** The view's query-string parameters: only those that differ from the defaults. */
export function logViewParams(view: LogView): URLSearchParams {
  const q = new URLSearchParams();
  if (view.filters.type !== '0') q.set('type', view.filters.type);
  for (const [field, name] of TEXT_PARAMS) {
    const v = view.filters[field].trim();
    if (v) q.set(name, v);
    // In the form's order, which a person reading the address follows.
    if (field === 'group') {
      if (view.start !== undefined) q.set('start_timestamp', String(view.start));
      if (view.end !== undefined) q.set('end_timestamp', String(view.end));
    }
  }
  if (view.page !== 1) q.set('p', String(view.page));
  if (view.pageSize !== DEFAULT_LOG_PAGE_SIZE) q.set('page_size', String(view.pageSize));
  return q;
}

/** Parameters as an address's query string: "?type=2&p=3", or "" for none. */
export function searchOf(q: URLSearchParams): string {
  const text = q.toString();
  return text ? `?${text}` : '';
}

export function logViewSearch(view: LogView): string {
  return searchOf(logViewParams(view));
}

/**
 * The view the form applies: its filters (texts trimmed), from page 1, the page size kept. A time
 * field left as the address showed it keeps the address's instant to the second (the field shows
 * only minutes, and an hour repeated by a daylight-saving change would read as its first); an edited
 * one is read in the browser's time zone, "To" to the end of its minute. Check it with logFormError first.
 */
export function appliedView<F extends LogFilterForm>(form: F, current: LogView<F>): LogView<F> {
  const start = current.start !== undefined && form.from === current.filters.from ? current.start : fromLocalInput(form.from);
  const last = lastSecondOf(form.to);
  const end = current.end !== undefined && form.to === current.filters.to ? current.end : last === undefined ? undefined : Math.min(last, LOG_TIME_MAX);
  const filters = { ...form };
  for (const [field] of TEXT_PARAMS) filters[field] = form[field].trim();
  return { filters, start: start === 0 ? undefined : start, end, page: 1, pageSize: current.pageSize };
}

/** The view with its page size changed: the page that holds the first row shown so far, which stays in sight. */
export function withPageSize<V extends LogView<LogFilterForm>>(view: V, pageSize: number): V {
  return { ...view, pageSize, page: Math.floor(((view.page - 1) * view.pageSize) / pageSize) + 1 };
}

/** A query with the view's time bounds, to the second, in place of those of its form's fields. */
export function withViewTimes<Q extends LogQuery>(query: Q, view: LogView<LogFilterForm>): Q {
  const { start_timestamp: _start, end_timestamp: _end, ...rest } = query;
  const out = rest as Q;
  if (view.start !== undefined) out.start_timestamp = view.start;
  if (view.end !== undefined) out.end_timestamp = view.end;
  return out;
}

/** The view as /api/log/self's query. */
export function logViewQuery(view: LogView): LogQuery {
  return withViewTimes(logQuery(view.filters, view.page, view.pageSize), view);
}

/**
 * The address's query string, and `canonical`, the one of the view it reads as: when they differ (a
 * value dropped as unusable, a default written out, another order), the address is rewritten to it
 * in place, so that what is copied or bookmarked is what is shown, and Back skips the other.
 */
export function useCanonicalSearch(search: string, canonical: string): void {
  useEffect(() => {
    // Only while the address is still the one read: two Backs in quick succession move it on before
    // this runs, and rewriting the newer entry with the older view's address lost that entry (the
    // filter applied before a page-size change read back as the page-size change).
    if (location.search === search && search !== canonical) navigate(location.pathname + canonical, { replace: true });
  }, [search, canonical]);
}

/** Goes to a view of the page that is open: a history entry of its own, unless `replace`. */
export function goToSearch(search: string, replace = false): void {
  navigate(location.pathname + search, { replace });
}

export function LogsPage() {
  const search = useSearch();
  const view = readLogView(search);
  const key = logViewSearch(view);
  useCanonicalSearch(search, key);
  const filtersKey = logViewSearch({ ...view, page: 1, pageSize: DEFAULT_LOG_PAGE_SIZE });
  const [form, setForm] = useState(view.filters);
  const [formError, setFormError] = useState<{ field: keyof LogFilterForm; error: string } | null>(null);
  // Other filters in the address (Back, Forward, a link, Clear): the form shows them. A page change
  // leaves alone what is being typed.
  useEffect(() => {
    setForm(view.filters);
    setFormError(null);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [filtersKey]);
  const logs = useLoad(() => call(api.GET('/api/log/self', { params: { query: logViewQuery(view) } })), [key]);
  const set = (k: keyof LogFilterForm) => (v: string) => setForm((s) => ({ ...s, [k]: v }));
  const go = (next: LogView, replace = false) => goToSearch(logViewSearch(next), replace);
  // Rows are shown only for the query that succeeded: after a failure, the previous rows would read
  // as the answer to the filters now shown.
  const shown = logs.error ? undefined : logs.data;

  return (
    <Card title="Requests and other entries">
      <form class="filters" aria-label="Log filters" onSubmit={(e) => {
        e.preventDefault();
        const wrong = logFormError(form);
        setFormError(wrong);
        if (wrong) return;
        go(appliedView(form, view));
        // The same filters applied again read the log again.
        logs.reload();
      }}>
        <LogFilterFields form={form} set={set} errors={formError ? { [formError.field]: formError.error } : {}} />
        <div class="buttons">
          <button type="submit" class="primary">Apply filters</button>
          <button type="button" onClick={() => { setForm(EMPTY_LOG_FILTERS); setFormError(null); go({ ...DEFAULT_LOG_VIEW, pageSize: view.pageSize }); }}>Clear</button>
        </div>
      </form>
      {logs.loading && <Loading what="Loading logs" />}
      <ErrorText error={logs.error} />
      {shown && <LogTable items={shown.items} />}
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

/** Entries of a request the relay served (consumption, and a failed request's error entry). */
function isRequest(l: Pick<LogEntry, 'type'>): boolean {
  return l.type === LOG_TYPE.consume || l.type === LOG_TYPE.error;
}

/**
 * What an entry did to the balance: +1 credited, -1 debited, 0 when the entry does not say. The log's
 * quota is unsigned: a top-up credits, a request debits, and a management entry (an administrator's
 * change, a referral reward) records its direction only in its text. Only the fixed opening
 * console-api writes tells it, never what follows: an add/remove entry ends with the administrator's
 * free-text reason, which may say anything ("refund: the outage removed 500000 quota from you").
 *  - "An administrator added|removed N quota[: reason]" (POST /api/user/manage add_quota, routes/user.ts);
 *  - "An administrator set the balance from A to B (±N quota)" (PUT /api/user/, routes/user.ts);
 *  - "referral reward: … +N referral quota (aff_quota, not the balance)" (referrals/referrals.ts).
 */
export function logDirection(l: Pick<LogEntry, 'type' | 'content'>): 1 | -1 | 0 {
  if (l.type === LOG_TYPE.topup) return 1;
  if (isRequest(l)) return -1;
  if (l.type !== LOG_TYPE.manage) return 0;
  const change = /^An administrator (added|removed) \d+ quota(?::|$)/.exec(l.content);
  if (change) return change[1] === 'removed' ? -1 : 1;
  const set = /^An administrator set the balance from (-?\d+) to (-?\d+)(?: \([+-]?\d+ quota\))?$/.exec(l.content);
  if (set) return Math.sign(Number(set[2]) - Number(set[1])) as 1 | -1 | 0;
  if (/^referral reward: .*; \+\d+ referral quota \(aff_quota, not the balance\)$/s.test(l.content)) return 1;
  return 0;
}

/** The Amount cell: "+$5.00" credited, "-$0.000078" charged, unsigned when the entry does not say. */
export function logAmount(l: Pick<LogEntry, 'type' | 'content' | 'quota'>): string {
  const direction = logDirection(l);
  return direction === 0 || l.quota === 0 ? dollars(l.quota) : dollars(direction * l.quota, { sign: true });
}

/**
 * The log's rows; `everyAccount` (the administrators' page) adds whose each row is and its channel.
 * Each entry is a body of its own: its columns, then its details on a line across the whole table
 * under them. As a thirteenth column the details were cut at 1280 px (All usage logs showed 70% of
 * them) and squeezed the other columns to three lines a cell.
 */
export function LogTable({ items, everyAccount = false }: { items: LogEntry[]; everyAccount?: boolean }) {
  if (items.length === 0) return <p>No entries match.</p>;
  const columns = everyAccount ? 12 : 10;
  return (
    <Table class="logs">
        <thead><tr><th>Time</th>{everyAccount && <th>Account</th>}<th>Type</th><th>Key</th><th>Model</th>{everyAccount && <th>Channel</th>}<th title="prompt → completion tokens">Tokens</th><th>Amount</th><th>Duration</th><th>Stream</th><th>Group</th><th>Request ID</th></tr>
          <tr class="entry-details"><th colSpan={columns}>Details</th></tr></thead>
          {items.map((l) => (
            <tbody class="entry" key={`${l.user_id}-${l.request_id}-${l.id}`}>
            <tr>
              <td>{dateTime(l.created_at)}</td>
              {everyAccount && <td class="account" title={`account #${l.user_id}`}>{l.username || `#${l.user_id}`}</td>}
              <td>{LOG_TYPES[l.type] ?? l.type}</td>
              <td>{l.token_name}</td>
              <td>{l.model_name}</td>
              {everyAccount && <td>{l.channel || '—'}</td>}
              {/* One column for both (prompt → completion), the table narrower by one. */}
              {/* A top-up or an adjustment counts no tokens: a dash, as for its duration, not "0 → 0". */}
              {isRequest(l)
                ? <td class="tokens" title={`${count(l.prompt_tokens)} prompt tokens, ${count(l.completion_tokens)} completion tokens`}>{count(l.prompt_tokens)} → {count(l.completion_tokens)}</td>
                : <td class="tokens">–</td>}
              <td class="amount" title={`${quotaUnits(l.quota)}${logDirection(l) === 0 && l.quota !== 0 ? ' (the entry does not record whether it added or removed)' : ''}`}>{logAmount(l)}</td>
              <td>{isRequest(l) ? `${l.use_time} s` : '–'}</td>
              <td>{isRequest(l) ? (l.is_stream ? 'Yes' : 'No') : '–'}</td>
              <td>{l.group}</td>
              <td><code class="id request">{l.request_id}</code></td>
            </tr>
            <tr class="entry-details"><td class="details" colSpan={columns} data-label="Details">{logDetails(l.content) || '–'}</td></tr>
            </tbody>
          ))}
      </Table>
  );
}
