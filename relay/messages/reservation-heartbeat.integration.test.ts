// A live relay renews the deadlines of the reservations it holds, so a request that outlives
// RESERVATION_TTL_SEC keeps its reservation and is billed once against it; a reservation no live relay
// renews (its relay died) is still released by the reaper.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  settledAccountQuota,
  billingSettled, createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

const MODEL = 'claude-haiku-4-5';
// claude-haiku-4-5: model ratio 0.5, completion ratio 5, group default 1 (core/pricing/ratios.ts).
const cost = (input: number, output: number) => Math.round((input + output * 5) * 0.5);
const FUNDS = 10_000_000;
const TTL_MS = 1000;
// 30 tokens 100 ms apart: the stream lives about three TTLs.
const OUTPUT = 30;

let stack: GatewayStack;
let account: TestAccount;
let key: { id: number; key: string };

beforeAll(async () => {
  stack = await startGatewayStack({
    env: { RESERVATION_TTL_SEC: String(TTL_MS / 1000), RESERVATION_REAP_INTERVAL_MS: '100' },
    mock: { tokenDelayMs: 100, outputTokens: OUTPUT },
  });
  await mockChannel(stack, [MODEL]);
  account = await fundedAccount(stack, FUNDS);
  // A limited key: its requests are reserved one by one in Redis, with the deadlines this file is
  // about (an unlimited key's come from a credit slice, whose deadline renews on its own clock:
  // core/quota/credit-slices.integration.test.ts).
  key = await createApiKey(stack, account, { unlimited_quota: false, remain_quota: FUNDS });
});
afterAll(async () => {
  await stack?.close();
});

const balance = (): Promise<number> => settledAccountQuota(stack, account.id);

async function ledgerHas(requestId: string): Promise<boolean> {
  const rows = await stack.sql`SELECT 1 FROM ledger WHERE request_id = ${requestId}`;
  return rows.length > 0;
}

describe('a request that outlives the reservation TTL', () => {
  it('keeps its reservation while alive and is billed exactly once', async () => {
    const before = await balance();
    const client = new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 });
    const { data: stream, response } = await client.messages
      .create({ model: MODEL, max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'Tell me a long story' }] })
      .withResponse();
    const requestId = response.headers.get('x-gateway-request-id')!;
    const reservationKey = stack.keys.reservation(account.id, requestId);
    const startedAt = Date.now();
    let input = 0;
    let deltas = 0;
    let heldPastTtl = 0;
    for await (const e of stream) {
      if (e.type === 'message_start') input = e.message.usage.input_tokens;
      if (e.type === 'content_block_delta') {
        deltas++;
        // Past two TTLs and several reaper passes, the reservation must still be open.
        if (Date.now() - startedAt > 2 * TTL_MS && deltas < OUTPUT - 2 && heldPastTtl === 0) {
          heldPastTtl = await stack.redis.exists(reservationKey);
        }
      }
    }
    expect(Date.now() - startedAt).toBeGreaterThan(2 * TTL_MS);
    expect(deltas).toBe(OUTPUT);
    expect(heldPastTtl).toBe(1);

    const row = await ledgerRow(stack, requestId);
    expect(row).toMatchObject({ completion_tokens: OUTPUT, prompt_tokens: input, quota: cost(input, OUTPUT) });
    await billingSettled(stack);
    // Never released: no expiry row, and the one debit is the actual cost.
    expect(await ledgerHas(`${requestId}:expired`)).toBe(false);
    expect(await balance()).toBe(before - cost(input, OUTPUT));
    expect(await stack.quota.accountBalance(account.id)).toBe(before - cost(input, OUTPUT));
    expect(await stack.redis.exists(reservationKey)).toBe(0);
    expect(await stack.redis.zscore(stack.keys.reservationDeadlines(), `${account.id}:${requestId}`)).toBeNull();
  });
});

describe('a reservation whose relay died', () => {
  it('is released by the reaper once its deadline passes unrenewed', async () => {
    const mirror = (await stack.quota.accountBalance(account.id))!;
    const requestId = `dead-relay-${Date.now()}`;
    const outcome = await stack.quota.reserve({
      userId: account.id, tokenId: key.id, tokenLimited: false, requestId, amount: 5_000, deadlineMs: Date.now() + TTL_MS,
    });
    expect(outcome).toBe('reserved');
    expect(await stack.quota.accountBalance(account.id)).toBe(mirror - 5_000);
    const deadline = Date.now() + 10_000;
    while (await stack.redis.exists(stack.keys.reservation(account.id, requestId))) {
      if (Date.now() > deadline) throw new Error('the reaper never released the reservation');
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await stack.quota.accountBalance(account.id)).toBe(mirror);
    await billingSettled(stack);
    expect(await ledgerHas(`${requestId}:expired`)).toBe(true);
  });
});
