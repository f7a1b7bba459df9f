// The pricing page (new-api's): the models the account can use and what a million tokens cost in a
// group it may use. The API gives each model's prices at group ratio 1 and the group ratios; a
// group's prices are those times its ratio, as the relay bills a request routed through that group.
import { useState } from 'preact/hooks';
import { api, call, type paths } from '../api/client';
import { Card, ErrorText, Field, Loading, Select, useLoad } from '../components/ui';
import type { PageProps } from '../app';

export type Pricing = NonNullable<paths['/api/pricing']['get']['responses'][200]['content']['application/json']['data']>;
export type ModelPricing = Pricing['models'][number];

export interface PriceRow {
  model: string;
  priced: boolean;
  /** Dollars per million tokens in the chosen group; null when the model has no price. */
  input: number | null;
  output: number | null;
  cachedInput: number | null;
  groups: string[];
}

/** The group shown first: the account's own when it serves anything, else the first that does. */
export function defaultGroup(p: Pricing): string {
  const serving = servingGroups(p);
  return serving.includes(p.group) ? p.group : serving[0] ?? '';
}

/** The usable groups that serve at least one model, in the API's order. */
export function servingGroups(p: Pricing): string[] {
  return Object.keys(p.group_ratio).filter((g) => p.models.some((m) => m.enable_groups.includes(g)));
}

/** The models a key of `group` can reach, whose names contain `search`, priced at that group's ratio. */
export function priceRows(p: Pricing, group: string, search = ''): PriceRow[] {
  const ratio = p.group_ratio[group] ?? 1;
  const needle = search.trim().toLowerCase();
  // 12 significant digits, as the API's: 0.3 × 0.5 is 0.15, not 0.15000000000000002.
  const times = (n: number | null) => (n === null ? null : Number((n * ratio).toPrecision(12)));
  return p.models
    .filter((m) => m.enable_groups.includes(group) && m.model_name.toLowerCase().includes(needle))
    .map((m) => ({
      model: m.model_name, priced: m.priced, input: times(m.input_price), output: times(m.output_price),
      cachedInput: times(m.cache_read_price), groups: m.enable_groups,
    }));
}

/** "$3.00", "$0.075", "$0.0025": cents for whole dollars, enough digits below a dollar to tell models apart. */
export function perMillion(d: number | null): string {
  if (d === null) return 'not priced';
  const fixed = d.toFixed(d >= 1 || d === 0 ? 2 : 6);
  return `$${fixed.includes('.') ? fixed.replace(/(\.\d\d\d*?)0+$/, '$1') : fixed}`;
}

export function PricingPage(_props: PageProps) {
  const pricing = useLoad(() => call(api.GET('/api/pricing')), []);
  return (
    <>
      {pricing.loading && !pricing.data && <Loading what="Loading prices" />}
      <ErrorText error={pricing.error} />
      {pricing.data && <PriceTable pricing={pricing.data} />}
    </>
  );
}

export function PriceTable({ pricing }: { pricing: Pricing }) {
  const [group, setGroup] = useState(() => defaultGroup(pricing));
  const [search, setSearch] = useState('');
  const groups = servingGroups(pricing);
  if (groups.length === 0) return <Card title="Models"><p>No model is available to this account yet.</p></Card>;
  const rows = priceRows(pricing, group, search);
  const ratio = pricing.group_ratio[group] ?? 1;
  return (
    <Card title="Models">
      <div class="filters">
        <Select label="Group" value={group} onValue={setGroup}
          options={groups.map((g) => ({ value: g, label: `${g} (ratio ${pricing.group_ratio[g]})${g === pricing.group ? ', your group' : ''}` }))} />
        <Field label="Search models" value={search} onValue={setSearch} />
      </div>
      <p class="hint">
        US dollars per million tokens for a key of group {group} (group ratio {ratio}: the model's price × {ratio}).
        A model marked “not priced” is refused until an administrator sets its price.
      </p>
      {rows.length === 0 ? <p>No model matches.</p> : (
        <div class="scroll">
          <table class="pricing">
            <thead><tr><th>Model</th><th>Input $/M</th><th>Output $/M</th><th>Cached input $/M</th><th>Groups</th></tr></thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.model}>
                  <td><code>{r.model}</code></td>
                  <td>{perMillion(r.input)}</td>
                  <td>{perMillion(r.output)}</td>
                  <td>{perMillion(r.cachedInput)}</td>
                  <td>{r.groups.join(', ')}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Card>
  );
}
