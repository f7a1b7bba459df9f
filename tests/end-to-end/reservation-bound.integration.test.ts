// The reservation bounds every cost (docs/billing.md, "Reserve"): requests whose few bytes cost many
// input tokens (a PDF given by URL) must not take a small balance below zero. The mock charges 50,000
// input tokens per document, far more than the bytes of its block; before the reservation bounded
// such blocks by the model's context window, 40 concurrent requests from 200,000 quota were all
// answered and the balance ended far below zero.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  billingSettled, createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack,
} from '../harness/gateway-stack.js';
import { relayMetrics } from '../../relay/metrics/relay-metrics.js';

// claude-3-haiku-20240307: model ratio 0.125, completion ratio 5 (core/pricing/ratios.ts); group 1.
const MODEL = 'claude-3-haiku-20240307';
const DOCUMENT_TOKENS = 50_000;
const FUNDS = 200_000;
const REQUESTS = 40;

let stack: GatewayStack;

beforeAll(async () => {
  // A token delay keeps the requests in flight together, as concurrent clients would be.
  stack = await startGatewayStack({ mock: { documentInputTokens: DOCUMENT_TOKENS, tokenDelayMs: 5 } });
  await mockChannel(stack, [MODEL]);
});
afterAll(async () => {
  await stack?.close();
});

async function usageEventsOf(userId: number): Promise<Record<string, unknown>[]> {
  const rs = await stack.ch.query({
    query: 'SELECT request_id, quota, prompt_tokens FROM logs FINAL WHERE user_id = {u:UInt64} AND type IN (2, 5)',
    query_params: { u: userId },
    format: 'JSONEachRow',
  });
  return rs.json<Record<string, unknown>>();
}

describe('the reservation bounds what media costs', () => {
  it('concurrent document requests never take Postgres or the Redis mirror below zero, and every answer is billed', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account);
    const overBefore = relayMetrics.overReservations.value;
    const client = new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 });

    let lowest = FUNDS;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const b = await stack.quota.accountBalance(account.id);
        if (b !== null) lowest = Math.min(lowest, b);
        await new Promise((r) => setTimeout(r, 2));
      }
    })();

    const results = await Promise.all(Array.from({ length: REQUESTS }, async (_, i) => {
      try {
        const { data, response } = await client.messages.create({
          model: MODEL,
          max_tokens: 16,
          messages: [{
            role: 'user',
            content: [
              { type: 'document', source: { type: 'url', url: `https://example.com/report-${i}.pdf` } },
              { type: 'text', text: 'Summarise this report.' },
            ],
          }],
        }).withResponse();
        return { status: 200, requestId: response.headers.get('x-gateway-request-id')!, input: data.usage.input_tokens };
      } catch (err) {
        if (err instanceof Anthropic.APIError) return { status: err.status ?? 0, requestId: '', input: 0 };
        throw err;
      }
    }));
    const answered = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status !== 200);
    // An answer may reach the client before its settlement reaches the stream: wait for each row.
    for (const r of answered) await ledgerRow(stack, r.requestId);
    await billingSettled(stack);
    sampling = false;
    await sampler;
    // Some are answered, the rest refused for the balance, none for anything else.
    expect(answered.length).toBeGreaterThan(0);
    expect(refused.length).toBeGreaterThan(0);
    expect(new Set(refused.map((r) => r.status))).toEqual(new Set([402]));
    for (const r of answered) expect(r.input).toBeGreaterThanOrEqual(DOCUMENT_TOKENS);

    // Every answered request was billed, once, and nothing else was.
    const ledger = await stack.sql`SELECT request_id, quota FROM ledger WHERE user_id = ${account.id} AND type IN (2, 5)`;
    expect(ledger.filter((r) => Number(r.quota) > 0).map((r) => r.request_id).sort()).toEqual(answered.map((r) => r.requestId).sort());
    const debited = ledger.reduce((s, r) => s + Number(r.quota), 0);
    const [user] = await stack.sql`SELECT quota FROM users WHERE id = ${account.id}`;
    expect(Number(user!.quota)).toBe(FUNDS - debited);
    expect(Number(user!.quota)).toBeGreaterThanOrEqual(0);
    expect(await stack.quota.accountBalance(account.id)).toBe(FUNDS - debited);
    expect(lowest).toBeGreaterThanOrEqual(0);

    // The logs say the same, and no request cost more than its reservation.
    const logs = await usageEventsOf(account.id);
    expect(logs.reduce((s, r) => s + Number(r.quota), 0)).toBe(debited);
    expect(relayMetrics.overReservations.value).toBe(overBefore);
  }, 60_000);

  it('a Claude 4.6 model reserves its 1M window: a prompt of 250,000 tokens by URL is within the reservation', async () => {
    // claude-sonnet-4-6 takes 1M tokens without a beta (input-bound.ts). With the 200,000 of older
    // Claude models each of these requests reserved 200,080 and cost 250,000 and more: all 3 were
    // answered over their reservations (a smaller balance went below zero).
    const model = 'claude-sonnet-4-6';
    await mockChannel(stack, [model]); // its built-in price: ratio 1.5 ($3 per million input tokens), completion ratio 5
    const funds = 1_650_000;
    const account = await fundedAccount(stack, funds);
    const key = await createApiKey(stack, account);
    const overBefore = relayMetrics.overReservations.value;
    const client = new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 });
    const results = await Promise.all(Array.from({ length: 3 }, async (_, i) => {
      try {
        const { response } = await client.messages.create({
          model,
          max_tokens: 16,
          messages: [{
            role: 'user',
            content: [
              ...Array.from({ length: 5 }, (_, d) => ({ type: 'document' as const, source: { type: 'url' as const, url: `https://example.com/r${i}-${d}.pdf` } })),
              { type: 'text' as const, text: 'Compare these reports.' },
            ],
          }],
        }).withResponse();
        return { status: 200, requestId: response.headers.get('x-gateway-request-id')! };
      } catch (err) {
        if (err instanceof Anthropic.APIError) return { status: err.status ?? 0, requestId: '' };
        throw err;
      }
    }));
    // (1,000,000 + 16 × 5) × 1.5 = 1,500,120 reserved each: one fits the balance, the others are refused for it.
    const answered = results.filter((r) => r.status === 200);
    expect(answered).toHaveLength(1);
    expect(results.filter((r) => r.status === 402)).toHaveLength(2);
    const row = await ledgerRow(stack, answered[0]!.requestId);
    await billingSettled(stack);
    expect(Number(row.prompt_tokens)).toBeGreaterThanOrEqual(5 * DOCUMENT_TOKENS);
    const [user] = await stack.sql`SELECT quota FROM users WHERE id = ${account.id}`;
    expect(Number(user!.quota)).toBe(funds - Number(row.quota));
    expect(await stack.quota.accountBalance(account.id)).toBe(funds - Number(row.quota));
    const logs = await usageEventsOf(account.id);
    expect(logs.reduce((s, r) => s + Number(r.quota), 0)).toBe(Number(row.quota));
    expect(relayMetrics.overReservations.value).toBe(overBefore);
  }, 60_000);

  it('media stated past a known window are billed at the window: a balance of one reservation is not taken below zero', async () => {
    // claude-3-haiku's window is 200,000 (input-bound.ts): 5 documents the mock states as 250,000
    // tokens are more than it takes, so a real provider would have refused the prompt. Billed as
    // stated, such a request cost 250,000 × 0.125 where 200,000 × 0.125 was reserved, and took a
    // balance of one reservation to -6,250 (a probe: -100,001 with a larger model).
    const reservation = Math.round((200_000 + 16 * 5) * 0.125);
    const account = await fundedAccount(stack, reservation);
    const key = await createApiKey(stack, account);
    const client = new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 });
    const { data, response } = await client.messages.create({
      model: MODEL,
      max_tokens: 16,
      messages: [{
        role: 'user',
        content: [
          ...Array.from({ length: 5 }, (_, d) => ({ type: 'document' as const, source: { type: 'url' as const, url: `https://example.com/w${d}.pdf` } })),
          { type: 'text' as const, text: 'Compare these reports.' },
        ],
      }],
    }).withResponse();
    // The client sees what the provider stated; the books bill the window.
    expect(data.usage.input_tokens).toBeGreaterThan(5 * DOCUMENT_TOKENS);
    const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
    await billingSettled(stack);
    expect(Number(row.prompt_tokens)).toBe(200_000);
    expect(Number(row.quota)).toBe(Math.round((200_000 + data.usage.output_tokens * 5) * 0.125));
    const [user] = await stack.sql`SELECT quota FROM users WHERE id = ${account.id}`;
    expect(Number(user!.quota)).toBe(reservation - Number(row.quota));
    expect(Number(user!.quota)).toBeGreaterThanOrEqual(0);
    expect(await stack.quota.accountBalance(account.id)).toBe(reservation - Number(row.quota));
    expect((await usageEventsOf(account.id)).reduce((s, r) => s + Number(r.quota), 0)).toBe(Number(row.quota));
  }, 60_000);
});
