// The built-in prices of Anthropic's models since Claude Opus 4.6, checked against the dollar prices
// Anthropic publishes (platform.claude.com/docs/en/about-claude/pricing and each model's overview page,
// read 2026-11-30), written out here rather than recomputed from the table: per million tokens, base
// input, output, cache hits, 5-minute and 1-hour cache writes.
import { describe, expect, it } from 'vitest';
import { quotaCost, type PriceRatios, type TokenUsage } from './quota-cost.js';
import { QUOTA_PER_DOLLAR, ratiosFromOptions, writesCacheUnmarked } from './ratios.js';

const defaults = ratiosFromOptions(new Map());

function priceOf(model: string): PriceRatios {
  return {
    model: defaults.model(model),
    completion: defaults.completion(model),
    group: 1,
    cacheRead: defaults.cacheRead(model),
    cacheWrite: defaults.cacheWrite(model),
    cacheWrite1h: defaults.cacheWrite1h(model),
    longContext: defaults.longContext(model),
  };
}

const NONE: TokenUsage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheCreationTokens: 0, cacheCreation1hTokens: 0 };
/** What a usage costs in US dollars at the built-in price. */
const dollars = (model: string, u: Partial<TokenUsage>) => quotaCost({ ...NONE, ...u }, priceOf(model)) / QUOTA_PER_DOLLAR;
const M = 1_000_000;
/** 90,000 tokens of a kind: under Haiku 5.5's 100,000-token threshold, so its base tier. */
const T = 90_000;

// [model, input, output, cache hit, 5m write, 1h write] in $ per million tokens.
const PRICES: ReadonlyArray<readonly [string, number, number, number, number, number]> = [
  ['claude-opus-4-6', 5, 25, 0.5, 6.25, 10],
  ['claude-opus-4-7', 5, 25, 0.5, 6.25, 10],
  ['claude-opus-4-8', 5, 25, 0.5, 6.25, 10],
  ['claude-opus-5', 5, 25, 0.5, 6.25, 10],
  ['claude-opus-5-5', 4, 20, 0.2, 5, 8],
  ['claude-sonnet-4-6', 3, 15, 0.3, 3.75, 6],
  ['claude-sonnet-5', 2, 10, 0.2, 2.5, 4],
  ['claude-sonnet-5-5', 2, 10, 0.2, 2.5, 4],
  ['claude-fable-5', 10, 50, 1, 12.5, 20],
  ['claude-mythos-5', 10, 50, 1, 12.5, 20],
  ['claude-fable-5-1', 10, 50, 0.25, 12.5, 20],
  ['claude-mythos-5-1', 10, 50, 0.25, 12.5, 20],
  ['claude-haiku-5-5', 0.1, 0.5, 0.01, 0.125, 0.2],
];

describe('built-in prices of the Claude models since Opus 4.6', () => {
  it.each(PRICES)('%s: $%d input, $%d output, $%d cache hits, $%d / $%d cache writes (5m / 1h) per MTok', (model, input, output, read, write5m, write1h) => {
    expect(defaults.priced(model)).toBe(true);
    expect(dollars(model, { inputTokens: T })).toBeCloseTo((input * T) / M, 9);
    expect(dollars(model, { outputTokens: T })).toBeCloseTo((output * T) / M, 9);
    expect(dollars(model, { cacheReadTokens: T })).toBeCloseTo((read * T) / M, 9);
    expect(dollars(model, { cacheCreationTokens: T })).toBeCloseTo((write5m * T) / M, 9);
    expect(dollars(model, { cacheCreationTokens: T, cacheCreation1hTokens: T })).toBeCloseTo((write1h * T) / M, 9);
  });

  it('bill the whole 1M window at one price, but for Claude Haiku 5.5', () => {
    for (const [model, input, output] of PRICES) {
      if (model === 'claude-haiku-5-5') continue;
      expect(defaults.longContext(model), model).toBeUndefined();
      expect(dollars(model, { inputTokens: 900_000, outputTokens: 10_000 }), model).toBeCloseTo(0.9 * input + 0.01 * output, 6);
    }
  });

  it('price a dated or -latest id as its model, and a vendor-prefixed or unlisted one not at all', () => {
    expect(defaults.model('claude-opus-5-5-20260922')).toBe(defaults.model('claude-opus-5-5'));
    expect(defaults.cacheRead('claude-fable-5-1-latest')).toBe(0.025);
    // Claude Fable 5.2's cache prices are not in the official pages read; it stays for the operator to price.
    expect([defaults.priced('claude-fable-5-2'), defaults.priced('claude-mythos-5-2'), defaults.priced('claude-opus-5-6')]).toEqual([false, false, false]);
  });
});

describe('Claude Haiku 5.5: 5× every price once the prompt (input, cache reads and writes) is over 100,000 tokens', () => {
  it('prices a prompt of exactly 100,000 tokens at $0.10 and one token more at $0.50 per MTok', () => {
    expect(dollars('claude-haiku-5-5', { inputTokens: 100_000 })).toBeCloseTo(0.01, 9);
    // (quota is whole units: $0.000002 each)
    expect(dollars('claude-haiku-5-5', { inputTokens: 100_001 })).toBeCloseTo((0.5 * 100_001) / M, 5);
    expect(dollars('claude-haiku-5-5', { inputTokens: 200_000, outputTokens: 1_000 })).toBeCloseTo(0.1 + 0.0025, 9);
  });

  it('counts cache tokens toward the threshold and bills them at $0.05 (hits), $0.625 and $1 (writes), output at $2.50', () => {
    // 50,000 input + 60,000 cache hits = 110,000: $0.50 × 0.05 + $0.05 × 0.06 + $2.50 × 0.001.
    expect(dollars('claude-haiku-5-5', { inputTokens: 50_000, cacheReadTokens: 60_000, outputTokens: 1_000 })).toBeCloseTo(0.025 + 0.003 + 0.0025, 9);
    // 10,000 input + 100,000 cache writes, 40,000 of them 1-hour: $0.50 × 0.01 + $0.625 × 0.06 + $1 × 0.04.
    expect(dollars('claude-haiku-5-5', { inputTokens: 10_000, cacheCreationTokens: 100_000, cacheCreation1hTokens: 40_000 })).toBeCloseTo(0.005 + 0.0375 + 0.04, 9);
    // Under the threshold the same kinds are at $0.01, $0.125 and $0.20.
    expect(dollars('claude-haiku-5-5', { inputTokens: 10_000, cacheReadTokens: 40_000, cacheCreationTokens: 50_000, cacheCreation1hTokens: 20_000 }))
      .toBeCloseTo(0.001 + 0.0004 + 0.00375 + 0.004, 9);
  });

  it('can be removed or changed by the option LongContextRatio', () => {
    const off = ratiosFromOptions(new Map([['LongContextRatio', '{"claude-haiku-5-5":null}']]));
    expect(off.longContext('claude-haiku-5-5')).toBeUndefined();
    expect(off.longContext('claude-sonnet-4-5')).toEqual({ aboveTokens: 200_000, input: 2, output: 1.5 });
  });
});

describe('writesCacheUnmarked: OpenAI from GPT-5.6 on', () => {
  it.each([
    ['gpt-5.6', true], ['gpt-5.6-mini', true], ['openai/gpt-5.7', true], ['gpt-5.10', true], ['gpt-6', true], ['gpt-6.1-pro', true], ['GPT-5.6', true],
    ['gpt-5', false], ['gpt-5.1', false], ['gpt-5.5', false], ['gpt-5-mini', false], ['gpt-4o', false], ['gpt-56', false], ['claude-opus-5-5', false],
  ])('%s: %s', (model, writes) => {
    expect(writesCacheUnmarked(model)).toBe(writes);
  });
});
