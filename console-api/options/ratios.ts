// Groups and price ratios as configured in the options table (relay/pricing/ratios.ts semantics).
import { type Ratios, RATIO_OPTION_KEYS, ratiosFromOptions } from '../../relay/pricing/ratios.js';
import type { Db } from '../db.js';

/** The pseudo-group an API key may name to let the relay choose among the account's groups. */
export const AUTO_GROUP = 'auto';

export async function loadRatios(db: Db): Promise<Ratios> {
  const rows = await db<{ key: string; value: string }[]>`
    SELECT key, value FROM options WHERE key IN ${db([...RATIO_OPTION_KEYS])}`;
  return ratiosFromOptions(new Map(rows.map((r) => [r.key, r.value])));
}

/** Group names an account may be placed in. */
export async function accountGroups(db: Db): Promise<string[]> {
  return Object.keys((await loadRatios(db)).groups());
}

/** Group names an API key may name: the account groups plus `auto` ('' is handled by the caller). */
export async function tokenGroups(db: Db): Promise<string[]> {
  return [...(await accountGroups(db)), AUTO_GROUP];
}
