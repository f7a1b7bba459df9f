import { describe, expect, it } from 'vitest';
import { describeCacheUsage, describeCost, describeLongContext, describeServiceTier, describeWebSearch, quotaCost, quotaCostBound, webSearchFee, type PriceRatios } from './quota-cost.js';
import { ratiosFromOptions } from './ratios.js';

const haiku: PriceRatios = { model: 0.5, completion: 5, group: 1, cacheRead: 0.1, cacheWrite: 1.25, cacheWrite1h: 2 };
const usage = (u: Partial<Parameters<typeof quotaCost>[0]>) =>
  ({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheCreationTokens: 0, cacheCreation1hTokens: 0, ...u });

describe('quotaCost', () => {
  it('charges at least 1 for a priced request that used tokens, and its reservation bound covers that; nothing used or a free ratio is 0', () => {
    const mini: PriceRatios = { model: 0.075, completion: 4, group: 1, cacheRead: 0.5, cacheWrite: 1, cacheWrite1h: 1 };
    // 1 input and 1 output token: 0.375, which rounded to 0 (a request sent small enough was free).
    expect(quotaCost(usage({ inputTokens: 1, outputTokens: 1 }), mini)).toBe(1);
    expect(quotaCostBound(1, 1, mini, 'none')).toBe(1);
    expect(quotaCost(usage({ inputTokens: 1, outputTokens: 1 }), mini)).toBeLessThanOrEqual(quotaCostBound(1, 1, mini, '1h'));
    expect(quotaCost(usage({ cacheReadTokens: 1 }), mini)).toBe(1);
    // Above 1, rounding as before.
    expect(quotaCost(usage({ inputTokens: 100, outputTokens: 10 }), mini)).toBe(Math.round((100 + 40) * 0.075));
    expect(quotaCost(usage({}), mini)).toBe(0);
    expect(quotaCost(usage({ inputTokens: 1000, outputTokens: 100 }), { ...mini, group: 0 })).toBe(0);
    expect(quotaCost(usage({ inputTokens: 1000, outputTokens: 100 }), { ...mini, model: 0 })).toBe(0);
    expect(quotaCostBound(0, 0, mini, '1h')).toBe(0);
  });

  it('prices cache reads at 0.1×, 5-minute writes at 1.25× and 1-hour writes at 2× of input', () => {
    expect(quotaCost(usage({ inputTokens: 100, cacheReadTokens: 10_000 }), haiku)).toBe(Math.round((100 + 1_000) * 0.5));
    expect(quotaCost(usage({ cacheCreationTokens: 10_000 }), haiku)).toBe(6_250);
    expect(quotaCost(usage({ cacheCreationTokens: 10_000, cacheCreation1hTokens: 10_000 }), haiku)).toBe(10_000);
    expect(quotaCost(usage({ inputTokens: 3, cacheReadTokens: 7, cacheCreationTokens: 5, cacheCreation1hTokens: 2, outputTokens: 11 }), { ...haiku, group: 0.8 }))
      .toBe(Math.round((3 + 0.7 + 3 * 1.25 + 2 * 2 + 55) * 0.5 * 0.8));
  });

  it('is bounded by quotaCostBound for any split of the input tokens when the request may use the cache', () => {
    for (const [read, w5m, w1h] of [[1000, 0, 0], [0, 1000, 0], [0, 0, 1000], [300, 300, 400]]) {
      const u = usage({ inputTokens: 1000 - read! - w5m! - w1h!, cacheReadTokens: read, cacheCreationTokens: w5m! + w1h!, cacheCreation1hTokens: w1h, outputTokens: 50 });
      expect(quotaCost(u, haiku)).toBeLessThanOrEqual(quotaCostBound(1000, 50, haiku, '1h'));
    }
    expect(quotaCostBound(1000, 50, haiku, '1h')).toBe(Math.round((2000 + 250) * 0.5));
    expect(quotaCostBound(1000, 50, haiku, 'none')).toBe(Math.round((1000 + 250) * 0.5));
    // A cache read ratio above 1 (an operator's choice) raises the bound too.
    expect(quotaCostBound(1000, 0, { ...haiku, cacheRead: 3 }, '1h')).toBe(1500);
  });

  it('bounds a request with 5-minute breakpoints only at the 5-minute write ratio, for any split without an hour\'s writes', () => {
    for (const [read, w5m] of [[1000, 0], [0, 1000], [400, 600]]) {
      const u = usage({ inputTokens: 1000 - read! - w5m!, cacheReadTokens: read, cacheCreationTokens: w5m, outputTokens: 50 });
      expect(quotaCost(u, haiku)).toBeLessThanOrEqual(quotaCostBound(1000, 50, haiku, '5m'));
    }
    expect(quotaCostBound(1000, 50, haiku, '5m')).toBe(Math.round((1250 + 250) * 0.5));
    expect(quotaCostBound(1000, 0, { ...haiku, cacheRead: 3 }, '5m')).toBe(1500);
  });

  it('adds each web search at its price times the group ratio, rounded apart as the reservation rounds it', () => {
    const priced = { ...haiku, webSearch: 5_000 };
    expect(quotaCost(usage({ inputTokens: 9, outputTokens: 10, webSearchRequests: 3 }), priced)).toBe(Math.round((9 + 50) * 0.5) + 15_000);
    expect(quotaCost(usage({ inputTokens: 9, outputTokens: 10, webSearchRequests: 3 }), { ...priced, group: 2 })).toBe(59 + 30_000);
    expect(quotaCost(usage({ inputTokens: 9, webSearchRequests: 0 }), priced)).toBe(5);
    // No price given: searches are free (a caller that does not bill them).
    expect(quotaCost(usage({ inputTokens: 9, webSearchRequests: 3 }), haiku)).toBe(5);
    // The reservation of max_uses searches bounds the fee of any fewer.
    expect(webSearchFee(3, 5_000, 0.7)).toBeLessThanOrEqual(webSearchFee(5, 5_000, 0.7));
    expect(webSearchFee(3, 333, 0.7)).toBe(Math.round(3 * 333 * 0.7));
    expect(webSearchFee(0, 5_000, 1)).toBe(0);
    expect(describeWebSearch(usage({ webSearchRequests: 3 }), priced)).toBe('; web search 3 × 5000 quota × group ratio 1');
    expect(describeWebSearch(usage({}), priced)).toBe('');
  });

  it('prices a cheaper service tier\'s tokens at its ratio, the fees untiered, never above the standard bound', () => {
    const u = usage({ inputTokens: 301, cacheReadTokens: 40, cacheCreationTokens: 20, cacheCreation1hTokens: 5, outputTokens: 77, webSearchRequests: 2 });
    const priced = { ...haiku, group: 0.8, webSearch: 5_000 };
    expect(quotaCost(u, priced, 0.5)).toBe(Math.round((301 + 4 + 15 * 1.25 + 5 * 2 + 385) * 0.5 * 0.8 * 0.5) + webSearchFee(2, 5_000, 0.8));
    expect(quotaCost(u, priced, 1)).toBe(quotaCost(u, priced));
    for (const tier of [0.5, 0.333, 0.999, 1]) expect(quotaCost(usage({ inputTokens: 1000, outputTokens: 50 }), haiku, tier)).toBeLessThanOrEqual(quotaCostBound(1000, 50, haiku, 'none'));
    expect(describeServiceTier(0.5)).toBe('; flex service tier ×0.5');
    expect(describeServiceTier(1)).toBe('');
  });

  it('describes the ratios and, only when there are any, the cache tokens', () => {
    expect(describeCost(haiku)).toBe('model ratio 0.5, completion ratio 5, cache read ratio 0.1, cache write ratio 1.25 (5m) / 2 (1h), group ratio 1');
    expect(describeCacheUsage(usage({ inputTokens: 5 }))).toBe('');
    expect(describeCacheUsage(usage({ cacheReadTokens: 4, cacheCreationTokens: 3, cacheCreation1hTokens: 1 }))).toBe('; cache read 4, cache write 5m 2, cache write 1h 1 tokens');
  });
});

describe('cache ratios from the options', () => {
  it('default to 0.1, 1.25 and 2 and are overridden per model by CacheRatio, CreateCacheRatio, CreateCacheRatio1h', () => {
    const r = ratiosFromOptions(new Map([['CacheRatio', '{"m":0.2}'], ['CreateCacheRatio', '{"m":1.5}'], ['CreateCacheRatio1h', '{"m":3}']]));
    expect([r.cacheRead('m'), r.cacheWrite('m'), r.cacheWrite1h('m')]).toEqual([0.2, 1.5, 3]);
    expect([r.cacheRead('other'), r.cacheWrite('other'), r.cacheWrite1h('other')]).toEqual([0.1, 1.25, 2]);
  });
});

describe('model ratios', () => {
  it('price a dated model id as its model (claude-opus-4-1-20250805 as claude-opus-4-1), not at the fallback ratio', () => {
    const r = ratiosFromOptions(new Map());
    expect(r.model('claude-opus-4-1-20250805')).toBe(7.5);
    expect(r.model('claude-opus-4-20250514')).toBe(7.5);
    expect(r.model('claude-opus-4-0')).toBe(7.5);
    expect(r.model('claude-sonnet-4-5-20250929')).toBe(1.5);
    expect(r.model('claude-haiku-4-5-20251001')).toBe(0.5);
    expect(r.model('claude-opus-4-5-20251101')).toBe(2.5);
    expect(r.model('claude-3-opus-20240229')).toBe(7.5);
    expect(r.model('claude-3-5-haiku-20241022')).toBe(0.4);
    expect(r.model('claude-3-5-haiku-latest')).toBe(0.4);
    // A ratio configured for the dated id wins over its model's, and the options' ratios date-match too.
    const configured = ratiosFromOptions(new Map([['ModelRatio', '{"claude-opus-4-1-20250805":9,"my-model":2}'], ['CompletionRatio', '{"my-model":3}']]));
    expect(configured.model('claude-opus-4-1-20250805')).toBe(9);
    expect(configured.model('claude-opus-4-1')).toBe(7.5);
    expect([configured.model('my-model-20260101'), configured.completion('my-model-20260101')]).toEqual([2, 3]);
    // A name only ending in digits is not a date.
    expect(r.priced('claude-opus-4-1-2025')).toBe(false);
    expect(r.priced('unknown-model')).toBe(false);
    // Names of Object.prototype's members are names like any other.
    for (const name of ['constructor', 'toString', '__proto__', 'hasOwnProperty-20250101']) {
      expect([r.priced(name), r.completion(name), r.cacheRead(name), r.group(name), r.longContext(name)]).toEqual([false, 5, 0.1, undefined, undefined]);
    }
  });

  it('refuse a model no ratio prices, unless SelfUseModeEnabled serves it at new-api\'s 37.5', () => {
    const r = ratiosFromOptions(new Map([['ModelRatio', '{"my-model":2}']]));
    expect([r.priced('my-model'), r.priced('claude-haiku-4-5'), r.priced('gpt-4o-mini-2024-07-18')]).toEqual([true, true, true]);
    expect([r.priced('o5-preview'), r.priced('my-model-v2'), r.priced('')]).toEqual([false, false, false]);
    const selfUse = ratiosFromOptions(new Map([['ModelRatio', '{"my-model":2}'], ['SelfUseModeEnabled', 'true']]));
    expect([selfUse.priced('o5-preview'), selfUse.model('o5-preview'), selfUse.completion('o5-preview')]).toEqual([true, 37.5, 5]);
    expect(selfUse.model('my-model')).toBe(2);
    expect(ratiosFromOptions(new Map([['SelfUseModeEnabled', 'false']])).priced('o5-preview')).toBe(false);
  });

  it('price OpenAI\'s models as OpenAI does: input, output and cached input, dated ids as their model', () => {
    const r = ratiosFromOptions(new Map());
    // $ per million tokens: input = ratio × 2, output = input × completion, cached = input × cacheRead.
    const dollars = (m: string) => [r.model(m) * 2, r.model(m) * 2 * r.completion(m), r.model(m) * 2 * r.cacheRead(m)];
    expect(dollars('gpt-4o')).toEqual([2.5, 10, 1.25]);
    expect(dollars('gpt-4o-2024-08-06')).toEqual([2.5, 10, 1.25]);
    expect(dollars('gpt-4o-2024-05-13').slice(0, 2)).toEqual([5, 15]);
    expect(dollars('gpt-4o-mini-2024-07-18').map((d) => +d.toFixed(4))).toEqual([0.15, 0.6, 0.075]);
    expect(dollars('gpt-4.1')).toEqual([2, 8, 0.5]);
    expect(dollars('o3-mini-2025-01-31').map((d) => +d.toFixed(4))).toEqual([1.1, 4.4, 0.55]);
    expect(dollars('gpt-5').map((d) => +d.toFixed(4))).toEqual([1.25, 10, 0.125]);
    // The options override the built-in table, per model.
    const configured = ratiosFromOptions(new Map([['CompletionRatio', '{"gpt-4o":3}'], ['CacheRatio', '{"gpt-4o":0.25}']]));
    expect([configured.completion('gpt-4o'), configured.cacheRead('gpt-4o'), configured.completion('gpt-4o-mini')]).toEqual([3, 0.25, 4]);
  });
});

describe('long-context pricing', () => {
  const sonnet: PriceRatios = { model: 1.5, completion: 5, group: 1, cacheRead: 0.1, cacheWrite: 1.25, cacheWrite1h: 2, longContext: { aboveTokens: 200_000, input: 2, output: 1.5 } };

  it('prices a prompt over the threshold (input and cache tokens together) at the long-context rates, Anthropic\'s 2× input and 1.5× output', () => {
    // At the threshold: the standard rates.
    expect(quotaCost(usage({ inputTokens: 200_000, outputTokens: 1000 }), sonnet)).toBe(Math.round((200_000 + 1000 * 5) * 1.5));
    // One token over, counting the cache: every token at the long-context rates, cache ones included.
    const u = usage({ inputTokens: 100_001, cacheReadTokens: 60_000, cacheCreationTokens: 40_000, cacheCreation1hTokens: 10_000, outputTokens: 1000 });
    expect(quotaCost(u, sonnet)).toBe(Math.round(((100_001 + 60_000 * 0.1 + 30_000 * 1.25 + 10_000 * 2) * 2 + 1000 * 5 * 1.5) * 1.5));
    // A model without the tier: the standard rates whatever the length.
    const { longContext: _, ...plain } = sonnet;
    expect(quotaCost(usage({ inputTokens: 500_000, outputTokens: 10 }), plain)).toBe(Math.round((500_000 + 50) * 1.5));
    expect(describeLongContext(u, sonnet)).toBe('; long context (prompt over 200000 tokens): input ×2, output ×1.5');
    expect(describeLongContext(usage({ inputTokens: 10 }), sonnet)).toBe('');
  });

  it('is bounded by quotaCostBound, which reserves a prompt that may pass the threshold at the long-context rates', () => {
    for (const input of [1000, 200_000, 200_001, 900_000]) {
      const bound = quotaCostBound(input, 4096, sonnet, '1h');
      for (const split of [0, 0.3, 1]) {
        const u = usage({ inputTokens: Math.round(input * (1 - split)), cacheCreationTokens: input - Math.round(input * (1 - split)), cacheCreation1hTokens: input - Math.round(input * (1 - split)), outputTokens: 4096 });
        expect(quotaCost(u, sonnet)).toBeLessThanOrEqual(bound);
      }
    }
  });

  it('comes from LongContextRatio, by model and dated id, default for the Sonnet 4 models only', () => {
    const r = ratiosFromOptions(new Map());
    expect(r.longContext('claude-sonnet-4-5-20250929')).toEqual({ aboveTokens: 200_000, input: 2, output: 1.5 });
    expect(r.longContext('claude-sonnet-4-20250514')).toEqual({ aboveTokens: 200_000, input: 2, output: 1.5 });
    expect(r.longContext('claude-opus-4-1')).toBeUndefined();
    const configured = ratiosFromOptions(new Map([['LongContextRatio', '{"gpt-x":{"above_tokens":272000,"input":2,"output":1.5},"claude-sonnet-4-5":null}']]));
    expect(configured.longContext('gpt-x')).toEqual({ aboveTokens: 272_000, input: 2, output: 1.5 });
    expect(configured.longContext('claude-sonnet-4-5')).toBeUndefined();
  });
});
