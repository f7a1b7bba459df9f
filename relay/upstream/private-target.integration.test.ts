// A channel's base_url is checked when it is saved, but a name can resolve to a public address then
// and to 127.0.0.1 later (DNS rebinding), and an administrator who is not root controls both the
// channel and the name. Unless the root option ChannelAllowPrivateNetworks is on, the relay must
// refuse such a target when it connects, as the console's channel test does: otherwise any API key
// makes it POST the channel's credential into the gateway's own network. A channel named `localhost`
// stands for the rebound name (it resolves to loopback here, with no DNS server to rebind); it is
// saved while the option is on, as the harness's stack has it, which is what a save-time check lets
// through for a name that resolved to a public address.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { channelMetrics } from '../metrics/channel-metrics.js';
import {
  billingSettled, consoleCall, createApiKey, fundedAccount, mockChannel, priceModels, startGatewayStack, uniqueName,
  type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

const NAMED = 'rebound-name-model';
const LITERAL = 'loopback-literal-model';
/** Served by both channels: a refusal moves on to the other, as a refused connection does. */
const BOTH = 'both-private-model';
const FUNDS = 50_000_000;

let stack: GatewayStack;
let account: TestAccount;
let anthropic: Anthropic;
let named = 0;
let literal = 0;

beforeAll(async () => {
  stack = await startGatewayStack({ mock: { outputTokens: 5 } });
  const port = new URL(stack.mock.url).port;
  named = await mockChannel(stack, [NAMED, BOTH], 'default', { base_url: `http://localhost:${port}`, priority: 1 });
  literal = await mockChannel(stack, [LITERAL, BOTH], 'default', { base_url: `http://127.0.0.1:${port}` });
  account = await fundedAccount(stack, FUNDS);
  anthropic = new Anthropic({ apiKey: (await createApiKey(stack, account)).key, baseURL: stack.relayUrl, maxRetries: 0 });
});
afterAll(async () => {
  await stack?.close();
});

/**
 * Sets the option as root does, and waits until the relay has read it: options are read whole, so
 * once the relay prices a model written after the option, it has read the option too.
 */
async function allowPrivateNetworks(on: boolean): Promise<void> {
  const { json } = await consoleCall(stack, 'PUT', '/api/option/', stack.adminToken, { key: 'ChannelAllowPrivateNetworks', value: on });
  expect(json.success).toBe(true);
  await priceModels(stack, [uniqueName('reload-marker-')]);
}

const PROMPT = [{ role: 'user' as const, content: 'What is on 127.0.0.1:8123?' }];
const ask = (model: string) => anthropic.messages.create({ model, max_tokens: 20, messages: PROMPT });
async function askStreamed(model: string): Promise<void> {
  for await (const _ of await anthropic.messages.create({ model, max_tokens: 20, messages: PROMPT, stream: true }));
}

/** The account's balance in Postgres and in the relay's Redis mirror, and what its ledger rows charged (a failure's row charges 0). */
async function books(): Promise<{ balance: number; mirror: number | null; charged: number }> {
  await billingSettled(stack);
  const [u] = await stack.sql`SELECT quota FROM users WHERE id = ${account.id}`;
  const [l] = await stack.sql`SELECT coalesce(sum(quota), 0)::bigint AS q FROM ledger WHERE user_id = ${account.id}`;
  return { balance: Number(u!.quota), mirror: await stack.quota.accountBalance(account.id), charged: Number(l!.q) };
}

describe('a channel whose base_url is, or resolves to, a private address', () => {
  it('is reached while ChannelAllowPrivateNetworks is on', async () => {
    const sent = stack.mock.stats.requests;
    for (const model of [NAMED, LITERAL]) expect((await ask(model)).type).toBe('message');
    expect(stack.mock.stats.requests).toBe(sent + 2);
  });

  it('is refused at connection time once the option is off, kept-alive connections included: nothing sent, nothing billed', async () => {
    await allowPrivateNetworks(false);
    const before = { sent: stack.mock.stats.requests, books: await books() };
    for (const model of [NAMED, LITERAL]) {
      for (const call of [ask, askStreamed]) {
        const err = await call(model).then(() => null, (e: unknown) => e);
        // What the relay answers for any provider it cannot reach; the address is not told.
        expect(err).toBeInstanceOf(Anthropic.InternalServerError);
        expect((err as InstanceType<typeof Anthropic.APIError>).error).toEqual({
          type: 'error', error: { type: 'api_error', message: 'The model provider could not be reached.' },
          // The gateway's request id, as the answer's x-gateway-request-id header has it.
          request_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        });
      }
    }
    expect(stack.mock.stats.requests).toBe(before.sent);
    expect(await books()).toEqual(before.books);
  });

  it('counts as a failed connection: the next channel is tried', async () => {
    const connections = () => [named, literal].map((id) => channelMetrics.attempts.get(channelMetrics.label(id), 'connection'));
    const [a, b] = connections();
    const sent = stack.mock.stats.requests;
    await expect(ask(BOTH)).rejects.toBeInstanceOf(Anthropic.InternalServerError);
    expect(connections()).toEqual([a! + 1, b! + 1]);
    expect(stack.mock.stats.requests).toBe(sent);
  });

  it('is reached again once the option is back on', async () => {
    await allowPrivateNetworks(true);
    const sent = stack.mock.stats.requests;
    for (const model of [NAMED, LITERAL]) expect((await ask(model)).type).toBe('message');
    expect(stack.mock.stats.requests).toBe(sent + 2);
  });
});
