// Price ratios, stored as options (new-api's names: ModelRatio, CompletionRatio, GroupRatio, each a
// JSON object) and falling back to these defaults. Ratio 1 means 1 quota per token; 500000 quota is
// one US dollar, so a model ratio of 1.5 prices input at 3 dollars per million tokens.
import type { LongContextPrice } from './quota-cost.js';

export const QUOTA_PER_DOLLAR = 500_000;

/**
 * Anthropic's input prices (per million tokens: opus 4 and 4.1 $15, opus 4.5 $5, sonnet $3, haiku 4.5
 * $1, haiku 3.5 $0.80, haiku 3 $0.25), by model; a dated id (`claude-opus-4-1-20250805`) or a
 * `-latest` alias is priced as its model (ratioOf).
 */
export const DEFAULT_MODEL_RATIO: Readonly<Record<string, number>> = {
  'claude-3-haiku': 0.125,
  'claude-3-opus': 7.5,
  'claude-3-5-haiku': 0.4,
  'claude-3-5-sonnet': 1.5,
  'claude-3-7-sonnet': 1.5,
  'claude-haiku-4-5': 0.5,
  'claude-sonnet-4': 1.5,
  'claude-sonnet-4-0': 1.5,
  'claude-sonnet-4-5': 1.5,
  'claude-opus-4': 7.5,
  'claude-opus-4-0': 7.5,
  'claude-opus-4-1': 7.5,
  'claude-opus-4-5': 2.5,
};
/** Ratio of a model the table does not name. */
export const FALLBACK_MODEL_RATIO = 1;
/** Anthropic prices output at five times input for every current model. */
export const FALLBACK_COMPLETION_RATIO = 5;
/**
 * Cache prices relative to input, Anthropic's for every current model: reads 0.1×, 5-minute writes
 * 1.25×, 1-hour writes 2×. Options CacheRatio and CreateCacheRatio (new-api's names) and
 * CreateCacheRatio1h (new-api has no 1-hour one) override them per model.
 */
export const FALLBACK_CACHE_READ_RATIO = 0.1;
export const FALLBACK_CACHE_WRITE_RATIO = 1.25;
export const FALLBACK_CACHE_WRITE_1H_RATIO = 2;
export const DEFAULT_GROUP_RATIO: Readonly<Record<string, number>> = { default: 1, vip: 1, svip: 1 };

/**
 * Long-context tiers by model (option LongContextRatio overrides them per model; null removes one):
 * Anthropic prices the Sonnet 4 models' prompts over 200,000 tokens (possible with the context-1m
 * beta) at 2× input and 1.5× output.
 */
export const DEFAULT_LONG_CONTEXT: Readonly<Record<string, LongContextPrice>> = {
  'claude-sonnet-4': { aboveTokens: 200_000, input: 2, output: 1.5 },
  'claude-sonnet-4-0': { aboveTokens: 200_000, input: 2, output: 1.5 },
  'claude-sonnet-4-5': { aboveTokens: 200_000, input: 2, output: 1.5 },
};

export const RATIO_OPTION_KEYS = ['ModelRatio', 'CompletionRatio', 'GroupRatio', 'CacheRatio', 'CreateCacheRatio', 'CreateCacheRatio1h', 'LongContextRatio'] as const;

export interface Ratios {
  model(name: string): number;
  completion(name: string): number;
  cacheRead(name: string): number;
  cacheWrite(name: string): number;
  cacheWrite1h(name: string): number;
  group(name: string): number | undefined;
  groups(): Readonly<Record<string, number>>;
  /** The model's long-context tier, if it has one. */
  longContext(name: string): LongContextPrice | undefined;
}

/** An option's JSON object as a table: each entry `valueOf` takes (undefined: left out). */
function parseTable<T>(raw: string | undefined, valueOf: (v: unknown) => T | undefined): Record<string, T> {
  if (!raw) return {};
  const parsed: unknown = JSON.parse(raw);
  const out: Record<string, T> = {};
  if (parsed && typeof parsed === 'object') {
    for (const [k, v] of Object.entries(parsed)) {
      const value = valueOf(v);
      if (value !== undefined) out[k] = value;
    }
  }
  return out;
}

function parseRatioTable(raw: string | undefined): Record<string, number> {
  return parseTable(raw, (v) => (typeof v === 'number' && v >= 0 ? v : undefined));
}

/** LongContextRatio's text: model → {above_tokens, input, output}, or null for none. */
function parseLongContextTable(raw: string | undefined): Record<string, LongContextPrice | null> {
  return parseTable(raw, (v): LongContextPrice | null | undefined => {
    if (v === null) return null;
    const t = (v && typeof v === 'object' ? v : {}) as { above_tokens?: unknown; input?: unknown; output?: unknown };
    return typeof t.above_tokens === 'number' && typeof t.input === 'number' && typeof t.output === 'number'
      ? { aboveTokens: t.above_tokens, input: t.input, output: t.output }
      : undefined;
  });
}

/** A dated model id's or a `-latest` alias's model: `claude-opus-4-1-20250805` → `claude-opus-4-1`. */
const VERSION_SUFFIX = /-(?:\d{8}|latest)$/;

/**
 * The table's ratio for a model: its own name's, else (a dated id or an alias) its model's. Without
 * the second step a dated id the table names only undated (the ids providers list and clients send)
 * was priced at the fallback ratio 1: claude-opus-4-1-20250805 at 1 instead of 7.5.
 */
function ratioOf<T>(table: Readonly<Record<string, T>>, name: string): T | undefined {
  // Own keys only: a model named `constructor` or `toString` is not priced at Object.prototype's.
  if (Object.hasOwn(table, name)) return table[name];
  const base = name.replace(VERSION_SUFFIX, '');
  return base !== name && Object.hasOwn(table, base) ? table[base] : undefined;
}

/** Names looked up at most this many kept per table: the models a gateway serves are far fewer. */
const LOOKUPS_KEPT = 1024;

/** ratioOf, each name's answer kept: the relay asks for every ratio of a request's model on the hot path. */
function lookupIn<T>(table: Readonly<Record<string, T>>): (name: string) => T | undefined {
  const known = new Map<string, T | undefined>();
  return (name) => {
    if (known.has(name)) return known.get(name);
    const value = ratioOf(table, name);
    if (known.size >= LOOKUPS_KEPT) known.clear();
    known.set(name, value);
    return value;
  };
}

/** Builds the lookups from the options table's rows (key → value). */
export function ratiosFromOptions(options: ReadonlyMap<string, string>): Ratios {
  const model = { ...DEFAULT_MODEL_RATIO, ...parseRatioTable(options.get('ModelRatio')) };
  const completion = parseRatioTable(options.get('CompletionRatio'));
  const cacheRead = parseRatioTable(options.get('CacheRatio'));
  const cacheWrite = parseRatioTable(options.get('CreateCacheRatio'));
  const cacheWrite1h = parseRatioTable(options.get('CreateCacheRatio1h'));
  const group = options.has('GroupRatio') ? parseRatioTable(options.get('GroupRatio')) : { ...DEFAULT_GROUP_RATIO };
  const longContext = { ...DEFAULT_LONG_CONTEXT, ...parseLongContextTable(options.get('LongContextRatio')) };
  const modelOf = lookupIn(model);
  const completionOf = lookupIn(completion);
  const cacheReadOf = lookupIn(cacheRead);
  const cacheWriteOf = lookupIn(cacheWrite);
  const cacheWrite1hOf = lookupIn(cacheWrite1h);
  const longContextOf = lookupIn(longContext);
  return {
    model: (name) => modelOf(name) ?? FALLBACK_MODEL_RATIO,
    completion: (name) => completionOf(name) ?? FALLBACK_COMPLETION_RATIO,
    cacheRead: (name) => cacheReadOf(name) ?? FALLBACK_CACHE_READ_RATIO,
    cacheWrite: (name) => cacheWriteOf(name) ?? FALLBACK_CACHE_WRITE_RATIO,
    cacheWrite1h: (name) => cacheWrite1hOf(name) ?? FALLBACK_CACHE_WRITE_1H_RATIO,
    group: (name) => (Object.hasOwn(group, name) ? group[name] : undefined),
    groups: () => group,
    longContext: (name) => longContextOf(name) ?? undefined,
  };
}
