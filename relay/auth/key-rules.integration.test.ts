// Every rule of an API key, enforced on each request through the official SDK: each answers with its
// own Anthropic error type and status, and neither the account nor the key loses any quota.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  billingSettled, consoleCall, createApiKey, fundedAccount, mockChannel, startGatewayStack,
  type GatewayStack, type TestAccount, storeOptions
} from '../../tests/harness/gateway-stack.js';

const MODEL = 'claude-haiku-4-5';
const OTHER_MODEL = 'claude-opus-4-5';
/** Served by a channel of group vip only. */
const VIP_ONLY_MODEL = 'claude-sonnet-4-5';
const FUNDS = 1_000_000;
let stack: GatewayStack;

beforeAll(async () => {
  stack = await startGatewayStack();
  await mockChannel(stack, [MODEL, OTHER_MODEL]);
  await mockChannel(stack, [MODEL], 'vip');
  await mockChannel(stack, [VIP_ONLY_MODEL], 'vip');
});
afterAll(async () => {
  await stack?.close();
});

function ask(key: string, model = MODEL, headers: Record<string, string> = {}) {
  const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0, defaultHeaders: headers });
  return client.messages.create({ model, max_tokens: 8, messages: [{ role: 'user', content: 'rule check' }] });
}

async function refusal(p: Promise<unknown>): Promise<{ status: number; type: string; message: string }> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err, 'the request should have been refused').toBeInstanceOf(Anthropic.APIError);
  const e = err as InstanceType<typeof Anthropic.APIError>;
  const body = e.error as { type: string; error: { type: string; message: string } };
  expect(body.type).toBe('error');
  return { status: e.status!, type: body.error.type, message: body.error.message };
}

/** The account's and the key's quota, in Postgres and in the Redis mirrors, plus the pending events. */
async function money(account: TestAccount, keyId: number) {
  await billingSettled(stack);
  const [u] = await stack.sql`SELECT quota, used_quota FROM users WHERE id = ${account.id}`;
  const [t] = await stack.sql`SELECT remain_quota, used_quota FROM tokens WHERE id = ${keyId}`;
  return {
    quota: u!.quota, used: u!.used_quota, keyRemain: t!.remain_quota, keyUsed: t!.used_quota,
    // An unloaded mirror will be seeded from Postgres: the spendable amount is the same.
    mirror: (await stack.quota.accountBalance(account.id)) ?? u!.quota,
    keyMirror: (await stack.quota.tokenRemain(account.id, keyId)) ?? t!.remain_quota,
  };
}

async function expectRefusedWithoutCost(account: TestAccount, keyId: number, call: () => Promise<unknown>, status: number, type: string) {
  const before = await money(account, keyId);
  const r = await refusal(call());
  expect({ status: r.status, type: r.type }).toEqual({ status, type });
  expect(await money(account, keyId)).toEqual(before);
  return r;
}

describe('expired_time', () => {
  it('refuses a key past its expiry with 401 authentication_error', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account, { expired_time: Math.floor(Date.now() / 1000) + 2 });
    await ask(key.key);
    await stack.sql`UPDATE tokens SET expired_time = ${Math.floor(Date.now() / 1000) - 1} WHERE id = ${key.id}`;
    await stack.redis.publish(stack.keys.invalidationChannel(), JSON.stringify({ kind: 'token', id: key.id }));
    await new Promise((r) => setTimeout(r, 50));
    const r = await expectRefusedWithoutCost(account, key.id, () => ask(key.key), 401, 'authentication_error');
    expect(r.message).toMatch(/expired/);
  });

  it('never expires a key with -1', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account, { expired_time: -1 });
    expect((await ask(key.key)).type).toBe('message');
  });
});

describe('remain_quota and unlimited_quota', () => {
  it('refuses a limited key whose remaining quota is below the reservation with 402 billing_error', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account, { unlimited_quota: false, remain_quota: 10 });
    const r = await expectRefusedWithoutCost(account, key.id, () => ask(key.key), 402, 'billing_error');
    expect(r.message).toMatch(/key/);
  });

  it('lets an unlimited key spend the account balance whatever its remain_quota', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account, { unlimited_quota: true, remain_quota: 0 });
    expect((await ask(key.key)).type).toBe('message');
    const after = await money(account, key.id);
    expect(after.keyRemain).toBe(0);
    expect(after.quota).toBeLessThan(FUNDS);
  });
});

describe('model_limits_enabled and model_limits', () => {
  it('refuses a model outside the whitelist with 403 permission_error and serves one inside it', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account, { model_limits_enabled: true, model_limits: `${MODEL},claude-3-haiku-20240307` });
    await expectRefusedWithoutCost(account, key.id, () => ask(key.key, OTHER_MODEL), 403, 'permission_error');
    expect((await ask(key.key, MODEL)).type).toBe('message');
  });

  it('ignores the list while model_limits_enabled is false', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account, { model_limits_enabled: false, model_limits: MODEL });
    expect((await ask(key.key, OTHER_MODEL)).type).toBe('message');
  });
});

describe('allow_ips', () => {
  it('serves a listed single address and a listed CIDR range', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const single = await createApiKey(stack, account, { allow_ips: '127.0.0.1' });
    const range = await createApiKey(stack, account, { allow_ips: '10.0.0.0/8,127.0.0.0/8' });
    expect((await ask(single.key)).type).toBe('message');
    expect((await ask(range.key)).type).toBe('message');
  });

  it('refuses an address outside the list with 403 permission_error, IPv4 and IPv6 lists alike', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const v4 = await createApiKey(stack, account, { allow_ips: '192.0.2.0/24' });
    await expectRefusedWithoutCost(account, v4.id, () => ask(v4.key), 403, 'permission_error');
    const v6 = await createApiKey(stack, account, { allow_ips: '2001:db8::/32' });
    await expectRefusedWithoutCost(account, v6.id, () => ask(v6.key), 403, 'permission_error');
  });

  it('means no restriction when empty or null', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const empty = await createApiKey(stack, account, { allow_ips: '' });
    const none = await createApiKey(stack, account, { allow_ips: null });
    expect((await ask(empty.key)).type).toBe('message');
    expect((await ask(none.key)).type).toBe('message');
  });

  it('does not believe X-Forwarded-For from an untrusted peer', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account, { allow_ips: '203.0.113.7' });
    await expectRefusedWithoutCost(account, key.id, () => ask(key.key, MODEL, { 'x-forwarded-for': '203.0.113.7' }), 403, 'permission_error');
  });
});

describe('group', () => {
  it('uses the account group when the key names none', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account, { group: '' });
    const res = await new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 }).messages
      .create({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: 'g' }] }).withResponse();
    await billingSettled(stack);
    const id = res.response.headers.get('x-gateway-request-id');
    const [row] = await stack.sql`SELECT "group" FROM ledger WHERE request_id = ${id}`;
    expect(row!.group).toBe('default');
  });

  it('refuses a key whose group the account may not use with 403 permission_error', async () => {
    // The key is made while vip is open to everyone; then the option narrows the usable groups.
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account, { group: 'vip' });
    await stack.sql`INSERT INTO options (key, value) VALUES ('UserUsableGroups', '{"default":"Default"}')
                    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
    await stack.redis.publish(stack.keys.invalidationChannel(), JSON.stringify({ kind: 'options', keys: ['UserUsableGroups'] }));
    try {
      await new Promise((r) => setTimeout(r, 100));
      await expectRefusedWithoutCost(account, key.id, () => ask(key.key), 403, 'permission_error');
      // The account's own group is always usable.
      await consoleCall(stack, 'PUT', '/api/user/', stack.adminToken, { id: account.id, group: 'vip' });
      await new Promise((r) => setTimeout(r, 100));
      expect((await ask(key.key)).type).toBe('message');
    } finally {
      await stack.sql`DELETE FROM options WHERE key = 'UserUsableGroups'`;
      await stack.redis.publish(stack.keys.invalidationChannel(), JSON.stringify({ kind: 'options', keys: ['UserUsableGroups'] }));
    }
  });

  // Review finding 3: with UserUsableGroups unset every priced group was open to every account. Unset
  // now means new-api's default: the account's own group plus default and vip.
  it('refuses, with UserUsableGroups unset, an account of group default a key in svip with 403 permission_error', async () => {
    await mockChannel(stack, [MODEL], 'svip');
    // The key is made while the account is of group svip (the console offers svip to no other account).
    const account = await fundedAccount(stack, FUNDS, 'svip');
    const key = await createApiKey(stack, account, { group: 'svip' });
    expect((await ask(key.key)).type).toBe('message');
    await consoleCall(stack, 'PUT', '/api/user/', stack.adminToken, { id: account.id, group: 'default' });
    await new Promise((r) => setTimeout(r, 100));
    await expectRefusedWithoutCost(account, key.id, () => ask(key.key), 403, 'permission_error');
    // default and vip stay usable.
    expect((await ask((await createApiKey(stack, account, { group: 'vip' })).key)).type).toBe('message');
  });

  it('keeps a group root adds to GroupRatio to the accounts placed in it: partner serves partner, 403 to default', async () => {
    const ratio = await consoleCall(stack, 'PUT', '/api/option/', stack.adminToken, { key: 'GroupRatio', value: { default: 1, vip: 1, svip: 1, partner: 0.5 } });
    expect(ratio.json.success, ratio.json.message).toBe(true);
    await mockChannel(stack, [MODEL], 'partner');
    const partner = await fundedAccount(stack, FUNDS, 'partner');
    const key = await createApiKey(stack, partner, { group: 'partner' });
    const res = await new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 }).messages
      .create({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: 'p' }] }).withResponse();
    await billingSettled(stack);
    const [row] = await stack.sql`SELECT "group" FROM ledger WHERE request_id = ${res.response.headers.get('x-gateway-request-id')}`;
    expect(row!.group).toBe('partner');
    expect((await ask((await createApiKey(stack, partner, { group: '' })).key)).type).toBe('message');
    // The same key once its account is of group default.
    await consoleCall(stack, 'PUT', '/api/user/', stack.adminToken, { id: partner.id, group: 'default' });
    await new Promise((r) => setTimeout(r, 100));
    await expectRefusedWithoutCost(partner, key.id, () => ask(key.key), 403, 'permission_error');
  });
});

describe('disabled key, deleted key, banned account', () => {
  it('refuses a disabled key with 401 authentication_error', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account);
    expect((await ask(key.key)).type).toBe('message');
    // Disabled in the console; the next request, moments later, is refused.
    const off = await consoleCall(stack, 'PUT', '/api/token/?status_only=true', account.token, { id: key.id, status: 2 });
    expect(off.json.success).toBe(true);
    await new Promise((r) => setTimeout(r, 50));
    const r = await expectRefusedWithoutCost(account, key.id, () => ask(key.key), 401, 'authentication_error');
    expect(r.message).toMatch(/disabled/);
  });

  it('refuses a deleted key as unknown, with 401', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account);
    expect((await ask(key.key)).type).toBe('message');
    const deleted = await consoleCall(stack, 'DELETE', `/api/token/${key.id}`, account.token);
    expect(deleted.json.success).toBe(true);
    await new Promise((r) => setTimeout(r, 50));
    await expectRefusedWithoutCost(account, key.id, () => ask(key.key), 401, 'authentication_error');
  });

  it('refuses every key of a banned account with 403 permission_error, within a second of the ban', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account);
    expect((await ask(key.key)).type).toBe('message');
    const banned = await consoleCall(stack, 'PUT', '/api/user/', stack.adminToken, { id: account.id, status: 2 });
    expect(banned.json.success).toBe(true);
    const deadline = Date.now() + 1000;
    let refusedAt = 0;
    while (Date.now() < deadline) {
      const outcome = await ask(key.key).then(() => 'served', () => 'refused');
      if (outcome === 'refused') {
        refusedAt = Date.now();
        break;
      }
    }
    expect(refusedAt, 'the ban did not reach the relay within one second').toBeGreaterThan(0);
    await expectRefusedWithoutCost(account, key.id, () => ask(key.key), 403, 'permission_error');
  });

  it('applies a quota change made in the console to the very next request', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account);
    expect((await ask(key.key)).type).toBe('message');
    await billingSettled(stack);
    await consoleCall(stack, 'PUT', '/api/user/', stack.adminToken, { id: account.id, quota: 3 });
    const r = await refusal(ask(key.key));
    expect(r).toMatchObject({ status: 402, type: 'billing_error' });
    expect(await stack.quota.accountBalance(account.id)).toBe(3);
  });
});

describe('rate limits', () => {
  it('answers 429 rate_limit_error with retry-after once a key spends its requests per minute, moving no quota', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account);
    const set = await consoleCall(stack, 'PUT', '/api/token/', account.token, { id: key.id, rate_limit_rpm: 2 });
    expect(set.json.success).toBe(true);
    await new Promise((r) => setTimeout(r, 50));
    // The window slides (reserveQuota-8.lua): whatever the clock's minute, the third request is refused.
    await ask(key.key);
    await ask(key.key);
    const res = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': key.key, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'rule check' }] }),
    });
    expect(res.status).toBe(429);
    // The two just taken leave the window once their 10-second bucket is wholly older than 60 s:
    // more than 50 s from now, at most 70 (two buckets apart, the first of them counts).
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(50);
    expect(Number(res.headers.get('retry-after'))).toBeLessThanOrEqual(70);
    expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
    await expectRefusedWithoutCost(account, key.id, () => ask(key.key), 429, 'rate_limit_error');
  });

  // Before: the token counter moved only when a request settled, so 100 requests sent at once by a key
  // limited to 500 tokens a minute were all served (6,600 tokens). Each request now holds what it may
  // use (its input bound and max_tokens) until it settles.
  it('a key\'s tokens per minute hold against requests sent at once: those past the limit get 429 and cost nothing', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account);
    const set = await consoleCall(stack, 'PUT', '/api/token/', account.token, { id: key.id, rate_limit_tpm: 500 });
    expect(set.json.success).toBe(true);
    await new Promise((r) => setTimeout(r, 50));
    const body = JSON.stringify({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'tokens per minute' }] });
    const retryAfters: number[] = [];
    const statuses = await Promise.all(Array.from({ length: 30 }, () =>
      fetch(`${stack.relayUrl}/v1/messages`, { method: 'POST', headers: { 'x-api-key': key.key, 'content-type': 'application/json' }, body }).then(async (r) => {
        await r.arrayBuffer();
        if (r.status === 429) retryAfters.push(Number(r.headers.get('retry-after')));
        return r.status;
      })));
    const served = statuses.filter((s) => s === 200).length;
    expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
    // The tokens just taken leave the sliding window once their 10-second bucket is wholly older than 60 s.
    expect(retryAfters.every((seconds) => seconds > 50 && seconds <= 70)).toBe(true);
    expect(served).toBeGreaterThanOrEqual(1);
    expect(served).toBeLessThan(30);
    await billingSettled(stack);
    // What the served requests used stays within the limit, but for the one request that may find the
    // counter just below it (its hold: the body's bytes and max_tokens); the refused cost nothing.
    const [used] = await stack.sql`SELECT count(*)::int AS n, coalesce(sum(prompt_tokens + completion_tokens), 0)::int AS tokens
                                   FROM ledger WHERE user_id = ${account.id} AND type = 2`;
    expect(used!.n).toBe(served);
    expect(used!.tokens).toBeLessThanOrEqual(500 + Buffer.byteLength(body) + 8);
  });

  it('applies the group limit of GroupRateLimits when the key sets none, tokens per minute included', async () => {
    await storeOptions(stack, { GroupRateLimits: '{"vip":{"rpm":0,"tpm":1}}' }, 100);
    try {
      const account = await fundedAccount(stack, FUNDS, 'vip');
      const key = await createApiKey(stack, account);
      await ask(key.key);
      await expectRefusedWithoutCost(account, key.id, () => ask(key.key), 429, 'rate_limit_error');
    } finally {
      await storeOptions(stack, { GroupRateLimits: null }, 0);
    }
  });

  // Before: a key's own limit replaced its group's, and a key's limits are its owner's to set: rpm
  // 1,000,000 on a key of a group limited to 1 a minute served every request.
  it('applies the lower of the key\'s own limit and its group\'s: an owner cannot lift the operator\'s limit', async () => {
    await storeOptions(stack, { GroupRateLimits: JSON.stringify({ vip: { rpm: 1, tpm: 0 } }) });
    try {
      const account = await fundedAccount(stack, FUNDS, 'vip');
      const key = await createApiKey(stack, account);
      expect((await consoleCall(stack, 'PUT', '/api/token/', account.token, { id: key.id, rate_limit_rpm: 1_000_000 })).json.success).toBe(true);
      await new Promise((r) => setTimeout(r, 100));
      await ask(key.key);
      await expectRefusedWithoutCost(account, key.id, () => ask(key.key), 429, 'rate_limit_error');
    } finally {
      await storeOptions(stack, { GroupRateLimits: null });
    }
  });

  // Before: a group's limit was counted per key, so an account with three keys of a group limited to
  // 2 requests a minute got 6 of 6 served (and with 60 key writes a minute, any number). The group's
  // limit is the account's, all its keys of the group together, as new-api counts it.
  it('counts a group\'s requests per minute per account: three keys of one account share the group\'s limit', async () => {
    await storeOptions(stack, { GroupRateLimits: JSON.stringify({ vip: { rpm: 2, tpm: 0 } }) });
    try {
      const account = await fundedAccount(stack, FUNDS, 'vip');
      const keys = [await createApiKey(stack, account), await createApiKey(stack, account), await createApiKey(stack, account)];
      const statuses: number[] = [];
      for (const key of keys) {
        for (let i = 0; i < 2; i++) statuses.push(await ask(key.key).then(() => 200, (e: unknown) => (e as InstanceType<typeof Anthropic.APIError>).status ?? 0));
      }
      expect(statuses).toEqual([200, 200, 429, 429, 429, 429]);
      const r = await refusal(ask(keys[2]!.key));
      expect(r).toMatchObject({ status: 429, type: 'rate_limit_error' });
      expect(r.message).toMatch(/2 requests per minute/);
      // Another account of the group has its own: the limit is per account, not the group's in total.
      const other = await fundedAccount(stack, FUNDS, 'vip');
      await ask((await createApiKey(stack, other)).key);
      await billingSettled(stack);
      const [served] = await stack.sql`SELECT count(*)::int AS n FROM ledger WHERE user_id = ${account.id} AND type = 2`;
      expect(served!.n).toBe(2);
    } finally {
      await storeOptions(stack, { GroupRateLimits: null });
    }
  });

  it('keeps a key\'s own limit the key\'s: a key at its own limit leaves the account\'s other keys their group\'s', async () => {
    await storeOptions(stack, { GroupRateLimits: JSON.stringify({ vip: { rpm: 3, tpm: 0 } }) });
    try {
      const account = await fundedAccount(stack, FUNDS, 'vip');
      const tight = await createApiKey(stack, account);
      const loose = await createApiKey(stack, account);
      expect((await consoleCall(stack, 'PUT', '/api/token/', account.token, { id: tight.id, rate_limit_rpm: 1 })).json.success).toBe(true);
      await new Promise((r) => setTimeout(r, 100));
      await ask(tight.key);
      const r = await refusal(ask(tight.key));
      expect(r).toMatchObject({ status: 429, type: 'rate_limit_error' });
      expect(r.message).toMatch(/1 requests per minute/);
      // The refused request took nothing from the group's window: the other key has the 2 left.
      await ask(loose.key);
      await ask(loose.key);
      await expectRefusedWithoutCost(account, loose.id, () => ask(loose.key), 429, 'rate_limit_error');
    } finally {
      await storeOptions(stack, { GroupRateLimits: null });
    }
  });

  // An auto key's requests go to the first group of AutoGroups that serves the model: that group's
  // limit is the one a key of that group would meet. The first group of AutoGroups was applied
  // whichever served: an auto key got [200, 200, 200, 200] where a vip key got [200, 429].
  it.each([
    { limited: 'vip', expected: 429 },
    { limited: 'default', expected: 200 },
  ])('limits an auto key routed to vip (AutoGroups default, vip; the model served in vip only) by vip\'s limit, not by the first group\'s: $limited limited', async ({ limited, expected }) => {
    await storeOptions(stack, { AutoGroups: '["default","vip"]', GroupRateLimits: JSON.stringify({ [limited]: { rpm: 1, tpm: 0 } }) });
    try {
      const account = await fundedAccount(stack, FUNDS);
      const key = await createApiKey(stack, account, { group: 'auto' });
      await ask(key.key, VIP_ONLY_MODEL);
      if (expected === 429) await expectRefusedWithoutCost(account, key.id, () => ask(key.key, VIP_ONLY_MODEL), 429, 'rate_limit_error');
      else await ask(key.key, VIP_ONLY_MODEL);
      await billingSettled(stack);
      const rows = await stack.sql`SELECT "group" FROM ledger WHERE token_id = ${key.id} AND type = 2`;
      expect(rows.map((r) => r.group)).toEqual(expected === 429 ? ['vip'] : ['vip', 'vip']);
    } finally {
      await storeOptions(stack, { AutoGroups: null, GroupRateLimits: null });
    }
  });
});

