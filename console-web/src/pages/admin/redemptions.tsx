import { useState } from 'preact/hooks';
import { api, call } from '../../api/client';
import type { Redemption } from '../../api/types';
import { Card, ConfirmButton, CopyButton, ErrorText, Field, Loading, Pager, splitFieldError, Table, useAction, useLoad } from '../../components/ui';
import { dateTime, dollars, dollarsError, dollarsToQuota, fromLocalInput } from '../../format';

const PAGE_SIZE = 20;
const STATUS: Record<number, string> = { 1: 'Unused', 2: 'Disabled', 3: 'Used' };

/**
 * A code's status as people read it. An unused code past its expired_time (Unix seconds; -1 or 0:
 * never) can no longer be redeemed (console-api redeems only while expired_time > now): "Expired".
 */
export function codeStatus(r: Pick<Redemption, 'status' | 'expired_time'>, nowSec = Math.floor(Date.now() / 1000)): string {
  if (r.status === 1 && r.expired_time > 0 && r.expired_time <= nowSec) return 'Expired';
  return STATUS[r.status] ?? String(r.status);
}

export function AdminRedemptionsPage() {
  const [page, setPage] = useState(1);
  const [keyword, setKeyword] = useState('');
  const [search, setSearch] = useState('');
  const [created, setCreated] = useState<string[] | null>(null);
  const list = useLoad(() => call(api.GET('/api/redemption/', { params: { query: { p: page, page_size: PAGE_SIZE, ...(search ? { keyword: search } : {}) } } })), [page, search]);
  // A failed load keeps the previous answer (useLoad): its rows are not this search's, so none are shown.
  const shown = list.error ? undefined : list.data;
  return (
    <>
      <CreateCodes onCreated={(codes) => { setCreated(codes); setPage(1); list.reload(); }} />
      {created && (
        <Card title="New codes">
          <p>Copy them now: the list below shows codes masked (its Show button fetches one again).</p>
          <pre class="codes" data-testid="new-codes">{created.join('\n')}</pre>
          <div class="buttons"><CopyButton text={created.join('\n')} label="Copy codes" /><button type="button" onClick={() => setCreated(null)}>Hide</button></div>
        </Card>
      )}
      <Card title="Codes">
        <form class="filters" aria-label="Search codes" onSubmit={(e) => { e.preventDefault(); setPage(1); setSearch(keyword.trim()); }}>
          <Field label="Name contains, or the exact code" value={keyword} onValue={setKeyword} />
          <button type="submit">Search</button>
        </form>
        {list.loading && <Loading what="Loading codes" />}
        <ErrorText error={list.error} />
        {shown && (shown.items.length === 0 ? page === 1 && <p>No codes.</p> : (
          <Table>
            <thead><tr><th>Id</th><th>Name</th><th>Code</th><th>Value</th><th>Status</th><th>Created</th><th>Redeemed</th><th>Expires</th><th class="actions">Actions</th></tr></thead>
            <tbody>{shown.items.map((r) => <CodeRow key={r.id} r={r} onChanged={list.reload} />)}</tbody>
          </Table>
        ))}
        {shown && <Pager page={page} pageSize={PAGE_SIZE} total={shown.total} onPage={setPage} label="Code pages" />}
      </Card>
    </>
  );
}

function CodeRow({ r, onChanged }: { r: Redemption; onChanged: () => void }) {
  const action = useAction();
  // The list carries codes masked; the full code is fetched only when asked for (and only for codes this administrator may change).
  const [code, setCode] = useState<string | null>(null);
  const reveal = () => action.run(async () => {
    setCode((await call(api.POST('/api/redemption/{id}/key', { params: { path: { id: String(r.id) } } }))).key);
  });
  const setStatus = (status: 1 | 2) => action.run(async () => {
    await call(api.PUT('/api/redemption/', { params: { query: { status_only: 'true' } }, body: { id: r.id, status } }));
    onChanged();
  });
  return (
    <tr>
      <td>{r.id}</td><td>{r.name}</td><td>{code ? <><code>{code}</code> <CopyButton text={code} label="Copy" /></> : <code class="masked">{r.key}</code>}</td><td>{dollars(r.quota)}</td><td>{codeStatus(r)}</td>
      <td>{dateTime(r.created_time)}</td><td>{r.redeemed_time ? `${dateTime(r.redeemed_time)} by #${r.used_user_id}` : '—'}</td>
      <td>{r.expired_time > 0 ? dateTime(r.expired_time) : 'Never'}</td>
      <td class="actions">
        {code === null && <button type="button" disabled={action.busy} onClick={() => void reveal()} aria-label={`Show code ${r.id}`}>Show</button>}
        {/* One button that changes its words, so the focus stays on it once the list is read again. */}
        {(r.status === 1 || r.status === 2) && (
          <button type="button" disabled={action.busy} onClick={() => void setStatus(r.status === 1 ? 2 : 1)}
            aria-label={`${r.status === 1 ? 'Disable' : 'Enable'} code ${r.id}`}>{r.status === 1 ? 'Disable' : 'Enable'}</button>
        )}
        {/* Delete always asks (console-web/README.md), as a key's, an account's and a channel's do. */}
        <ConfirmButton label="Delete" name={`Delete code ${r.id}`} confirm="Confirm delete" confirmName={`Confirm deleting code ${r.id}`} busy={action.busy}
          onConfirm={() => action.run(async () => { await call(api.DELETE('/api/redemption/{id}', { params: { path: { id: String(r.id) } } })); onChanged(); })} />
        <ErrorText error={action.error} />
      </td>
    </tr>
  );
}

function CreateCodes({ onCreated }: { onCreated: (codes: string[]) => void }) {
  const [name, setName] = useState('');
  const [value, setValue] = useState('10');
  const [count, setCount] = useState('1');
  const [expires, setExpires] = useState('');
  const action = useAction();
  const [valueError, setValueError] = useState<string | null>(null);
  const [expiresError, setExpiresError] = useState<string | null>(null);
  const [fe, formError] = splitFieldError(action.error, ['name', 'quota', 'count', 'expired_time']);
  // A field's error is about the value it was given for: editing the field takes it away (the
  // browser's own checks, such as How many's minimum, may stop the next submit before it runs).
  const edited = (setter: (v: string) => void, field: string) => (v: string) => {
    setter(v);
    if (fe[field]) action.setError(null);
  };
  return (
    <Card title="Create codes">
      <form aria-label="Create codes" onSubmit={(e) => {
        e.preventDefault();
        const quota = dollarsToQuota(value);
        if (quota === undefined || quota <= 0) {
          setValueError(dollarsError(value, 'a dollar amount above $0, such as 10 or 2.50'));
          return;
        }
        setValueError(null);
        // A past time is checked here, as the key form does: the API's words for it name its wire values.
        const at = fromLocalInput(expires);
        if (at !== undefined && at <= Math.floor(Date.now() / 1000)) {
          setExpiresError('must be in the future');
          return;
        }
        setExpiresError(null);
        void action.run(async () => {
          const codes = await call(api.POST('/api/redemption/', { body: {
            name: name.trim(), quota, count: Number(count), expired_time: at ?? -1,
          } }));
          onCreated(codes as string[]);
        });
      }}>
        <Field label="Name" value={name} onValue={edited(setName, 'name')} required maxLength={50} error={fe.name} />
        <Field label="Value per code (US dollars)" inputMode="decimal" value={value} onValue={(v) => { setValueError(null); edited(setValue, 'quota')(v); }} required error={valueError ?? fe.quota} hint="e.g. 10 or 2.50 ($1 = 500,000 quota)" />
        <Field label="How many" type="number" min={1} max={100} value={count} onValue={edited(setCount, 'count')} error={fe.count} hint="1 to 100" />
        <Field label="Expires at" type="datetime-local" value={expires} onValue={(v) => { setExpiresError(null); edited(setExpires, 'expired_time')(v); }} error={expiresError ?? fe.expired_time} hint="empty: never" />
        <button type="submit" class="primary" disabled={action.busy}>Create codes</button>
        <ErrorText error={formError} />
      </form>
    </Card>
  );
}
