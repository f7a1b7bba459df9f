import { useState } from 'preact/hooks';
import { api, call } from '../../api/client';
import type { OptionItem } from '../../api/types';
import type { PageProps } from '../../app';
import { Card, ConfirmButton, ErrorText, Field, Loading, useAction, useLoad } from '../../components/ui';
import { ROLE } from '../../format';

/** Ratios, groups, payments, ...: every option by its key's topic, for the page's sections. */
export function optionSection(key: string): string {
  if (/Ratio|Price/i.test(key)) return 'Ratios and prices';
  if (/Group/i.test(key)) return 'Groups';
  if (/Pay|TopUp|Topup|Epay|Cardpay|Redemption|Compliance|Discount|Amount/i.test(key)) return 'Payments and top-up';
  return 'Other settings';
}

/** What an administrator below root reads above the options: it may look, not change (the API refuses it, 403). */
export const READ_ONLY_OPTIONS_NOTE = 'Options are changed by the super administrator only (as in new-api): you can read them here, not change them.';

/**
 * Every option, by topic. Only the super administrator changes options (each one's write_role is
 * 100, PUT /api/option/ refuses an administrator): below it the page is read-only, with a note, and
 * no Save or Clear is offered.
 */
export function AdminOptionsPage({ account }: PageProps) {
  const options = useLoad(() => call(api.GET('/api/option/')), []);
  const readOnly = account.role < ROLE.root;
  const [filter, setFilter] = useState('');
  const sections = new Map<string, OptionItem[]>();
  for (const o of options.data ?? []) {
    if (filter && !o.key.toLowerCase().includes(filter.toLowerCase())) continue;
    const s = optionSection(o.key);
    sections.set(s, [...(sections.get(s) ?? []), o]);
  }
  return (
    <>
      {readOnly && <p class="hint" role="note">{READ_ONLY_OPTIONS_NOTE}</p>}
      <Field label="Find an option" value={filter} onValue={setFilter} />
      {options.loading && <Loading what="Loading options" />}
      <ErrorText error={options.error} />
      {[...sections].map(([title, items]) => (
        <Card key={title} title={title}>
          {items.map((o) => <OptionRow key={o.key} o={o} canWrite={account.role >= o.write_role} noted={readOnly} onSaved={options.reload} />)}
        </Card>
      ))}
    </>
  );
}

/**
 * What Save sends for an option, or null when it sends nothing. The API never returns a secret's
 * value (it reads as ''), so a secret's empty field means "keep the stored secret": only a new value
 * is sent. Erasing a secret is the separate Clear action.
 */
export function optionSaveValue(o: Pick<OptionItem, 'secret'>, value: string): string | null {
  return o.secret && value === '' ? null : value;
}

/** One option; `noted`: the page already says it is read-only, so a row does not say it again. */
function OptionRow({ o, canWrite, noted, onSaved }: { o: OptionItem; canWrite: boolean; noted: boolean; onSaved: () => void }) {
  const [value, setValue] = useState(o.secret ? '' : o.value);
  const [saved, setSaved] = useState<string | null>(null);
  const action = useAction();
  const multiline = !o.secret && (o.value.startsWith('{') || o.value.startsWith('[') || o.value.length > 60);
  const toSend = optionSaveValue(o, value);
  const put = (v: string, done: string) => action.run(async () => {
    await call(api.PUT('/api/option/', { body: { key: o.key, value: v } }));
    setSaved(done);
    // A secret is not kept on the page once stored.
    if (o.secret) setValue('');
    onSaved();
  });
  return (
    <form class="option" aria-label={o.key} onSubmit={(e) => {
      e.preventDefault();
      setSaved(null);
      if (toSend === null) return;
      void put(toSend, 'Saved');
    }}>
      {multiline
        ? <div class="field"><label for={`opt-${o.key}`}>{o.key}</label><textarea id={`opt-${o.key}`} rows={4} value={value} disabled={!canWrite} onInput={(e) => setValue((e.currentTarget as HTMLTextAreaElement).value)} /></div>
        : <Field label={o.key} type={o.secret ? 'password' : 'text'} value={value} onValue={setValue} disabled={!canWrite} autoComplete={o.secret ? 'new-password' : undefined}
            hint={o.secret ? (o.configured ? (canWrite ? 'configured; leave empty to keep it, or type a new value to replace it' : 'configured') : 'not configured') : undefined} />}
      <p class="hint">{o.description}{!canWrite && !noted ? ' (only the super administrator can change this)' : ''}</p>
      {canWrite && (
        <div class="buttons">
          <button type="submit" disabled={action.busy || toSend === null} aria-label={`Save ${o.key}`}>Save</button>
          {o.secret && o.configured && (
            <ConfirmButton label="Clear" name={`Clear ${o.key}`} confirm="Confirm clear" confirmName={`Confirm clearing ${o.key}`} keepName={`Keep ${o.key}`} busy={action.busy}
              onConfirm={() => { setSaved(null); return put('', 'Cleared'); }}>
              <span class="hint">Clearing erases the stored secret.</span>
            </ConfirmButton>
          )}
        </div>
      )}
      {saved && <span class="ok" role="status">{saved}</span>}
      <ErrorText error={action.error} />
    </form>
  );
}
