// One request end to end: the official Anthropic SDK through the relay to the mock provider, the
// reservation and settlement in Redis, the billing worker into Postgres and ClickHouse, and the
// console's log and statistics endpoints, with the money checked to the unit.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  billingSettled, consoleCall, createApiKey, fundedAccount, mockChannel, startGatewayStack,
  type GatewayStack, type TestAccount,
} from '../harness/gateway-stack.js';

// claude-haiku-4-5: model ratio 0.5, completion ratio 5 (core/pricing/ratios.ts); group default: 1.
const MODEL = 'claude-haiku-4-5';
const expectedCost = (input: number, output: number) => Math.round((input + output * 5) * 0.5 * 1);

let stack: GatewayStack;

beforeAll(async () => {
  stack = await startGatewayStack();
  await mockChannel(stack, [MODEL]);
});
afterAll(async () => {
  await stack?.close();
});

async function accountRow(id: number) {
  const [row] = await stack.sql`SELECT quota, used_quota, request_count FROM users WHERE id = ${id}`;
  return row as { quota: number; used_quota: number; request_count: number };
}
async function tokenRow(id: number) {
  const [row] = await stack.sql`SELECT remain_quota, used_quota FROM tokens WHERE id = ${id}`;
  return row as { remain_quota: number; used_quota: number };
}
async function logRows(userId: number) {
  const rs = await stack.ch.query({
    // Requests only (consumption and error rows); the funding of the account is a management row.
    query: 'SELECT * FROM logs FINAL WHERE user_id = {u:UInt64} AND type IN (2, 5) ORDER BY created_at, request_id',
    query_params: { u: userId },
    format: 'JSONEachRow',
  });
  return rs.json<Record<string, unknown>>();
}
function sdk(key: string) {
  return new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
}

describe('a request through relay, billing and console', () => {
  let account: TestAccount;
  let key: { id: number; key: string };
  const FUNDS = 1_000_000;
  const KEY_QUOTA = 400_000;
  const bills: { requestId: string; cost: number; stream: boolean; input: number; output: number }[] = [];

  beforeAll(async () => {
    account = await fundedAccount(stack, FUNDS);
    key = await createApiKey(stack, account, { unlimited_quota: false, remain_quota: KEY_QUOTA });
  });

  it('answers a non-streaming request with the provider message and its request-id', async () => {
    const { data, response } = await sdk(key.key).messages
      .create({ model: MODEL, max_tokens: 20, messages: [{ role: 'user', content: 'Hello there, gateway' }] })
      .withResponse();
    expect(data.type).toBe('message');
    expect(data.content[0]).toMatchObject({ type: 'text' });
    expect(data.usage.output_tokens).toBe(20);
    expect(response.headers.get('request-id')).toMatch(/^req_/);
    const requestId = response.headers.get('x-gateway-request-id')!;
    expect(requestId).toBeTruthy();
    bills.push({ requestId, stream: false, input: data.usage.input_tokens, output: data.usage.output_tokens, cost: expectedCost(data.usage.input_tokens, data.usage.output_tokens) });
  });

  it('streams a request event by event through the SDK', async () => {
    const stream = sdk(key.key).messages.stream({ model: MODEL, max_tokens: 48, messages: [{ role: 'user', content: 'Stream to me, please' }] });
    const types: string[] = [];
    stream.on('streamEvent', (e) => types.push(e.type));
    const final = await stream.finalMessage();
    const { response } = await stream.withResponse();
    expect(types[0]).toBe('message_start');
    expect(types).toContain('content_block_delta');
    expect(types.at(-1)).toBe('message_stop');
    expect(final.usage.output_tokens).toBe(48);
    bills.push({ requestId: response.headers.get('x-gateway-request-id')!, stream: true, input: final.usage.input_tokens, output: final.usage.output_tokens, cost: expectedCost(final.usage.input_tokens, final.usage.output_tokens) });
  });

  it('takes the key from x-api-key too and passes anthropic-version through', async () => {
    const res = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': key.key, 'anthropic-version': '2023-06-01', 'anthropic-beta': 'test-beta-2025', 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Anthropic.Message;
    const seen = stack.mock.requests.at(-1)!;
    expect(seen.headers['anthropic-version']).toBe('2023-06-01');
    expect(seen.headers['anthropic-beta']).toBe('test-beta-2025');
    // The provider sees the channel's credential, never the caller's key.
    expect(seen.headers['x-api-key']).toBe('sk-ant-mock-channel-credential');
    expect(JSON.stringify(seen.headers)).not.toContain(key.key);
    bills.push({ requestId: res.headers.get('x-gateway-request-id')!, stream: false, input: body.usage.input_tokens, output: body.usage.output_tokens, cost: expectedCost(body.usage.input_tokens, body.usage.output_tokens) });
  });

  it('settles every request to the unit in Postgres, ClickHouse and the console', async () => {
    await billingSettled(stack);
    const total = bills.reduce((s, b) => s + b.cost, 0);
    expect(total).toBeGreaterThan(0);

    expect(await accountRow(account.id)).toEqual({ quota: FUNDS - total, used_quota: total, request_count: bills.length });
    expect(await tokenRow(key.id)).toEqual({ remain_quota: KEY_QUOTA - total, used_quota: total });
    expect(await stack.quota.accountBalance(account.id)).toBe(FUNDS - total);
    expect(await stack.quota.tokenRemain(account.id, key.id)).toBe(KEY_QUOTA - total);

    const rows = await logRows(account.id);
    expect(rows).toHaveLength(bills.length);
    for (const bill of bills) {
      const row = rows.find((r) => r.request_id === bill.requestId)!;
      expect(row).toBeDefined();
      expect(Number(row.quota)).toBe(bill.cost);
      expect(row.prompt_tokens).toBe(bill.input);
      expect(row.completion_tokens).toBe(bill.output);
      expect(row.is_stream).toBe(bill.stream);
      expect(row.type).toBe(2);
      expect(row.upstream_request_id).toMatch(/^req_/);
    }

    const logs = await consoleCall<{ items: Record<string, unknown>[]; total: number; page: number; page_size: number }>(
      stack, 'GET', '/api/log/self?p=1&page_size=50&type=2', account.token);
    expect(logs.status).toBe(200);
    expect(logs.json.success).toBe(true);
    expect(logs.json.data!.total).toBe(bills.length);
    expect(logs.json.data!.page).toBe(1);
    const item = logs.json.data!.items.find((i) => i.request_id === bills[0]!.requestId)!;
    const tokenName = (await stack.sql`SELECT name FROM tokens WHERE id = ${key.id}`)[0]!.name as string;
    expect(item).toEqual({
      id: expect.any(Number),
      user_id: account.id,
      created_at: expect.any(Number),
      type: 2,
      content: expect.any(String),
      username: account.username,
      token_name: tokenName,
      model_name: MODEL,
      quota: bills[0]!.cost,
      prompt_tokens: bills[0]!.input,
      completion_tokens: bills[0]!.output,
      use_time: expect.any(Number),
      is_stream: false,
      channel: expect.any(Number),
      token_id: key.id,
      group: 'default',
      request_id: bills[0]!.requestId,
      upstream_request_id: expect.stringMatching(/^req_/),
      protocol: 'anthropic',
    });
    expect(item.channel).toBeGreaterThan(0);
    expect(Math.abs((item.created_at as number) - Date.now() / 1000)).toBeLessThan(120);

    const stat = await consoleCall<{ quota: number; rpm: number; tpm: number }>(stack, 'GET', '/api/log/self/stat', account.token);
    expect(stat.json.data).toEqual({
      quota: total,
      rpm: bills.length,
      tpm: bills.reduce((s, b) => s + b.input + b.output, 0),
    });

    // The administrator's funding of the account is logged too, as a management row.
    const manage = await consoleCall<{ items: { quota: number; type: number }[]; total: number }>(
      stack, 'GET', '/api/log/self?type=3', account.token);
    expect(manage.json.data!.total).toBe(1);
    expect(manage.json.data!.items[0]).toMatchObject({ type: 3, quota: FUNDS });

    const self = await consoleCall<{ quota: number; used_quota: number }>(stack, 'GET', '/api/user/self', account.token);
    expect(self.json.data).toMatchObject({ quota: FUNDS - total, used_quota: total });
  });
});

describe('not enough credit', () => {
  it('answers 402 billing_error and moves nothing', async () => {
    const account = await fundedAccount(stack, 50);
    const key = await createApiKey(stack, account);
    const err = await sdk(key.key).messages
      .create({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'expensive' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(402);
    expect((err as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: 'error', error: { type: 'billing_error' } });
    await billingSettled(stack);
    expect(await accountRow(account.id)).toEqual({ quota: 50, used_quota: 0, request_count: 0 });
    expect(await stack.quota.accountBalance(account.id)).toBe(50);
    expect(await logRows(account.id)).toHaveLength(0);
  });

  it('refuses a request without a key or with an unknown key in Anthropic format', async () => {
    const none = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST', body: JSON.stringify({ model: MODEL, max_tokens: 1, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(none.status).toBe(401);
    expect(await none.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
    const err = await sdk('sk-unknownunknownunknown').messages
      .create({ model: MODEL, max_tokens: 1, messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
  });
});

describe('200 concurrent requests from an account funded for about 50', () => {
  it('never lets the balance below zero, and the debits equal the logged quota', async () => {
    const body = { model: MODEL, max_tokens: 10, messages: [{ role: 'user' as const, content: 'count' }] };
    // input = ceil(5 / 4) = 2 tokens (bench/mock-upstream countInputTokens), output = 10.
    const perRequest = expectedCost(2, 10);
    const funds = perRequest * 50 + Math.floor(perRequest / 2);
    const account = await fundedAccount(stack, funds);
    const key = await createApiKey(stack, account);
    const client = sdk(key.key);

    let lowest = funds;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const v = await stack.quota.accountBalance(account.id);
        if (v !== null) lowest = Math.min(lowest, v);
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    const results = await Promise.allSettled(Array.from({ length: 200 }, () => client.messages.create(body)));
    sampling = false;
    await sampler;

    const ok = results.filter((r) => r.status === 'fulfilled').length;
    const refused = results.filter((r) => r.status === 'rejected');
    for (const r of refused) expect(((r as PromiseRejectedResult).reason as { status?: number }).status).toBe(402);
    expect(ok).toBeGreaterThan(0);
    expect(ok).toBeLessThanOrEqual(50);
    expect(lowest).toBeGreaterThanOrEqual(0);

    await billingSettled(stack);
    const after = await accountRow(account.id);
    expect(after.quota).toBeGreaterThanOrEqual(0);
    const debits = funds - after.quota;
    const rows = await logRows(account.id);
    const logged = rows.reduce((s, r) => s + Number(r.quota), 0);
    const [ledger] = await stack.sql`SELECT COALESCE(SUM(quota), 0)::bigint AS q, COUNT(*)::int AS n FROM ledger WHERE user_id = ${account.id} AND type IN (2, 5)`;
    expect(debits).toBe(ok * perRequest);
    expect(logged).toBe(debits);
    expect(Number(ledger!.q)).toBe(debits);
    expect(rows.filter((r) => r.type === 2)).toHaveLength(ok);
    expect(after.used_quota).toBe(debits);
    expect(await stack.quota.accountBalance(account.id)).toBe(after.quota);
  });
});
