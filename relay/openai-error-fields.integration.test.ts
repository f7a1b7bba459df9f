// What OpenAI's SDK reads of the relay's own errors, and of paths that only OpenAI's API has:
//   - `param` names the field a request problem is about (OpenAI's notation, `messages.[0].role`);
//     it was always null;
//   - `x-request-id` (err.requestID) carries the gateway's request id when no provider's id is there
//     (the relay's own errors, a stream whose provider sent none); it was absent. Anthropic's side is
//     unchanged: its `request-id` stays the provider's, and no x-request-id is added there;
//   - an unknown path of OpenAI's API (POST /v1/embeddings, /v1/completions) is a 404 in OpenAI's
//     error shape, code `unknown_url`; it was Anthropic's. Every other unknown path keeps Anthropic's.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../tests/harness/gateway-stack.js';

let stack: GatewayStack;
let provider: Server;
let apiKey: string;
let openai: OpenAI;
let anthropic: Anthropic;

// A Chat Completions provider that sends no x-request-id.
function scripted(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end('data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
      + 'data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\ndata: [DONE]\n\n');
  });
}

beforeAll(async () => {
  provider = createServer(scripted);
  await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));
  stack = await startGatewayStack();
  await mockChannel(stack, ['claude-haiku-4-5']);
  await mockChannel(stack, ['no-id-model'], 'default', { base_url: `http://127.0.0.1:${(provider.address() as AddressInfo).port}`, key: 'sk-proj-scripted', type: 1 });
  apiKey = (await createApiKey(stack, await fundedAccount(stack, 10_000_000))).key;
  openai = new OpenAI({ apiKey, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey, baseURL: stack.relayUrl, maxRetries: 0 });
});
afterAll(async () => {
  await stack?.close();
  provider?.closeAllConnections();
  await new Promise((r) => provider?.close(r));
});

type OpenAIError = InstanceType<typeof OpenAI.APIError>;

describe('the relay\'s own errors on /v1/chat/completions', () => {
  it('name the field in `param`, as OpenAI does', async () => {
    const bad = await openai.chat.completions.create({ model: 'claude-haiku-4-5', temperature: 3, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bad as OpenAIError).param).toBe('temperature');
    const role = await openai.chat.completions.create({ model: 'claude-haiku-4-5', messages: [{ role: 'robot' as 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect((role as OpenAIError).param).toBe('messages.[0].role');
    expect((role as OpenAIError).message).toMatch(/messages\.0\.role/);
    // A problem with no field stays null.
    const json = await fetch(`${stack.relayUrl}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }, body: '{' });
    expect(((await json.json()) as { error: { param: unknown } }).error.param).toBeNull();
  });

  it('carry the gateway\'s request id as x-request-id, which the SDK gives as err.requestID', async () => {
    for (const request of [
      { model: 'claude-haiku-4-5', temperature: 3, messages: [{ role: 'user' as const, content: 'hi' }] },
      { model: 'no-such-model', messages: [{ role: 'user' as const, content: 'hi' }] },
    ]) {
      const err = await openai.chat.completions.create(request).catch((e: unknown) => e) as OpenAIError;
      expect(err).toBeInstanceOf(OpenAI.APIError);
      const gateway = err.headers?.get('x-gateway-request-id');
      expect(gateway).toMatch(/^[0-9a-f-]{36}$/);
      expect(err.requestID).toBe(gateway);
    }
  });

  it('a stream whose provider sent no request id carries the gateway\'s', async () => {
    const { data: stream, response } = await openai.chat.completions.create({ model: 'no-id-model', stream: true, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    for await (const c of stream) void c;
    expect(response.headers.get('x-request-id')).toBe(response.headers.get('x-gateway-request-id'));
  });

  it('Anthropic\'s side: request-id is the provider\'s when it answered, the gateway\'s when the relay did (the SDK\'s err.requestID); no x-request-id', async () => {
    const err = await anthropic.messages.create({ model: 'no-such-model', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e) as InstanceType<typeof Anthropic.APIError>;
    expect(err).toBeInstanceOf(Anthropic.NotFoundError);
    expect(err.headers?.get('x-request-id')).toBeNull();
    expect(err.headers?.get('x-gateway-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(err.requestID).toBe(err.headers?.get('x-gateway-request-id'));
    const { response } = await anthropic.messages.create({ model: 'claude-haiku-4-5', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(response.headers.get('request-id')).toBeTruthy();
    expect(response.headers.get('request-id')).not.toBe(response.headers.get('x-gateway-request-id'));
  });
});

describe('an unknown path', () => {
  it('of OpenAI\'s API is a 404 in OpenAI\'s error shape, which its SDK reads', async () => {
    const embeddings = await openai.embeddings.create({ model: 'text-embedding-3-small', input: 'hi' }).catch((e: unknown) => e) as OpenAIError;
    expect(embeddings).toBeInstanceOf(OpenAI.NotFoundError);
    expect(embeddings).toMatchObject({ status: 404, type: 'invalid_request_error', code: 'unknown_url', param: null });
    expect(embeddings.message).toMatch(/POST \/v1\/embeddings/);
    // The error names its request id, as every other answer does (review openaicompat: none here).
    expect(embeddings.requestID).toMatch(/^[0-9a-f-]{36}$/);
    expect(embeddings.requestID).toBe(embeddings.headers?.get('x-gateway-request-id'));
    const completions = await openai.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'hi' }).catch((e: unknown) => e) as OpenAIError;
    expect(completions).toMatchObject({ status: 404, type: 'invalid_request_error', code: 'unknown_url' });
    for (const [method, path] of [['GET', '/v1/chat/completions'], ['POST', '/v1/responses'], ['POST', '/v1/images/generations'], ['GET', '/v1/files'], ['POST', '/v1/audio/speech']]) {
      const res = await fetch(`${stack.relayUrl}${path}`, { method, headers: { authorization: `Bearer ${apiKey}` } });
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'unknown_url', param: null, message: expect.stringContaining(`${method} ${path}`) } });
    }
    // The SDK given the gateway's address without /v1: OpenAI's shape, saying where the API is (before: Anthropic's shape).
    const withoutV1 = await new OpenAI({ apiKey, baseURL: stack.relayUrl, maxRetries: 0 }).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e) as OpenAIError;
    expect(withoutV1).toBeInstanceOf(OpenAI.NotFoundError);
    expect(withoutV1).toMatchObject({ status: 404, type: 'invalid_request_error', code: 'unknown_url' });
    expect(withoutV1.message).toMatch(/POST \/chat\/completions\): this gateway does not serve it\. OpenAI's API is served under \/v1/);
  });

  it('under /v1/models (a trailing slash, another method: OpenAI\'s model delete) is OpenAI\'s to a client asking as OpenAI\'s does, as /v1/models itself', async () => {
    const deleted = await openai.models.delete('ft:gpt-4o-mini:acme::abc').catch((e: unknown) => e) as OpenAIError;
    expect(deleted).toBeInstanceOf(OpenAI.NotFoundError);
    expect(deleted).toMatchObject({ status: 404, type: 'invalid_request_error', code: 'unknown_url' });
    for (const [method, path] of [['GET', '/v1/models/'], ['POST', '/v1/models'], ['DELETE', '/v1/models/x']]) {
      const res = await fetch(`${stack.relayUrl}${path}`, { method, headers: { authorization: `Bearer ${apiKey}` } });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(await res.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'unknown_url', message: expect.stringContaining(`${method} ${path}`) } });
      // Anthropic's manner (x-api-key, or its version header): Anthropic's shape.
      const anthropicStyle = await fetch(`${stack.relayUrl}${path}`, { method, headers: { 'x-api-key': apiKey } });
      expect(await anthropicStyle.json()).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
    }
  });

  it('anywhere else, or from an Anthropic client, is Anthropic\'s', async () => {
    for (const [path, headers] of [['/v1/foo', {}], ['/v2/embeddings', {}], ['/v1/messages/batches', {}], ['/v1/files', { 'anthropic-version': '2023-06-01' }]] as const) {
      const res = await fetch(`${stack.relayUrl}${path}`, { method: 'POST', headers: { 'x-api-key': apiKey, ...headers } });
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
      expect(res.headers.get('request-id')).toMatch(/^[0-9a-f-]{36}$/);
      expect(res.headers.get('x-request-id')).toBeNull();
    }
    // The Anthropic SDK's err.requestID, of an endpoint it has and the gateway does not serve.
    const batches = await anthropic.messages.batches.list().catch((e: unknown) => e) as InstanceType<typeof Anthropic.APIError>;
    expect(batches).toBeInstanceOf(Anthropic.NotFoundError);
    expect(batches.requestID).toBe(batches.headers?.get('x-gateway-request-id'));
  });

  it('a free endpoint\'s refusal names its request id too (a key refused on /v1/models)', async () => {
    const refused = await new OpenAI({ apiKey: 'sk-not-a-key', baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 }).models.list().catch((e: unknown) => e) as OpenAIError;
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(refused.requestID).toMatch(/^[0-9a-f-]{36}$/);
    expect(refused.requestID).toBe(refused.headers?.get('x-gateway-request-id'));
    const anthropicRefused = await new Anthropic({ apiKey: 'sk-not-a-key', baseURL: stack.relayUrl, maxRetries: 0 }).models.list().catch((e: unknown) => e) as InstanceType<typeof Anthropic.APIError>;
    expect(anthropicRefused).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(anthropicRefused.requestID).toBe(anthropicRefused.headers?.get('x-gateway-request-id'));
  });
});
