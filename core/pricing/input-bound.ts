// What bounds a request's input from above when its bytes do not (images, documents, search results,
// server tools: docs/billing.md, "Reserve"): the model's context window, since the provider refuses a
// prompt longer than that, and the fees of server tools the request enables. Stored as options:
// ModelContextWindow (model → tokens, JSON, merged over the defaults) and WebSearchCallPrice (quota per
// web search before the group ratio). And the output side: ModelMaxOutputTokens (model → tokens, JSON),
// the output bound of a Chat Completions request that sets none (Anthropic requires one; OpenAI's
// default is the model's whole output, which no reservation could cover), reserved and sent to the
// provider as the request's bound.
import { QUOTA_PER_DOLLAR } from './ratios.js';

/** Every current Claude model's window; a model the table does not name gets it too. */
export const DEFAULT_CONTEXT_WINDOW = 200_000;
/** The window of a request whose `anthropic-beta` header asks for `context-1m-…`. */
export const EXTENDED_CONTEXT_WINDOW = 1_000_000;
/** The beta flag's prefix (`context-1m-2025-08-07`); any version of it counts. */
export const CONTEXT_1M_BETA = 'context-1m';
/** Anthropic: $10 per 1,000 web searches. */
export const DEFAULT_WEB_SEARCH_CALL_PRICE = Math.round((10 / 1000) * QUOTA_PER_DOLLAR);
/** Searches reserved for a web_search tool that sets no `max_uses` (the provider sets no cap). */
export const DEFAULT_WEB_SEARCH_MAX_USES = 20;

/**
 * The output bound of a Chat Completions request that sets none, for a model ModelMaxOutputTokens does
 * not name: enough for most answers, and a reservation a small balance still covers (a model's whole
 * output, 64,000 tokens for Claude Sonnet 4.5, would reserve 16× as much).
 */
export const DEFAULT_MAX_OUTPUT_TOKENS = 4096;

export const INPUT_BOUND_OPTION_KEYS = ['ModelContextWindow', 'WebSearchCallPrice', 'ModelMaxOutputTokens'] as const;

export interface InputBounds {
  /** The context window of `model`, the 1M window when `extended` asks for it and it is larger. */
  contextWindow(model: string, extended: boolean): number;
  /** Quota per web search, before the group ratio. */
  webSearchCallPrice: number;
  /** The output bound of a Chat Completions request to `model` that sets none. */
  maxOutputTokens(model: string): number;
}

function parseWindows(raw: string | undefined): Record<string, number> {
  if (!raw) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return {};
  }
  const out: Record<string, number> = {};
  if (parsed && typeof parsed === 'object') {
    for (const [k, v] of Object.entries(parsed)) if (typeof v === 'number' && Number.isInteger(v) && v > 0) out[k] = v;
  }
  return out;
}

/** Builds the lookups from the options table's rows (key → value). */
export function inputBoundsFromOptions(options: ReadonlyMap<string, string>): InputBounds {
  const windows = parseWindows(options.get('ModelContextWindow'));
  const price = Number(options.get('WebSearchCallPrice'));
  const outputs = parseWindows(options.get('ModelMaxOutputTokens'));
  return {
    contextWindow(model, extended) {
      // Own keys only: a model named like an Object.prototype member is a model like any other.
      const w = Object.hasOwn(windows, model) ? windows[model]! : DEFAULT_CONTEXT_WINDOW;
      return extended ? Math.max(w, EXTENDED_CONTEXT_WINDOW) : w;
    },
    webSearchCallPrice: options.has('WebSearchCallPrice') && Number.isFinite(price) && price >= 0 ? price : DEFAULT_WEB_SEARCH_CALL_PRICE,
    maxOutputTokens: (model) => (Object.hasOwn(outputs, model) ? outputs[model]! : DEFAULT_MAX_OUTPUT_TOKENS),
  };
}
