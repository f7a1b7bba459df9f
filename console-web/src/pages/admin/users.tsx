import { useState } from 'preact/hooks';
import { api, call } from '../../api/client';
import type { Account } from '../../api/types';
import type { PageProps } from '../../app';
import { Card, ConfirmButton, ErrorText, Field, Loading, Pager, Select, splitFieldError, Table, useAction, useFocusOnOpen, useLoad } from '../../components/ui';
import { count, dollars, dollarsError, dollarsInput, dollarsToQuota, ROLE, ROLE_NAMES } from '../../format';

const PAGE_SIZE = 20;

/** The account groups: the keys of the GroupRatio option. */
export function accountGroups(options: { key: string; value: string }[] | undefined): string[] {
  const raw = options?.find((o) => o.key === 'GroupRatio')?.value;
  try {
    return raw ? Object.keys(JSON.parse(raw) as Record<string, unknown>) : [];
  } catch {
    return [];
  }
}

export function AdminUsersPage({ account: me, refreshAccount }: PageProps) {
  const [page, setPage] = useState(1);
  const [keyword, setKeyword] = useState('');
  const [search, setSearch] = useState('');
  const [editing, setEditing] = useState<Account | null>(null);
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<Account | null>(null);
  const options = useLoad(() => call(api.GET('/api/option/')), []);
  const list = useLoad(() => call(api.GET('/api/user/search', { params: { query: { p: page, page_size: PAGE_SIZE, ...(search ? { keyword: search } : {}) } } })), [page, search]);
  // A failed load keeps the previous answer (useLoad): its rows are not this search's, so none are shown.
  const shown = list.error ? undefined : list.data;
  return (
    <>
      {creating && <CreateAccount canCreateAdmin={me.role >= ROLE.root} groups={accountGroups(options.data)} onCancel={() => setCreating(false)}
        onCreated={(a) => { setCreating(false); setCreated(a); setPage(1); list.reload(); }} />}
      {editing && <EditAccount key={editing.id} a={editing} self={editing.id === me.id} groups={accountGroups(options.data)} onDone={() => {
        // The signed-in account edited itself (its name, its balance): the header is read again too.
        if (editing.id === me.id) refreshAccount();
        setEditing(null);
        list.reload();
      }} />}
      <Card title="Accounts" actions={!creating && <button type="button" onClick={() => { setCreated(null); setCreating(true); }}>New account</button>}>
        {created && <p role="status">Created account {created.username} (id {created.id}). Its balance is $0: add to it with Edit.</p>}
        <form class="filters" aria-label="Search accounts" onSubmit={(e) => { e.preventDefault(); setPage(1); setSearch(keyword.trim()); }}>
          <Field label="Id, username, display name or e-mail" value={keyword} onValue={setKeyword} />
          <button type="submit">Search</button>
        </form>
        {list.loading && <Loading what="Loading accounts" />}
        <ErrorText error={list.error} />
        {shown && (
          <Table>
            <thead><tr><th>Id</th><th>Username</th><th>Display name</th><th>Role</th><th>Status</th><th>Group</th><th>Balance</th><th>Used</th><th>Requests</th><th class="actions">Actions</th></tr></thead>
            <tbody>{shown.items.map((a) => <AccountRow key={a.id} a={a} me={me} onEdit={() => setEditing(a)} onChanged={list.reload} />)}</tbody>
          </Table>
        )}
        {shown && <Pager page={page} pageSize={PAGE_SIZE} total={shown.total} onPage={setPage} label="Account pages" />}
      </Card>
    </>
  );
}

/**
 * POST /api/user/: an account made by an administrator (new-api's "Add user"), under registration's
 * rules for name and password. Only the super administrator may make an administrator.
 */
function CreateAccount({ canCreateAdmin, groups, onCancel, onCreated }: { canCreateAdmin: boolean; groups: string[]; onCancel: () => void; onCreated: (a: Account) => void }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [displayName, setDisplayName] = useState('');
  const [group, setGroup] = useState('default');
  const [role, setRole] = useState(String(ROLE.user));
  const action = useAction();
  const [fe, formError] = splitFieldError(action.error, ['username', 'password', 'display_name', 'group', 'role']);
  const edited = (setter: (v: string) => void, field: string) => (v: string) => {
    setter(v);
    if (fe[field]) action.setError(null);
  };
  const form = useFocusOnOpen<HTMLFormElement>();
  return (
    <Card title="New account">
      <form ref={form} aria-label="New account" onKeyDown={(e) => { if (e.key === 'Escape') { e.preventDefault(); onCancel(); } }} onSubmit={(e) => {
        e.preventDefault();
        void action.run(async () => {
          const a = await call(api.POST('/api/user/', { body: {
            username, password, group: group.trim() || 'default',
            ...(displayName.trim() ? { display_name: displayName } : {}),
            ...(canCreateAdmin ? { role: role === String(ROLE.admin) ? ROLE.admin : ROLE.user } : {}),
          } }));
          onCreated(a);
        });
      }}>
        <Field label="Username" value={username} onValue={edited(setUsername, 'username')} required maxLength={20} hint="3 to 20 characters, no spaces" error={fe.username} autoComplete="off" />
        <Field label="Password" type="password" autoComplete="new-password" value={password} onValue={edited(setPassword, 'password')} required maxLength={64} hint="8 to 64 characters; give it to the account's owner" error={fe.password} />
        <Field label="Display name" value={displayName} onValue={edited(setDisplayName, 'display_name')} maxLength={50} hint="empty: the username" error={fe.display_name} />
        <Field label="Group" value={group} onValue={edited(setGroup, 'group')} list="new-account-groups" hint={groups.length ? `one of ${groups.join(', ')}` : undefined} error={fe.group} />
        <datalist id="new-account-groups">{groups.map((g) => <option key={g} value={g} />)}</datalist>
        {canCreateAdmin && <Select label="Role" value={role} onValue={edited(setRole, 'role')} options={[{ value: String(ROLE.user), label: 'Ordinary user' }, { value: String(ROLE.admin), label: 'Administrator' }]} />}
        {fe.role && <p class="error" role="alert">{fe.role}</p>}
        <div class="buttons"><button type="submit" class="primary" disabled={action.busy}>Create account</button><button type="button" onClick={onCancel}>Cancel</button></div>
        <ErrorText error={formError} />
      </form>
    </Card>
  );
}

type ManageAction = 'disable' | 'enable' | 'promote' | 'demote' | 'delete';

function AccountRow({ a, me, onEdit, onChanged }: { a: Account; me: Account; onEdit: () => void; onChanged: () => void }) {
  const action = useAction();
  const manage = (act: ManageAction) => action.run(async () => {
    await call(api.POST('/api/user/manage', { body: { id: a.id, action: act } }));
    onChanged();
  });
  const isRoot = me.role >= ROLE.root;
  const self = a.id === me.id;
  return (
    <tr>
      <td>{a.id}</td><td class="name">{a.username}</td><td class="name">{a.display_name}</td><td>{ROLE_NAMES[a.role] ?? a.role}</td>
      <td>{a.status === 1 ? 'Enabled' : 'Banned'}</td><td>{a.group}</td><td>{dollars(a.quota)}</td><td>{dollars(a.used_quota)}</td><td>{count(a.request_count)}</td>
      <td class="actions">
        <button type="button" onClick={onEdit} aria-label={`Edit ${a.username}`}>Edit</button>
        {/* A ban ends the account's sessions and stops its keys at once: asked first, as Delete is. */}
        {!self && (a.status === 1
          ? <ConfirmButton label="Ban" name={`Ban ${a.username}`} confirm="Confirm ban" confirmName={`Confirm banning ${a.username}`} busy={action.busy} danger={false} onConfirm={() => manage('disable')} />
          : <button type="button" disabled={action.busy} onClick={() => void manage('enable')} aria-label={`Unban ${a.username}`}>Unban</button>)}
        {/* A change of privilege is asked first too; one button that changes its words, so the focus stays on it. */}
        {isRoot && !self && a.role <= ROLE.admin && (a.role < ROLE.admin
          ? <ConfirmButton label="Make administrator" name={`Make ${a.username} an administrator`} confirm="Confirm: make administrator"
              confirmName={`Confirm making ${a.username} an administrator`} busy={action.busy} danger={false} onConfirm={() => manage('promote')} />
          : <ConfirmButton label="Make ordinary user" name={`Make ${a.username} an ordinary user`} confirm="Confirm: make ordinary user"
              confirmName={`Confirm making ${a.username} an ordinary user`} busy={action.busy} danger={false} onConfirm={() => manage('demote')} />)}
        {!self && <ConfirmButton label="Delete" name={`Delete ${a.username}`} confirm="Confirm delete" confirmName={`Confirm deleting ${a.username}`} busy={action.busy} onConfirm={() => manage('delete')} />}
        <ErrorText error={action.error} />
      </td>
    </tr>
  );
}

/** The fields of PUT /api/user/ the edit form sends, the balance aside. */
export type AccountChanges = { username?: string; group?: string; display_name?: string; status?: 1 | 2; password?: string };

/**
 * An account edit's body (the balance aside): only the fields changed from what the form showed, so
 * saving a display name from a form opened before a ban or a group change does not undo it. The new
 * password only when one was typed: an empty field keeps the account's password.
 */
export function accountChanges(
  shown: Pick<Account, 'username' | 'group' | 'display_name' | 'status'>,
  f: { username: string; group: string; displayName: string; status: string; password: string },
): AccountChanges {
  const body: AccountChanges = {};
  if (f.username !== shown.username) body.username = f.username;
  if (f.group !== shown.group) body.group = f.group;
  if (f.displayName !== shown.display_name) body.display_name = f.displayName;
  if (f.status !== String(shown.status)) body.status = f.status === '2' ? 2 : 1;
  if (f.password !== '') body.password = f.password;
  return body;
}

export function EditAccount({ a, self, groups, onDone }: { a: Account; self: boolean; groups: string[]; onDone: () => void }) {
  const [username, setUsername] = useState(a.username);
  const [password, setPassword] = useState('');
  const [group, setGroup] = useState(a.group);
  const [displayName, setDisplayName] = useState(a.display_name);
  const [status, setStatus] = useState(String(a.status));
  const [balance, setBalance] = useState(dollarsInput(a.quota));
  const [add, setAdd] = useState('');
  const [reason, setReason] = useState('');
  const save = useAction();
  const credit = useAction();
  const [balanceError, setBalanceError] = useState<string | null>(null);
  const [addError, setAddError] = useState<string | null>(null);
  const [saveFields, saveError] = splitFieldError(save.error, ['quota', 'username', 'group', 'display_name', 'status', 'password']);
  const [creditFields, creditError] = splitFieldError(credit.error, ['value', 'reason']);
  // A field's error is about the value it was given for: editing the field takes it away.
  const edited = (setter: (v: string) => void, field: string) => (v: string) => {
    setter(v);
    if (saveFields[field]) save.setError(null);
  };
  const form = useFocusOnOpen<HTMLFormElement>();
  return (
    <Card title={`Edit account ${a.username}`}>
      <form ref={form} aria-label={`Edit account ${a.username}`} onKeyDown={(e) => { if (e.key === 'Escape') { e.preventDefault(); onDone(); } }} onSubmit={(e) => {
        e.preventDefault();
        // The balance only when it was edited, and only if it is still what the form showed: else a
        // top-up or a settlement made while the form was open would be undone.
        const balanceEdited = balance !== dollarsInput(a.quota);
        const quota = dollarsToQuota(balance);
        if (balanceEdited && quota === undefined) {
          setBalanceError(dollarsError(balance, 'a dollar amount of $0 or more, such as 10 or 2.50'));
          return;
        }
        setBalanceError(null);
        void save.run(async () => {
          await call(api.PUT('/api/user/', { body: { id: a.id, ...accountChanges(a, { username, group, displayName, status, password }), ...(balanceEdited && quota !== undefined ? { quota, expected_quota: a.quota } : {}) } }));
          onDone();
        });
      }}>
        <Field label="Username" value={username} onValue={edited(setUsername, 'username')} maxLength={20} hint="3 to 20 characters, no spaces" error={saveFields.username} />
        <Field label="Display name" value={displayName} onValue={edited(setDisplayName, 'display_name')} maxLength={50} error={saveFields.display_name} />
        <Field label="Group" value={group} onValue={edited(setGroup, 'group')} list="account-groups" hint={groups.length ? `one of ${groups.join(', ')}` : undefined} error={saveFields.group} />
        <datalist id="account-groups">{groups.map((g) => <option key={g} value={g} />)}</datalist>
        <Select label="Status" value={status} onValue={edited(setStatus, 'status')} options={[{ value: '1', label: 'Enabled' }, { value: '2', label: 'Banned' }]} />
        {saveFields.status && <p class="error" role="alert">{saveFields.status}</p>}
        <Field label="Balance (US dollars)" inputMode="decimal" value={balance} onValue={(v) => { setBalanceError(null); edited(setBalance, 'quota')(v); }} hint="sets the balance; the change is logged" error={balanceError ?? saveFields.quota} />
        {/* The API refuses a reset of one's own password here: that change needs the current one. */}
        {self
          ? <p class="hint">Your own password is changed on the Profile page.</p>
          : <Field label="New password" type="password" autoComplete="new-password" value={password} onValue={edited(setPassword, 'password')}
              hint="leave empty to keep the password; a new one signs the account out everywhere (its sessions and access tokens end)" error={saveFields.password} />}
        <div class="buttons"><button type="submit" class="primary" disabled={save.busy}>Save account</button><button type="button" onClick={onDone}>Cancel</button></div>
        <ErrorText error={saveError} />
      </form>
      <form class="inline" aria-label="Add or remove quota" onSubmit={(e) => {
        e.preventDefault();
        const value = dollarsToQuota(add, { negative: true });
        if (value === undefined || value === 0) {
          setAddError(dollarsError(add, 'a non-zero dollar amount, such as 10 or -2.50 (negative removes)'));
          return;
        }
        setAddError(null);
        void credit.run(async () => {
          await call(api.POST('/api/user/manage', { body: { id: a.id, action: 'add_quota', value, ...(reason ? { reason } : {}) } }));
          onDone();
        });
      }}>
        <Field label="Add to balance (US dollars)" inputMode="decimal" value={add} onValue={(v) => { setAdd(v); setAddError(null); if (creditFields.value) credit.setError(null); }} hint="negative removes" error={addError ?? creditFields.value} />
        <Field label="Reason" value={reason} onValue={(v) => { setReason(v); if (creditFields.reason) credit.setError(null); }} error={creditFields.reason} />
        <button type="submit" disabled={credit.busy}>Add quota</button>
        <ErrorText error={creditError} />
      </form>
    </Card>
  );
}
