// Channel routing against several mock providers: priority, weight, retries on connection errors,
// 429 and 5xx, never after the first byte, and the `auto` group with cross-group retry.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockUpstream, type MockUpstream } from '../../bench/mock-upstream/mock-upstream.js';
import {
  billingSettled, createApiKey, fundedAccount, MOCK_CHANNEL_KEY, mockChannel, startGatewayStack,
  type GatewayStack,
} from '../../tests/harness/gateway-stack.js';

let stack: GatewayStack;
let failing: MockUpstream;
let second: MockUpstream;
let key: string;

beforeAll(async () => {
  stack = await startGatewayStack({ env: { RELAY_MAX_TRIES: '3' } });
  failing = await startMockUpstream({ apiKey: MOCK_CHANNEL_KEY, errorRate: 1 });
  second = await startMockUpstream({ apiKey: MOCK_CHANNEL_KEY });
  const account = await fundedAccount(stack, 50_000_000);
  key = (await createApiKey(stack, account)).key;
});
afterAll(async () => {
  await failing?.close();
  await second?.close();
  await stack?.close();
});

const client = () => new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });

async function send(model: string, apiKey = key, endUser?: string) {
  const { data, response } = await new Anthropic({ apiKey, baseURL: stack.relayUrl, maxRetries: 0 }).messages
    .create({ model, max_tokens: 4, messages: [{ role: 'user', content: 'route me' }], ...(endUser ? { metadata: { user_id: endUser } } : {}) }).withResponse();
  return { data, requestId: response.headers.get('x-gateway-request-id')! };
}

async function ledgerOf(requestId: string) {
  await billingSettled(stack);
  const [row] = await stack.sql`SELECT channel_id, "group", quota FROM ledger WHERE request_id = ${requestId}`;
  return row as { channel_id: number; group: string; quota: number };
}

function requestsTo(mock: MockUpstream, model: string): number {
  return mock.requests.filter((r) => (r.body as { model?: string } | undefined)?.model === model).length;
}

describe('priority and retries', () => {
  it('retries a 529 from the highest-priority channel on the next one and logs the channel that answered', async () => {
    const model = 'route-priority';
    await mockChannel(stack, [model], 'default', { base_url: failing.url, priority: 10 });
    const healthy = await mockChannel(stack, [model], 'default', { base_url: second.url, priority: 0 });
    const { data, requestId } = await send(model);
    expect(data.type).toBe('message');
    expect(requestsTo(failing, model)).toBe(1);
    expect((await ledgerOf(requestId)).channel_id).toBe(healthy);
  });

  it('retries a connection error on the next channel', async () => {
    const model = 'route-refused';
    await mockChannel(stack, [model], 'default', { base_url: 'http://127.0.0.1:9', priority: 5 });
    const healthy = await mockChannel(stack, [model], 'default', { base_url: second.url, priority: 1 });
    const { requestId } = await send(model);
    expect((await ledgerOf(requestId)).channel_id).toBe(healthy);
  });

  it('passes the last failure through after RELAY_MAX_TRIES channels, billing nothing', async () => {
    const model = 'route-exhausted';
    for (const p of [30, 20, 10]) await mockChannel(stack, [model], 'default', { base_url: failing.url, priority: p });
    await mockChannel(stack, [model], 'default', { base_url: second.url, priority: 0 });
    const err = await send(model).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(529);
    expect(requestsTo(failing, model)).toBe(3);
    expect(requestsTo(second, model)).toBe(0);
  });

  it('never retries once the first byte has reached the client', async () => {
    const model = 'route-midstream';
    const dying = await startMockUpstream({ apiKey: MOCK_CHANNEL_KEY, failMidStreamAfterTokens: 3, tokenDelayMs: 5 });
    try {
      await mockChannel(stack, [model], 'default', { base_url: dying.url, priority: 10 });
      await mockChannel(stack, [model], 'default', { base_url: second.url, priority: 0 });
      const stream = client().messages.stream({ model, max_tokens: 50, messages: [{ role: 'user', content: 'x' }] });
      const err = await stream.finalMessage().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect(requestsTo(second, model)).toBe(0);
    } finally {
      await dying.close();
    }
  });
});

describe('model mapping', () => {
  it('sends the provider the mapped model name and logs the requested one', async () => {
    const model = 'route-alias';
    await mockChannel(stack, [model], 'default', { base_url: second.url, model_mapping: { [model]: 'claude-haiku-4-5' } });
    const { requestId } = await send(model);
    const seen = second.requests.at(-1)!;
    expect((seen.body as { model: string }).model).toBe('claude-haiku-4-5');
    await billingSettled(stack);
    const [row] = await stack.sql`SELECT model_name FROM ledger WHERE request_id = ${requestId}`;
    expect(row!.model_name).toBe(model);
  });
});

describe('a channel whose credential cannot be opened', () => {
  it('is skipped, and every other route keeps working', async () => {
    const [bad] = await stack.sql`
      INSERT INTO channels (name, base_url, key_ciphertext, models, "group")
      VALUES ('sealed-elsewhere', ${second.url}, ${Buffer.from('not sealed with this KEY_SECRET, at all')}, 'route-unreadable', 'default')
      RETURNING id`;
    await stack.sql`INSERT INTO abilities ("group", model, channel_id) VALUES ('default', 'route-unreadable', ${bad!.id})`;
    const model = 'route-readable';
    await mockChannel(stack, [model], 'default', { base_url: second.url });
    expect(stack.relay.hasChannel(bad!.id as number)).toBe(false);
    expect((await send(model)).data.type).toBe('message');
    const err = await send('route-unreadable').catch((e: unknown) => e);
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(404);
  });
});

describe('weight', () => {
  // Cache affinity keeps one key (or end user) on one channel, so the weights share the keys and end
  // users of a tier (channel-health.integration.test.ts checks the affinity itself).
  it('shares a priority tier by weight, over end users', async () => {
    const model = 'route-weight';
    const heavy = await startMockUpstream({ apiKey: MOCK_CHANNEL_KEY });
    const light = await startMockUpstream({ apiKey: MOCK_CHANNEL_KEY });
    try {
      await mockChannel(stack, [model], 'default', { base_url: heavy.url, weight: 3 });
      await mockChannel(stack, [model], 'default', { base_url: light.url, weight: 1 });
      for (let i = 0; i < 10; i++) await Promise.all(Array.from({ length: 20 }, (_, j) => send(model, key, `weight-user-${i * 20 + j}`)));
      const share = heavy.stats.requests / (heavy.stats.requests + light.stats.requests);
      expect(heavy.stats.requests + light.stats.requests).toBe(200);
      // 3:1 gives 0.75; the bounds are more than five standard deviations wide.
      expect(share).toBeGreaterThan(0.6);
      expect(share).toBeLessThan(0.9);
    } finally {
      await heavy.close();
      await light.close();
    }
  });
});

describe('the auto group', () => {
  beforeAll(async () => {
    await stack.sql`INSERT INTO options (key, value) VALUES ('AutoGroups', '["vip","default"]')
                    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
    await stack.redis.publish(stack.keys.invalidationChannel(), JSON.stringify({ kind: 'options', keys: ['AutoGroups'] }));
    await new Promise((r) => setTimeout(r, 100));
  });

  it('with cross_group_retry, moves to the next group when the first group fails, and bills that group', async () => {
    const model = 'route-auto';
    await mockChannel(stack, [model], 'vip', { base_url: failing.url });
    const fallback = await mockChannel(stack, [model], 'default', { base_url: second.url });
    const account = await fundedAccount(stack, 1_000_000);
    const crossing = await createApiKey(stack, account, { group: 'auto', cross_group_retry: true });
    const { requestId } = await send(model, crossing.key);
    expect(await ledgerOf(requestId)).toMatchObject({ channel_id: fallback, group: 'default' });

    const staying = await createApiKey(stack, account, { group: 'auto', cross_group_retry: false });
    const err = await send(model, staying.key).catch((e: unknown) => e);
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(529);
  });

  it('tries the configured groups in order', async () => {
    const model = 'route-auto-order';
    const vip = await mockChannel(stack, [model], 'vip', { base_url: second.url });
    await mockChannel(stack, [model], 'default', { base_url: second.url });
    const account = await fundedAccount(stack, 1_000_000);
    const auto = await createApiKey(stack, account, { group: 'auto' });
    const { requestId } = await send(model, auto.key);
    expect(await ledgerOf(requestId)).toMatchObject({ channel_id: vip, group: 'vip' });
  });
});
