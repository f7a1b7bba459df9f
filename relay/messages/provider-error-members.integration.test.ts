// A provider's 4xx error passed to a client of its own protocol keeps only the protocol's members:
// Anthropic's `type`, `error.type`, `error.message` and `request_id`; OpenAI's `error.message`, `type`,
// `param` and `code`. Before, the error object was passed whole: a provider (or a proxy before it) that
// quotes the request it was sent, as some do in a 400, handed the client the channel's upstream address
// and the relay's request headers, a `debug` member whatever it held.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';
import { startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

let stack: GatewayStack;
let provider: ScriptedProvider;
let key: string;

beforeAll(async () => {
  provider = await startScriptedProvider(({ model, headers }, res) => {
    const echoed = { host: headers.host, 'content-length': headers['content-length'], 'x-api-key': '[redacted]' };
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify(model.startsWith('pem-oai')
      ? { error: { message: 'messages: too long', type: 'invalid_request_error', param: 'messages', code: null, request_headers: echoed }, debug: { upstream: headers.host } }
      : { type: 'error', error: { type: 'invalid_request_error', message: 'messages: too long', request_headers: echoed }, request_id: 'req_provider_1', debug: { upstream: headers.host } }));
  });
  stack = await startGatewayStack();
  await mockChannel(stack, ['pem-ant'], 'default', { base_url: provider.url });
  await mockChannel(stack, ['pem-oai'], 'default', { base_url: provider.url, type: 1, key: 'sk-x' });
  key = (await createApiKey(stack, await fundedAccount(stack, 10_000_000))).key;
});
afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

async function post(path: string, model: string): Promise<{ status: number; text: string; json: Record<string, unknown> }> {
  const r = await fetch(`${stack.relayUrl}${path}`, {
    method: 'POST',
    headers: { 'x-api-key': key, authorization: `Bearer ${key}`, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
  });
  const text = await r.text();
  return { status: r.status, text, json: JSON.parse(text) as Record<string, unknown> };
}

describe('a provider 400 holding members of its own', () => {
  it('reaches an Anthropic client as Anthropic\'s error alone: its type, message and request id', async () => {
    const r = await post('/v1/messages', 'pem-ant');
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: 'messages: too long' }, request_id: 'req_provider_1' });
    expect(r.text).not.toContain(new URL(provider.url).host);
  });

  it('reaches an OpenAI client as OpenAI\'s error alone: its message, type, param and code', async () => {
    const r = await post('/v1/chat/completions', 'pem-oai');
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: { message: 'messages: too long', type: 'invalid_request_error', param: 'messages', code: null } });
    expect(r.text).not.toContain(new URL(provider.url).host);
  });
});
