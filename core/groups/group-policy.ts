// Which groups a request may be routed through, and each group's rate limits, from the options
// (new-api's names): UserUsableGroups {name: description} lists the groups an account may pick for a
// key besides its own (unset: `default` and `vip`, new-api's default); AutoGroups [names] is the order
// the `auto` group tries; GroupRateLimits {group: {rpm, tpm}} gives the per-key limits of a group.
import { type Ratios, ratiosFromOptions } from '../pricing/ratios.js';

export const AUTO_GROUP = 'auto';
export const GROUP_OPTION_KEYS = ['UserUsableGroups', 'AutoGroups', 'GroupRateLimits'] as const;

export interface RateLimits {
  rpm: number;
  tpm: number;
}

export interface GroupPolicy {
  /**
   * The groups to try, in order, for a key of group `keyGroup` ('' = the account's) owned by an
   * account of group `userGroup`; null when the key's group is not one the account may use.
   */
  routeGroups(keyGroup: string, userGroup: string): readonly string[] | null;
  rateLimits(group: string): RateLimits;
}

function parseJson(raw: string | undefined): unknown {
  if (!raw) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}

/**
 * The groups every account may use besides its own while UserUsableGroups is unset: new-api's default
 * ({"default": …, "vip": …}), each only where GroupRatio prices it. A group added to GroupRatio (a
 * cheaper `partner` given to some accounts) is thus open only to the accounts placed in it until the
 * option names it; one named `vip` is open to every account at once (README, key rules).
 */
export const DEFAULT_USABLE_GROUPS: readonly string[] = ['default', 'vip'];

/** The UserUsableGroups option ({name: description}), or undefined when it is not set. */
export function usableGroupsOption(options: ReadonlyMap<string, string>): Readonly<Record<string, unknown>> | undefined {
  const parsed = parseJson(options.get('UserUsableGroups'));
  return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
}

/** The groups every account may use besides its own: the option's, or DEFAULT_USABLE_GROUPS when it is unset. */
function sharedUsableGroups(options: ReadonlyMap<string, string>): readonly string[] {
  const usable = usableGroupsOption(options);
  return usable ? Object.keys(usable) : DEFAULT_USABLE_GROUPS;
}

/**
 * The groups an account of `userGroup` may use, in order: its own group and those of the
 * UserUsableGroups option (unset: `default` and `vip`); priced groups only. The relay's routing, the
 * console's key checks and its groups endpoint all answer from this rule.
 */
export function usableGroupNames(options: ReadonlyMap<string, string>, ratios: Ratios, userGroup: string): string[] {
  return [...new Set([userGroup, ...sharedUsableGroups(options)])].filter((g) => ratios.group(g) !== undefined);
}

export interface UsableGroup {
  ratio: number;
  /** The UserUsableGroups description, or the name when it has none. */
  desc: string;
}

/** usableGroupNames with each group's ratio and description, as the console lists them. */
export function describeUsableGroups(options: ReadonlyMap<string, string>, userGroup: string): Record<string, UsableGroup> {
  const ratios = ratiosFromOptions(options);
  const descriptions = usableGroupsOption(options);
  const out: Record<string, UsableGroup> = {};
  for (const name of usableGroupNames(options, ratios, userGroup)) {
    const desc = descriptions?.[name];
    out[name] = { ratio: ratios.group(name)!, desc: typeof desc === 'string' && desc !== '' ? desc : name };
  }
  return out;
}

export function groupPolicyFromOptions(options: ReadonlyMap<string, string>, ratios: Ratios): GroupPolicy {
  // The same rule as usableGroupNames: the account's own group and the option's (unset: default, vip).
  const usable = new Set(sharedUsableGroups(options));
  const autoOption = parseJson(options.get('AutoGroups'));
  const auto = Array.isArray(autoOption) ? autoOption.filter((g): g is string => typeof g === 'string') : ['default'];
  const limitsOption = parseJson(options.get('GroupRateLimits'));
  const limits = new Map<string, RateLimits>();
  if (limitsOption && typeof limitsOption === 'object') {
    for (const [g, v] of Object.entries(limitsOption as Record<string, { rpm?: unknown; tpm?: unknown }>)) {
      limits.set(g, { rpm: Number(v?.rpm) > 0 ? Number(v.rpm) : 0, tpm: Number(v?.tpm) > 0 ? Number(v.tpm) : 0 });
    }
  }
  const may = (group: string, userGroup: string) =>
    (group === userGroup || usable.has(group)) && ratios.group(group) !== undefined;
  const cache = new Map<string, readonly string[] | null>();
  const NONE = { rpm: 0, tpm: 0 };
  return {
    routeGroups(keyGroup, userGroup) {
      const cacheKey = keyGroup + '\n' + userGroup;
      let groups = cache.get(cacheKey);
      if (groups === undefined) {
        const group = keyGroup || userGroup;
        if (group === AUTO_GROUP) {
          const list = auto.filter((g) => may(g, userGroup));
          groups = list.length ? list : null;
        } else {
          groups = may(group, userGroup) ? [group] : null;
        }
        cache.set(cacheKey, groups);
      }
      return groups;
    },
    rateLimits: (group) => limits.get(group) ?? NONE,
  };
}
