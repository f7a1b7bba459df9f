// Price ratios, stored as options (new-api's names: ModelRatio, CompletionRatio, GroupRatio, each a
// JSON object) and falling back to these defaults. Ratio 1 means 1 quota per token; 500000 quota is
// one US dollar, so a model ratio of 1.5 prices input at 3 dollars per million tokens.
import type { LongContextPrice } from './quota-cost.js';

export const QUOTA_PER_DOLLAR = 500_000;

/**
 * Input prices by model: Anthropic's (per million tokens: opus 4 and 4.1 $15, opus 4.5 to 5 $5, opus
 * 5.5 $4, sonnet 3.5 to 4.6 $3, sonnet 5 and 5.5 $2, haiku 4.5 $1, haiku 3.5 $0.80, haiku 3 $0.25,
 * haiku 5.5 $0.10, fable and mythos 5 and 5.1 $10) and OpenAI's standard tier (gpt-4o $2.50, gpt-4o-mini
 * $0.15, gpt-4.1 $2, o1 $15, o3 $2, gpt-5 $1.25, ...). A dated id (`claude-opus-4-1-20250805`,
 * `gpt-4o-mini-2024-07-18`) or a `-latest` alias is priced as its model (ratioOf) unless the table
 * names it (gpt-4o-2024-05-13 kept its launch price). A model in neither this table nor the ModelRatio
 * option is refused (see `priced`).
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
  // Anthropic's models since Opus 4.6 (platform.claude.com pricing and model pages, read 2026-11-30):
  // Opus 4.6-4.8 and 5 $5, Sonnet 4.6 $3, Sonnet 5 and 5.5 $2 (Sonnet 5's increase to $3 was called
  // off), Opus 5.5 $4, Fable and Mythos 5 and 5.1 $10, Haiku 5.5 $0.10 (prompts up to 100,000 tokens;
  // above, 5× everything: DEFAULT_LONG_CONTEXT). Output is 5× input for all of them.
  'claude-opus-4-6': 2.5,
  'claude-opus-4-7': 2.5,
  'claude-opus-4-8': 2.5,
  'claude-opus-5': 2.5,
  'claude-opus-5-5': 2,
  'claude-sonnet-4-6': 1.5,
  'claude-sonnet-5': 1,
  'claude-sonnet-5-5': 1,
  'claude-haiku-5-5': 0.05,
  'claude-fable-5': 5,
  'claude-fable-5-1': 5,
  'claude-mythos-5': 5,
  'claude-mythos-5-1': 5,
  'gpt-3.5-turbo': 0.25,
  'gpt-4-turbo': 5,
  'gpt-4o': 1.25,
  'gpt-4o-2024-05-13': 2.5,
  'gpt-4o-mini': 0.075,
  'gpt-4.1': 1,
  'gpt-4.1-mini': 0.2,
  'gpt-4.1-nano': 0.05,
  'o1': 7.5,
  'o1-mini': 0.55,
  'o3': 1,
  'o3-mini': 0.55,
  'o4-mini': 0.55,
  'gpt-5': 0.625,
  'gpt-5-mini': 0.125,
  'gpt-5-nano': 0.025,
};
/**
 * The ratio of a model no table names, served only with the option SelfUseModeEnabled: new-api's
 * (37.5, $75 per million input tokens), dear enough that a forgotten price costs the account holder,
 * not the operator.
 */
export const UNSET_MODEL_RATIO = 37.5;
/** Anthropic prices output at five times input for every current model. */
export const FALLBACK_COMPLETION_RATIO = 5;
/** Output relative to input where it is not five times: OpenAI's models (option CompletionRatio overrides). */
export const DEFAULT_COMPLETION_RATIO: Readonly<Record<string, number>> = {
  'gpt-3.5-turbo': 3,
  'gpt-4-turbo': 3,
  'gpt-4o': 4,
  'gpt-4o-2024-05-13': 3,
  'gpt-4o-mini': 4,
  'gpt-4.1': 4,
  'gpt-4.1-mini': 4,
  'gpt-4.1-nano': 4,
  'o1': 4,
  'o1-mini': 4,
  'o3': 4,
  'o3-mini': 4,
  'o4-mini': 4,
  'gpt-5': 8,
  'gpt-5-mini': 8,
  'gpt-5-nano': 8,
};
/**
 * Cache prices relative to input, Anthropic's for every current model: reads 0.1×, 5-minute writes
 * 1.25×, 1-hour writes 2×. Options CacheRatio and CreateCacheRatio (new-api's names) and
 * CreateCacheRatio1h (new-api has no 1-hour one) override them per model.
 */
export const FALLBACK_CACHE_READ_RATIO = 0.1;
export const FALLBACK_CACHE_WRITE_RATIO = 1.25;
export const FALLBACK_CACHE_WRITE_1H_RATIO = 2;
/**
 * Cache reads where they are not 0.1× input: OpenAI's cached input (prompt_tokens_details.cached_tokens)
 * is half price on gpt-4o and the o1/o3-mini models and a quarter on gpt-4.1, o3 and o4-mini (gpt-5 is
 * 0.1×, the fallback). OpenAI charges nothing extra for writing its cache, so its models' writes never occur.
 * Anthropic's cache hits are 0.1× input but on Claude Opus 5.5 ($0.20 for $4 input: 0.05×) and Claude
 * Fable and Mythos 5.1 ($0.25 for $10: 0.025×); their cache writes are the usual 1.25× and 2×.
 */
export const DEFAULT_CACHE_READ_RATIO: Readonly<Record<string, number>> = {
  'claude-opus-5-5': 0.05,
  'claude-fable-5-1': 0.025,
  'claude-mythos-5-1': 0.025,
  'gpt-4o': 0.5,
  'gpt-4o-mini': 0.5,
  'gpt-4.1': 0.25,
  'gpt-4.1-mini': 0.25,
  'gpt-4.1-nano': 0.25,
  'o1': 0.5,
  'o1-mini': 0.5,
  'o3': 0.25,
  'o3-mini': 0.5,
  'o4-mini': 0.25,
};
/**
 * Models whose provider writes the prompt cache without a breakpoint, and bills the writes: OpenAI's
 * from GPT-5.6 on ("cache writes cost 1.25× the uncached input token rate", reported in
 * prompt_tokens_details.cache_write_tokens; developers.openai.com, "Prompt caching"). A request to one
 * is reserved and billed its stated writes at the model's write ratio (CreateCacheRatio, 1.25 by
 * default) as a request with a breakpoint is; before, they were billed as plain input at 1×.
 */
const UNMARKED_CACHE_WRITERS = /^(?:[\w.-]+\/)?gpt-(?:5\.(?:[6-9]|[1-9]\d+)|[6-9](?:\.\d+)?)(?:-|$)/i;

export function writesCacheUnmarked(model: string): boolean {
  return UNMARKED_CACHE_WRITERS.test(model);
}

export const DEFAULT_GROUP_RATIO: Readonly<Record<string, number>> = { default: 1, vip: 1, svip: 1 };

/**
 * Long-context tiers by model (option LongContextRatio overrides them per model; null removes one):
 * Anthropic prices the Sonnet 4 models' prompts over 200,000 tokens (possible with the context-1m
 * beta) at 2× input and 1.5× output, and Claude Haiku 5.5's prompts over 100,000 tokens (input, cache
 * reads and cache writes counted) at 5× every price: $0.50 input, $0.625 / $1 cache writes, $0.05 cache
 * reads, $2.50 output against $0.10, $0.125 / $0.20, $0.01 and $0.50 up to 100,000. The models since
 * Opus 4.6 other than Haiku 5.5 bill their whole 1M window at one price.
 */
export const DEFAULT_LONG_CONTEXT: Readonly<Record<string, LongContextPrice>> = {
  'claude-sonnet-4': { aboveTokens: 200_000, input: 2, output: 1.5 },
  'claude-sonnet-4-0': { aboveTokens: 200_000, input: 2, output: 1.5 },
  'claude-sonnet-4-5': { aboveTokens: 200_000, input: 2, output: 1.5 },
  'claude-haiku-5-5': { aboveTokens: 100_000, input: 5, output: 5 },
};

export const RATIO_OPTION_KEYS = ['ModelRatio', 'CompletionRatio', 'GroupRatio', 'CacheRatio', 'CreateCacheRatio', 'CreateCacheRatio1h', 'LongContextRatio', 'SelfUseModeEnabled'] as const;

export interface Ratios {
  /**
   * Whether a request for the model may be served: the model has a ratio (built in or ModelRatio), or
   * the option SelfUseModeEnabled serves every model, those without one at UNSET_MODEL_RATIO. As in
   * new-api, a model without a price is refused rather than served at a guess: a provider's newest
   * model would otherwise run at whatever the guess is, below its cost.
   */
  priced(name: string): boolean;
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

/**
 * A dated model id's or a `-latest` alias's model: `claude-opus-4-1-20250805` → `claude-opus-4-1`,
 * `gpt-4o-mini-2024-07-18` → `gpt-4o-mini`.
 */
const VERSION_SUFFIX = /-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest)$/;

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
  const completion = { ...DEFAULT_COMPLETION_RATIO, ...parseRatioTable(options.get('CompletionRatio')) };
  const cacheRead = { ...DEFAULT_CACHE_READ_RATIO, ...parseRatioTable(options.get('CacheRatio')) };
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
  const selfUse = options.get('SelfUseModeEnabled') === 'true';
  return {
    priced: (name) => selfUse || modelOf(name) !== undefined,
    model: (name) => modelOf(name) ?? UNSET_MODEL_RATIO,
    completion: (name) => completionOf(name) ?? FALLBACK_COMPLETION_RATIO,
    cacheRead: (name) => cacheReadOf(name) ?? FALLBACK_CACHE_READ_RATIO,
    cacheWrite: (name) => cacheWriteOf(name) ?? FALLBACK_CACHE_WRITE_RATIO,
    cacheWrite1h: (name) => cacheWrite1hOf(name) ?? FALLBACK_CACHE_WRITE_1H_RATIO,
    group: (name) => (Object.hasOwn(group, name) ? group[name] : undefined),
    groups: () => group,
    longContext: (name) => longContextOf(name) ?? undefined,
  };
}
