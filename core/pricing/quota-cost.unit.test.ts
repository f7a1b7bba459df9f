import { describe, expect, it } from 'vitest';
import { describeCacheUsage, describeCost, describeWebSearch, quotaCost, quotaCostBound, webSearchFee, type PriceRatios } from './quota-cost.js';
import { ratiosFromOptions } from './ratios.js';

const haiku: PriceRatios = { model: 0.5, completion: 5, group: 1, cacheRead: 0.1, cacheWrite: 1.25, cacheWrite1h: 2 };
const usage = (u: Partial<Parameters<typeof quotaCost>[0]>) =>
  ({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheCreationTokens: 0, cacheCreation1hTokens: 0, ...u });

describe('quotaCost', () => {
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
      expect(quotaCost(u, haiku)).toBeLessThanOrEqual(quotaCostBound(1000, 50, haiku, true));
    }
    expect(quotaCostBound(1000, 50, haiku, true)).toBe(Math.round((2000 + 250) * 0.5));
    expect(quotaCostBound(1000, 50, haiku, false)).toBe(Math.round((1000 + 250) * 0.5));
    // A cache read ratio above 1 (an operator's choice) raises the bound too.
    expect(quotaCostBound(1000, 0, { ...haiku, cacheRead: 3 }, true)).toBe(1500);
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
