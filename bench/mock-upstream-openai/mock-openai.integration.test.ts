// The OpenAI-format mock spoken to directly by the official `openai` SDK: if the SDK reads it as it
// reads OpenAI (answers, streams, usage, errors with their request ids), tests of the relay against it
// test the relay against Chat Completions' real wire format.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countPromptTokens, startMockOpenAI, type MockOpenAI } from './mock-openai.js';

const KEY = 'sk-proj-mock-direct';
let mock: MockOpenAI;
let client: OpenAI;

beforeAll(async () => {
  mock = await startMockOpenAI({ apiKey: KEY, outputTokens: 6, cachedTokens: 2 });
  client = new OpenAI({ apiKey: KEY, baseURL: `${mock.url}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  await mock?.close();
});

describe('the OpenAI-format mock', () => {
  it('answers a completion with deterministic usage and x-request-id', async () => {
    const messages = [{ role: 'user' as const, content: 'Hello there, how are you?' }];
    const { data, response } = await client.chat.completions.create({ model: 'gpt-4o-mini', max_completion_tokens: 4, messages }).withResponse();
    expect(response.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{32}$/);
    expect(data.choices[0]).toMatchObject({ index: 0, finish_reason: 'length', message: { role: 'assistant', content: 'tok '.repeat(4) } });
    expect(data.usage).toMatchObject({ prompt_tokens: countPromptTokens({ messages }), completion_tokens: 4, prompt_tokens_details: { cached_tokens: 2 } });
  });

  it('streams chunks, the usage chunk when asked, and [DONE]', async () => {
    const stream = await client.chat.completions.create({ model: 'gpt-4o-mini', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Hi' }] });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe('tok '.repeat(6));
    expect(finish).toBe('stop');
    expect(usage).toMatchObject({ prompt_tokens: 1, completion_tokens: 6, total_tokens: 7 });
  });

  it('refuses a wrong key, a bad body and a forced error in OpenAI\'s error JSON', async () => {
    const stranger = new OpenAI({ apiKey: 'sk-wrong-key-1234', baseURL: `${mock.url}/v1`, maxRetries: 0 });
    const unauthorized = await stranger.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }] }).catch((e: unknown) => e);
    expect(unauthorized).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((unauthorized as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe('invalid_api_key');
    expect((unauthorized as InstanceType<typeof OpenAI.AuthenticationError>).requestID).toMatch(/^req_/);

    const bad = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [] }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bad as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('messages');

    const limited = await client.chat.completions.create({ model: 'gpt-x-error429', messages: [{ role: 'user', content: 'Hi' }] }).catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
    expect((limited as InstanceType<typeof OpenAI.RateLimitError>).type).toBe('requests');
  });

  it('lists its models', async () => {
    const ids: string[] = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids).toContain('gpt-4o-mini');
  });
});
