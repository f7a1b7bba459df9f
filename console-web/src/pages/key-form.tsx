// The API key form (create and edit): every field of the contract's creation input. The form keeps
// text as typed; keyInput() turns it into the request body and says which field is wrong, and
// keyChanges() into an edit's body.
import { useState } from 'preact/hooks';
import type { ApiKey, ApiKeyInput, Body, Groups } from '../api/types';
import { Checkbox, ErrorText, Field, Select, splitFieldError, useAction, useFocusOnOpen } from '../components/ui';
import { dollarsError, dollarsInput, dollarsToQuota, fromLocalInput, toLocalInput } from '../format';

export interface KeyFormState {
  name: string;
  neverExpires: boolean;
  expiresAt: string;
  unlimited: boolean;
  quotaDollars: string;
  modelLimitsEnabled: boolean;
  modelLimits: string;
  allowIps: string;
  group: string;
  crossGroupRetry: boolean;
}

export const EMPTY_KEY_FORM: KeyFormState = {
  name: '', neverExpires: true, expiresAt: '', unlimited: true, quotaDollars: '', modelLimitsEnabled: false,
  modelLimits: '', allowIps: '', group: '', crossGroupRetry: false,
};

export function formFromKey(k: ApiKey): KeyFormState {
  return {
    name: k.name,
    neverExpires: k.expired_time === -1,
    expiresAt: k.expired_time === -1 ? '' : toLocalInput(k.expired_time),
    unlimited: k.unlimited_quota,
    quotaDollars: dollarsInput(k.remain_quota),
    modelLimitsEnabled: k.model_limits_enabled,
    modelLimits: k.model_limits,
    allowIps: k.allow_ips ?? '',
    group: k.group,
    crossGroupRetry: k.cross_group_retry,
  };
}

/** The request body, or the field at fault and why. */
export function keyInput(f: KeyFormState, nowSec: number): { body: ApiKeyInput } | { field: keyof KeyFormState; error: string } {
  const name = f.name.trim();
  if (!name) return { field: 'name', error: 'a name is required' };
  if (name.length > 50) return { field: 'name', error: 'at most 50 characters' };
  let expired = -1;
  if (!f.neverExpires) {
    const at = fromLocalInput(f.expiresAt);
    if (at === undefined) return { field: 'expiresAt', error: 'choose a date and time, or tick "Never expires"' };
    if (at <= nowSec) return { field: 'expiresAt', error: 'must be in the future' };
    expired = at;
  }
  let remain = 0;
  if (!f.unlimited) {
    const quota = dollarsToQuota(f.quotaDollars);
    if (quota === undefined) return { field: 'quotaDollars', error: dollarsError(f.quotaDollars, 'a dollar amount above $0, such as 10 or 2.50') };
    // 0 would make a key that is exhausted from the start.
    if (quota <= 0) return { field: 'quotaDollars', error: 'must be at least $0.000002 (1 quota): a key with $0 could make no request; tick "Unlimited quota" for no limit' };
    remain = quota;
  }
  const models = f.modelLimits.split(',').map((m) => m.trim()).filter(Boolean).join(',');
  if (f.modelLimitsEnabled && !models) return { field: 'modelLimits', error: 'list at least one model, or untick the whitelist' };
  return {
    body: {
      name,
      expired_time: expired,
      remain_quota: remain,
      unlimited_quota: f.unlimited,
      model_limits_enabled: f.modelLimitsEnabled,
      model_limits: f.modelLimitsEnabled ? models : '',
      allow_ips: f.allowIps.trim() === '' ? '' : f.allowIps.trim(),
      group: f.group,
      cross_group_retry: f.group === 'auto' && f.crossGroupRetry,
    },
  };
}

/** PUT /api/token/'s body, less the id. */
export type ApiKeyChanges = Omit<Body<'/api/token/', 'put'>, 'id'>;

/**
 * An edit's body. The quota goes back only when its fields were edited, and then with the value the
 * form showed as expected_remain_quota: the key may have spent since the page loaded, and setting
 * the old figure again would hand that spending back (the API answers 409 instead). The expiry goes
 * back (and must be in the future) only when it was edited: an expired key can still be renamed, and
 * a rename does not move an expiry to the minute the field shows.
 */
export function keyChanges(shown: ApiKey, f: KeyFormState, nowSec: number): { body: ApiKeyChanges } | { field: keyof KeyFormState; error: string } {
  const was = formFromKey(shown);
  const expiryEdited = f.neverExpires !== was.neverExpires || (!f.neverExpires && f.expiresAt !== was.expiresAt);
  const r = keyInput(expiryEdited ? f : { ...f, neverExpires: true }, nowSec);
  if ('field' in r) return r;
  const { remain_quota, unlimited_quota, expired_time, ...unchanged } = r.body;
  const rest: ApiKeyChanges = expiryEdited ? { ...unchanged, expired_time } : unchanged;
  if (f.unlimited === was.unlimited && (f.unlimited || f.quotaDollars === was.quotaDollars)) return { body: rest };
  // Made unlimited: what is left stays as it is, and counts again if a limit is set later.
  if (f.unlimited) return { body: { ...rest, unlimited_quota: true } };
  return { body: { ...rest, remain_quota, unlimited_quota, expected_remain_quota: shown.remain_quota } };
}

const API_FIELDS: Record<string, keyof KeyFormState> = {
  name: 'name', expired_time: 'expiresAt', remain_quota: 'quotaDollars', model_limits: 'modelLimits', allow_ips: 'allowIps', group: 'group',
};

type KeyFormProps = { groups: Groups | undefined; submitLabel: string; onCancel: () => void } & (
  | { editing?: undefined; initial: KeyFormState; onSubmit: (body: ApiKeyInput) => Promise<void> }
  | { editing: ApiKey; onSubmit: (body: ApiKeyChanges) => Promise<void> });

export function KeyForm(props: KeyFormProps) {
  const { groups, submitLabel, onCancel } = props;
  const [f, setF] = useState(() => (props.editing ? formFromKey(props.editing) : props.initial));
  const [local, setLocal] = useState<{ field: keyof KeyFormState; error: string } | null>(null);
  const action = useAction();
  const [apiErrors, formError] = splitFieldError(action.error, Object.keys(API_FIELDS));
  // An error is about the value it was given for: editing its field takes it away (the browser's own
  // checks may stop the next submit, which would otherwise leave it standing).
  const set = <K extends keyof KeyFormState>(k: K) => (v: KeyFormState[K]) => {
    setF((s) => ({ ...s, [k]: v }));
    if (local?.field === k) setLocal(null);
    const apiField = Object.entries(API_FIELDS).find(([, f]) => f === k)?.[0];
    if (apiField && apiErrors[apiField]) action.setError(null);
  };
  const form = useFocusOnOpen<HTMLFormElement>();
  const err = (k: keyof KeyFormState): string | undefined => {
    if (local?.field === k) return local.error;
    const apiField = Object.entries(API_FIELDS).find(([, v]) => v === k)?.[0];
    return apiField ? apiErrors[apiField] : undefined;
  };

  const submit = (e: Event) => {
    e.preventDefault();
    // A new submit answers for the form as it is now: the server's errors of the last one go, even
    // when the form's own check stops this one before it is sent.
    action.setError(null);
    const now = Math.floor(Date.now() / 1000);
    if (props.editing) {
      const r = keyChanges(props.editing, f, now);
      if ('field' in r) { setLocal(r); return; }
      setLocal(null);
      const save = props.onSubmit;
      void action.run(() => save(r.body));
      return;
    }
    const r = keyInput(f, now);
    if ('field' in r) { setLocal(r); return; }
    setLocal(null);
    const create = props.onSubmit;
    void action.run(() => create(r.body));
  };

  const groupOptions = [{ value: '', label: 'Account group (default)' },
    ...Object.entries(groups ?? {}).map(([name, g]) => ({ value: name, label: `${name} — ratio ${g.ratio}${g.desc ? ` (${g.desc})` : ''}` }))];

  return (
    <form ref={form} class="panel" onSubmit={submit} aria-label={submitLabel} onKeyDown={(e) => { if (e.key === 'Escape') { e.preventDefault(); onCancel(); } }}>
      <Field label="Name" value={f.name} onValue={set('name')} maxLength={50} required error={err('name')} />
      <Checkbox label="Never expires" checked={f.neverExpires} onChecked={set('neverExpires')} />
      {!f.neverExpires && <Field label="Expires at" type="datetime-local" value={f.expiresAt} onValue={set('expiresAt')} error={err('expiresAt')} />}
      <Checkbox label="Unlimited quota" checked={f.unlimited} onChecked={set('unlimited')} />
      {!f.unlimited && <Field label="Quota (US dollars)" inputMode="decimal" value={f.quotaDollars} onValue={set('quotaDollars')} error={err('quotaDollars')} hint="500,000 quota = $1" />}
      <Checkbox label="Limit to these models" checked={f.modelLimitsEnabled} onChecked={set('modelLimitsEnabled')} />
      {f.modelLimitsEnabled && <Field label="Models (comma-separated)" value={f.modelLimits} onValue={set('modelLimits')} error={err('modelLimits')} />}
      <Field label="Allowed IP addresses" value={f.allowIps} onValue={set('allowIps')} error={err('allowIps')} hint="comma-separated addresses or CIDR blocks; empty allows any" />
      <Select label="Group" value={f.group} onValue={set('group')} options={groupOptions} />
      {err('group') && <p class="error" role="alert">{err('group')}</p>}
      <Checkbox label="Retry in other groups (auto group only)" checked={f.crossGroupRetry} onChecked={set('crossGroupRetry')} disabled={f.group !== 'auto'} />
      <div class="buttons">
        <button type="submit" class="primary" disabled={action.busy}>{action.busy ? 'Saving…' : submitLabel}</button>
        <button type="button" onClick={onCancel}>Cancel</button>
      </div>
      <ErrorText error={formError} />
    </form>
  );
}
