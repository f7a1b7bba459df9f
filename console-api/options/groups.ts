// Groups and price ratios as configured in the options table (relay/pricing/ratios.ts semantics).
import { type Ratios, RATIO_OPTION_KEYS, ratiosFromOptions } from '../../relay/pricing/ratios.js';
import { AUTO_GROUP, usableGroupNames, usableGroupsOption } from '../../relay/routing/group-policy.js';
import type { Db } from '../db.js';

export { AUTO_GROUP };

export async function loadRatios(db: Db): Promise<Ratios> {
  const rows = await db<{ key: string; value: string }[]>`
    SELECT key, value FROM options WHERE key IN ${db([...RATIO_OPTION_KEYS])}`;
  return ratiosFromOptions(new Map(rows.map((r) => [r.key, r.value])));
}

/** Group names an account may be placed in. */
export async function accountGroups(db: Db): Promise<string[]> {
  return Object.keys((await loadRatios(db)).groups());
}

/** The groups an account may use (relay/routing/group-policy.ts usableGroupNames), with ratio and description. */
export async function usableGroups(db: Db, userGroup: string): Promise<Record<string, { ratio: number; desc: string }>> {
  const rows = await db<{ key: string; value: string }[]>`
    SELECT key, value FROM options WHERE key IN ${db([...RATIO_OPTION_KEYS, 'UserUsableGroups'])}`;
  const options = new Map(rows.map((r) => [r.key, r.value]));
  const ratios = ratiosFromOptions(options);
  const descriptions = usableGroupsOption(options);
  const out: Record<string, { ratio: number; desc: string }> = {};
  for (const name of usableGroupNames(options, ratios, userGroup)) {
    const desc = descriptions?.[name];
    out[name] = { ratio: ratios.group(name)!, desc: typeof desc === 'string' && desc !== '' ? desc : name };
  }
  return out;
}

/** Group names an API key of this account may name: its usable groups plus `auto` ('' is handled by the caller). */
export async function tokenGroups(db: Db, userGroup: string): Promise<string[]> {
  return [...Object.keys(await usableGroups(db, userGroup)), AUTO_GROUP];
}
