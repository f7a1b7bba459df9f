// The request-id header (the SDK's err.requestID, what a user quotes to support) and the error body's
// request_id named different requests when the relay rebuilt a provider's error: a stream that failed
// for a request without stream, a provider error that is no JSON (review sdk). A rebuilt error carries
// the gateway's id in both, and in x-gateway-request-id.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';
import { LONG_PROMPT, sse, startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

let stack: GatewayStack;
let provider: ScriptedProvider;
let client: Anthropic;
beforeAll(async () => {
  provider = await startScriptedProvider((r, res) => {
    if (r.model === 'scr-folded-err') {
      // A provider that streams a request that asked for none, failing at once (folded answer).
      res.writeHead(200, { 'content-type': 'text/event-stream', 'request-id': 'req_upstream_folded' });
      res.end(sse('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
    } else {
      // A 400 whose body is no JSON (a proxy's page).
      res.writeHead(400, { 'content-type': 'text/html', 'request-id': 'req_upstream_html' });
      res.end('<html>bad request</html>');
    }
  });
  stack = await startGatewayStack();
  await mockChannel(stack, ['scr-folded-err', 'scr-html-err'], 'default', { base_url: provider.url });
  const account = await fundedAccount(stack, 100_000_000);
  client = new Anthropic({ apiKey: (await createApiKey(stack, account)).key, baseURL: stack.relayUrl, maxRetries: 0 });
}, 120_000);
afterAll(async () => { await stack?.close(); await provider?.close(); });

describe('request id of a rebuilt provider error', () => {
  it.each(['scr-folded-err', 'scr-html-err'])('%s: header request-id names the same request as the body', async (model) => {
    const err = await client.messages.create({ model, max_tokens: 100, messages: [{ role: 'user', content: LONG_PROMPT }] }).then(() => null, (e: unknown) => e as InstanceType<typeof Anthropic.APIError>);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    const body = err!.error as { request_id?: string };
    expect(err!.requestID).toBe(body.request_id);
    expect(err!.requestID).toBe(err!.headers?.get('x-gateway-request-id'));
  });
});
