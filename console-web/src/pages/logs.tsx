import { useState } from 'preact/hooks';
import { api, call } from '../api/client';
import type { LogEntry, LogQuery } from '../api/types';
import { Card, ErrorText, Field, Loading, Pager, Select, Table, useLoad } from '../components/ui';
import { count, dateTime, dollars, fromLocalInput, LOG_TYPE, LOG_TYPES, logDetails, quotaUnits } from '../format';

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
export function LogFilterFields<F extends LogFilterForm>({ form, set, fromHint, fromError, toError }: {
  form: F;
  set: (k: keyof LogFilterForm) => (v: string) => void;
  fromHint?: string;
  fromError?: string | undefined;
  toError?: string | undefined;
}) {
  return (
    <>
      <Select label="Type" value={form.type} onValue={set('type')} options={[{ value: '0', label: 'All' }, ...Object.entries(LOG_TYPES).map(([v, l]) => ({ value: v, label: l }))]} />
      <Field label="API key name" value={form.tokenName} onValue={set('tokenName')} />
      <Field label="Model" value={form.modelName} onValue={set('modelName')} />
      <Field label="Group" value={form.group} onValue={set('group')} />
      <Field label="From" type="datetime-local" value={form.from} onValue={set('from')} hint={fromHint} error={fromError} />
      <Field label="To" type="datetime-local" value={form.to} onValue={set('to')} error={toError} />
      <Field label="Request ID" value={form.requestId} onValue={set('requestId')} />
      <Field label="Upstream request ID" value={form.upstreamRequestId} onValue={set('upstreamRequestId')} />
    </>
  );
}

export function LogsPage() {
  const [form, setForm] = useState(EMPTY_LOG_FILTERS);
  const [applied, setApplied] = useState(EMPTY_LOG_FILTERS);
  const [page, setPage] = useState(1);
  const [pageSize, setPageSize] = useState(20);
  const logs = useLoad(() => call(api.GET('/api/log/self', { params: { query: logQuery(applied, page, pageSize) } })), [applied, page, pageSize]);
  const set = (k: keyof LogFilterForm) => (v: string) => setForm((s) => ({ ...s, [k]: v }));
  const [rangeError, setRangeError] = useState<{ field: 'from' | 'to'; error: string } | null>(null);
  // Rows are shown only for the query that succeeded: after a failure, the previous rows would read
  // as the answer to the filters now shown.
  const shown = logs.error ? undefined : logs.data;

  return (
    <Card title="Requests and other entries">
      <form class="filters" aria-label="Log filters" onSubmit={(e) => {
        e.preventDefault();
        const wrong = logFilterError(form);
        setRangeError(wrong);
        if (wrong) return;
        setPage(1); setApplied(form); logs.reload();
      }}>
        <LogFilterFields form={form} set={set} fromError={rangeError?.field === 'from' ? rangeError.error : undefined}
          toError={rangeError?.field === 'to' ? rangeError.error : undefined} />
        <div class="buttons">
          <button type="submit" class="primary">Apply filters</button>
          <button type="button" onClick={() => { setForm(EMPTY_LOG_FILTERS); setApplied(EMPTY_LOG_FILTERS); setPage(1); setRangeError(null); }}>Clear</button>
        </div>
      </form>
      {logs.loading && <Loading what="Loading logs" />}
      <ErrorText error={logs.error} />
      {shown && <LogTable items={shown.items} />}
      {shown && (
        <div class="pager-row">
          <Pager page={page} pageSize={shown.page_size} total={shown.total} onPage={setPage} label="Log pages" />
          <Select label="Rows per page" value={String(pageSize)} onValue={(v) => { setPageSize(Number(v)); setPage(1); }} options={['10', '20', '50', '100'].map((v) => ({ value: v, label: v }))} />
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
 * change, a referral reward) records its direction only in its text, as console-api writes it
 * ("added N quota", "removed N quota", "set the balance from A to B (±N quota)", "+N referral quota").
 */
export function logDirection(l: Pick<LogEntry, 'type' | 'content'>): 1 | -1 | 0 {
  if (l.type === LOG_TYPE.topup) return 1;
  if (isRequest(l)) return -1;
  if (l.type !== LOG_TYPE.manage) return 0;
  if (/\bremoved \d+ quota\b/.test(l.content)) return -1;
  if (/\badded \d+ quota\b/.test(l.content)) return 1;
  const delta = /\(([+-])\d+ quota\)/.exec(l.content);
  if (delta) return delta[1] === '-' ? -1 : 1;
  const set = /\bset the balance from (-?\d+) to (-?\d+)/.exec(l.content);
  if (set) return Math.sign(Number(set[2]) - Number(set[1])) as 1 | -1 | 0;
  if (/\+\d+ referral quota\b/.test(l.content)) return 1;
  return 0;
}

/** The Amount cell: "+$5.00" credited, "-$0.000078" charged, unsigned when the entry does not say. */
export function logAmount(l: Pick<LogEntry, 'type' | 'content' | 'quota'>): string {
  const direction = logDirection(l);
  return direction === 0 || l.quota === 0 ? dollars(l.quota) : dollars(direction * l.quota, { sign: true });
}

/** The log's rows; `everyAccount` (the administrators' page) adds whose each row is and its channel. */
export function LogTable({ items, everyAccount = false }: { items: LogEntry[]; everyAccount?: boolean }) {
  if (items.length === 0) return <p>No entries match.</p>;
  return (
    <Table class="logs">
        <thead><tr><th>Time</th>{everyAccount && <th>Account</th>}<th>Type</th><th>Key</th><th>Model</th>{everyAccount && <th>Channel</th>}<th>Prompt</th><th>Completion</th><th>Amount</th><th>Duration</th><th>Stream</th><th>Group</th><th>Request ID</th><th>Details</th></tr></thead>
        <tbody>
          {items.map((l) => (
            <tr key={`${l.user_id}-${l.request_id}-${l.id}`}>
              <td>{dateTime(l.created_at)}</td>
              {everyAccount && <td title={`account #${l.user_id}`}>{l.username || `#${l.user_id}`}</td>}
              <td>{LOG_TYPES[l.type] ?? l.type}</td>
              <td>{l.token_name}</td>
              <td>{l.model_name}</td>
              {everyAccount && <td>{l.channel || '—'}</td>}
              <td>{count(l.prompt_tokens)}</td>
              <td>{count(l.completion_tokens)}</td>
              <td class="amount" title={`${quotaUnits(l.quota)}${logDirection(l) === 0 && l.quota !== 0 ? ' (the entry does not record whether it added or removed)' : ''}`}>{logAmount(l)}</td>
              <td>{isRequest(l) ? `${l.use_time} s` : '–'}</td>
              <td>{isRequest(l) ? (l.is_stream ? 'Yes' : 'No') : '–'}</td>
              <td>{l.group}</td>
              <td><code class="id">{l.request_id}</code></td>
              <td class="details">{logDetails(l.content)}</td>
            </tr>
          ))}
        </tbody>
      </Table>
  );
}
