// The groups the console offers: those an account may be placed in, those it may use for a key, with
// their ratios and descriptions. The rules are core/groups/group-policy.ts's, the same the relay routes by.
import { loadOptions } from '../../core/options/options-source.js';
import { type Ratios, RATIO_OPTION_KEYS, ratiosFromOptions } from '../../core/pricing/ratios.js';
import { AUTO_GROUP, describeUsableGroups, type UsableGroup } from '../../core/groups/group-policy.js';
import type { Db } from '../db.js';

export { AUTO_GROUP };

export async function loadRatios(db: Db): Promise<Ratios> {
  return ratiosFromOptions(await loadOptions(db, RATIO_OPTION_KEYS));
}

/** Group names an account may be placed in. */
export async function accountGroups(db: Db): Promise<string[]> {
  return Object.keys((await loadRatios(db)).groups());
}

/** The groups an account may use, with ratio and description. */
export async function usableGroups(db: Db, userGroup: string): Promise<Record<string, UsableGroup>> {
  return describeUsableGroups(await loadOptions(db, [...RATIO_OPTION_KEYS, 'UserUsableGroups']), userGroup);
}

/** Group names an API key of this account may name: its usable groups plus `auto` ('' is handled by the caller). */
export async function tokenGroups(db: Db, userGroup: string): Promise<string[]> {
  return [...Object.keys(await usableGroups(db, userGroup)), AUTO_GROUP];
}
