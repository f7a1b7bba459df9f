// A limited key, or an account, deleted while a request of it is in flight (its headers in and the
// key looked up, its body not yet): the request goes on (it was accepted before the deletion, as one
// a moment earlier would be) and its reservation seeds the mirror the deletion found missing.
//
// Before: that mirror (`…:remain` or `…:balance`, and its sequence key) was seeded for ever: the
// deletion's "expire in a day" had run on keys that did not exist yet (review soak, finding 1). Now a
// deleted row's mirror is seeded to expire as the deletion's do (seedBalance-2.lua ARGV[3]).
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DELETED_MIRROR_TTL_SEC } from '../../core/quota/quota-store.js';
import { billingSettled, consoleCall, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';

const MODEL = 'claude-3-haiku-20240307';
let stack: GatewayStack;
beforeAll(async () => {
  stack = await startGatewayStack();
  await mockChannel(stack, [MODEL]);
}, 120_000);
afterAll(async () => { await stack?.close(); });

const BODY = JSON.stringify({ model: MODEL, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });

/** A request whose headers are sent now and its body when `release` is called; `answer` is its status. */
function headersFirst(apiKey: string): { release(): void; status: Promise<number> } {
  const url = new URL(stack.relayUrl);
  const sock = connect(Number(url.port), url.hostname);
  sock.write(`POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: ${apiKey}\r\ncontent-type: application/json\r\n`
    + `anthropic-version: 2023-06-01\r\ncontent-length: ${Buffer.byteLength(BODY)}\r\nconnection: close\r\n\r\n`);
  let data = '';
  const status = new Promise<number>((resolve) => {
    sock.on('data', (d: Buffer) => { data += d.toString(); });
    sock.on('close', () => resolve(Number(data.split(' ')[1] ?? 0)));
    sock.on('error', () => resolve(0));
  });
  return { release: () => sock.write(BODY), status };
}

/** Until the relay's key lookup (started by the headers) has answered: it caches the key. */
const lookedUp = (): Promise<void> => new Promise((r) => setTimeout(r, 300));

async function expectExpiring(keys: string[]): Promise<void> {
  for (const key of keys) {
    const ttl = await stack.redis.ttl(key);
    expect(ttl, `${key}: seeded for ever (-1)`).toBeGreaterThan(0);
    expect(ttl, key).toBeLessThanOrEqual(DELETED_MIRROR_TTL_SEC);
  }
}

describe('deleted while a request of it is in flight', () => {
  it('a limited key: served, its mirror seeded to expire', async () => {
    const account = await fundedAccount(stack, 100_000_000);
    const key = await createApiKey(stack, account, { unlimited_quota: false, remain_quota: 50_000_000 });
    const req = headersFirst(key.key);
    await lookedUp();
    expect((await consoleCall(stack, 'DELETE', `/api/token/${key.id}`, account.token)).json.success).toBe(true);
    expect(await stack.redis.exists(stack.keys.tokenRemain(account.id, key.id))).toBe(0);
    req.release();
    expect(await req.status).toBe(200);
    await billingSettled(stack);
    await expectExpiring([stack.keys.tokenRemain(account.id, key.id), stack.keys.tokenQuotaSeq(account.id, key.id)]);
  }, 60_000);

  it('an account: served, its balance mirror seeded to expire', async () => {
    const account = await fundedAccount(stack, 100_000_000);
    const key = await createApiKey(stack, account);
    const req = headersFirst(key.key);
    await lookedUp();
    expect((await consoleCall(stack, 'POST', '/api/user/manage', stack.adminToken, { id: account.id, action: 'delete' })).json.success).toBe(true);
    expect(await stack.redis.exists(stack.keys.accountBalance(account.id))).toBe(0);
    req.release();
    expect(await req.status).toBe(200);
    await billingSettled(stack);
    await expectExpiring([stack.keys.accountBalance(account.id), stack.keys.accountCreditSeq(account.id)]);
  }, 60_000);
});
