import { useState } from 'preact/hooks';
import { ApiError, api, call } from '../../api/client';
import type { Body, Channel, ChannelInput } from '../../api/types';
import { Card, Checkbox, ConfirmButton, ErrorText, Field, Loading, Pager, Select, splitFieldError, Table, useAction, useFocusOnOpen, useLoad } from '../../components/ui';
import { dateTime, dollars, inputNumber } from '../../format';

const PAGE_SIZE = 20;
const STATUS: Record<number, string> = { 1: 'Enabled', 2: 'Disabled', 3: 'Disabled (automatic)' };
// The wire format a channel's provider speaks, by new-api's type numbers (relay/providers/registry.ts).
// The API takes only these two; a channel stored earlier with another type keeps it, and the relay
// serves it as Anthropic's, so the list names its number.
const FORMAT: Record<number, string> = { 14: 'Anthropic Messages', 1: 'OpenAI Chat Completions' };
const formatOf = (type: number) => FORMAT[type] ?? `Anthropic Messages (type ${type})`;

/**
 * The Provider format choices: the two types the API takes. A legacy type is shown, so the form does
 * not claim a format the channel lacks, but cannot be chosen again once left (the API would refuse it).
 */
export function typeOptions(type: string): { value: string; label: string; disabled?: boolean }[] {
  const options: { value: string; label: string; disabled?: boolean }[] = [{ value: '14', label: FORMAT[14]! }, { value: '1', label: FORMAT[1]! }];
  if (!(type in FORMAT)) options.push({ value: type, label: `Type ${type} (no longer accepted)`, disabled: true });
  return options;
}

export function AdminChannelsPage() {
  const [page, setPage] = useState(1);
  const [keyword, setKeyword] = useState('');
  const [search, setSearch] = useState('');
  const [editing, setEditing] = useState<Channel | 'new' | null>(null);
  const list = useLoad(() => call(api.GET('/api/channel/', { params: { query: { p: page, page_size: PAGE_SIZE, ...(search ? { keyword: search } : {}) } } })), [page, search]);
  // A failed load keeps the previous answer (useLoad): its rows are not this search's, so none are shown.
  const shown = list.error ? undefined : list.data;
  return (
    <>
      {editing && <ChannelForm key={editing === 'new' ? 'new' : editing.id} channel={editing === 'new' ? null : editing} onDone={() => { setEditing(null); list.reload(); }} />}
      <Card title="Channels" actions={editing === null ? <button type="button" class="primary" onClick={() => setEditing('new')}>Create channel</button> : undefined}>
        <form class="filters" aria-label="Search channels" onSubmit={(e) => { e.preventDefault(); setPage(1); setSearch(keyword.trim()); }}>
          <Field label="Search channels" value={keyword} onValue={setKeyword} />
          <button type="submit">Search</button>
        </form>
        {list.loading && <Loading what="Loading channels" />}
        <ErrorText error={list.error} />
        {shown && (shown.items.length === 0 ? page === 1 && <p>No channels.</p> : (
          <Table>
            <thead><tr><th>Id</th><th>Name</th><th>Format</th><th>Base URL</th><th>Models</th><th>Group</th><th>Status</th><th>Priority</th><th>Weight</th><th>Used</th><th>Last test</th><th class="actions">Actions</th></tr></thead>
            <tbody>{shown.items.map((c) => <ChannelRow key={c.id} c={c} onEdit={() => setEditing(c)} onChanged={list.reload} />)}</tbody>
          </Table>
        ))}
        {shown && <Pager page={page} pageSize={PAGE_SIZE} total={shown.total} onPage={setPage} label="Channel pages" />}
      </Card>
    </>
  );
}

/**
 * What the Last test column says: the test this page saw fail, while no test has succeeded since;
 * else the channel's last successful test.
 */
export function lastTestText(c: Pick<Channel, 'test_time' | 'response_time'>, failed: { at: number; message: string } | null): string {
  if (failed && failed.at >= c.test_time) return `${dateTime(failed.at)}: ${failed.message}`;
  return c.test_time ? `${dateTime(c.test_time)} (${c.response_time} ms)` : '—';
}

function ChannelRow({ c, onEdit, onChanged }: { c: Channel; onEdit: () => void; onChanged: () => void }) {
  const action = useAction();
  const [tested, setTested] = useState<string | null>(null);
  // A failed test is written nowhere (the API updates test_time and response_time only on success, and
  // probe_time and probe_result are the relays' probes of an auto-disabled channel), so reading the row
  // again would not show it: the row holds it until the page is loaded again or a test succeeds.
  const [failed, setFailed] = useState<{ at: number; message: string } | null>(null);
  const setStatus = (status: 1 | 2) => action.run(async () => { await call(api.PUT('/api/channel/', { body: { id: c.id, status } })); onChanged(); });
  const test = () => action.run(async () => {
    setTested(null);
    setFailed(null);
    let r;
    try {
      r = await call(api.GET('/api/channel/test/{id}', { params: { path: { id: String(c.id) }, query: {} } }));
    } catch (err) {
      // HTTP 200 with success false is the channel failing its test; any other error is the console's.
      if (!(err instanceof ApiError && err.status === 200)) throw err;
      setFailed({ at: Math.floor(Date.now() / 1000), message: err.message });
      return;
    }
    setTested(`OK: ${r.model} answered in ${r.response_time} ms`);
    onChanged();
  });
  return (
    <tr>
      <td>{c.id}</td><td class="name">{c.name}</td><td>{formatOf(c.type)}</td><td><code class="url" title={c.base_url}>{c.base_url}</code></td><td class="models">{c.models}</td><td>{c.group}</td>
      <td class="status">{STATUS[c.status] ?? c.status}{c.status !== 1 && c.status_reason && <small class="reason">{c.status_reason}</small>}</td>
      <td>{c.priority}</td><td>{c.weight}</td><td>{dollars(c.used_quota)}</td>
      <td class={failed && failed.at >= c.test_time ? 'test failed' : 'test'}>{lastTestText(c, failed)}</td>
      <td class="actions">
        <button type="button" onClick={onEdit} aria-label={`Edit channel ${c.name}`}>Edit</button>
        <button type="button" disabled={action.busy} onClick={() => void test()} aria-label={`Test channel ${c.name}`}>Test</button>
        {c.status === 1
          ? <button type="button" disabled={action.busy} onClick={() => void setStatus(2)} aria-label={`Disable channel ${c.name}`}>Disable</button>
          : <button type="button" disabled={action.busy} onClick={() => void setStatus(1)} aria-label={`Enable channel ${c.name}`}>Enable</button>}
        <ConfirmButton label="Delete" name={`Delete channel ${c.name}`} confirm="Confirm delete" confirmName={`Confirm deleting channel ${c.name}`} busy={action.busy}
          onConfirm={() => action.run(async () => { await call(api.DELETE('/api/channel/{id}', { params: { path: { id: String(c.id) } } })); onChanged(); })} />
        {tested && <p class="ok" role="status">{tested}</p>}
        <ErrorText error={action.error} />
      </td>
    </tr>
  );
}

const FIELDS = ['name', 'type', 'base_url', 'key', 'models', 'group', 'priority', 'weight', 'model_mapping', 'flex_ratio', 'status',
  'auto_ban', 'fault_threshold', 'fault_rate_threshold'] as const;

/** The channel form as typed (text, as the inputs hold it; the checkbox's state). */
export interface ChannelFormState {
  name: string; base_url: string; key: string; models: string; group: string; priority: string; weight: string;
  model_mapping: string; status: string; type: string; flex_ratio: string;
  auto_ban: boolean; fault_threshold: string; fault_rate_threshold: string;
}

// A threshold of null is the fleet's setting, shown as an empty field.
const thresholdText = (v: number | null | undefined) => (v === null || v === undefined ? '' : inputNumber(v));

export function formFromChannel(channel: Channel | null): ChannelFormState {
  return {
    name: channel?.name ?? '', base_url: channel?.base_url ?? '', key: '', models: channel?.models ?? '', group: channel?.group ?? 'default',
    priority: inputNumber(channel?.priority ?? 0), weight: inputNumber(channel?.weight ?? 1), model_mapping: channel?.model_mapping ?? '', status: String(channel?.status ?? 1),
    type: String(channel?.type ?? 14), flex_ratio: inputNumber(channel?.flex_ratio ?? 1),
    auto_ban: channel?.auto_ban ?? true, fault_threshold: thresholdText(channel?.fault_threshold), fault_rate_threshold: thresholdText(channel?.fault_rate_threshold),
  };
}

type ChannelBody = Omit<Body<'/api/channel/', 'put'>, 'id'>;

/**
 * A threshold as the API takes it: emptied is null, which the API reads as "the fleet's setting" (left
 * out, an edit would keep the channel's own). Other text is sent as typed, for the API to refuse by name.
 */
function thresholdValue(text: string): number | null {
  if (text.trim() === '') return null;
  return (Number.isNaN(Number(text)) ? text : Number(text)) as number;
}

/** The value of one field as the API takes it. */
function wireValue(f: ChannelFormState, k: Exclude<keyof ChannelFormState, 'key'>): ChannelBody[keyof ChannelBody] {
  switch (k) {
    case 'priority': case 'weight': case 'type': return Number(f[k]);
    case 'model_mapping': return f.model_mapping || null;
    case 'status': return (f.status === '2' ? 2 : f.status === '3' ? 3 : 1) as 1 | 2 | 3;
    // Sent as typed ('' stays text): the console refuses what is not a number in (0, 1].
    case 'flex_ratio': return (f.flex_ratio.trim() === '' || Number.isNaN(Number(f.flex_ratio)) ? f.flex_ratio : Number(f.flex_ratio)) as number;
    case 'fault_threshold': case 'fault_rate_threshold': return thresholdValue(f[k]);
    default: return f[k];
  }
}

const EDITABLE = ['name', 'type', 'base_url', 'models', 'group', 'priority', 'weight', 'model_mapping', 'flex_ratio', 'status',
  'auto_ban', 'fault_threshold', 'fault_rate_threshold'] as const;

/** POST /api/channel/'s body: every field. */
export function channelInput(f: ChannelFormState): ChannelInput {
  const body: Record<string, unknown> = { key: f.key };
  for (const k of EDITABLE) body[k] = wireValue(f, k);
  return body as ChannelInput;
}

/**
 * An edit's body: only the fields the administrator changed from what the form showed (the key only
 * when typed). A field left alone is not sent, so saving the weight of a channel the relays disabled
 * (status 3) does not enable it again, nor undo a change another administrator made meanwhile.
 */
export function channelChanges(shown: Channel, f: ChannelFormState): ChannelBody {
  const was = formFromChannel(shown);
  const body: Record<string, unknown> = {};
  for (const k of EDITABLE) if (f[k] !== was[k]) body[k] = wireValue(f, k);
  if (f.key) body.key = f.key;
  return body as ChannelBody;
}

/** The Status choices: the automatic state only while the channel is in it (the relays set it). */
export function statusOptions(shown: Channel | null): { value: string; label: string }[] {
  const options = [{ value: '1', label: 'Enabled' }, { value: '2', label: 'Disabled' }];
  if (shown?.status === 3) options.push({ value: '3', label: 'Disabled (automatic)' });
  return options;
}

export function ChannelForm({ channel, onDone }: { channel: Channel | null; onDone: () => void }) {
  const [f, setF] = useState(() => formFromChannel(channel));
  const legacyType = channel && !(String(channel.type) in FORMAT) ? channel.type : null;
  const action = useAction();
  const [apiErrors, formError] = splitFieldError(action.error, FIELDS);
  // An error names the value it was given for: editing the field takes it away (the browser's own
  // checks may stop the next submit, which would otherwise leave it standing), and only its own.
  const [edited, setEdited] = useState<ReadonlySet<string>>(new Set());
  const fe: Record<string, string> = Object.fromEntries(Object.entries(apiErrors).filter(([k]) => !edited.has(k)));
  const set = (k: keyof ChannelFormState) => (v: string | boolean) => {
    setF((s) => ({ ...s, [k]: v }));
    if (fe[k]) setEdited((s) => new Set(s).add(k));
  };
  const first = useFocusOnOpen<HTMLFormElement>();
  const title = channel ? `Edit channel ${channel.name}` : 'New channel';
  const reason = channel?.status === 3 && channel.status_reason ? ` (${channel.status_reason})` : '';
  return (
    <Card title={title}>
      <form ref={first} aria-label={title} onKeyDown={(e) => { if (e.key === 'Escape') { e.preventDefault(); onDone(); } }} onSubmit={(e) => {
        e.preventDefault();
        setEdited(new Set());
        void action.run(async () => {
          if (channel) await call(api.PUT('/api/channel/', { body: { id: channel.id, ...channelChanges(channel, f) } }));
          else await call(api.POST('/api/channel/', { body: channelInput(f) }));
          onDone();
        });
      }}>
        <Field label="Name" value={f.name} onValue={set('name')} required maxLength={100} error={fe.name} />
        <Select label="Provider format" value={f.type} onValue={set('type')} options={typeOptions(f.type)}
          hint={legacyType !== null ? `stored as type ${legacyType}, which the relay serves as Anthropic Messages; kept unless you choose a format` : undefined} />
        {fe.type && <p class="error" role="alert">{fe.type}</p>}
        <Field label="Base URL" type="url" value={f.base_url} onValue={set('base_url')} required error={fe.base_url} hint="the provider's address, e.g. https://api.anthropic.com" />
        <Field label="Channel key" type="password" autoComplete="off" value={f.key} onValue={set('key')} required={!channel} error={fe.key} hint={channel ? 'leave empty to keep the stored key' : 'stored encrypted; never shown again'} />
        <Field label="Models" value={f.models} onValue={set('models')} required error={fe.models} hint="comma-separated" />
        <Field label="Groups" value={f.group} onValue={set('group')} error={fe.group} hint="comma-separated" />
        <Field label="Priority" type="number" value={f.priority} onValue={set('priority')} error={fe.priority} hint="higher is tried first" />
        <Field label="Weight" type="number" min={0} value={f.weight} onValue={set('weight')} error={fe.weight} hint="share among channels of the same priority" />
        <Field label="Model mapping (JSON)" value={f.model_mapping} onValue={set('model_mapping')} error={fe.model_mapping} hint='e.g. {"claude-x": "claude-y"}' />
        <Field label="Flex price ratio" type="number" min={0} max={1} step="any" value={f.flex_ratio} onValue={set('flex_ratio')} error={fe.flex_ratio}
          hint="what the provider charges for a service_tier flex answer, as a fraction of its standard price (OpenAI: 0.5; 1 bills flex as standard)" />
        <Select label="Status" value={f.status} onValue={set('status')} options={statusOptions(channel)}
          hint={channel?.status === 3 ? `disabled by the relays' health checks${reason}; kept unless you choose another status` : undefined} />
        {fe.status && <p class="error" role="alert">{fe.status}</p>}
        <Checkbox label="Auto-disable on faults" checked={f.auto_ban} onChecked={set('auto_ban')} />
        {fe.auto_ban && <p class="error" role="alert">{fe.auto_ban}</p>}
        {/* The thresholds only decide when auto-disabling happens: without it they do nothing (kept, for when it is on again). */}
        <Field label="Faults in a row before disabling" type="number" min={0} step={1} value={f.fault_threshold} onValue={set('fault_threshold')} error={fe.fault_threshold}
          disabled={!f.auto_ban} hint={f.auto_ban ? "empty: the gateway's CHANNEL_FAULTS_TO_DISABLE (5 by default); 0 turns this rule off" : 'no effect while auto-disabling is off'} />
        <Field label="Fault rate that disables" type="number" min={0} max={1} step="any" value={f.fault_rate_threshold} onValue={set('fault_rate_threshold')} error={fe.fault_rate_threshold}
          disabled={!f.auto_ban} hint={f.auto_ban ? "a fraction of the attempts in the fault window, 0 to 1; empty: the gateway's CHANNEL_FAULT_RATE_TO_DISABLE (0.5 by default); 0 turns this rule off" : 'no effect while auto-disabling is off'} />
        <div class="buttons"><button type="submit" class="primary" disabled={action.busy}>{channel ? 'Save channel' : 'Create channel'}</button><button type="button" onClick={onDone}>Cancel</button></div>
        <ErrorText error={formError} />
      </form>
    </Card>
  );
}
