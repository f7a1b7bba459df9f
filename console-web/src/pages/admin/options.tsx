import { useState } from 'preact/hooks';
import { api, call } from '../../api/client';
import type { OptionItem } from '../../api/types';
import type { PageProps } from '../../app';
import { Card, ErrorText, Field, Loading, useAction, useLoad } from '../../components/ui';

/** Ratios, groups, payments, ...: every option by its key's topic, for the page's sections. */
export function optionSection(key: string): string {
  if (/Ratio|Price/i.test(key)) return 'Ratios and prices';
  if (/Group/i.test(key)) return 'Groups';
  if (/Pay|TopUp|Topup|Epay|Cardpay|Redemption|Compliance|Discount|Amount/i.test(key)) return 'Payments and top-up';
  return 'Other settings';
}

export function AdminOptionsPage({ account }: PageProps) {
  const options = useLoad(() => call(api.GET('/api/option/')), []);
  const [filter, setFilter] = useState('');
  const sections = new Map<string, OptionItem[]>();
  for (const o of options.data ?? []) {
    if (filter && !o.key.toLowerCase().includes(filter.toLowerCase())) continue;
    const s = optionSection(o.key);
    sections.set(s, [...(sections.get(s) ?? []), o]);
  }
  return (
    <>
      <Field label="Find an option" value={filter} onValue={setFilter} />
      {options.loading && <Loading what="Loading options" />}
      <ErrorText error={options.error} />
      {[...sections].map(([title, items]) => (
        <Card key={title} title={title}>
          {items.map((o) => <OptionRow key={o.key} o={o} canWrite={account.role >= o.write_role} onSaved={options.reload} />)}
        </Card>
      ))}
    </>
  );
}

function OptionRow({ o, canWrite, onSaved }: { o: OptionItem; canWrite: boolean; onSaved: () => void }) {
  const [value, setValue] = useState(o.secret ? '' : o.value);
  const [saved, setSaved] = useState(false);
  const action = useAction();
  const multiline = !o.secret && (o.value.startsWith('{') || o.value.startsWith('[') || o.value.length > 60);
  return (
    <form class="option" aria-label={o.key} onSubmit={(e) => {
      e.preventDefault();
      setSaved(false);
      void action.run(async () => { await call(api.PUT('/api/option/', { body: { key: o.key, value } })); setSaved(true); onSaved(); });
    }}>
      {multiline
        ? <div class="field"><label for={`opt-${o.key}`}>{o.key}</label><textarea id={`opt-${o.key}`} rows={4} value={value} disabled={!canWrite} onInput={(e) => setValue((e.currentTarget as HTMLTextAreaElement).value)} /></div>
        : <Field label={o.key} type={o.secret ? 'password' : 'text'} value={value} onValue={setValue} disabled={!canWrite}
            hint={o.secret ? (o.configured ? 'configured; type a new value to replace it' : 'not configured') : undefined} />}
      <p class="hint">{o.description}{!canWrite ? ' (only the super administrator can change this)' : ''}</p>
      {canWrite && <button type="submit" disabled={action.busy} aria-label={`Save ${o.key}`}>Save</button>}
      {saved && <span class="ok" role="status">Saved</span>}
      <ErrorText error={action.error} />
    </form>
  );
}
