// GET /v1/models and GET /v1/models/{model_id} in Anthropic's shape, for the models a key may use:
// those some channel serves for the key's group (ChannelRegistry.modelsOf), narrowed to the key's
// model whitelist when it has one. Pure functions: the relay passes the sets in.
//
// Order: newest first (by created_at, then id), as Anthropic lists. Paging as Anthropic's API:
//   limit     1..1000, default 20
//   after_id  the page that starts right after this id (has_more: more items after the page)
//   before_id the page that ends right before this id (has_more: more items before the page)
// A cursor id that is not in the list (a model gone between two pages) gives an empty page.

export interface ModelInfo {
  type: 'model';
  id: string;
  display_name: string;
  created_at: string;
}

export interface ModelsPage {
  data: ModelInfo[];
  has_more: boolean;
  first_id: string | null;
  last_id: string | null;
}

export interface ListModelsQuery {
  limit: number;
  afterId: string | null;
  beforeId: string | null;
}

/** Names and release dates of known models; other ids get their id as name and a date from the id. */
const KNOWN: Readonly<Record<string, { name: string; created: string }>> = {
  'claude-haiku-5-5': { name: 'Claude Haiku 5.5', created: '2026-10-07T00:00:00Z' },
  'claude-sonnet-5-5': { name: 'Claude Sonnet 5.5', created: '2026-09-28T00:00:00Z' },
  'claude-opus-5-5': { name: 'Claude Opus 5.5', created: '2026-09-22T00:00:00Z' },
  'claude-fable-5-1': { name: 'Claude Fable 5.1', created: '2026-09-01T00:00:00Z' },
  'claude-mythos-5-1': { name: 'Claude Mythos 5.1', created: '2026-09-01T00:00:00Z' },
  'claude-opus-5': { name: 'Claude Opus 5', created: '2026-07-24T00:00:00Z' },
  'claude-sonnet-5': { name: 'Claude Sonnet 5', created: '2026-06-30T00:00:00Z' },
  'claude-fable-5': { name: 'Claude Fable 5', created: '2026-06-09T00:00:00Z' },
  'claude-mythos-5': { name: 'Claude Mythos 5', created: '2026-06-09T00:00:00Z' },
  'claude-opus-4-8': { name: 'Claude Opus 4.8', created: '2026-05-28T00:00:00Z' },
  'claude-opus-4-7': { name: 'Claude Opus 4.7', created: '2026-04-16T00:00:00Z' },
  'claude-sonnet-4-6': { name: 'Claude Sonnet 4.6', created: '2026-02-17T00:00:00Z' },
  'claude-opus-4-6': { name: 'Claude Opus 4.6', created: '2026-02-05T00:00:00Z' },
  'claude-opus-4-5-20251101': { name: 'Claude Opus 4.5', created: '2025-11-01T00:00:00Z' },
  'claude-haiku-4-5-20251001': { name: 'Claude Haiku 4.5', created: '2025-10-01T00:00:00Z' },
  'claude-sonnet-4-5-20250929': { name: 'Claude Sonnet 4.5', created: '2025-09-29T00:00:00Z' },
  'claude-opus-4-1-20250805': { name: 'Claude Opus 4.1', created: '2025-08-05T00:00:00Z' },
  'claude-opus-4-20250514': { name: 'Claude Opus 4', created: '2025-05-22T00:00:00Z' },
  'claude-sonnet-4-20250514': { name: 'Claude Sonnet 4', created: '2025-05-22T00:00:00Z' },
  'claude-3-7-sonnet-20250219': { name: 'Claude Sonnet 3.7', created: '2025-02-24T00:00:00Z' },
  'claude-3-5-haiku-20241022': { name: 'Claude Haiku 3.5', created: '2024-10-22T00:00:00Z' },
  'claude-3-haiku-20240307': { name: 'Claude Haiku 3', created: '2024-03-07T00:00:00Z' },
};

/**
 * Anthropic's aliases, which point at a snapshot above: a channel serving `claude-haiku-4-5` lists it
 * with its snapshot's name and date (it was listed by its id, dated 1970).
 */
const ALIASES: Readonly<Record<string, string>> = {
  'claude-opus-4-5': 'claude-opus-4-5-20251101',
  'claude-haiku-4-5': 'claude-haiku-4-5-20251001',
  'claude-sonnet-4-5': 'claude-sonnet-4-5-20250929',
  'claude-opus-4-1': 'claude-opus-4-1-20250805',
  'claude-opus-4-0': 'claude-opus-4-20250514',
  'claude-sonnet-4-0': 'claude-sonnet-4-20250514',
  'claude-3-7-sonnet-latest': 'claude-3-7-sonnet-20250219',
  'claude-3-5-haiku-latest': 'claude-3-5-haiku-20241022',
};

const EPOCH = '1970-01-01T00:00:00Z';

export function modelInfo(id: string): ModelInfo {
  // Own keys only: `toString` or `__proto__` as a channel's model id named Object.prototype's members.
  const snapshot = Object.hasOwn(ALIASES, id) ? ALIASES[id]! : id;
  const known = Object.hasOwn(KNOWN, snapshot) ? KNOWN[snapshot] : undefined;
  if (known) return { type: 'model', id, display_name: known.name, created_at: known.created };
  const date = /-(20\d\d)(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])$/.exec(id);
  return { type: 'model', id, display_name: id, created_at: date ? `${date[1]}-${date[2]}-${date[3]}T00:00:00Z` : EPOCH };
}

/**
 * Models a key may use: served for its group(s), in its whitelist when model limits are on, and
 * priced: one without a price is refused when asked for (model_not_priced), so listing it would
 * offer what cannot be had.
 */
export function allowedModels(served: Iterable<string>, modelLimits: ReadonlySet<string> | null, priced: (model: string) => boolean = () => true): Set<string> {
  const out = new Set<string>();
  for (const id of served) if ((modelLimits === null || modelLimits.has(id)) && priced(id)) out.add(id);
  return out;
}

/** Reads limit, after_id and before_id (e.g. `(n) => req.getQuery(n)`); a string is the error message. */
export function parseListModelsQuery(get: (name: string) => string | undefined | null): ListModelsQuery | string {
  const limitRaw = get('limit');
  let limit = 20;
  if (limitRaw !== undefined && limitRaw !== null && limitRaw !== '') {
    // A negative number is an integer out of range, not "not an integer".
    if (!/^[-+]?\d+$/.test(limitRaw)) return 'limit: Input should be a valid integer';
    limit = Number(limitRaw);
    if (limit < 1 || limit > 1000) return 'limit: Input should be between 1 and 1000';
  }
  const afterId = get('after_id') || null;
  const beforeId = get('before_id') || null;
  if (afterId && beforeId) return 'after_id and before_id cannot both be set';
  return { limit, afterId, beforeId };
}

function compare(a: ModelInfo, b: ModelInfo): number {
  if (a.created_at !== b.created_at) return a.created_at < b.created_at ? 1 : -1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** One page of the list of `ids` (any order; duplicates count once). */
export function listModels(ids: Iterable<string>, query: ListModelsQuery): ModelsPage {
  const all = [...new Set(ids)].map(modelInfo).sort(compare);
  let data: ModelInfo[];
  let hasMore: boolean;
  if (query.beforeId !== null) {
    const i = all.findIndex((m) => m.id === query.beforeId);
    const from = Math.max(0, i - query.limit);
    data = i < 0 ? [] : all.slice(from, i);
    hasMore = i > 0 && from > 0;
  } else if (query.afterId !== null) {
    const i = all.findIndex((m) => m.id === query.afterId);
    data = i < 0 ? [] : all.slice(i + 1, i + 1 + query.limit);
    hasMore = i >= 0 && i + 1 + query.limit < all.length;
  } else {
    data = all.slice(0, query.limit);
    hasMore = query.limit < all.length;
  }
  return { data, has_more: hasMore, first_id: data[0]?.id ?? null, last_id: data[data.length - 1]?.id ?? null };
}

/** GET /v1/models/{model_id}: the model when the key may use it, else null (404 not_found_error). */
export function retrieveModel(allowed: ReadonlySet<string>, id: string): ModelInfo | null {
  return allowed.has(id) ? modelInfo(id) : null;
}

/** A model in OpenAI's shape (GET /v1/models for OpenAI clients): created in Unix seconds. */
export interface OpenAIModel {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
}

export function openaiModel(id: string): OpenAIModel {
  const m = modelInfo(id);
  return { id, object: 'model', created: Math.floor(Date.parse(m.created_at) / 1000), owned_by: id.startsWith('claude') ? 'anthropic' : 'system' };
}

/** OpenAI's list: every model the key may use, newest first, unpaged (OpenAI's endpoint has no paging). */
export function openaiModelList(ids: Iterable<string>): { object: 'list'; data: OpenAIModel[] } {
  return { object: 'list', data: [...new Set(ids)].map(modelInfo).sort(compare).map((m) => openaiModel(m.id)) };
}
