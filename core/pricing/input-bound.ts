// What bounds a request's input from above when its bytes do not (images, documents, search results,
// server tools: docs/billing.md, "Reserve"): the model's context window, since the provider refuses a
// prompt longer than that, and the fees of server tools the request enables. A text request's bytes
// bound it already; a window only tightens that, so only a window known to be the model's (the
// option's, or a built-in one) may: a guessed one below the real window (200,000 for gpt-4.1, whose
// window is 1,047,576) would reserve less than the provider bills. Stored as options:
// ModelContextWindow (model → tokens, JSON, merged over the defaults) and WebSearchCallPrice (quota per
// web search before the group ratio), ModelImageTokens (model → tokens per image, JSON, over the
// built-in bounds of the Claude models). And the output side: ModelMaxOutputTokens (model → tokens, JSON),
// the output bound of a Chat Completions request that sets none (Anthropic requires one; OpenAI's
// default is the model's whole output, which no reservation could cover), reserved and sent to the
// provider as the request's bound.
import { QUOTA_PER_DOLLAR } from './ratios.js';

/**
 * What a request the bytes do not bound reserves for a model whose window is not known (the Claude
 * models before 4.6 take this much too): an operator whose model takes more sets ModelContextWindow.
 */
export const DEFAULT_CONTEXT_WINDOW = 200_000;
/** Claude Opus 4.6 and Sonnet 4.6, and every Claude model since: 1M tokens without a beta header. */
export const CLAUDE_CONTEXT_WINDOW = 1_000_000;

/**
 * What may stand before a Claude model's name: vendor paths (`anthropic/`, `openrouter/anthropic/`,
 * LiteLLM's `bedrock/`), then Amazon Bedrock's `anthropic.` with its region's prefix or none
 * (`us.anthropic.`, `global.`, `us-gov.`). Each path segment ends at its slash: no backtracking.
 */
const CLAUDE_PREFIX = String.raw`^(?:[\w.-]+\/)*(?:(?:[a-z-]+\.)?anthropic\.)?claude-`;
/**
 * What may follow a model's version: nothing, a date (`-20250514`, Vertex's `@20250514`, then
 * Bedrock's `-v1:0`), Bedrock's undated `-v1` (`anthropic.claude-opus-4-6-v1`), `-latest`, the
 * `-thinking` of new-api's aliases, a bracketed tag (`claude-sonnet-4-6[1m]`), an OpenRouter or
 * Ollama `:tag`.
 */
const CLAUDE_SUFFIX = String.raw`(?:$|[-@]\d{8}|-v\d|-latest|-thinking|\[|:)`;
/** The model families of the Claude 4 generation, named before or after the version (`claude-4.5-sonnet`). */
const FAMILY = '(?:opus|sonnet|haiku)';

/**
 * The Claude 3 models and the Claude 4 models of the given minor versions (`claude-opus-4`, `-4-0`,
 * `-4-1`, …, dated or `-latest`), with or without a vendor prefix, in Bedrock's, Vertex's and
 * OpenRouter's (`claude-sonnet-4.5`, `claude-3.5-sonnet`) and aggregators' (`claude-4.5-sonnet`,
 * `claude-35-sonnet`) forms too: the windows' and the images' tables draw the line between model
 * generations in the same place.
 */
function claudeModels(minors: string): RegExp {
  const version = String.raw`4(?:[.-][${minors}])?`;
  return new RegExp(String.raw`${CLAUDE_PREFIX}(?:3(?:\d?[.-]|$)|(?:${FAMILY}-${version}|${version}-${FAMILY})${CLAUDE_SUFFIX})`, 'i');
}
/**
 * Every Claude model of the generations that read images, by its name's start: not Claude 1 and 2
 * (`claude-2.1`, `claude-instant-1.2`, Bedrock's `anthropic.claude-v2:1`), retired, without vision,
 * and with windows of 100,000 and 200,000, which the rows of later models would overstate.
 */
const CLAUDE_ANY = new RegExp(String.raw`${CLAUDE_PREFIX}(?![12](?:[.-]|$)|instant|v\d)`, 'i');

// Built-in windows, by family: the name, its dated or suffixed names (`gpt-4.1-mini-2025-04-14`), with
// or without a vendor prefix. Each is the largest window of its family (o1-mini's is 128,000, o1's
// 200,000; gpt-5-chat-latest's 128,000), since one too small would under-reserve, and an unlisted
// family (gpt-5.1, a future o5) is bounded by its bytes rather than by a guess.
const BUILT_IN_WINDOWS: ReadonlyArray<readonly [RegExp, number]> = [
  [/^(?:[\w.-]+\/)?gpt-4o(?:-|$)/i, 128_000],
  [/^(?:[\w.-]+\/)?gpt-4\.1(?:-|$)/i, 1_047_576],
  [/^(?:[\w.-]+\/)?o[134](?:-|$)/i, 200_000],
  [/^(?:[\w.-]+\/)?gpt-5(?:-|$)/i, 400_000],
  // The Claude 3 models and the 4 models before 4.6 (`claude-opus-4`, `-4-0`, `-4-1`, `-4-5`, dated or
  // `-latest`): 200,000 (the Sonnet 4 models 1M with the context-1m beta, below).
  [claudeModels('015'), DEFAULT_CONTEXT_WINDOW],
  // Every other Claude model: 4.6 and later take 1M tokens at their standard price. 200,000 here
  // capped a 750,000-token prompt to claude-sonnet-4-6 at 200,000 billed, and a PDF to it reserved a
  // fifth of its cost.
  [CLAUDE_ANY, CLAUDE_CONTEXT_WINDOW],
];

/** The value of the first row whose pattern names `model` (the tables' rows go from narrow to broad). */
function firstMatch<T>(rows: ReadonlyArray<readonly [RegExp, T]>, model: string): T | undefined {
  for (let i = 0; i < rows.length; i++) if (rows[i]![0].test(model)) return rows[i]![1];
  return undefined;
}

/**
 * How a Claude model sizes an image (Anthropic's vision guide): an image larger than the model's
 * native resolution is scaled down, its aspect kept, to a long edge of at most `longEdge` px and at
 * most `tokens` visual tokens; it is then padded to a multiple of 28 px and costs one token per
 * 28 × 28 px patch. 1,568 px and 1,568 tokens on the Claude 3 and 4 models up to Opus and Sonnet 4.6
 * and Haiku 4.5; 2,576 px and 4,784 tokens on Opus 4.7 and later.
 */
export interface ImageScaling {
  longEdge: number;
  tokens: number;
}
/** The side of the square of pixels that is one visual token. */
export const IMAGE_PATCH_PX = 28;
const CLAUDE_4_6_SCALING: ImageScaling = { longEdge: 1_568, tokens: 1_568 };
const CLAUDE_OPUS_4_7_SCALING: ImageScaling = { longEdge: 2_576, tokens: 4_784 };
const CLAUDE_OPUS_4_7 = new RegExp(String.raw`${CLAUDE_PREFIX}(?:opus-4[.-]7|4[.-]7-opus)${CLAUDE_SUFFIX}`, 'i');

/**
 * What an image reserves on a Claude model (`bound`): a tenth above the most an earlier version of
 * the guide gave (width × height / 750 tokens, ~1,600 up to 4.6, 5,000 on Opus 4.7), so above the
 * patch caps too (1,568, 4,784). A later Claude model whose largest size is not published is bounded
 * by the largest image the API takes, 8,000 × 8,000 px (81,796 patches, 85,334 by the earlier
 * formula): still a twelfth of a 1M window, where the window made one screenshot to Claude Opus 4.7
 * reserve 2,500,200 quota at max_tokens 16 (now 14,500). An estimate from the provider's
 * documentation, not a fact of the bytes: it sizes the reservation, and what the provider states is
 * billed up to the window (messages-handler.ts). A later Claude model whose sizing is not published
 * yet is taken to size as Opus 4.7, the latest that is (`scaling`).
 */
const imageBound = (tokens: number) => Math.ceil((tokens * 11) / 10);
/** The earlier guide's figures: an image's most up to 4.6 and on Opus 4.7, and its pixels per token. */
const EARLIER_GUIDE_4_6_TOKENS = 1_600;
const EARLIER_GUIDE_OPUS_4_7_TOKENS = 5_000;
const EARLIER_GUIDE_PIXELS_PER_TOKEN = 750;
const CLAUDE_IMAGES: ReadonlyArray<readonly [RegExp, { scaling: ImageScaling; bound: number }]> = [
  [claudeModels('0156'), { scaling: CLAUDE_4_6_SCALING, bound: imageBound(EARLIER_GUIDE_4_6_TOKENS) }],
  [CLAUDE_OPUS_4_7, { scaling: CLAUDE_OPUS_4_7_SCALING, bound: imageBound(EARLIER_GUIDE_OPUS_4_7_TOKENS) }],
  [CLAUDE_ANY, { scaling: CLAUDE_OPUS_4_7_SCALING, bound: imageBound(Math.ceil((8_000 * 8_000) / EARLIER_GUIDE_PIXELS_PER_TOKEN)) }],
];

/**
 * How `model` sizes an image, as far as its provider documents it; undefined for a model that is
 * not Claude (OpenAI bills an image by tiles or patches, times a multiplier of the model's): what a
 * prompt the provider stated no usage for is billed an image (its `tokens`), not a bound (the
 * reservation's is imageTokenBound's, CLAUDE_IMAGES' `bound`).
 */
export function imageScaling(model: string): ImageScaling | undefined {
  return firstMatch(CLAUDE_IMAGES, model)?.scaling;
}

/** The window of a request whose `anthropic-beta` header asks for `context-1m-…`. */
export const EXTENDED_CONTEXT_WINDOW = 1_000_000;
/** A model name's tag for its 1M window, as Claude Code writes it (`claude-sonnet-4-5[1m]`). */
const ONE_MILLION_TAG = /\[1m\]$/i;
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

export const INPUT_BOUND_OPTION_KEYS = ['ModelContextWindow', 'WebSearchCallPrice', 'ModelMaxOutputTokens', 'ModelImageTokens'] as const;

export interface InputBounds {
  /**
   * The input bound of a request its bytes do not bound: the context window of `model` (the default
   * when not known), the 1M window when `extended` asks for it and it is larger.
   */
  contextWindow(model: string, extended: boolean): number;
  /** What caps a text request's byte bound: the window as contextWindow, Infinity when not known. */
  textWindow(model: string, extended: boolean): number;
  /** Quota per web search, before the group ratio. */
  webSearchCallPrice: number;
  /** The output bound of a Chat Completions request to `model` that sets none. */
  maxOutputTokens(model: string): number;
  /**
   * The most one image costs on `model` in input tokens (the option's, or a Claude model's built-in
   * bound), undefined when not known: OpenAI's models bill an image by tiles or patches times a
   * multiplier of the model's (gpt-4o-mini up to ~25,500 tokens), so their media keep the window.
   */
  imageTokenBound(model: string): number | undefined;
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
  const images = parseWindows(options.get('ModelImageTokens'));
  // Own keys only: a model named like an Object.prototype member is a model like any other.
  const known = (model: string) => (Object.hasOwn(windows, model) ? windows[model]! : firstMatch(BUILT_IN_WINDOWS, model));
  // The context-1m beta raises a window to at least 1M, never lowers one; so does a name tagged `[1m]`
  // (Claude Code's `claude-sonnet-4-5[1m]`), which a channel may send to a gateway that reads it as the beta.
  const widen = (w: number, model: string, extended: boolean) => (extended || ONE_MILLION_TAG.test(model) ? Math.max(w, EXTENDED_CONTEXT_WINDOW) : w);
  return {
    contextWindow: (model, extended) => widen(known(model) ?? DEFAULT_CONTEXT_WINDOW, model, extended),
    textWindow(model, extended) {
      const w = known(model);
      return w === undefined ? Infinity : widen(w, model, extended);
    },
    webSearchCallPrice: options.has('WebSearchCallPrice') && Number.isFinite(price) && price >= 0 ? price : DEFAULT_WEB_SEARCH_CALL_PRICE,
    maxOutputTokens: (model) => (Object.hasOwn(outputs, model) ? outputs[model]! : DEFAULT_MAX_OUTPUT_TOKENS),
    imageTokenBound: (model) => (Object.hasOwn(images, model) ? images[model]! : firstMatch(CLAUDE_IMAGES, model)?.bound),
  };
}
