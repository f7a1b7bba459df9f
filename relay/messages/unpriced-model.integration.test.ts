// A model that no ratio prices (neither the built-in table nor the ModelRatio option) is refused with
// a 404 in the route's error format before anything is reserved or sent to the provider, as new-api
// refuses it; before, it was served at ratio 1, whatever the provider charges for it. The option
// SelfUseModeEnabled (root's) serves it at new-api's 37.5, billed exactly in every book.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  settledAccountQuota,
  consoleCall, createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, unpricedMockChannel, type GatewayStack, type TestAccount, storeOptions
} from '../../tests/harness/gateway-stack.js';

const UNPRICED = 'claude-unreleased-5';
const PRICED = 'claude-haiku-4-5';
const OUTPUT = 7;
const FUNDS = 50_000_000;

let stack: GatewayStack;
let account: TestAccount;
let anthropic: Anthropic;
let openai: OpenAI;

beforeAll(async () => {
  stack = await startGatewayStack({ mock: { outputTokens: OUTPUT } });
  // Created through the console without pricing its model (the harness's mockChannel would price it).
  await unpricedMockChannel(stack, [UNPRICED]);
  await mockChannel(stack, [PRICED]);
  account = await fundedAccount(stack, FUNDS);
  const key = (await createApiKey(stack, account)).key;
  anthropic = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
  openai = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  await stack?.close();
});

const balance = (): Promise<number> => settledAccountQuota(stack, account.id);

async function ledgerRows(): Promise<number> {
  const [r] = await stack.sql`SELECT count(*)::int AS n FROM ledger WHERE user_id = ${account.id}`;
  return r!.n as number;
}

async function setSelfUseMode(on: boolean): Promise<void> {
  const { json } = await consoleCall(stack, 'PUT', '/api/option/', stack.adminToken, { key: 'SelfUseModeEnabled', value: String(on) });
  expect(json.success).toBe(true);
  const deadline = Date.now() + 5000;
  while (stack.relay.hasPrice(UNPRICED) !== on) {
    if (Date.now() > deadline) throw new Error('the relay did not pick up SelfUseModeEnabled');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('a model without a price', () => {
  it('is refused on /v1/messages with Anthropic\'s 404, nothing reserved, billed or sent to the provider', async () => {
    const before = { balance: await balance(), mirror: await stack.quota.accountBalance(account.id), sent: stack.mock.stats.requests, ledger: await ledgerRows() };
    for (const stream of [false, true]) {
      const err = await anthropic.messages.create({ model: UNPRICED, max_tokens: 50, stream, messages: [{ role: 'user', content: 'hi' }] })
        .then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.NotFoundError);
      const e = err as InstanceType<typeof Anthropic.NotFoundError>;
      expect(e.error).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
      expect((e.error as { error: { message: string } }).error.message).toContain(`Model "${UNPRICED}" has no price`);
    }
    expect(stack.mock.stats.requests).toBe(before.sent);
    expect(await balance()).toBe(before.balance);
    expect(await stack.quota.accountBalance(account.id)).toBe(before.mirror);
    expect(await ledgerRows()).toBe(before.ledger);
  });

  it('is refused on /v1/chat/completions with OpenAI\'s 404 (code model_not_priced)', async () => {
    const sent = stack.mock.stats.requests;
    const err = await openai.chat.completions.create({ model: UNPRICED, messages: [{ role: 'user', content: 'hi' }] }).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).code).toBe('model_not_priced');
    expect(stack.mock.stats.requests).toBe(sent);
  });

  it('is served with SelfUseModeEnabled at ratio 37.5 (completion 5), the same quota in the ledger, users.quota and the mirror', async () => {
    await setSelfUseMode(true);
    try {
      const before = await balance();
      const { data, response } = await anthropic.messages.create({ model: UNPRICED, max_tokens: 50, messages: [{ role: 'user', content: 'Hello there' }] }).withResponse();
      expect(data.usage.output_tokens).toBe(OUTPUT);
      // Written out, not taken from core/pricing: (input + output × 5) × 37.5.
      const quota = Math.round((data.usage.input_tokens + OUTPUT * 5) * 37.5);
      const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
      expect(row).toMatchObject({ quota, prompt_tokens: data.usage.input_tokens, completion_tokens: OUTPUT });
      expect(before - await balance()).toBe(quota);
      expect(await stack.quota.accountBalance(account.id)).toBe(await balance());
    } finally {
      await setSelfUseMode(false);
    }
  });
});

// Ratios each a number can multiply past what a balance holds, or to NaN (Infinity × a GroupRatio of
// 0). Before: Redis refused the amount, and every request of the model heard 529 "the relay cannot
// reach its quota store" for as long as the prices stayed (review admin, defect 1).
describe('a price whose ratios multiply past what a balance can hold', () => {
  it.each<{ name: string; options: Record<string, string> }>([
    { name: 'infinite (1e300 × 1e300)', options: { ModelRatio: `{"${PRICED}":1e300}`, CompletionRatio: `{"${PRICED}":1e300}` } },
    { name: 'NaN (1e300 × 1e300 × GroupRatio 0)', options: { ModelRatio: `{"${PRICED}":1e300}`, CompletionRatio: `{"${PRICED}":1e300}`, GroupRatio: '{"default":0,"vip":1,"svip":1}' } },
  ])('$name: refused 404 in each protocol, saying why; nothing reserved, billed or sent', async ({ options }) => {
    await storeOptions(stack, options);
    try {
      const before = { balance: await balance(), mirror: await stack.quota.accountBalance(account.id), sent: stack.mock.stats.requests, ledger: await ledgerRows() };
      for (const stream of [false, true]) {
        const err = await anthropic.messages.create({ model: PRICED, max_tokens: 50, stream, messages: [{ role: 'user', content: 'hi' }] }).then(() => null, (e: unknown) => e);
        expect(err).toBeInstanceOf(Anthropic.NotFoundError);
        expect(((err as InstanceType<typeof Anthropic.NotFoundError>).error as { error: { message: string } }).error.message).toContain('gives no usable cost');
      }
      const err = await openai.chat.completions.create({ model: PRICED, messages: [{ role: 'user', content: 'hi' }] }).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
      expect((err as InstanceType<typeof OpenAI.NotFoundError>).code).toBe('model_not_priced');
      expect(stack.mock.stats.requests).toBe(before.sent);
      expect(await balance()).toBe(before.balance);
      expect(await stack.quota.accountBalance(account.id)).toBe(before.mirror);
      expect(await ledgerRows()).toBe(before.ledger);
    } finally {
      await storeOptions(stack, Object.fromEntries(Object.keys(options).map((k) => [k, null])));
    }
  });
});
