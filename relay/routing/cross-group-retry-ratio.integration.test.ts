// A cross-group retry is billed at the group ratio the request was reserved at. The reservation
// prices every group an `auto` key may move to at the dearest of their ratios, read once; the retry's
// group ratio was read again when the request went out, so a GroupRatio an administrator raised in
// between (here while the relay counts a large prompt on a worker, after the balance refused its byte
// bound) billed the retry at the new ratio, far past the reservation: 10,501,600 quota taken from a
// balance of 1,000,000. The docs' rule (docs/billing.md, "Reserve"): settled at the ratios reserved at.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockUpstream, type MockUpstream } from '../../bench/mock-upstream/mock-upstream.js';
import {
  accountQuota, billingSettled, consoleCall, createApiKey, fundedAccount, ledgerRow, MOCK_CHANNEL_KEY, mockChannel, startGatewayStack, storeOptions,
  type GatewayStack,
} from '../../tests/harness/gateway-stack.js';

const MODEL = 'retry-ratio-model';
const FUNDS = 1_000_000;
const OUTPUT = 16;

let stack: GatewayStack;
let overloaded: MockUpstream;

beforeAll(async () => {
  stack = await startGatewayStack({ env: { RELAY_MAX_TRIES: '3' } });
  overloaded = await startMockUpstream({ apiKey: MOCK_CHANNEL_KEY, errorRate: 1 });
  await storeOptions(stack, { AutoGroups: '["vip","default"]', GroupRatio: '{"default":1,"vip":1,"svip":1}' });
  await mockChannel(stack, [MODEL], 'vip', { base_url: overloaded.url });
  await mockChannel(stack, [MODEL], 'default');
}, 60_000);
afterAll(async () => {
  await overloaded?.close();
  await stack?.close();
});

async function setGroupRatio(value: Record<string, number>): Promise<void> {
  const { json } = await consoleCall(stack, 'PUT', '/api/option/', stack.adminToken, { key: 'GroupRatio', value: JSON.stringify(value) });
  if (!json.success) throw new Error(json.message);
}

describe('a GroupRatio raised while an auto request is in flight', () => {
  it('leaves its cross-group retry billed at the ratio it was reserved at', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const { key } = await createApiKey(stack, account, { group: 'auto', cross_group_retry: true });
    const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0, timeout: 60_000 });
    // 2.1 MB of text: its byte bound (about 2.1 M quota) is more than the balance, so the relay counts
    // the prompt on a worker before it reserves again: the ratio changes in that window.
    const answer = client.messages.create({ model: MODEL, max_tokens: OUTPUT, messages: [{ role: 'user', content: 'hello world '.repeat(175_000) }] }).withResponse();
    await new Promise((r) => setTimeout(r, 60));
    await setGroupRatio({ default: 20, vip: 1, svip: 1 });
    const { response } = await answer;
    await setGroupRatio({ default: 1, vip: 1, svip: 1 });
    expect(overloaded.requests.length).toBeGreaterThan(0);

    const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
    expect(row.group).toBe('default');
    // Model ratio 1, completion ratio 5 (the fallback), group ratio 1 as reserved.
    expect(row.completion_tokens).toBeGreaterThan(0);
    expect(row.quota).toBe(row.prompt_tokens + row.completion_tokens * 5);
    expect(row.quota).toBeLessThan(FUNDS);
    await billingSettled(stack);
    expect(await accountQuota(stack, account.id)).toBe(FUNDS - row.quota);
    expect(await stack.quota.accountBalance(account.id)).toBe(FUNDS - row.quota);
  }, 90_000);
});
