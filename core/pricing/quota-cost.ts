// The price of a request in quota: (input + output × completion_ratio) × model_ratio × group_ratio,
// rounded to the nearest unit. Cache reads and writes count as input tokens.
export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
  cacheTokens: number;
}

export interface PriceRatios {
  model: number;
  completion: number;
  group: number;
}

export function quotaCost(usage: TokenUsage, r: PriceRatios): number {
  const weighted = usage.inputTokens + usage.cacheTokens + usage.outputTokens * r.completion;
  // Ratios are decimals like 1.5; rounding the float product to an integer keeps every debit exact
  // in integer quota from here on.
  return Math.round(weighted * r.model * r.group);
}

/** Content of the log row: the ratios that produced the quota, as new-api writes it. */
export function describeCost(r: PriceRatios): string {
  return `model ratio ${r.model}, completion ratio ${r.completion}, group ratio ${r.group}`;
}
