// The bare hop (the bench's baseline) answers as the provider does through both ways of reading a
// JSON answer (dispatch(), the default, as the relay reads it; request(), the earlier baseline), and
// streams either way: the Anthropic SDK sees the mock's message, its request id and its stream.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockUpstream, type MockUpstream } from './mock-upstream/mock-upstream.js';
import { startBareProxy, type BareProxy } from './bare-proxy.js';

const KEY = 'sk-ant-bare-test';
let mock: MockUpstream;
const proxies: BareProxy[] = [];

beforeAll(async () => {
  mock = await startMockUpstream({ apiKey: KEY, outputTokens: 16 });
});
afterAll(async () => {
  for (const p of proxies) await p.close();
  await mock?.close();
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
