// The token-counting workers are not free: a prompt is counted only for a known key that passes its
// rules, and on /v1/messages only when the byte-bound reservation was refused for balance; count_tokens
// has a per-key budget per minute (429 with retry-after); a full counting queue answers 529. Money
// stays exact throughout.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  billingSettled, consoleCall, createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack,
  type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';
import { parsePromText } from '../../core/metrics/prom.js';

const MODEL = 'claude-haiku-4-5';
// claude-haiku-4-5: model ratio 0.5, completion ratio 5, group default 1 (core/pricing/ratios.ts).
const cost = (input: number, output: number) => Math.round((input + output * 5) * 0.5);
const COUNTS_PER_MINUTE = 4;
const RICH = 100_000_000;

let stack: GatewayStack;
let rich: TestAccount;
let richKey: string;

beforeAll(async () => {
  stack = await startGatewayStack({
    env: { COUNT_TOKENS_PER_MINUTE: String(COUNTS_PER_MINUTE), COUNT_PROMPT_ABOVE_BYTES: '4096', TOKEN_WORKERS: '1', TOKEN_QUEUE_MAX: '1' },
  });
  await mockChannel(stack, [MODEL]);
  rich = await fundedAccount(stack, RICH);
  richKey = (await createApiKey(stack, rich)).key;
});
afterAll(async () => {
  await stack?.close();
});

async function promptCounts(): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${stack.relay.metricsPort}/metrics`)).text();
  return parsePromText(text).get('gateway_relay_prompt_counts_total') ?? 0;
}

/** Waits out the end of a minute, so that a budget test stays within one window. */
async function sameMinute(): Promise<void> {
  if (new Date().getSeconds() > 50) await new Promise((r) => setTimeout(r, (61 - new Date().getSeconds()) * 1000));
}

function countTokens(key: string, body: unknown, relayUrl = stack.relayUrl) {
  return fetch(`${relayUrl}/v1/messages/count_tokens`, {
    method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
}

const LARGE = 'lorem ipsum dolor sit amet '.repeat(2_000); // ~54 KB: over COUNT_PROMPT_ABOVE_BYTES

describe('/v1/messages', () => {
  it('does not count a large prompt when the balance covers its byte bound', async () => {
    const before = await promptCounts();
    const client = new Anthropic({ apiKey: richKey, baseURL: stack.relayUrl, maxRetries: 0 });
    const msg = await client.messages.create({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: LARGE }] });
    expect(msg.type).toBe('message');
    expect(await promptCounts()).toBe(before);
  });

  it('counts it when only the counted estimate fits the balance, and bills the actual cost exactly', async () => {
    await sameMinute();
    const body = JSON.stringify({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: LARGE }] });
    // Byte bound ~54,000 tokens (cost ~27,000); counted ~4,000 × 2 (cost ~4,000): 15,000 holds the latter only.
    const funds = 15_000;
    expect(cost(Buffer.byteLength(body), 4)).toBeGreaterThan(funds);
    const modest = await fundedAccount(stack, funds);
    const key = (await createApiKey(stack, modest)).key;
    const before = await promptCounts();
    const res = await fetch(`${stack.relayUrl}/v1/messages`, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body });
    expect(res.status).toBe(200);
    const msg = (await res.json()) as { usage: { input_tokens: number; output_tokens: number } };
    expect(await promptCounts()).toBe(before + 1);
    const row = await ledgerRow(stack, res.headers.get('x-gateway-request-id')!);
    expect(row.quota).toBe(cost(msg.usage.input_tokens, msg.usage.output_tokens));
    await billingSettled(stack);
    const [u] = await stack.sql`SELECT quota, used_quota FROM users WHERE id = ${modest.id}`;
    expect(u!.quota + u!.used_quota).toBe(funds);
    expect(u!.used_quota).toBe(row.quota);
  });

  // Before: 40,000 spaces were counted ~500 cl100k tokens and reserved ~1,000, while the provider (the
  // mock, a token per 4 bytes) billed 10,001: an account of 2,000 went to -3,013, and 20 such requests
  // at once took one to -9,925 and its limited key 7.9× past its quota. Now the estimate is a token per
  // 8 bytes at least (×2): the reservation holds what the provider bills.
  it('a prompt that cl100k packs tight (40,000 spaces), sent at once on several keys: the balance and the key quotas never go below 0', async () => {
    await sameMinute();
    const body = JSON.stringify({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: ' '.repeat(40_000) + 'hi' }] });
    const funds = 6_000;
    const account = await fundedAccount(stack, funds);
    const keys = await Promise.all(Array.from({ length: 8 }, () => createApiKey(stack, account, { unlimited_quota: false, remain_quota: 5_500 })));
    const answers = await Promise.all(keys.map(({ key }) =>
      fetch(`${stack.relayUrl}/v1/messages`, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body })
        .then(async (res) => ({ status: res.status, requestId: res.headers.get('x-gateway-request-id')!, body: await res.json() as { usage?: { input_tokens: number; output_tokens: number } } }))));
    const served = answers.filter((a) => a.status === 200);
    // Refused for balance (402) or, the counting queue being full, 529: nothing else.
    expect(answers.every((a) => a.status === 200 || a.status === 402 || a.status === 529)).toBe(true);
    expect(served.length).toBeLessThanOrEqual(1);
    await billingSettled(stack);
    const [u] = await stack.sql`SELECT quota, used_quota FROM users WHERE id = ${account.id}`;
    expect(Number(u!.quota)).toBeGreaterThanOrEqual(0);
    expect(Number(u!.quota) + Number(u!.used_quota)).toBe(funds);
    let billed = 0;
    for (const a of served) {
      const row = await ledgerRow(stack, a.requestId);
      expect(row.quota).toBe(cost(a.body.usage!.input_tokens, a.body.usage!.output_tokens));
      billed += row.quota;
    }
    expect(Number(u!.used_quota)).toBe(billed);
    const tokens = await stack.sql`SELECT remain_quota FROM tokens WHERE user_id = ${account.id}`;
    expect(tokens.every((t) => Number(t.remain_quota) >= 0)).toBe(true);
  });

  it('refuses a key whose rules fail, or whose rate limit is spent, without counting', async () => {
    const account = await fundedAccount(stack, 1_000);
    const key = await createApiKey(stack, account);
    const body = JSON.stringify({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: LARGE }] });
    const before = await promptCounts();
    await consoleCall(stack, 'PUT', '/api/token/', account.token, { id: key.id, rate_limit_rpm: 1 });
    await stack.redis.hset(stack.keys.keyRequestsInWindow(account.id, key.id), String(Math.floor(Date.now() / 10_000)), 5);
    await stack.redis.expire(stack.keys.keyRequestsInWindow(account.id, key.id), 120);
    await new Promise((r) => setTimeout(r, 50));
    const limited = await fetch(`${stack.relayUrl}/v1/messages`, { method: 'POST', headers: { 'x-api-key': key.key, 'content-type': 'application/json' }, body });
    expect(limited.status).toBe(429);
    await consoleCall(stack, 'PUT', '/api/token/?status_only=true', account.token, { id: key.id, status: 2 });
    await new Promise((r) => setTimeout(r, 50));
    const disabled = await fetch(`${stack.relayUrl}/v1/messages`, { method: 'POST', headers: { 'x-api-key': key.key, 'content-type': 'application/json' }, body });
    expect(disabled.status).toBe(401);
    const counted = await countTokens(key.key, { model: MODEL, messages: [{ role: 'user', content: LARGE }] });
    expect(counted.status).toBe(401);
    expect(await promptCounts()).toBe(before);
  });

  it('does not count for a balance below the least a counted reservation asks: a key of zero balance gets its 402 at once', async () => {
    // LARGE counted at the fewest tokens its bytes allow (one per 8 bytes, times the factor 2) still
    // costs some 6,800 quota: a balance of 1,000 cannot hold it, whatever the count.
    await sameMinute();
    const poor = await fundedAccount(stack, 1_000);
    const key = (await createApiKey(stack, poor)).key;
    const body = JSON.stringify({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: LARGE }] });
    const before = await promptCounts();
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${stack.relayUrl}/v1/messages`, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body });
      expect(res.status).toBe(402);
      // It says what the request would take: above the balance of 1,000.
      const reserves = /This request reserves (\d+) quota\.$/.exec(((await res.json()) as { error: { message: string } }).error.message);
      expect(Number(reserves?.[1])).toBeGreaterThan(1_000);
    }
    expect(await promptCounts()).toBe(before);
    // Its count_tokens budget is untouched by them: all of it is still there.
    for (let i = 0; i < COUNTS_PER_MINUTE; i++) expect((await countTokens(key, { model: MODEL, messages: [{ role: 'user', content: 'x' }] })).status).toBe(200);
  });

  it('stops counting for a key once its counts of the minute are spent: the byte bound\'s refusal stands', async () => {
    await sameMinute();
    const poor = await fundedAccount(stack, 15_000);
    const key = (await createApiKey(stack, poor)).key;
    const body = JSON.stringify({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: LARGE }] });
    for (let i = 0; i < COUNTS_PER_MINUTE; i++) expect((await countTokens(key, { model: MODEL, messages: [{ role: 'user', content: 'x' }] })).status).toBe(200);
    const before = await promptCounts();
    const res = await fetch(`${stack.relayUrl}/v1/messages`, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body });
    expect(res.status).toBe(402);
    expect(await promptCounts()).toBe(before);
  });
});

describe('count_tokens', () => {
  it('answers 429 rate_limit_error with retry-after once the key\'s counts of the minute are spent', async () => {
    await sameMinute();
    const key = (await createApiKey(stack, rich)).key;
    const body = { model: MODEL, messages: [{ role: 'user', content: 'hello' }] };
    for (let i = 0; i < COUNTS_PER_MINUTE; i++) expect((await countTokens(key, body)).status).toBe(200);
    const before = await promptCounts();
    const res = await countTokens(key, body);
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Number(res.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
    expect(await promptCounts()).toBe(before);
    // Through the SDK: its typed error.
    const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
    await expect(client.messages.countTokens({ model: MODEL, messages: [{ role: 'user', content: 'x' }] })).rejects.toBeInstanceOf(Anthropic.RateLimitError);
  });

  it('answers 529 overloaded_error when the counting queue is full, and counts the others', async () => {
    // One worker, one waiting: of many large counts sent at once, most are refused at once.
    const keys = await Promise.all(Array.from({ length: 4 }, () => createApiKey(stack, rich)));
    const huge = 'word '.repeat(200_000);
    const answers = await Promise.all(keys.flatMap((k) => Array.from({ length: 3 }, () =>
      countTokens(k.key, { model: MODEL, messages: [{ role: 'user', content: huge }] }).then(async (r) => ({ status: r.status, json: (await r.json()) as { error?: { type: string } } })))));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(1);
    const refused = answers.filter((a) => a.status === 529);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    for (const r of refused) expect(r.json.error?.type).toBe('overloaded_error');
    expect(statuses.every((s) => s === 200 || s === 529)).toBe(true);
  });

  it('a count refused 529 spends none of the key\'s budget: served and still-servable counts make the whole budget', async () => {
    // Before: the slot was taken before the queue refused, so a burst answered 529 in part left the
    // key 429 for the rest of its minute (110 at once of a budget of 120: 77 served, 33 × 529, then 10
    // × 200, 10 × 429). Now the queue's place is taken first (TokenCounter.takePromptPlace).
    await sameMinute();
    const key = (await createApiKey(stack, rich)).key;
    const huge = 'word '.repeat(200_000);
    // As many as the budget (a call over it is refused 429 and counts, by design: takeRateSlot-1.lua),
    // all to one relay: behind the two relays' balancer (the cluster pass) each would have a queue of
    // its own, and none of the burst would be refused.
    const oneRelay = `http://127.0.0.1:${stack.relay.port}`;
    const burst = await Promise.all(Array.from({ length: COUNTS_PER_MINUTE }, () =>
      countTokens(key, { model: MODEL, messages: [{ role: 'user', content: huge }] }, oneRelay).then((r) => r.status)));
    const served = burst.filter((s) => s === 200).length;
    expect(burst.filter((s) => s === 529).length).toBeGreaterThanOrEqual(1);
    // One at a time now (the queue has room): exactly the slots the burst did not serve remain.
    const body = { model: MODEL, messages: [{ role: 'user', content: 'hello' }] };
    const after: number[] = [];
    for (let i = 0; i < COUNTS_PER_MINUTE + 1; i++) after.push((await countTokens(key, body)).status);
    expect(after.filter((s) => s === 200).length).toBe(COUNTS_PER_MINUTE - served);
    expect(after.slice(COUNTS_PER_MINUTE - served).every((s) => s === 429)).toBe(true);
  });
});

describe('count_tokens, one account\'s counts in flight (COUNT_TOKENS_IN_FLIGHT_PER_ACCOUNT)', () => {
  // A queue with room for all: what bounds an account is its own places, all its keys together. One
  // key's 16 counts of 8 MB at once made another's count of a line wait 18 s behind them; with a limit
  // per key, 8 keys of one account made it wait 32 s.
  let own: GatewayStack;
  beforeAll(async () => {
    own = await startGatewayStack({ env: { COUNT_TOKENS_IN_FLIGHT_PER_ACCOUNT: '2', TOKEN_WORKERS: '1', TOKEN_QUEUE_MAX: '64', COUNT_TOKENS_PER_MINUTE: '1000' } });
    await mockChannel(own, [MODEL]);
  });
  afterAll(async () => {
    await own?.close();
  });

  it('answers an account over its places 429 with retry-after, whichever of its keys asks, while another account is counted', async () => {
    const busyAccount = await fundedAccount(own, RICH);
    const busyKeys = await Promise.all(Array.from({ length: 4 }, async () => (await createApiKey(own, busyAccount)).key));
    const other = (await createApiKey(own, await fundedAccount(own, RICH))).key;
    const oneRelay = `http://127.0.0.1:${own.relay.port}`;
    const huge = { model: MODEL, messages: [{ role: 'user', content: 'word '.repeat(400_000) }] };
    const burst = Promise.all(Array.from({ length: 8 }, (_, i) => countTokens(busyKeys[i % busyKeys.length]!, huge, oneRelay)
      .then(async (r) => ({ status: r.status, retryAfter: r.headers.get('retry-after'), json: (await r.json()) as { error?: { type: string; message: string } } }))));
    const small = await countTokens(other, { model: MODEL, messages: [{ role: 'user', content: 'hello' }] }, oneRelay);
    expect(small.status).toBe(200);
    const answers = await burst;
    expect(answers.filter((a) => a.status === 200)).toHaveLength(2);
    const refused = answers.filter((a) => a.status === 429);
    expect(refused).toHaveLength(6);
    for (const r of refused) {
      expect(r.retryAfter).toBe('1');
      expect(r.json.error).toMatchObject({ type: 'rate_limit_error', message: expect.stringMatching(/This account has 2 token counts running already/) });
    }
    // Its places free again once its counts end.
    expect((await countTokens(busyKeys[0]!, { model: MODEL, messages: [{ role: 'user', content: 'hello' }] }, oneRelay)).status).toBe(200);
  });

  // Before: on /v1/messages the same 429 (a count for a reservation the byte bound could not cover)
  // came without the retry-after the README gives it.
  it('answers /v1/messages 429 with retry-after 1 when the account\'s counts for reservations are all in flight, billing none of them', async () => {
    // The byte bound (450 KB: the model's window of 200,000 tokens, 100,000 quota) is over the
    // balance; a counted estimate (90,000 tokens × 2, 90,000 quota) is under it.
    const funds = 95_000;
    const account = await fundedAccount(own, funds);
    const keys = await Promise.all(Array.from({ length: 4 }, async () => (await createApiKey(own, account)).key));
    const oneRelay = `http://127.0.0.1:${own.relay.port}`;
    const body = JSON.stringify({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: 'word '.repeat(90_000) }] });
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) =>
      fetch(`${oneRelay}/v1/messages`, { method: 'POST', headers: { 'x-api-key': keys[i % keys.length]!, 'content-type': 'application/json' }, body })
        .then(async (r) => ({ status: r.status, retryAfter: r.headers.get('retry-after'), json: (await r.json()) as { error?: { type: string; message: string } } }))));
    expect(answers.every((a) => [200, 402, 429].includes(a.status))).toBe(true);
    const refused = answers.filter((a) => a.status === 429);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.retryAfter).toBe('1');
      expect(r.json.error).toMatchObject({ type: 'rate_limit_error', message: expect.stringMatching(/This account has 2 token counts running already/) });
    }
    await billingSettled(own);
    const [u] = await own.sql`SELECT quota, used_quota FROM users WHERE id = ${account.id}`;
    expect(Number(u!.quota) + Number(u!.used_quota)).toBe(funds);
    const [billed] = await own.sql`SELECT count(*)::int AS n FROM ledger WHERE user_id = ${account.id} AND type = 2`;
    expect(billed!.n).toBe(answers.filter((a) => a.status === 200).length);
  });
});
