// The pricing page's list (GET /api/pricing): the models an account can reach and what they cost. A
// model is listed when an enabled channel serves it in a group the account may use, the same groups
// and the same abilities rows the relay routes by, so the page never offers a model the relay would
// answer with model_not_found, nor hides one it would serve.
import { loadOptions } from '../../core/options/options-source.js';
import { usableGroupNames } from '../../core/groups/group-policy.js';
import { QUOTA_PER_DOLLAR, RATIO_OPTION_KEYS, type Ratios, ratiosFromOptions } from '../../core/pricing/ratios.js';
import { CHANNEL_STATUS } from '../channels/abilities.js';
import type { Db } from '../db.js';

const TOKENS_PER_MILLION = 1_000_000;

export interface PricePerMillion {
  input: number;
  output: number;
  cache_read: number;
}

/**
 * US dollars per million tokens. A ratio of 1 is 1 quota per token and 500000 quota is one dollar, so
 * $/M input = model ratio × 2, output = that × completion ratio, a cached input read = that × cache
 * ratio, each times the group ratio the request is routed through. The relay's billing applies the
 * same product to each token; this is its per-million form, in one place for the API and its tests.
 * Rounded to 12 significant digits: 7.5 × 0.1 × 2 should read 1.5, not 1.5000000000000002.
 */
export function pricePerMillion(r: { model: number; completion: number; cacheRead: number }, groupRatio = 1): PricePerMillion {
  const input = (r.model * groupRatio * TOKENS_PER_MILLION) / QUOTA_PER_DOLLAR;
  const clean = (n: number) => Number(n.toPrecision(12));
  return { input: clean(input), output: clean(input * r.completion), cache_read: clean(input * r.cacheRead) };
}

export interface ModelPricing {
  model_name: string;
  /**
   * Whether the relay serves it: false for a model a channel lists but no ratio prices (while the
   * option SelfUseModeEnabled is off), whose requests are refused with 404 model_not_priced. Its
   * ratios and prices are null rather than the self-use fallback, which would be a price nobody pays.
   */
  priced: boolean;
  model_ratio: number | null;
  completion_ratio: number | null;
  /** Cached input read, relative to input. */
  cache_ratio: number | null;
  /** Dollars per million tokens at group ratio 1; the page multiplies by the group's ratio. */
  input_price: number | null;
  output_price: number | null;
  cache_read_price: number | null;
  /** The groups serving it that the account may use, in the group policy's order. */
  enable_groups: string[];
}

export interface AccountPricing {
  /** The account's own group. */
  group: string;
  /** The groups the account may use (own and usable: those `auto` tries are among them) → ratio. */
  group_ratio: Record<string, number>;
  models: ModelPricing[];
}

export function modelPricing(name: string, ratios: Ratios, enableGroups: string[]): ModelPricing {
  if (!ratios.priced(name)) {
    return {
      model_name: name, priced: false, model_ratio: null, completion_ratio: null, cache_ratio: null,
      input_price: null, output_price: null, cache_read_price: null, enable_groups: enableGroups,
    };
  }
  const r = { model: ratios.model(name), completion: ratios.completion(name), cacheRead: ratios.cacheRead(name) };
  const price = pricePerMillion(r);
  return {
    model_name: name, priced: true, model_ratio: r.model, completion_ratio: r.completion, cache_ratio: r.cacheRead,
    input_price: price.input, output_price: price.output, cache_read_price: price.cache_read, enable_groups: enableGroups,
  };
}

/** What an account of `userGroup` can use, read fresh: an option or channel change shows at once. */
export async function loadAccountPricing(db: Db, userGroup: string): Promise<AccountPricing> {
  const options = await loadOptions(db, [...RATIO_OPTION_KEYS, 'UserUsableGroups']);
  const ratios = ratiosFromOptions(options);
  // The `auto` group routes only through groups of this list (group-policy.ts), so it adds none.
  const groups = usableGroupNames(options, ratios, userGroup);
  const groupRatio: Record<string, number> = {};
  for (const g of groups) groupRatio[g] = ratios.group(g)!;
  if (groups.length === 0) return { group: userGroup, group_ratio: groupRatio, models: [] };

  // The relay's channel registry reads the same rows: enabled abilities of enabled channels.
  const rows = await db<{ group: string; model: string }[]>`
    SELECT DISTINCT a."group", a.model
    FROM abilities a JOIN channels c ON c.id = a.channel_id
    WHERE a.enabled AND c.status = ${CHANNEL_STATUS.enabled} AND a."group" IN ${db(groups)}`;
  const servedIn = new Map<string, Set<string>>();
  for (const r of rows) {
    let set = servedIn.get(r.model);
    if (!set) servedIn.set(r.model, (set = new Set()));
    set.add(r.group);
  }
  const models = [...servedIn.keys()]
    .sort()
    .map((name) => modelPricing(name, ratios, groups.filter((g) => servedIn.get(name)!.has(g))));
  return { group: userGroup, group_ratio: groupRatio, models };
}
