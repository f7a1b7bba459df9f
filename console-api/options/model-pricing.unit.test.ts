import { describe, expect, it } from 'vitest';
import { ratiosFromOptions } from '../../core/pricing/ratios.js';
import { modelPricing, pricePerMillion } from './model-pricing.js';

describe('pricePerMillion', () => {
  it('is ratio × 2 dollars per million input tokens, times completion for output and cache for cached reads', () => {
    // Anthropic's list prices: Sonnet $3 / $15 / $0.30 cached; Opus 4.1 $15 / $75 / $1.50.
    expect(pricePerMillion({ model: 1.5, completion: 5, cacheRead: 0.1 })).toEqual({ input: 3, output: 15, cache_read: 0.3 });
    expect(pricePerMillion({ model: 7.5, completion: 5, cacheRead: 0.1 })).toEqual({ input: 15, output: 75, cache_read: 1.5 });
    // OpenAI's gpt-4o-mini: $0.15 / $0.60 / $0.075 cached.
    expect(pricePerMillion({ model: 0.075, completion: 4, cacheRead: 0.5 })).toEqual({ input: 0.15, output: 0.6, cache_read: 0.075 });
  });

  it('multiplies every price by the group ratio', () => {
    expect(pricePerMillion({ model: 1.5, completion: 5, cacheRead: 0.1 }, 0.8)).toEqual({ input: 2.4, output: 12, cache_read: 0.24 });
    expect(pricePerMillion({ model: 1.5, completion: 5, cacheRead: 0.1 }, 0)).toEqual({ input: 0, output: 0, cache_read: 0 });
  });
});

describe('modelPricing', () => {
  it('takes the ratios the relay bills by, options over the built-in table', () => {
    const ratios = ratiosFromOptions(new Map([['ModelRatio', '{"gpt-4o":2}'], ['CacheRatio', '{"gpt-4o":0.25}']]));
    expect(modelPricing('gpt-4o', ratios, ['default'])).toEqual({
      model_name: 'gpt-4o', priced: true, model_ratio: 2, completion_ratio: 4, cache_ratio: 0.25,
      input_price: 4, output_price: 16, cache_read_price: 1, enable_groups: ['default'],
    });
    // A dated id is priced as its model.
    expect(modelPricing('claude-opus-4-1-20250805', ratios, [])).toMatchObject({ priced: true, model_ratio: 7.5, input_price: 15 });
  });

  it('flags a model no ratio prices, with no prices, unless self-use mode serves it at the fallback ratio', () => {
    expect(modelPricing('mystery-1', ratiosFromOptions(new Map()), ['vip'])).toEqual({
      model_name: 'mystery-1', priced: false, model_ratio: null, completion_ratio: null, cache_ratio: null,
      input_price: null, output_price: null, cache_read_price: null, enable_groups: ['vip'],
    });
    const selfUse = ratiosFromOptions(new Map([['SelfUseModeEnabled', 'true']]));
    expect(modelPricing('mystery-1', selfUse, ['vip'])).toMatchObject({ priced: true, model_ratio: 37.5, input_price: 75, output_price: 375 });
  });
});
