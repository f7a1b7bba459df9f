// The groups the console offers: those an account may be placed in, those it may use for a key, with
// their ratios and descriptions. The rules are core/groups/group-policy.ts's, the same the relay routes by.
import { loadOptions } from '../../core/options/options-source.js';
import { type Ratios, RATIO_OPTION_KEYS, ratiosFromOptions } from '../../core/pricing/ratios.js';
import { AUTO_GROUP, describeUsableGroups, type UsableGroup } from '../../core/groups/group-policy.js';
import type { Db } from '../db.js';

export { AUTO_GROUP };

/**
 * Advisory lock id of option writes checked against other rows (OptionDef.conflict, routes/option.ts),
 * which take it exclusively: a GroupRatio that drops a group checks that no account or channel is in
 * it. A write that puts an account or a channel in a group takes it shared (lockGroupsShared) and checks
 * the group under it, so that check and the drop run one after the other: before, both passed against
 * the other's old state and an account was left in a group with no price.
 */
export const GROUP_OPTION_LOCK = 727_201;

/**
 * In a transaction that is about to place an account or a channel in `group`s: waits for a GroupRatio
 * write in progress, and holds off the next one until the commit. Shared, so such writes do not wait
 * for one another. Take it before the group check, and check with the transaction.
 */
export async function lockGroupsShared(tx: Db): Promise<void> {
  await tx`SELECT pg_advisory_xact_lock_shared(${GROUP_OPTION_LOCK})`;
}

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
