// What a provider writes is logged for the operator, never a channel's credential in it: a provider
// that quotes the key it was sent ("Incorrect API key provided: …") would put it in every log line
// about its error. The client-facing scrub is tested in relay/routing/retry-outcomes; this is the
// relay process's own output, where the logger catches key-shaped text but not a channel key of a
// shape of its own, which the relay must scrub by value.
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/project-root.js';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';
import { relayProcessEnv, spawnRelayProcess, withRelayProcess } from '../../tests/harness/relay-process.js';
import { LONG_PROMPT, messageStart, sse, startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

/** A channel credential of no known key shape (a self-hosted provider's token). */
const CHANNEL_KEY = 'chan-cred-7Hq2Lr9Xw4Tb8Kz1';

let stack: GatewayStack;
let provider: ScriptedProvider;
let key: string;

beforeAll(async () => {
  // A stream to a request that asked for JSON (folded), ending with an error that quotes the key.
  provider = await startScriptedProvider(({ model }, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(messageStart(model) + sse('error', { type: 'error', error: { type: 'authentication_error', message: `Incorrect API key provided: ${CHANNEL_KEY}` } }));
  });
  stack = await startGatewayStack();
  await mockChannel(stack, ['fold-error-quoting-key'], 'default', { base_url: provider.url, key: CHANNEL_KEY });
  key = (await createApiKey(stack, await fundedAccount(stack, 10_000_000))).key;
}, 120_000);
afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

describe('a folded stream ending with a provider error that quotes the channel key', () => {
  it('is logged without the key', async () => {
    const relay = await spawnRelayProcess([join(projectRoot(), 'dist/relay/main.js')], relayProcessEnv(stack.config, {}));
    await withRelayProcess(relay, async () => {
      const client = new Anthropic({ apiKey: key, baseURL: relay.url, maxRetries: 0 });
      const err = await client.messages.create({ model: 'fold-error-quoting-key', max_tokens: 16, messages: [{ role: 'user', content: LONG_PROMPT }] }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.APIError);
      await expect.poll(() => relay.output(), { timeout: 5_000 }).toContain('ended with an error');
      const line = relay.output().split('\n').find((l) => l.includes('ended with an error'))!;
      expect(line).toContain('Incorrect API key provided');
      expect(line).not.toContain(CHANNEL_KEY);
      expect(relay.output()).not.toContain(CHANNEL_KEY);
    });
  });
});
