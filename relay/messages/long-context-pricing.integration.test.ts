// Long-context pricing: a Sonnet 4 prompt over 200,000 tokens (cache tokens included) is priced as
// Anthropic prices the 1M context window, input 2× and output 1.5× (option LongContextRatio), through
// the official SDK, and the same quota lands in the ledger row, users.quota and the Redis mirror.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  settledAccountQuota,
  createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';
import { anthropicMessage } from '../../tests/harness/sdk-streams.js';

const MODEL = 'claude-sonnet-4-5-20250929';
// claude-sonnet-4-5: model ratio 1.5, completion ratio 5, cache read 0.1; above 200,000 prompt tokens
// input ×2 and output ×1.5. Written out here so that the test checks the formula, not repeats it.
const standard = (input: number, read: number, output: number) => Math.round((input + read * 0.1 + output * 5) * 1.5);
const longContext = (input: number, read: number, output: number) => Math.round(((input + read * 0.1) * 2 + output * 5 * 1.5) * 1.5);
const FUNDS = 100_000_000;
// Longer than the cache tokens the mock reports plus the input tokens it counts of this text (a
// quarter of its bytes), so that the body's bytes bound every prompt token, as with a real provider:
// the relay bills no more prompt than a text request's bytes can hold.
const SYSTEM = 'cached context '.repeat(20_000);
const OUTPUT = 10;

let stack: GatewayStack;
let account: TestAccount;
let client: Anthropic;

beforeAll(async () => {
  stack = await startGatewayStack({ mock: { outputTokens: OUTPUT } });
  await mockChannel(stack, [MODEL]);
  account = await fundedAccount(stack, FUNDS);
  client = new Anthropic({
    apiKey: (await createApiKey(stack, account)).key, baseURL: stack.relayUrl, maxRetries: 0,
    defaultHeaders: { 'anthropic-beta': 'context-1m-2025-08-07' },
  });
});
afterAll(async () => {
  await stack?.close();
});

const balance = (): Promise<number> => settledAccountQuota(stack, account.id);

describe.each([false, true])('stream %s', (stream) => {
  it.each([
    { name: 'a prompt under 200,000 tokens (100,000 of them cached): the standard rates', read: 100_000, long: false },
    { name: 'a prompt over 200,000 tokens (220,000 of them cached): the long-context rates, on every token', read: 220_000, long: true },
  ])('$name', async ({ read, long }) => {
    stack.mock.setOptions({ cacheReadTokens: read });
    const before = await balance();
    const params = {
      model: MODEL, max_tokens: 100, system: [{ type: 'text' as const, text: SYSTEM, cache_control: { type: 'ephemeral' as const } }],
      messages: [{ role: 'user' as const, content: 'What is cached here?' }],
    };
    const { message, requestId } = await anthropicMessage(client, params, stream);
    const input = message.usage.input_tokens;
    // The prompt the provider reports, uncached input and cache reads together, decides the tier.
    expect(input + read > 200_000).toBe(long);
    const quota = (long ? longContext : standard)(input, read, OUTPUT);
    expect(quota).not.toBe((long ? standard : longContext)(input, read, OUTPUT));
    const row = await ledgerRow(stack, requestId);
    expect(row).toMatchObject({ quota, prompt_tokens: input + read, completion_tokens: OUTPUT });
    expect(before - await balance()).toBe(quota);
    expect(await stack.quota.accountBalance(account.id)).toBe(await balance());
  });
});
