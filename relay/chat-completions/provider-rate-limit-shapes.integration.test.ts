// A provider's 429 reaches an OpenAI client as OpenAI's own rate limit (`code: rate_limit_exceeded`)
// whatever shape the OpenAI-format provider wrote it in, as an Anthropic channel's 429 is converted:
// Azure's `{"error": {"code": "429", "message": …}}` reached the client with `type: null, code: "429"`,
// another provider's `server_error` as that (review openai), and clients matching the code missed it.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';
import { startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

let stack: GatewayStack;
let provider: ScriptedProvider;
let key: string;

const LIMITS: Record<string, unknown> = {
  'limit-azure': { error: { code: '429', message: 'Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded call rate limit of your current OpenAI S0 pricing tier.' } },
  'limit-server-error': { error: { message: 'Too many requests', type: 'server_error', param: null, code: null } },
  'limit-openai-tokens': { error: { message: 'Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM).', type: 'tokens', param: null, code: 'rate_limit_exceeded' } },
};

beforeAll(async () => {
  provider = await startScriptedProvider(({ model }, res) => {
    res.writeHead(429, { 'content-type': 'application/json' });
    res.end(JSON.stringify(LIMITS[model] ?? LIMITS['limit-azure']));
  });
  stack = await startGatewayStack({ env: { CHANNEL_COOLDOWN_FAILURES: '0' } });
  await mockChannel(stack, Object.keys(LIMITS), 'default', { base_url: provider.url, type: 1 });
  key = (await createApiKey(stack, await fundedAccount(stack, 10_000_000))).key;
}, 120_000);

afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

describe('a provider\'s 429 to an OpenAI client', () => {
  it('is a RateLimitError coded rate_limit_exceeded whatever the provider wrote; OpenAI\'s own type of it is kept', async () => {
    const client = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
    const seen: Record<string, { status: number; type: unknown; code: unknown }> = {};
    for (const model of Object.keys(LIMITS)) {
      const err = await client.chat.completions.create({ model, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
      expect(err, model).toBeInstanceOf(OpenAI.RateLimitError);
      const e = err as InstanceType<typeof OpenAI.RateLimitError>;
      seen[model] = { status: e.status, type: e.type, code: e.code };
      // The provider's words are about the operator's account with it: not passed on.
      expect(e.message, model).not.toMatch(/Azure|org-x/);
    }
    expect(seen).toEqual({
      'limit-azure': { status: 429, type: 'rate_limit_exceeded', code: 'rate_limit_exceeded' },
      'limit-server-error': { status: 429, type: 'rate_limit_exceeded', code: 'rate_limit_exceeded' },
      'limit-openai-tokens': { status: 429, type: 'tokens', code: 'rate_limit_exceeded' },
    });
  });
});
