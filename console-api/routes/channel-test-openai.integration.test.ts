// GET /api/channel/test/:id on an OpenAI-format channel (type 1), against the OpenAI-format mock
// (bench/mock-upstream-openai/): the test request is a one-token Chat Completions call with the
// channel's key as a Bearer token (max_completion_tokens for OpenAI's reasoning models, which refuse
// max_tokens), and a refusal is reported by status and OpenAI's error type, never its body.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockOpenAI, type MockOpenAI } from '../../bench/mock-upstream-openai/mock-openai.js';
import { type ConsoleHarness, type TestAccount, startConsoleHarness } from '../../tests/harness/console-harness.js';

const KEY = 'sk-proj-channel-test-credential';
let h: ConsoleHarness;
let admin: TestAccount;
let root: TestAccount;
let mock: MockOpenAI;

beforeAll(async () => {
  h = await startConsoleHarness();
  admin = await h.account({ role: 10 });
  root = await h.account({ role: 100 });
  mock = await startMockOpenAI({ apiKey: KEY });
  const allowed = await h.app.inject({ method: 'PUT', url: '/api/option/', payload: { key: 'ChannelAllowPrivateNetworks', value: true }, headers: root.auth });
  expect(allowed.statusCode).toBe(200);
});
afterAll(async () => {
  await mock?.close();
  await h?.close();
});

async function openaiChannel(key: string, models: string, extra: Record<string, unknown> = {}): Promise<number> {
  const res = await h.app.inject({ method: 'POST', url: '/api/channel/', payload: { name: `openai-${Math.random()}`, type: 1, base_url: mock.url, key, models, ...extra }, headers: admin.auth });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data.id as number;
}

const testChannel = (id: number, model?: string) =>
  h.app.inject({ method: 'GET', url: `/api/channel/test/${id}${model ? `?model=${model}` : ''}`, headers: admin.auth });

describe('GET /api/channel/test/:id on an OpenAI-format channel', () => {
  it('sends a one-token Chat Completions request with the key as a Bearer token', async () => {
    const id = await openaiChannel(KEY, 'gpt-4o-mini,o3-mini');
    const res = await testChannel(id);
    expect(res.json()).toMatchObject({ success: true, data: { model: 'gpt-4o-mini', status_code: 200 } });
    const sent = mock.requests[mock.requests.length - 1]!;
    expect(sent.path).toBe('/v1/chat/completions');
    expect(sent.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(sent.headers).not.toHaveProperty('x-api-key');
    expect(sent.body).toEqual({ model: 'gpt-4o-mini', max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] });
  });

  it('a reasoning model is tested with max_completion_tokens (it refuses max_tokens)', async () => {
    const id = await openaiChannel(KEY, 'gpt-4o-mini,o3-mini');
    const res = await testChannel(id, 'o3-mini');
    expect(res.json()).toMatchObject({ success: true, data: { model: 'o3-mini', status_code: 200 } });
    expect(mock.requests[mock.requests.length - 1]!.body).toEqual({ model: 'o3-mini', max_completion_tokens: 1, messages: [{ role: 'user', content: 'hi' }] });
  });

  it('the model mapping applies', async () => {
    const id = await openaiChannel(KEY, 'my-alias', { model_mapping: JSON.stringify({ 'my-alias': 'gpt-4.1' }) });
    expect((await testChannel(id)).json()).toMatchObject({ success: true, data: { model: 'gpt-4.1' } });
    expect(mock.requests[mock.requests.length - 1]!.body).toMatchObject({ model: 'gpt-4.1' });
  });

  it('a refused key: success false with the status and OpenAI\'s error type, never the provider\'s message', async () => {
    const id = await openaiChannel('sk-proj-revoked-credential', 'gpt-4o-mini');
    const res = await testChannel(id);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ success: false, message: 'channel test failed: HTTP 401 invalid_request_error', data: { status_code: 401 } });
    expect(res.body).not.toContain('Incorrect API key');
    expect(res.body).not.toContain('revoked');
  });
});
