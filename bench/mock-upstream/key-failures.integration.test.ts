// The mock's per-key failures against the official SDK: a key told to fail gets the provider's own
// answer for that case (typed SDK errors), other keys are served, and the list changes at run time.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockUpstream, type MockUpstream } from './mock-upstream.js';

const GOOD = 'sk-ant-good';
const BAD = 'sk-ant-bad';
let mock: MockUpstream;
let controlled: MockUpstream;

beforeAll(async () => {
  mock = await startMockUpstream({ apiKey: GOOD, apiKeys: [BAD], keyFailures: { [BAD]: 'revoked' } });
  controlled = await startMockUpstream({ apiKey: GOOD, apiKeys: [BAD], control: true });
});
afterAll(async () => {
  await mock?.close();
  await controlled?.close();
});

const ask = (m: MockUpstream, apiKey: string) =>
  new Anthropic({ apiKey, baseURL: m.url, maxRetries: 0 }).messages.create({ model: 'claude-haiku-4-5', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] });

describe('keyFailures', () => {
  it('fails only the listed key, in the way it was told', async () => {
    expect((await ask(mock, GOOD)).type).toBe('message');
    await expect(ask(mock, BAD)).rejects.toBeInstanceOf(Anthropic.AuthenticationError);
    mock.setOptions({ keyFailures: { [BAD]: 'forbidden' } });
    await expect(ask(mock, BAD)).rejects.toBeInstanceOf(Anthropic.PermissionDeniedError);
    mock.setOptions({ keyFailures: { [BAD]: 'no_credit' } });
    const err = await ask(mock, BAD).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as Error).message).toContain('credit balance is too low');
    mock.setOptions({ keyFailures: {} });
    expect((await ask(mock, BAD)).type).toBe('message');
  });

  it('applies to count_tokens too', async () => {
    mock.setOptions({ keyFailures: { [BAD]: 'revoked' } });
    const client = new Anthropic({ apiKey: BAD, baseURL: mock.url, maxRetries: 0 });
    await expect(client.messages.countTokens({ model: 'claude-haiku-4-5', messages: [{ role: 'user', content: 'hi' }] }))
      .rejects.toBeInstanceOf(Anthropic.AuthenticationError);
  });

  it('PUT /mock/key-failures changes the list of a mock started with control, and only of those', async () => {
    const put = (m: MockUpstream, body: unknown) => fetch(`${m.url}/mock/key-failures`, { method: 'PUT', body: JSON.stringify(body) });
    expect((await put(controlled, { [BAD]: 'revoked' })).status).toBe(200);
    await expect(ask(controlled, BAD)).rejects.toBeInstanceOf(Anthropic.AuthenticationError);
    expect((await ask(controlled, GOOD)).type).toBe('message');
    expect((await put(controlled, { [BAD]: 'exploded' })).status).toBe(400);
    expect((await put(controlled, { [BAD]: null })).status).toBe(200);
    expect((await ask(controlled, BAD)).type).toBe('message');
    expect((await put(mock, { [BAD]: null })).status).toBe(404);
  });
});
