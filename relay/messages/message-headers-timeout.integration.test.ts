// A non-streaming answer's headers come only after the whole generation: the relay waits for them
// as long as UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS, not the streaming headers timeout. Otherwise a
// generation the provider finishes (and bills) would be given up, and, since a request that may be
// generating is never retried elsewhere, answered with an error and billed nothing.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockUpstream, type MockUpstream } from '../../bench/mock-upstream/mock-upstream.js';
import {
  billingSettled, createApiKey, fundedAccount, MOCK_CHANNEL_KEY, mockChannel, startGatewayStack, type GatewayStack,
} from '../../tests/harness/gateway-stack.js';

let stack: GatewayStack;
let slow: MockUpstream;
beforeAll(async () => {
  // Streaming headers may take 300 ms, a non-streaming answer 5 s; the provider generates for 1.2 s.
  stack = await startGatewayStack({ env: { UPSTREAM_HEADERS_TIMEOUT_MS: '300', UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS: '5000' } });
  slow = await startMockUpstream({ apiKey: MOCK_CHANNEL_KEY, firstTokenDelayMs: 1200, outputTokens: 5 });
  await mockChannel(stack, ['slow-gen'], 'default', { base_url: slow.url });
});
afterAll(async () => {
  await slow?.close();
  await stack?.close();
});

describe('a non-streaming generation longer than the streaming headers timeout', () => {
  it('is answered and billed what the provider reported', async () => {
    const acct = await fundedAccount(stack, 10_000_000);
    const { key } = await createApiKey(stack, acct);
    const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
    const message = await client.messages.create({ model: 'slow-gen', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
    expect(message.usage.output_tokens).toBe(5);
    expect(slow.stats.requests).toBe(1);
    await billingSettled(stack);
    const rows = await stack.sql<{ quota: string; type: number; completion_tokens: number }[]>`
      SELECT quota, type, completion_tokens FROM ledger WHERE user_id = ${acct.id}`;
    const credit = rows.filter((r) => r.type !== 2 && r.type !== 5);
    const billed = rows.filter((r) => r.type === 2);
    expect(billed).toHaveLength(1);
    expect(billed[0]!.completion_tokens).toBe(5);
    const [user] = await stack.sql<{ quota: string }[]>`SELECT quota FROM users WHERE id = ${acct.id}`;
    const funded = credit.reduce((s, r) => s + Number(r.quota), 0);
    expect(Number(user!.quota)).toBe(funded - Number(billed[0]!.quota));
    expect(Number(billed[0]!.quota)).toBeGreaterThan(0);
  });
});
