// GET /v1/models and POST /v1/messages/count_tokens through the official SDK.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createApiKey, fundedAccount, mockChannel, startGatewayStack, unpricedMockChannel, type GatewayStack,
} from '../../tests/harness/gateway-stack.js';

let stack: GatewayStack;
let key: string;
let limited: string;

beforeAll(async () => {
  stack = await startGatewayStack();
  await mockChannel(stack, ['claude-sonnet-4-6', 'claude-haiku-4-5-20251001', 'claude-opus-4-7']);
  const account = await fundedAccount(stack, 1_000_000);
  key = (await createApiKey(stack, account)).key;
  limited = (await createApiKey(stack, account, { model_limits_enabled: true, model_limits: 'claude-haiku-4-5-20251001' })).key;
});
afterAll(async () => {
  await stack?.close();
});
const client = (k = key) => new Anthropic({ apiKey: k, baseURL: stack.relayUrl, maxRetries: 0 });

describe('GET /v1/models', () => {
  it('lists the models this key may use, newest first, with paging', async () => {
    const page = await client().models.list({ limit: 2 });
    expect(page.data.map((m) => m.id)).toEqual(['claude-opus-4-7', 'claude-sonnet-4-6']);
    const all: string[] = [];
    for await (const m of client().models.list({ limit: 1 })) all.push(m.id);
    expect(all).toEqual(['claude-opus-4-7', 'claude-sonnet-4-6', 'claude-haiku-4-5-20251001']);
    expect((await client().models.retrieve('claude-sonnet-4-6')).type).toBe('model');
  });

  it('honours the key model whitelist', async () => {
    const ids: string[] = [];
    for await (const m of client(limited).models.list()) ids.push(m.id);
    expect(ids).toEqual(['claude-haiku-4-5-20251001']);
    const err = await client(limited).models.retrieve('claude-opus-4-7').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
  });

  it('leaves out a model a channel serves but no ratio prices: a request for it would be refused (model_not_priced)', async () => {
    await unpricedMockChannel(stack, ['claude-unpriced-9']);
    const ids: string[] = [];
    for await (const m of client().models.list()) ids.push(m.id);
    expect(ids).toEqual(['claude-opus-4-7', 'claude-sonnet-4-6', 'claude-haiku-4-5-20251001']);
    expect(await client().models.retrieve('claude-unpriced-9').catch((e: unknown) => e)).toBeInstanceOf(Anthropic.NotFoundError);
    // OpenAI's shape (no anthropic-version header) lists the same.
    const res = await fetch(`${stack.relayUrl}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(((await res.json()) as { data: { id: string }[] }).data.map((m) => m.id)).not.toContain('claude-unpriced-9');
  });

  it('refuses an unknown key', async () => {
    const err = await client('sk-nope').models.list().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
  });
});

describe('GET /v1/models errors to OpenAI\'s SDK', () => {
  const openai = (k = key) => new OpenAI({ apiKey: k, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });

  it('an unknown model: 404 in OpenAI\'s error JSON, code model_not_found, param model', async () => {
    const err = await openai().models.retrieve('nope-1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err).toMatchObject({ status: 404, code: 'model_not_found', param: 'model', type: 'not_found_error' });
    // A model the key's whitelist leaves out is not found all the same.
    expect(await openai(limited).models.retrieve('claude-opus-4-7').catch((e: unknown) => e)).toMatchObject({ status: 404, code: 'model_not_found' });
  });

  it('an unknown key: 401 with code invalid_api_key; a malformed escape: 400; Anthropic\'s clients keep Anthropic\'s JSON', async () => {
    expect(await openai('sk-nope').models.list().catch((e: unknown) => e)).toMatchObject({ status: 401, code: 'invalid_api_key', type: 'authentication_error' });
    const bad = await fetch(`${stack.relayUrl}/v1/models/%zz`, { headers: { authorization: `Bearer ${key}` } });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'invalid_request' } });
    // In the query string too (an empty page before).
    const badQuery = await fetch(`${stack.relayUrl}/v1/models?after_id=%zz`, { headers: { authorization: `Bearer ${key}` } });
    expect(badQuery.status).toBe(400);
    expect(await badQuery.json()).toMatchObject({ error: { type: 'invalid_request_error', message: 'the query string holds a malformed percent-escape.' } });
    const anthropicStyle = await fetch(`${stack.relayUrl}/v1/models/nope-1`, { headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01' } });
    expect(anthropicStyle.status).toBe(404);
    // The same id in the body and the headers (it was null, with no header).
    expect(await anthropicStyle.json()).toEqual({ type: 'error', error: { type: 'not_found_error', message: 'model: nope-1' }, request_id: anthropicStyle.headers.get('request-id') });
    expect(anthropicStyle.headers.get('x-gateway-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    // x-api-key is Anthropic's header: without anthropic-version too (curl), Anthropic's JSON and list.
    const bare = await fetch(`${stack.relayUrl}/v1/models`, { headers: { 'x-api-key': 'sk-bad' } });
    expect(bare.status).toBe(401);
    expect(await bare.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
    const list = await fetch(`${stack.relayUrl}/v1/models`, { headers: { 'x-api-key': key } });
    expect(await list.json()).toMatchObject({ data: expect.arrayContaining([expect.objectContaining({ type: 'model' })]), has_more: false });
  });
});

describe('POST /v1/messages/count_tokens', () => {
  it('counts the prompt without calling the provider or moving quota', async () => {
    const calls = stack.mock.stats.requests;
    const n = await client().messages.countTokens({ model: 'claude-sonnet-4-6', messages: [{ role: 'user', content: 'Hello world' }] });
    expect(n.input_tokens).toBeGreaterThan(0);
    const longer = await client().messages.countTokens({ model: 'claude-sonnet-4-6', messages: [{ role: 'user', content: 'Hello world '.repeat(50) }] });
    expect(longer.input_tokens).toBeGreaterThan(n.input_tokens * 10);
    expect(stack.mock.stats.requests).toBe(calls);
  });

  it('rejects a body without messages with 400', async () => {
    const res = await fetch(`${stack.relayUrl}/v1/messages/count_tokens`, {
      method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'x' }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
  });
});
