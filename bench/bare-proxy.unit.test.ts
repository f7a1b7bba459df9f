// The bare hop (the bench's baseline) answers as the provider does through both ways of reading a
// JSON answer (dispatch(), the default, as the relay reads it; request(), the earlier baseline), and
// streams either way: the Anthropic SDK sees the mock's message, its request id and its stream. In
// front of an OpenAI-format provider (--upstream-format openai) it forwards Chat Completions with the
// key as a Bearer token: the OpenAI SDK sees the OpenAI-format mock's completion, request id and stream.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockUpstream, type MockUpstream } from './mock-upstream/mock-upstream.js';
import { startMockOpenAI, type MockOpenAI } from './mock-upstream-openai/mock-openai.js';
import { startBareProxy, type BareProxy } from './bare-proxy.js';

const KEY = 'sk-ant-bare-test';
const OPENAI_KEY = 'sk-proj-bare-test';
let mock: MockUpstream;
let mockOpenAI: MockOpenAI;
const proxies: BareProxy[] = [];

beforeAll(async () => {
  mock = await startMockUpstream({ apiKey: KEY, outputTokens: 16 });
  mockOpenAI = await startMockOpenAI({ apiKey: OPENAI_KEY, outputTokens: 16, cachedTokens: 2 });
});
afterAll(async () => {
  for (const p of proxies) await p.close();
  await mock?.close();
  await mockOpenAI?.close();
});

describe.each(['dispatch', 'request'] as const)('the bare hop reading JSON answers with %s()', (upstreamApi) => {
  let client: Anthropic;
  beforeAll(async () => {
    const proxy = await startBareProxy({ upstream: mock.url, apiKey: KEY, upstreamApi });
    proxies.push(proxy);
    client = new Anthropic({ apiKey: 'ignored-by-the-hop', baseURL: `http://127.0.0.1:${proxy.port}`, maxRetries: 0 });
  });

  it('passes a message on with its request id', async () => {
    const { data, response } = await client.messages.create({ model: 'bench-small', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(data.type).toBe('message');
    expect(data.usage.output_tokens).toBe(16);
    expect(response.headers.get('request-id')).toBe(mock.requests.at(-1)!.requestId);
  });

  it('streams a streamed answer', async () => {
    const stream = client.messages.stream({ model: 'bench-small', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
    const final = await stream.finalMessage();
    expect(final.usage.output_tokens).toBe(16);
  });

  it('passes a provider error on with its status', async () => {
    const proxy = await startBareProxy({ upstream: mock.url, apiKey: 'not-the-key', upstreamApi });
    proxies.push(proxy);
    const bad = new Anthropic({ apiKey: 'x', baseURL: `http://127.0.0.1:${proxy.port}`, maxRetries: 0 });
    const err = await bad.messages.create({ model: 'bench-small', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }).then(() => null, (e: unknown) => e);
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(401);
  });
});

describe.each(['dispatch', 'request'] as const)('the bare hop in front of an OpenAI-format provider, reading JSON answers with %s()', (upstreamApi) => {
  let client: OpenAI;
  beforeAll(async () => {
    const proxy = await startBareProxy({ upstream: mockOpenAI.url, apiKey: OPENAI_KEY, upstreamApi, upstreamFormat: 'openai' });
    proxies.push(proxy);
    client = new OpenAI({ apiKey: 'ignored-by-the-hop', baseURL: `http://127.0.0.1:${proxy.port}/v1`, maxRetries: 0 });
  });

  it('passes a completion on with its request id, the key sent as a Bearer token', async () => {
    const { data, response } = await client.chat.completions.create({ model: 'bench-oai-chat', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(data.object).toBe('chat.completion');
    expect(data.usage).toMatchObject({ completion_tokens: 16, prompt_tokens_details: { cached_tokens: 1 } });
    const sent = mockOpenAI.requests.at(-1)!;
    expect(response.headers.get('x-request-id')).toBe(sent.requestId);
    expect(sent.headers['authorization']).toBe(`Bearer ${OPENAI_KEY}`);
  });

  it('streams a streamed answer with its usage chunk', async () => {
    const stream = await client.chat.completions.create({ model: 'bench-oai-chat', max_tokens: 16, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe('tok '.repeat(16));
    expect(usage?.completion_tokens).toBe(16);
  });

  it('passes a provider error on with its status', async () => {
    const proxy = await startBareProxy({ upstream: mockOpenAI.url, apiKey: 'not-the-key', upstreamApi, upstreamFormat: 'openai' });
    proxies.push(proxy);
    const bad = new OpenAI({ apiKey: 'x', baseURL: `http://127.0.0.1:${proxy.port}/v1`, maxRetries: 0 });
    const err = await bad.chat.completions.create({ model: 'bench-oai-chat', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }).then(() => null, (e: unknown) => e);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(401);
  });
});
