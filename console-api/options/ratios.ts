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

/**
 * The groups an account may use, with their ratio and description, as the relay's group policy sees
 * them (relay/routing/group-policy.ts): with the UserUsableGroups option set, the account's own group
 * plus the option's groups (its values are the descriptions); without it, every priced group. Only
 * groups with a ratio are listed.
 */
export async function usableGroups(db: Db, userGroup: string): Promise<Record<string, { ratio: number; desc: string }>> {
  const ratios = (await loadRatios(db)).groups();
  const [row] = await db<{ value: string }[]>`SELECT value FROM options WHERE key = 'UserUsableGroups'`;
  let usable: Record<string, unknown> | undefined;
  try {
    const parsed: unknown = row?.value ? JSON.parse(row.value) : undefined;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) usable = parsed as Record<string, unknown>;
  } catch {
    usable = undefined;
  }
  const names = usable ? [userGroup, ...Object.keys(usable)] : Object.keys(ratios);
  const out: Record<string, { ratio: number; desc: string }> = {};
  for (const name of names) {
    const ratio = ratios[name];
    if (ratio === undefined || name in out) continue;
    const desc = usable?.[name];
    out[name] = { ratio, desc: typeof desc === 'string' && desc !== '' ? desc : name };
  }
  return out;
}

/** Group names an API key of this account may name: its usable groups plus `auto` ('' is handled by the caller). */
export async function tokenGroups(db: Db, userGroup: string): Promise<string[]> {
  return [...Object.keys(await usableGroups(db, userGroup)), AUTO_GROUP];
}
