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
import { billingSettled, consoleCall, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../../tests/harness/gateway-stack.js';

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

/**
 * A request whose key is looked up from its headers, then `remove` (the deletion), then its body: the
 * deletion run while the request is in flight. The lookup is given 300 ms; on a machine too loaded for
 * it the deletion wins and the request is answered 401, a case of no interest here: tried again, with
 * a new account and key, up to 5 times. Resolves to the account and key of the request served.
 */
async function servedThoughDeleted(
  makeKey: (account: TestAccount) => Promise<{ id: number; key: string }>,
  remove: (account: TestAccount, key: { id: number; key: string }) => Promise<void>,
): Promise<{ account: TestAccount; key: { id: number; key: string } }> {
  const statuses: number[] = [];
  for (let attempt = 0; attempt < 5; attempt++) {
    const account = await fundedAccount(stack, 100_000_000);
    const key = await makeKey(account);
    const req = headersFirst(key.key);
    await new Promise((r) => setTimeout(r, 300));
    await remove(account, key);
    req.release();
    const status = await req.status;
    statuses.push(status);
    if (status === 200) return { account, key };
    if (status !== 401) break;
  }
  throw new Error(`no request served while its key or account was deleted: ${statuses.join(', ')}`);
}

async function expectExpiring(keys: string[]): Promise<void> {
  for (const key of keys) {
    const ttl = await stack.redis.ttl(key);
    expect(ttl, `${key}: seeded for ever (-1)`).toBeGreaterThan(0);
    expect(ttl, key).toBeLessThanOrEqual(DELETED_MIRROR_TTL_SEC);
  }
}

describe('deleted while a request of it is in flight', () => {
  it('a limited key: served, its mirror seeded to expire', async () => {
    const { account, key } = await servedThoughDeleted(
      (account) => createApiKey(stack, account, { unlimited_quota: false, remain_quota: 50_000_000 }),
      async (account, key) => {
        expect((await consoleCall(stack, 'DELETE', `/api/token/${key.id}`, account.token)).json.success).toBe(true);
        expect(await stack.redis.exists(stack.keys.tokenRemain(account.id, key.id))).toBe(0);
      });
    await billingSettled(stack);
    await expectExpiring([stack.keys.tokenRemain(account.id, key.id), stack.keys.tokenQuotaSeq(account.id, key.id)]);
  }, 120_000);

  it('an account: served, its balance mirror seeded to expire', async () => {
    const { account } = await servedThoughDeleted(
      (account) => createApiKey(stack, account),
      async (account) => {
        expect((await consoleCall(stack, 'POST', '/api/user/manage', stack.adminToken, { id: account.id, action: 'delete' })).json.success).toBe(true);
        expect(await stack.redis.exists(stack.keys.accountBalance(account.id))).toBe(0);
      });
    await billingSettled(stack);
    await expectExpiring([stack.keys.accountBalance(account.id), stack.keys.accountCreditSeq(account.id)]);
  }, 120_000);
});
