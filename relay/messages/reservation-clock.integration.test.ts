// The deadline the relay gives a request's reservation (messages-handler.ts) is dated with Redis's
// clock (core/quota/redis-clock.ts), which the billing worker's reaper reads too, not with the relay
// host's: dated with a host clock 120 s ahead, a crashed relay's reservation stayed held 120 s past
// its TTL (core/quota/redis-clock.integration.test.ts has the reaper's side).
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

const MODEL = 'claude-haiku-4-5';
const SKEW_MS = 120_000;
const TTL_SEC = 30;
const realNow = Date.now.bind(Date);

let stack: GatewayStack;
let account: TestAccount;
let key: { id: number; key: string };

beforeAll(async () => {
  // This host's clock (the relay's, here in the test's process) runs 120 s ahead of Redis's.
  vi.spyOn(Date, 'now').mockImplementation(() => realNow() + SKEW_MS);
  stack = await startGatewayStack({
    env: { RESERVATION_TTL_SEC: String(TTL_SEC) },
    mock: { tokenDelayMs: 50, outputTokens: 20 },
  });
  await mockChannel(stack, [MODEL]);
  account = await fundedAccount(stack, 10_000_000);
  // A limited key: reserved request by request, with the handler's deadline (an unlimited key's come from a slice).
  key = await createApiKey(stack, account, { unlimited_quota: false, remain_quota: 10_000_000 });
});
afterAll(async () => {
  // Closed on the clock it ran on: times it took under the skew (a flush due at, a lease refresh at)
  // would otherwise lie 120 s ahead of the restored clock.
  await stack?.close();
  vi.restoreAllMocks();
});

async function redisNow(): Promise<number> {
  const [sec, usec] = await stack.redis.time();
  return Number(sec) * 1000 + Number(usec) / 1000;
}

describe('a reservation made by a relay whose host clock runs ahead', () => {
  it('has its deadline a TTL after Redis\'s clock, not the host\'s', async () => {
    const client = new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 });
    const { data: stream, response } = await client.messages
      .create({ model: MODEL, max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'Tell me a story' }] })
      .withResponse();
    const requestId = response.headers.get('x-gateway-request-id')!;
    let deadline: string | null = null;
    let at = 0;
    for await (const e of stream) {
      if (e.type === 'content_block_delta' && deadline === null) {
        deadline = await stack.redis.zscore(stack.keys.reservationDeadlines(stack.keys.shardOf(account.id)), `${account.id}:${requestId}`);
        at = await redisNow();
      }
    }
    expect(deadline).not.toBeNull();
    // Set at the request's start (or a beat since): within a few seconds before now + TTL, never 120 s on.
    const ahead = Number(deadline) - (at + TTL_SEC * 1000);
    expect(ahead).toBeLessThanOrEqual(1_000);
    expect(ahead).toBeGreaterThan(-10_000);
  });
});
