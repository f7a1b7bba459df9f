// A channel key a header cannot carry (a line break: pasted with its newline, or new-api's one key a
// line; a character outside Latin-1), stored before the console refused such keys: undici refuses the
// request before writing anything. It was taken for a request the provider may have run: answered
// 500 "lost after the request was sent", the next channel never tried (review route).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKeyCrypto } from '../../infra/secrets/api-key-crypto.js';
import { billingSettled, createApiKey, fundedAccount, ledgerRow, MOCK_CHANNEL_KEY, mockChannel, startGatewayStack, unpricedMockChannel, type GatewayStack } from '../../tests/harness/gateway-stack.js';

let stack: GatewayStack;
let key: string;
let bad: number;
let good: number;

beforeAll(async () => {
  stack = await startGatewayStack();
  bad = await mockChannel(stack, ['uk-model'], 'default', { priority: 10 });
  good = await unpricedMockChannel(stack, ['uk-model'], 'default', { priority: 0 });
  await stack.sql`UPDATE channels SET key_ciphertext = ${createApiKeyCrypto(stack.config.KEY_SECRET).seal(`${MOCK_CHANNEL_KEY}\nsk-ant-second`)} WHERE id = ${bad}`;
  await stack.redis.publish(stack.keys.invalidationChannel(), JSON.stringify({ kind: 'channel', id: bad }));
  await new Promise((r) => setTimeout(r, 1000));
  key = (await createApiKey(stack, await fundedAccount(stack, 10_000_000))).key;
}, 90_000);
afterAll(async () => {
  await stack?.close();
});

describe('a channel whose key cannot be sent', () => {
  for (const stream of [false, true]) {
    it(`is passed over for the next channel (stream ${stream}), which serves and is billed`, async () => {
      const res = await fetch(`${stack.relayUrl}/v1/messages`, {
        method: 'POST', headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'uk-model', max_tokens: 5, stream, messages: [{ role: 'user', content: 'hi' }] }),
      });
      const text = await res.text();
      expect(res.status, text).toBe(200);
      await billingSettled(stack);
      expect(await ledgerRow(stack, res.headers.get('x-gateway-request-id')!)).toMatchObject({ channel_id: good });
    });
  }
});
