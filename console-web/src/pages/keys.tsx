import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, call } from '../api/client';
import type { ApiKey, ApiKeyInput } from '../api/types';
import { Card, ConfirmButton, CopyButton, ErrorText, errorText, Field, Loading, Pager, splitFieldError, Table, useAction, useLoad } from '../components/ui';
import { dateTime, dollars, quotaUnits } from '../format';
import { type ApiKeyChanges, EMPTY_KEY_FORM, KeyForm } from './key-form';

const PAGE_SIZE = 10;
/** The longest search GET /api/token/ takes: listTokensQuery's keyword, queryString(50) (console-api/routes/token.ts). */
const KEYWORD_MAX = 50;

export function KeysPage() {
  const [page, setPage] = useState(1);
  const [keyword, setKeyword] = useState('');
  const [search, setSearch] = useState('');
  const [editing, setEditing] = useState<ApiKey | 'new' | null>(null);
  const [revealed, setRevealed] = useState<{ name: string; key: string } | null>(null);
  const list = useLoad(() => call(api.GET('/api/token/', { params: { query: { p: page, page_size: PAGE_SIZE, ...(search ? { keyword: search } : {}) } } })), [page, search]);
  // A failed load keeps the previous answer (useLoad): its rows are not this search's, so none are shown.
  const shown = list.error ? undefined : list.data;
  const [searchErrors, listError] = splitFieldError(list.error, ['keyword']);
  const groups = useLoad(() => call(api.GET('/api/user/self/groups')), []);
  // The new key's panel dismissed, its button gone: the focus goes to Create key, not the page's body.
  const createButton = useRef<HTMLButtonElement>(null);
  const [dismissed, setDismissed] = useState(0);
  useEffect(() => { if (dismissed > 0) createButton.current?.focus(); }, [dismissed]);

  const create = async (body: ApiKeyInput) => {
    await call(api.POST('/api/token/', { body }));
    // The creation answer carries no key (the contract): find the new key, newest first, and show
    // its value (the list shows it masked; its row's Copy key fetches it again).
    const fresh = await call(api.GET('/api/token/', { params: { query: { p: 1, page_size: 20, keyword: body.name } } }));
    const mine = fresh.items.find((k) => k.name === body.name);
    if (mine) {
      const { key } = await call(api.POST('/api/token/{id}/key', { params: { path: { id: String(mine.id) } } }));
      setRevealed({ name: mine.name, key });
    }
    setEditing(null);
    setPage(1);
    list.reload();
  };
  const update = (id: number) => async (body: ApiKeyChanges) => {
    await call(api.PUT('/api/token/', { body: { id, ...body } }));
    setEditing(null);
    list.reload();
  };

  return (
    <>
      {revealed && (
        <div class="reveal" role="region" aria-label="New API key">
          <h2>Your new key “{revealed.name}”</h2>
          <p>The list shows it masked; its Copy key button there copies it again whenever you need it.</p>
          <p><code class="key" data-testid="new-key">{revealed.key}</code></p>
          <div class="buttons"><CopyButton text={revealed.key} label="Copy key" /><button type="button" onClick={() => { setRevealed(null); setDismissed((n) => n + 1); }}>I have copied it</button></div>
        </div>
      )}
      {editing === 'new' && <KeyForm initial={EMPTY_KEY_FORM} groups={groups.data} submitLabel="Create key" onSubmit={create} onCancel={() => setEditing(null)} />}
      {editing && editing !== 'new' && <KeyForm key={editing.id} editing={editing} groups={groups.data} submitLabel="Save key" onSubmit={update(editing.id)} onCancel={() => setEditing(null)} />}
      <Card title="Your keys" actions={editing === null ? <button ref={createButton} type="button" class="primary" onClick={() => { setRevealed(null); setEditing('new'); }}>Create key</button> : undefined}>
        <form class="filters" onSubmit={(e) => { e.preventDefault(); setPage(1); setSearch(keyword.trim()); }} aria-label="Search keys">
          <Field label="Search by name" value={keyword} onValue={setKeyword} maxLength={KEYWORD_MAX} error={searchErrors.keyword} />
          <button type="submit">Search</button>
        </form>
        {list.loading && <Loading what="Loading keys" />}
        <ErrorText error={listError} />
        {shown && (shown.items.length === 0 ? page === 1 && <p>No keys{search ? ` named like “${search}”` : ''} yet.</p> : (
          <Table>
            <thead><tr><th>Name</th><th>Key</th><th>Status</th><th>Quota left</th><th>Used</th><th>Expires</th><th>Group</th><th class="actions">Actions</th></tr></thead>
            <tbody>{shown.items.map((k) => <KeyRow key={k.id} k={k} onEdit={() => setEditing(k)} onChanged={list.reload} />)}</tbody>
          </Table>
        ))}
        {shown && <Pager page={page} pageSize={PAGE_SIZE} total={shown.total} onPage={setPage} label="Key pages" />}
      </Card>
    </>
  );
}

function KeyRow({ k, onEdit, onChanged }: { k: ApiKey; onEdit: () => void; onChanged: () => void }) {
  const action = useAction();
  // Expired (3) and exhausted (4) keys are enabled ones the relay refuses: disabling them is the toggle.
  const enabled = k.status !== 2;
  const toggle = () => action.run(async () => {
    await call(api.PUT('/api/token/', { params: { query: { status_only: 'true' } }, body: { id: k.id, status: enabled ? 2 : 1 } }));
    onChanged();
  });
  const remove = () => action.run(async () => {
    await call(api.DELETE('/api/token/{id}', { params: { path: { id: String(k.id) } } }));
    onChanged();
  });
  // The full key is read from the API only when copied: the page holds no key it was not asked for.
  const fetchKey = async () => (await call(api.POST('/api/token/{id}/key', { params: { path: { id: String(k.id) } } }))).key;
  const statusText = k.status === 1 ? 'Enabled' : k.status === 2 ? 'Disabled' : k.status === 3 ? 'Expired' : k.status === 4 ? 'Exhausted' : String(k.status);
  return (
    <tr>
      <td class="name">{k.name}</td>
      <td><code class="masked">{k.key}</code></td>
      <td>{statusText}</td>
      <td title={k.unlimited_quota ? undefined : quotaUnits(k.remain_quota)}>{k.unlimited_quota ? 'Unlimited' : dollars(k.remain_quota)}</td>
      <td title={quotaUnits(k.used_quota)}>{dollars(k.used_quota)}</td>
      <td>{k.expired_time === -1 ? 'Never' : dateTime(k.expired_time)}</td>
      <td>{keyGroupText(k)}</td>
      <td class="actions">
        <CopyButton text={fetchKey} label="Copy key" of={k.name} describeError={keyCopyError} />
        <button type="button" onClick={onEdit} aria-label={`Edit ${k.name}`}>Edit</button>
        <button type="button" disabled={action.busy} onClick={() => void toggle()} aria-label={`${enabled ? 'Disable' : 'Enable'} ${k.name}`}>{enabled ? 'Disable' : 'Enable'}</button>
        <ConfirmButton label="Delete" name={`Delete ${k.name}`} confirm="Confirm delete" confirmName={`Confirm deleting ${k.name}`} busy={action.busy} onConfirm={remove} />
        <ErrorText error={action.error} />
      </td>
    </tr>
  );
}

/**
 * The key's group and what else limits where and how much it may be used: its models, the addresses it
 * is accepted from and its own requests and tokens per minute. The addresses were shown only in the
 * edit form, so a key refused from a new address (403) gave no hint in the list why.
 */
export function keyGroupText(k: Pick<ApiKey, 'group' | 'model_limits_enabled' | 'model_limits' | 'allow_ips' | 'rate_limit_rpm' | 'rate_limit_tpm'>): string {
  let text = k.group || '—';
  if (k.model_limits_enabled) text += ` · models: ${k.model_limits}`;
  if (k.allow_ips) text += ` · from: ${k.allow_ips.split(',').join(', ')}`;
  if (k.rate_limit_rpm > 0) text += ` · ${k.rate_limit_rpm.toLocaleString('en-US')} requests/min`;
  if (k.rate_limit_tpm > 0) text += ` · ${k.rate_limit_tpm.toLocaleString('en-US')} tokens/min`;
  return text;
}

/** Why a key could not be fetched for copying, in words that say what to do. */
export function keyCopyError(err: unknown): string {
  if (err instanceof ApiError && err.status === 404) return 'The key could not be copied: it no longer exists (deleted elsewhere?). Reload the list.';
  if (err instanceof ApiError && err.status === 429) return 'The key could not be copied: too many requests. Wait a moment and try again.';
  return `The key could not be copied: ${errorText(err)}`;
}
