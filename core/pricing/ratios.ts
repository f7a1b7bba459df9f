// Price ratios, stored as options (new-api's names: ModelRatio, CompletionRatio, GroupRatio, each a
// JSON object) and falling back to these defaults. Ratio 1 means 1 quota per token; 500000 quota is
// one US dollar, so a model ratio of 1.5 prices input at 3 dollars per million tokens.
export const QUOTA_PER_DOLLAR = 500_000;

export const DEFAULT_MODEL_RATIO: Readonly<Record<string, number>> = {
  'claude-3-haiku-20240307': 0.125,
  'claude-3-5-haiku-20241022': 0.5,
  'claude-haiku-4-5': 0.5,
  'claude-3-5-sonnet-20241022': 1.5,
  'claude-3-7-sonnet-20250219': 1.5,
  'claude-sonnet-4-20250514': 1.5,
  'claude-sonnet-4-5': 1.5,
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

export const RATIO_OPTION_KEYS = ['ModelRatio', 'CompletionRatio', 'GroupRatio', 'CacheRatio', 'CreateCacheRatio', 'CreateCacheRatio1h'] as const;

export interface Ratios {
  model(name: string): number;
  completion(name: string): number;
  cacheRead(name: string): number;
  cacheWrite(name: string): number;
  cacheWrite1h(name: string): number;
  group(name: string): number | undefined;
  groups(): Readonly<Record<string, number>>;
}

function parseRatioTable(raw: string | undefined): Record<string, number> {
  if (!raw) return {};
  const parsed: unknown = JSON.parse(raw);
  const out: Record<string, number> = {};
  if (parsed && typeof parsed === 'object') {
    for (const [k, v] of Object.entries(parsed)) if (typeof v === 'number' && v >= 0) out[k] = v;
  }
  return out;
}

/** Builds the lookups from the options table's rows (key → value). */
export function ratiosFromOptions(options: ReadonlyMap<string, string>): Ratios {
  const model = { ...DEFAULT_MODEL_RATIO, ...parseRatioTable(options.get('ModelRatio')) };
  const completion = parseRatioTable(options.get('CompletionRatio'));
  const cacheRead = parseRatioTable(options.get('CacheRatio'));
  const cacheWrite = parseRatioTable(options.get('CreateCacheRatio'));
  const cacheWrite1h = parseRatioTable(options.get('CreateCacheRatio1h'));
  const group = options.has('GroupRatio') ? parseRatioTable(options.get('GroupRatio')) : { ...DEFAULT_GROUP_RATIO };
  return {
    model: (name) => model[name] ?? FALLBACK_MODEL_RATIO,
    completion: (name) => completion[name] ?? FALLBACK_COMPLETION_RATIO,
    cacheRead: (name) => cacheRead[name] ?? FALLBACK_CACHE_READ_RATIO,
    cacheWrite: (name) => cacheWrite[name] ?? FALLBACK_CACHE_WRITE_RATIO,
    cacheWrite1h: (name) => cacheWrite1h[name] ?? FALLBACK_CACHE_WRITE_1H_RATIO,
    group: (name) => group[name],
    groups: () => group,
  };
}
