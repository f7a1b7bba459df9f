// A channel one relay sets aside is set aside by every relay of the fleet: the relay that met the
// failures announces it (the invalidation channel's `channel_aside`), and the others apply it for the
// same time. Before: each relay learnt it alone, so with N relays a failing provider cost N times the
// failures (3 per relay: 504s after the headers timeout for a provider that never answers, a round trip
// and a retry each for one answering 5xx) before the fleet stopped sending it its users.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';
import { startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

const MODEL = 'claude-haiku-4-5';
let stack: GatewayStack;
let failing: ScriptedProvider;
let failingRequests = 0;

beforeAll(async () => {
  stack = await startGatewayStack({ relays: 2, env: { CHANNEL_COOLDOWN_FAILURES: '3', CHANNEL_COOLDOWN_SEC: '60' } });
  // Answers every request 500: the relay retries it on the other channel, and counts the failure.
  failing = await startScriptedProvider((_req, res) => {
    failingRequests++;
    res.writeHead(500, { 'content-type': 'application/json' });
    res.end('{"type":"error","error":{"type":"api_error","message":"Internal server error"}}');
  });
  await mockChannel(stack, [MODEL]);
  await mockChannel(stack, [MODEL], 'default', { base_url: failing.url });
});
afterAll(async () => {
  await failing?.close();
  await stack?.close();
});

it('3 failures on one relay set the channel aside on the other relay too', async () => {
  const account = await fundedAccount(stack, 10_000_000);
  const key = (await createApiKey(stack, account)).key;
  const [first, second] = stack.relays.map((r) => new Anthropic({ apiKey: key, baseURL: `http://127.0.0.1:${r.port}`, maxRetries: 0 }));
  const ask = (client: Anthropic, user: number) => client.messages.create({ model: MODEL, max_tokens: 8, metadata: { user_id: `user-${user}` }, messages: [{ role: 'user', content: 'hi' }] });
  // Through the first relay until it has met 3 failures (about half of the users land on the failing
  // channel first, and are served by the other after it).
  for (let u = 0; failingRequests < 3 && u < 200; u++) await ask(first!, u);
  expect(failingRequests).toBe(3);
  // The announcement reaches the second relay: none of its users' requests goes to the failing channel.
  await new Promise((r) => setTimeout(r, 300));
  for (let u = 0; u < 40; u++) await ask(second!, u);
  expect(failingRequests).toBe(3);
}, 60_000);
