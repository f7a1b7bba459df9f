import { describe, expect, it } from 'vitest';
import { DEFAULT_CONTEXT_WINDOW, inputBoundsFromOptions } from './input-bound.js';

const defaults = inputBoundsFromOptions(new Map());

describe('the input bound of a text request', () => {
  it('is its bytes alone for a model whose window is not known: a 200,000 cap would undercut a larger model', () => {
    for (const model of ['deepseek-chat', 'acme-long-context', 'gpt-5.1', 'o5', 'amazon.nova-pro-v1:0', 'claude-2.1', 'anthropic.claude-v2:1']) {
      expect(Math.min(defaults.textWindow(model, false), 300_000), model).toBe(300_000);
      expect(defaults.textWindow(model, true), model).toBe(Infinity);
    }
    // Media still reserves a window: the default one (docs/billing.md, "Reserve").
    expect(defaults.contextWindow('deepseek-chat', false)).toBe(DEFAULT_CONTEXT_WINDOW);
  });

  it('is capped by a window the option sets, over any built-in', () => {
    const o = inputBoundsFromOptions(new Map([['ModelContextWindow', '{"deepseek-chat":64000,"gpt-4.1":500000}']]));
    expect(o.textWindow('deepseek-chat', false)).toBe(64_000);
    expect(o.contextWindow('deepseek-chat', false)).toBe(64_000);
    expect(o.textWindow('gpt-4.1', false)).toBe(500_000);
  });
});

describe('built-in context windows', () => {
  it.each([
    ['gpt-4o', 128_000], ['gpt-4o-mini', 128_000], ['gpt-4o-2024-08-06', 128_000],
    ['gpt-4.1', 1_047_576], ['gpt-4.1-mini', 1_047_576], ['gpt-4.1-nano-2025-04-14', 1_047_576], ['openai/gpt-4.1', 1_047_576],
    ['o1', 200_000], ['o3', 200_000], ['o3-mini', 200_000], ['o4-mini', 200_000],
    ['gpt-5', 400_000], ['gpt-5-mini', 400_000], ['gpt-5-nano-2025-08-07', 400_000],
    ['claude-sonnet-4-5', 200_000], ['claude-haiku-4-5', 200_000], ['claude-haiku-4-5-20251001', 200_000],
    ['claude-opus-4', 200_000], ['claude-opus-4-0', 200_000], ['claude-opus-4-1-20250805', 200_000],
    ['claude-opus-4-20250514', 200_000], ['claude-opus-4-5', 200_000], ['claude-sonnet-4-latest', 200_000],
    ['claude-3-5-sonnet-20241022', 200_000], ['claude-3-7-sonnet-latest', 200_000], ['claude-3-haiku-20240307', 200_000],
    // 4.6 and later take 1M tokens without a beta.
    ['claude-opus-4-6', 1_000_000], ['claude-sonnet-4-6', 1_000_000], ['claude-opus-4-7', 1_000_000],
    ['claude-opus-4-10', 1_000_000], ['claude-opus-5-5', 1_000_000], ['claude-fable-5-1', 1_000_000],
    ['claude-opus-4-8', 1_000_000], ['claude-opus-5', 1_000_000], ['claude-sonnet-5', 1_000_000], ['claude-sonnet-5-5', 1_000_000],
    ['claude-haiku-5-5', 1_000_000], ['claude-fable-5', 1_000_000], ['claude-mythos-5', 1_000_000], ['claude-mythos-5-1', 1_000_000],
    ['anthropic/claude-sonnet-4-6', 1_000_000],
    // Amazon Bedrock's and Google Vertex AI's names for the same models.
    ['anthropic.claude-3-haiku-20240307-v1:0', 200_000], ['us.anthropic.claude-sonnet-4-20250514-v1:0', 200_000],
    ['global.anthropic.claude-sonnet-4-5-20250929-v1:0', 200_000], ['us-gov.anthropic.claude-3-5-sonnet-20240620-v1:0', 200_000],
    ['claude-opus-4-1@20250805', 200_000], ['claude-3-5-sonnet-v2@20241022', 200_000], ['claude-haiku-4-5@20251001', 200_000],
    ['anthropic.claude-opus-4-6-v1', 1_000_000], ['claude-opus-4-7@20260416', 1_000_000],
    // OpenRouter's dotted names, new-api's -thinking aliases, Claude Code's [1m].
    ['claude-sonnet-4.5', 200_000], ['anthropic/claude-3.5-sonnet', 200_000], ['claude-opus-4-1-thinking', 200_000],
    ['claude-opus-4-6-thinking', 1_000_000], ['claude-sonnet-4-6[1m]', 1_000_000], ['claude-opus-4.6', 1_000_000],
    // Several vendor paths (LiteLLM's bedrock/ before Bedrock's own form); aggregators' version-first names.
    ['openrouter/anthropic/claude-sonnet-4.6', 1_000_000], ['bedrock/us.anthropic.claude-opus-4-6-v1', 1_000_000],
    ['openrouter/anthropic/claude-3.5-sonnet', 200_000], ['claude-4-sonnet', 200_000], ['claude-4.5-sonnet', 200_000],
    ['claude-35-sonnet', 200_000], ['claude-4-6-sonnet', 1_000_000],
    // Claude Code's [1m] tag names the 1M window of a model whose own is 200,000.
    ['claude-sonnet-4-5[1m]', 1_000_000], ['claude-sonnet-4[1m]', 1_000_000],
  ])('%s: %i tokens, for text and media alike', (model, window) => {
    expect(defaults.contextWindow(model, false)).toBe(window);
    expect(defaults.textWindow(model, false)).toBe(window);
  });

  it('the context-1m beta raises a known window to 1,000,000, never lowers one', () => {
    expect(defaults.contextWindow('claude-sonnet-4-5', true)).toBe(1_000_000);
    expect(defaults.textWindow('claude-sonnet-4-5', true)).toBe(1_000_000);
    expect(defaults.textWindow('gpt-4.1', true)).toBe(1_047_576);
  });

  it('a name that only contains a family\'s is not of it', () => {
    for (const model of ['gpt-4.10', 'gpt-4omni', 'o10', 'my-gpt-4.1', 'gpt-50']) expect(defaults.textWindow(model, false), model).toBe(Infinity);
  });
});

describe('the most an image costs', () => {
  const largest = 93_868; // ceil(8,000 × 8,000 / 750) = 85,334, a tenth more
  it.each([
    // ~1,600 tokens (1.15 MP, 1,568 px on the long edge), a tenth more: the Claude 3 and 4 models to 4.6.
    ['claude-3-5-sonnet-20241022', 1_760], ['claude-3-haiku-20240307', 1_760], ['claude-sonnet-4-5', 1_760],
    ['claude-haiku-4-5-20251001', 1_760], ['claude-opus-4-1-20250805', 1_760], ['claude-opus-4-6', 1_760],
    ['claude-sonnet-4-6', 1_760], ['anthropic/claude-sonnet-4-6', 1_760], ['claude-sonnet-4-latest', 1_760],
    // 3.75 MP (2,576 px): 5,000 tokens.
    ['claude-opus-4-7', 5_500], ['claude-opus-4-7-20260416', 5_500],
    // Bedrock's and Vertex's names.
    ['anthropic.claude-3-haiku-20240307-v1:0', 1_760], ['us.anthropic.claude-sonnet-4-5-20250929-v1:0', 1_760],
    ['claude-opus-4-1@20250805', 1_760], ['claude-3-5-sonnet-v2@20241022', 1_760],
    ['global.anthropic.claude-opus-4-7-20260416-v1:0', 5_500], ['claude-opus-4-7@20260416', 5_500],
    ['claude-sonnet-4.5', 1_760], ['claude-haiku-4.5', 1_760], ['claude-opus-4-6-thinking', 1_760], ['claude-sonnet-4-6[1m]', 1_760],
    ['claude-opus-4.7', 5_500], ['claude-opus-4-7-thinking', 5_500], ['claude-4.7-opus', 5_500],
    // Bedrock's undated ids, and vendor paths before them.
    ['anthropic.claude-opus-4-6-v1', 1_760], ['us.anthropic.claude-opus-4-6-v1', 1_760], ['bedrock/us.anthropic.claude-opus-4-6-v1', 1_760],
    ['openrouter/anthropic/claude-opus-4.7', 5_500], ['claude-4-sonnet', 1_760], ['claude-4.5-sonnet', 1_760],
    // Not published: the largest image the API takes, unscaled.
    ['claude-opus-4-8', largest], ['claude-opus-5', largest], ['claude-sonnet-5-5', largest], ['claude-fable-5', largest],
    ['claude-opus-4-70', largest],
  ])('%s: %i tokens', (model, tokens) => {
    expect(defaults.imageTokenBound(model)).toBe(tokens);
  });

  it('is not known for OpenAI\'s and other models (their images keep the window), unless the option sets it', () => {
    for (const model of ['gpt-4o', 'gpt-4o-mini', 'gpt-4.1', 'gpt-5', 'o3', 'deepseek-chat', 'amazon.nova-pro-v1:0', 'my-anthropic.claude-x',
      // Claude 1 and 2: retired, no vision, not the rows of later models.
      'claude-2', 'claude-2.1', 'claude-instant-1.2', 'anthropic.claude-v2', 'anthropic.claude-v2:1', 'anthropic.claude-instant-v1']) {
      expect(defaults.imageTokenBound(model), model).toBeUndefined();
    }
    const o = inputBoundsFromOptions(new Map([['ModelImageTokens', '{"gpt-4o":1500,"claude-opus-5":6000,"bad":0}']]));
    expect(o.imageTokenBound('gpt-4o')).toBe(1_500);
    expect(o.imageTokenBound('claude-opus-5')).toBe(6_000);
    expect(o.imageTokenBound('bad')).toBeUndefined();
    expect(o.imageTokenBound('constructor')).toBeUndefined();
  });
});
