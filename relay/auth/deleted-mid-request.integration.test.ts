// A key or account changed in the console while a request of it is in flight, its headers in and its
// key read, its body not yet: the key is read again once the body is in, so a key disabled or
// deleted, or an account banned or deleted, refuses the request (review lifecycle: 40 of 40 such
// requests were served up to 8 s after the revocation, as long as the client kept the body coming).
//
// A reservation that still races a deletion (a relay that has not heard of it yet) seeds the mirror
// the deletion found missing; before, for ever: the deletion's "expire in a day" had run on keys that
// did not exist yet (review soak, finding 1). A deleted row's mirror is seeded to expire as the
// deletion's do (seedBalance-2.lua ARGV[3]), read from Postgres (postgres-balance-source.ts).
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DELETED_MIRROR_TTL_SEC } from '../../core/quota/quota-store.js';
import { billingSettled, consoleCall, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../../tests/harness/gateway-stack.js';

const MODEL = 'claude-3-haiku-20240307';
let stack: GatewayStack;
beforeAll(async () => {
  stack = await startGatewayStack();
  await mockChannel(stack, [MODEL]);
}, 120_000);
afterAll(async () => { await stack?.close(); });

const BODY = JSON.stringify({ model: MODEL, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });

/** A request whose headers are sent now and its body when `release` is called; `answer` is its status and body. */
function headersFirst(apiKey: string): { release(): void; answer: Promise<{ status: number; text: string }> } {
  const url = new URL(stack.relayUrl);
  const sock = connect(Number(url.port), url.hostname);
  sock.write(`POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: ${apiKey}\r\ncontent-type: application/json\r\n`
    + `anthropic-version: 2023-06-01\r\ncontent-length: ${Buffer.byteLength(BODY)}\r\nconnection: close\r\n\r\n`);
  let data = '';
  const answer = new Promise<{ status: number; text: string }>((resolve) => {
    sock.on('data', (d: Buffer) => { data += d.toString(); });
    sock.on('close', () => resolve({ status: Number(data.split(' ')[1] ?? 0), text: data.split('\r\n\r\n')[1] ?? '' }));
    sock.on('error', () => resolve({ status: 0, text: data }));
  });
  // Half the body now: the relay has the request, and waits for the rest.
  sock.write(BODY.slice(0, 20));
  return { release: () => sock.write(BODY.slice(20)), answer };
}

/** Until a new request of the key is refused: the relay heard of the change. */
async function refusedNow(apiKey: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const r = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST', headers: { 'x-api-key': apiKey, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body: BODY,
    });
    await r.arrayBuffer();
    if (r.status !== 200) return;
    if (Date.now() > deadline) throw new Error('the relay kept serving the key');
    await new Promise((done) => setTimeout(done, 20));
  }
}

async function consumed(account: TestAccount): Promise<number> {
  await billingSettled(stack);
  const [row] = await stack.sql`SELECT count(*)::int AS n FROM ledger WHERE user_id = ${account.id} AND type = 2`;
  return row!.n as number;
}

describe('changed in the console while a request\'s body comes in', () => {
  const cases: [string, (account: TestAccount, key: { id: number }) => Promise<void>, RegExp][] = [
    ['its key disabled', async (account, key) => {
      expect((await consoleCall(stack, 'PUT', '/api/token/', account.token, { id: key.id, status: 2 })).json.success).toBe(true);
    }, /disabled/i],
    ['its key deleted', async (account, key) => {
      expect((await consoleCall(stack, 'DELETE', `/api/token/${key.id}`, account.token)).json.success).toBe(true);
    }, /invalid|unknown|api key/i],
    ['its account banned', async (account) => {
      expect((await consoleCall(stack, 'POST', '/api/user/manage', stack.adminToken, { id: account.id, action: 'disable' })).json.success).toBe(true);
    }, /disabled|banned/i],
  ];
  for (const [name, change, message] of cases) {
    it(`${name}: refused when the body is in, nothing billed`, async () => {
      const account = await fundedAccount(stack, 100_000_000);
      const key = await createApiKey(stack, account);
      // The key read and cached by the relay: the request's headers find it at once.
      const warm = await fetch(`${stack.relayUrl}/v1/messages`, {
        method: 'POST', headers: { 'x-api-key': key.key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body: BODY,
      });
      expect(warm.status).toBe(200);
      await warm.arrayBuffer();
      const before = await consumed(account);
      const req = headersFirst(key.key);
      await new Promise((r) => setTimeout(r, 200));
      await change(account, key);
      await refusedNow(key.key);
      req.release();
      const answer = await req.answer;
      expect(answer.status).toBeGreaterThanOrEqual(400);
      expect(answer.status).toBeLessThan(500);
      const error = (JSON.parse(answer.text) as { type: string; error: { message: string } });
      expect(error.type).toBe('error');
      expect(error.error.message).toMatch(message);
      expect(await consumed(account)).toBe(before);
    }, 60_000);
  }
});

async function expectExpiring(keys: string[]): Promise<void> {
  for (const key of keys) {
    const ttl = await stack.redis.ttl(key);
    expect(ttl, `${key}: seeded for ever (-1)`).toBeGreaterThan(0);
    expect(ttl, key).toBeLessThanOrEqual(DELETED_MIRROR_TTL_SEC);
  }
}

describe('a reservation that races a deletion (its relay has not heard of it yet)', () => {
  it('a limited key: its mirror seeded to expire', async () => {
    const account = await fundedAccount(stack, 100_000_000);
    const key = await createApiKey(stack, account, { unlimited_quota: false, remain_quota: 50_000_000 });
    expect((await consoleCall(stack, 'DELETE', `/api/token/${key.id}`, account.token)).json.success).toBe(true);
    expect(await stack.redis.exists(stack.keys.tokenRemain(account.id, key.id))).toBe(0);
    expect(await stack.quota.reserve({ userId: account.id, tokenId: key.id, tokenLimited: true, requestId: `raced-key-${Date.now()}`, amount: 1_000, deadlineMs: Date.now() + 60_000 })).toBe('reserved');
    await expectExpiring([stack.keys.tokenRemain(account.id, key.id), stack.keys.tokenQuotaSeq(account.id, key.id)]);
  }, 60_000);

  it('an account: its balance mirror seeded to expire', async () => {
    const account = await fundedAccount(stack, 100_000_000);
    const key = await createApiKey(stack, account);
    expect((await consoleCall(stack, 'POST', '/api/user/manage', stack.adminToken, { id: account.id, action: 'delete' })).json.success).toBe(true);
    expect(await stack.redis.exists(stack.keys.accountBalance(account.id))).toBe(0);
    expect(await stack.quota.reserve({ userId: account.id, tokenId: key.id, tokenLimited: false, requestId: `raced-account-${Date.now()}`, amount: 1_000, deadlineMs: Date.now() + 60_000 })).toBe('reserved');
    await expectExpiring([stack.keys.accountBalance(account.id), stack.keys.accountCreditSeq(account.id)]);
  }, 60_000);
});
