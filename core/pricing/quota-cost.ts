// The price of a request in quota, the one formula the relay settles with and the bench's audit checks:
//   (input + cache_read × cache_read_ratio + cache_write_5m × cache_write_ratio
//    + cache_write_1h × cache_write_1h_ratio + output × completion_ratio) × model_ratio × group_ratio,
// rounded to the nearest unit and at least 1 when above 0, plus the server-tool fees: round(web_search_requests × web_search_price
// × group_ratio), rounded apart as the reservation rounds them (messages-handler.ts), so that a request
// making no more searches than it reserved never costs more than its reservation.
// The cache ratios are relative to the input price, as Anthropic quotes
// them (0.1, 1.25 and 2 by default): `input` is Anthropic's input_tokens, which counts neither.
// An answer a provider served at a cheaper service tier (OpenAI's `flex`) has its token terms times
// the channel's ratio for that tier (`tierRatio`, at most 1: the reservation at the standard price
// stays an upper bound); the fees are not tiered.
// A model with a long-context tier (Anthropic's Sonnet 4 models with the 1M context window: input 2×,
// output 1.5× once the prompt, cache tokens included, passes 200,000 tokens) has every input-side
// term multiplied by its input factor and the output term by its output factor above the threshold.
export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  /** Every cache write, 5-minute and 1-hour (Anthropic's cache_creation_input_tokens). */
  cacheCreationTokens: number;
  /** The part of cacheCreationTokens written for an hour; the rest is 5-minute. */
  cacheCreation1hTokens: number;
  /** Anthropic's usage.server_tool_use.web_search_requests; absent is none. */
  webSearchRequests?: number;
}

/** A model's long-context tier: above `aboveTokens` of prompt, the input and output prices times these. */
export interface LongContextPrice {
  aboveTokens: number;
  input: number;
  output: number;
}

export interface PriceRatios {
  model: number;
  completion: number;
  group: number;
  cacheRead: number;
  cacheWrite: number;
  cacheWrite1h: number;
  /** Quota per web search before the group ratio (option WebSearchCallPrice); absent: searches are free. */
  webSearch?: number;
  /** The model's long-context tier (option LongContextRatio); absent: none. */
  longContext?: LongContextPrice;
}

/** The long-context tier a usage is priced at: the model's, when its prompt passes the threshold. */
function longContextOf(u: TokenUsage, r: PriceRatios): LongContextPrice | undefined {
  const lc = r.longContext;
  return lc !== undefined && u.inputTokens + u.cacheReadTokens + u.cacheCreationTokens > lc.aboveTokens ? lc : undefined;
}

export function quotaCost(usage: TokenUsage, r: PriceRatios, tierRatio = 1): number {
  const lc = longContextOf(usage, r);
  const input = usage.inputTokens
    + usage.cacheReadTokens * r.cacheRead
    + (usage.cacheCreationTokens - usage.cacheCreation1hTokens) * r.cacheWrite
    + usage.cacheCreation1hTokens * r.cacheWrite1h;
  const output = usage.outputTokens * r.completion;
  const weighted = lc === undefined ? input + output : input * lc.input + output * lc.output;
  // Ratios are decimals like 1.5; rounding the float product to an integer keeps every debit exact
  // in integer quota from here on.
  const tokens = atLeastOne(weighted * r.model * r.group * tierRatio);
  const searches = usage.webSearchRequests;
  return searches ? tokens + webSearchFee(searches, r.webSearch ?? 0, r.group) : tokens;
}

/**
 * A price rounded to the nearest unit, and at least 1 when it is above 0: a priced request that used
 * tokens is never free (new-api's rule). Rounded alone, gpt-4o-mini's 1 input and 1 output token
 * (0.375 quota) cost 0, so requests sent small enough were served for nothing.
 */
function atLeastOne(price: number): number {
  return price > 0 ? Math.max(1, Math.round(price)) : Math.round(price);
}

/** What `searches` web searches cost (and reserve): their price in quota times the group ratio, rounded once. */
export function webSearchFee(searches: number, price: number, group: number): number {
  return searches === 0 ? 0 : Math.round(searches * price * group);
}

/**
 * The prompt cache a request can touch (its cache_control breakpoints): none (its input is all billed
 * at 1×), 5 minutes (reads and 5-minute writes), or an hour (writes at the hour's ratio too).
 */
export type CacheUse = 'none' | '5m' | '1h';

/**
 * The most quotaCost can charge for at most `inputTokens` input tokens of any kind and `outputTokens`
 * output: every input token priced at the dearest input ratio the request's cache use allows. A
 * request that asks for no caching (no cache_control anywhere) can neither read nor write the cache,
 * so its input is plain input; one without an hour's breakpoint writes for 5 minutes only.
 */
export function quotaCostBound(inputTokens: number, outputTokens: number, r: PriceRatios, cache: CacheUse): number {
  const inputRatio = cache === 'none' ? 1 : Math.max(1, r.cacheRead, r.cacheWrite, cache === '1h' ? r.cacheWrite1h : 1);
  // A prompt that may pass the long-context threshold is bounded at the long-context rates.
  const lc = r.longContext !== undefined && inputTokens > r.longContext.aboveTokens ? r.longContext : undefined;
  const inputFactor = lc === undefined ? 1 : Math.max(1, lc.input);
  const outputFactor = lc === undefined ? 1 : Math.max(1, lc.output);
  return atLeastOne((inputTokens * inputRatio * inputFactor + outputTokens * r.completion * outputFactor) * r.model * r.group);
}

/** The long-context rates a usage was priced at, for the log row's content; empty when none. */
export function describeLongContext(u: TokenUsage, r: PriceRatios): string {
  const lc = longContextOf(u, r);
  return lc === undefined ? '' : `; long context (prompt over ${lc.aboveTokens} tokens): input ×${lc.input}, output ×${lc.output}`;
}

/** Content of the log row: the ratios that produced the quota, as new-api writes it, and the cache ratios. */
export function describeCost(r: PriceRatios): string {
  return `model ratio ${r.model}, completion ratio ${r.completion}, cache read ratio ${r.cacheRead}, `
    + `cache write ratio ${r.cacheWrite} (5m) / ${r.cacheWrite1h} (1h), group ratio ${r.group}`;
}

/** The web searches of a usage for the log row's content; empty when the request made none. */
export function describeWebSearch(u: TokenUsage, r: PriceRatios): string {
  const n = u.webSearchRequests;
  return n ? `; web search ${n} × ${r.webSearch ?? 0} quota × group ratio ${r.group}` : '';
}

/** The service tier an answer was priced at, for the log row's content; empty at the standard price. */
export function describeServiceTier(tierRatio: number): string {
  return tierRatio === 1 ? '' : `; flex service tier ×${tierRatio}`;
}

/** The cache tokens of a usage for the log row's content; empty when the request used no cache. */
export function describeCacheUsage(u: TokenUsage): string {
  if (u.cacheReadTokens === 0 && u.cacheCreationTokens === 0) return '';
  return `; cache read ${u.cacheReadTokens}, cache write 5m ${u.cacheCreationTokens - u.cacheCreation1hTokens}, `
    + `cache write 1h ${u.cacheCreation1hTokens} tokens`;
}
