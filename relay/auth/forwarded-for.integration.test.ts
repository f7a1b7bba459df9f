// A key's allow_ips behind a trusted proxy, through the real uWS parser: a request carrying two
// X-Forwarded-For lines (the client's own claim, then the line its proxy appended) is judged by the
// whole list, so the client's claimed address does not pass for its real one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';
import { rawRequest } from '../../tests/harness/raw-http.js';

const MODEL = 'claude-haiku-4-5';
let stack: GatewayStack;

beforeAll(async () => {
  stack = await startGatewayStack({ env: { TRUSTED_PROXIES: '127.0.0.1, ::1, ::ffff:127.0.0.1' } });
  await mockChannel(stack, [MODEL]);
});
afterAll(async () => {
  await stack?.close();
});

/** One request, its X-Forwarded-For lines as given (fetch would join them): the status of the answer. */
async function statusWith(key: string, forwardedFor: string[]): Promise<number> {
  const url = new URL(stack.relayUrl);
  const body = JSON.stringify({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] });
  const head = [
    'POST /v1/messages HTTP/1.1', `Host: ${url.host}`, `x-api-key: ${key}`, 'anthropic-version: 2023-06-01',
    'content-type: application/json', `content-length: ${Buffer.byteLength(body)}`,
    ...forwardedFor.map((v) => `X-Forwarded-For: ${v}`),
  ].join('\r\n');
  return (await rawRequest(Number(url.port), head, body)).status;
}

describe('allow_ips behind a trusted proxy', () => {
  it('judges the whole X-Forwarded-For list, every line of it', async () => {
    const account = await fundedAccount(stack, 10_000_000);
    const key = await createApiKey(stack, account, { allow_ips: '203.0.113.7' });
    expect(await statusWith(key.key, ['203.0.113.7'])).toBe(200);
    // The client claims 203.0.113.7; its proxy appended the address it came from.
    expect(await statusWith(key.key, ['203.0.113.7', '198.51.100.9'])).toBe(403);
    expect(await statusWith(key.key, ['203.0.113.7, 198.51.100.9'])).toBe(403);
  });
});
