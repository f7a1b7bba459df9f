// What the client gets when channels fail in ways a retry must respect (an audit of the retry path):
//   - a gateway timeout (504, Cloudflare's 524) is not retried: the provider behind the proxy may
//     still be generating, and a second channel would generate (and bill the operator) again;
//   - a channel that cannot carry the request in its format is skipped for one that can, rather than
//     ending the failover with a 400;
//   - the provider request id answered is the answering attempt's, never an earlier channel's;
//   - a provider's 4xx JSON that is not an error in the client's format is rebuilt in it;
//   - a provider's 429 that says the channel's own account is out of credit (OpenAI's
//     insufficient_quota) is the channel's fault like a 401 or a "credit balance is too low", not the
//     client's rate limit or balance.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockOpenAI, type MockOpenAI } from '../../bench/mock-upstream-openai/mock-openai.js';
import { parsePromText } from '../../core/metrics/prom.js';
import {
  settledAccountQuota,
  billingSettled, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

interface FixedUpstream { url: string; requests: number; close(): Promise<void> }

/** A provider answering every request with one status, headers and body. */
async function fixedUpstream(status: number, body: string, headers: Record<string, string> = {}): Promise<FixedUpstream> {
  const up = { url: '', requests: 0, close: async () => {} };
  const server: Server = createServer((req, res) => {
    up.requests++;
    req.resume();
    req.on('end', () => res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  up.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  up.close = () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
  return up;
}

let stack: GatewayStack;
let account: TestAccount;
let client: Anthropic;
let healthy: FixedUpstream;
const upstreams: FixedUpstream[] = [];

beforeAll(async () => {
  stack = await startGatewayStack({ env: { RELAY_MAX_TRIES: '3' } });
  account = await fundedAccount(stack, 50_000_000);
  client = new Anthropic({ apiKey: (await createApiKey(stack, account)).key, baseURL: stack.relayUrl, maxRetries: 0 });
  healthy = await fixedUpstream(200, JSON.stringify({
    id: 'msg_1', type: 'message', role: 'assistant', model: 'm', content: [{ type: 'text', text: 'hi' }],
    stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 5, output_tokens: 1 },
  }));
  upstreams.push(healthy);
});
afterAll(async () => {
  for (const u of upstreams) await u.close();
  await stack?.close();
});

const balance = (): Promise<number> => settledAccountQuota(stack, account.id);

const ask = (model: string, content: Anthropic.MessageParam['content'] = 'hello') =>
  client.messages.create({ model, max_tokens: 8, messages: [{ role: 'user', content }] }).withResponse();

describe('retries', () => {
  it.each([504, 524])('a %i (the provider may still be generating) is answered, not retried on another channel; nothing billed', async (status) => {
    const model = `route-timeout-${status}`;
    const timedOut = await fixedUpstream(status, JSON.stringify({ type: 'error', error: { type: 'api_error', message: 'gateway timeout' } }));
    upstreams.push(timedOut);
    await mockChannel(stack, [model], 'default', { base_url: timedOut.url, priority: 10 });
    await mockChannel(stack, [model], 'default', { base_url: healthy.url, priority: 0 });
    const before = { balance: await balance(), healthy: healthy.requests };
    const err = await ask(model).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(status);
    // The provider's error had no request_id: the body carries the gateway's, as the relay's own errors do.
    const e = err as InstanceType<typeof Anthropic.APIError>;
    expect(e.error).toMatchObject({ type: 'error', error: { type: 'api_error' }, request_id: e.headers?.get('x-gateway-request-id') });
    expect(timedOut.requests).toBe(1);
    expect(healthy.requests).toBe(before.healthy);
    await billingSettled(stack);
    expect(await balance()).toBe(before.balance);
  });

  // Before: passed through at once, the tier's healthy channel never tried (with cache affinity, the
  // same users met the broken channel on every request).
  it.each([404, 405, 410])('a %i (the model gone there, a wrong base path) is tried on the next channel; the last channel\'s is passed through; billed once', async (status) => {
    const model = `route-not-found-${status}`;
    const missing = await fixedUpstream(status, JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: `model: ${model}` } }));
    upstreams.push(missing);
    await mockChannel(stack, [model], 'default', { base_url: missing.url, priority: 10 });
    await mockChannel(stack, [model], 'default', { base_url: healthy.url, priority: 0 });
    const before = { balance: await balance(), healthy: healthy.requests };
    const { data } = await ask(model);
    expect(data.content).toEqual([{ type: 'text', text: 'hi' }]);
    expect([missing.requests, healthy.requests - before.healthy]).toEqual([1, 1]);
    await billingSettled(stack);
    expect(before.balance - await balance()).toBeGreaterThan(0);

    // Only channels answering not found: the last one's answer reaches the client, nothing billed.
    const only = `route-only-not-found-${status}`;
    await mockChannel(stack, [only], 'default', { base_url: missing.url, priority: 10 });
    await mockChannel(stack, [only], 'default', { base_url: missing.url, priority: 0 });
    const after = await balance();
    const err = await ask(only).catch((e: unknown) => e) as InstanceType<typeof Anthropic.APIError>;
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(err.status).toBe(status);
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
    expect(missing.requests).toBe(3);
    await billingSettled(stack);
    expect(await balance()).toBe(after);
  });

  // Before: the redirect was noted as a failure a retry may cure, and the refusal's x-should-retry:
  // false was dropped: both SDKs sent the request twice more to the same two broken channels.
  it('a redirecting channel, then one refusing its credential: 500 with x-should-retry: false, as the refusal alone', async () => {
    const model = 'route-302-then-401';
    const redirecting = await fixedUpstream(302, '', { location: 'https://login.example/' });
    const refusing = await fixedUpstream(401, JSON.stringify({ type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } }));
    upstreams.push(redirecting, refusing);
    await mockChannel(stack, [model], 'default', { base_url: redirecting.url, priority: 10 });
    await mockChannel(stack, [model], 'default', { base_url: refusing.url, priority: 0 });
    const err = await ask(model).catch((e: unknown) => e) as InstanceType<typeof Anthropic.APIError>;
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    expect(err.headers?.get('x-should-retry')).toBe('false');
    expect([redirecting.requests, refusing.requests]).toEqual([1, 1]);
  });

  it('a provider refusing the channel\'s own credential (401) on the last channel: 500 saying so, not "could not be reached", and not a 401 about the client\'s key; nothing billed', async () => {
    const model = 'route-channel-refused';
    const refusing = await fixedUpstream(401, JSON.stringify({ type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } }), { 'request-id': 'req_refused' });
    upstreams.push(refusing);
    await mockChannel(stack, [model], 'default', { base_url: refusing.url });
    const before = await balance();
    const err = await ask(model).catch((e: unknown) => e) as InstanceType<typeof Anthropic.APIError>;
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    expect(err.error).toMatchObject({ error: { type: 'api_error', message: expect.stringContaining('refused this gateway\'s own credential') } });
    // The relay's own answer: the id users quote (the SDK's requestID, from request-id) is the one in
    // its body, the gateway's, not the refusing provider's 'req_refused'.
    expect(err.requestID).toBe(err.headers?.get('x-gateway-request-id'));
    expect((err.error as { request_id?: string }).request_id).toBe(err.requestID);
    await billingSettled(stack);
    expect(await balance()).toBe(before);
    // The provider's id stays in the log row, for the operator to take to the provider.
    const rs = await stack.ch.query({
      query: 'SELECT upstream_request_id FROM logs FINAL WHERE request_id = {r:String}', query_params: { r: err.requestID! }, format: 'JSONEachRow',
    });
    expect(await rs.json()).toEqual([{ upstream_request_id: 'req_refused' }]);
  });

  it('a provider\'s 5xx whose Anthropic error names a client\'s type is answered with the status\'s type (500 api_error), its words replaced', async () => {
    const model = 'route-500-client-type';
    const failing = await fixedUpstream(500, JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'upstream pool exhausted' } }));
    upstreams.push(failing);
    await mockChannel(stack, [model], 'default', { base_url: failing.url });
    const err = await ask(model).catch((e: unknown) => e) as InstanceType<typeof Anthropic.APIError>;
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    // Before: {"type":"invalid_request_error"} on a 500, which reads as the client's fault.
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'api_error' } });
    expect((err.error as { error: { message: string } }).error.message).not.toContain('pool exhausted');
  });

  it.each([false, true])('a provider\'s 4xx quoting the channel\'s credential (stream: %s) reaches the client without it, and without any key-shaped text', async (stream) => {
    const model = `route-quotes-key-${stream}`;
    const channelKey = 'chan-cred-0123456789-ABCDEFGHIJ';
    const other = 'sk-ant-api03-szMIIGYiZ_abcDEF123-ghiJKL456_mnoPQR789-LEAKAA';
    const quoting = await fixedUpstream(400, JSON.stringify({
      type: 'error', error: { type: 'invalid_request_error', message: `Incorrect API key provided: ${channelKey}; also tried ${other}; the prompt is too long` },
    }), { 'request-id': 'req_quoting' });
    upstreams.push(quoting);
    await mockChannel(stack, [model], 'default', { base_url: quoting.url, key: channelKey });
    const err = await (stream
      ? (async () => { for await (const _ of await client.messages.create({ model, max_tokens: 8, messages: [{ role: 'user', content: 'hello' }], stream: true })); })()
      : ask(model)).catch((e: unknown) => e) as InstanceType<typeof Anthropic.APIError>;
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    const message = (err.error as { error: { message: string } }).error.message;
    expect(message).not.toContain(channelKey);
    expect(message).not.toContain('szMIIGYiZ');
    // The rest of the provider's words stay: they are about the client's request.
    expect(message).toContain('the prompt is too long');
    expect(message).toContain('[redacted]');
  });

  it.each([false, true])('a provider whose connection is lost after the request arrived (stream: %s) is answered 500 saying so, not "could not be reached"; not retried; nothing billed', async (stream) => {
    const model = `route-lost-${stream}`;
    // Reads the whole request, then drops the connection without a byte: a provider process that
    // died mid-generation, or a proxy that cut it.
    let received = 0;
    const dropping: Server = createServer((req) => {
      req.resume();
      req.on('end', () => { received++; req.socket.destroy(); });
    });
    await new Promise<void>((resolve) => dropping.listen(0, '127.0.0.1', resolve));
    upstreams.push({ url: '', requests: 0, close: () => new Promise<void>((resolve) => { dropping.closeAllConnections(); dropping.close(() => resolve()); }) });
    await mockChannel(stack, [model], 'default', { base_url: `http://127.0.0.1:${(dropping.address() as AddressInfo).port}`, priority: 10 });
    await mockChannel(stack, [model], 'default', { base_url: healthy.url, priority: 0 });
    const before = { balance: await balance(), healthy: healthy.requests };
    const call = stream
      ? (async () => { for await (const _ of await client.messages.create({ model, max_tokens: 8, messages: [{ role: 'user', content: 'hello' }], stream: true })); })()
      : ask(model);
    const err = await call.catch((e: unknown) => e) as InstanceType<typeof Anthropic.APIError>;
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    expect(err.status).toBe(500);
    expect(err.error).toMatchObject({
      type: 'error', error: { type: 'api_error', message: 'The model provider\'s connection was lost after the request was sent, before it answered.' },
    });
    // Sent once: the provider may have been generating it, and a second channel would again.
    expect(received).toBe(1);
    expect(healthy.requests).toBe(before.healthy);
    await billingSettled(stack);
    expect(await balance()).toBe(before.balance);
  });

  it('answers with the answering attempt\'s provider request id, never an earlier channel\'s', async () => {
    const model = 'route-request-id';
    const overloaded = await fixedUpstream(529, JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'busy' } }), { 'request-id': 'req_first_channel' });
    upstreams.push(overloaded);
    await mockChannel(stack, [model], 'default', { base_url: overloaded.url, priority: 10 });
    // The last channel refuses the connection: no answer, so no provider request id of its own.
    await mockChannel(stack, [model], 'default', { base_url: 'http://127.0.0.1:9', priority: 0 });
    const err = await ask(model).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    const e = err as InstanceType<typeof Anthropic.APIError>;
    expect(overloaded.requests).toBe(1);
    // The relay's own answer: request-id (the SDK's err.requestID) is the gateway's, not the first channel's.
    const requestId = e.headers?.get('x-gateway-request-id');
    expect(requestId).toBeTruthy();
    expect(e.requestID).toBe(requestId);
    await billingSettled(stack);
    const rs = await stack.ch.query({
      query: 'SELECT upstream_request_id FROM logs FINAL WHERE request_id = {r:String}', query_params: { r: requestId! }, format: 'JSONEachRow',
    });
    expect(await rs.json()).toEqual([{ upstream_request_id: '' }]);
  });
});

describe('a channel that cannot carry the request', () => {
  let openai: MockOpenAI;
  beforeAll(async () => {
    openai = await startMockOpenAI({ apiKey: 'sk-proj-mock-retry-outcomes' });
  });
  afterAll(async () => {
    await openai?.close();
  });

  it('is skipped for the next channel that can: a document block after an overloaded Anthropic channel is served by the third, the OpenAI-format channel never called', async () => {
    const model = 'route-not-carried';
    const overloaded = await fixedUpstream(529, JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'busy' } }));
    upstreams.push(overloaded);
    await mockChannel(stack, [model], 'default', { base_url: overloaded.url, priority: 10 });
    await mockChannel(stack, [model], 'default', { base_url: openai.url, key: 'sk-proj-mock-retry-outcomes', type: 1, priority: 5 });
    await mockChannel(stack, [model], 'default', { base_url: healthy.url, priority: 0 });
    const sentToOpenAI = openai.requests.length;
    const healthyBefore = healthy.requests;
    const document: Anthropic.MessageParam['content'] = [
      { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'a short document' } },
      { type: 'text', text: 'Summarize it' },
    ];
    const { data } = await ask(model, document);
    expect(data.type).toBe('message');
    expect(openai.requests.length).toBe(sentToOpenAI);
    expect(healthy.requests).toBe(healthyBefore + 1);
  });

  it.each([
    { status: 529, type: 'overloaded_error' },
    { status: 429, type: 'rate_limit_error' },
  ])('with no channel left after it, answers the earlier channel\'s failure ($status $type, its retry-after kept), not a 400 for a valid request', async ({ status, type }) => {
    const model = `route-not-carried-last-${status}`;
    const overloaded = await fixedUpstream(status, JSON.stringify({ type: 'error', error: { type, message: 'busy' } }), { 'retry-after': '7' });
    upstreams.push(overloaded);
    await mockChannel(stack, [model], 'default', { base_url: overloaded.url, priority: 10 });
    await mockChannel(stack, [model], 'default', { base_url: openai.url, key: 'sk-proj-mock-retry-outcomes', type: 1, priority: 0 });
    const sentToOpenAI = openai.requests.length;
    const before = await balance();
    const err = await ask(model, [
      { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'a short document' } },
      { type: 'text', text: 'Summarize it' },
    ]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    const e = err as InstanceType<typeof Anthropic.APIError>;
    expect(e.status).toBe(status);
    expect(e.error).toMatchObject({ type: 'error', error: { type } });
    expect(e.headers?.get('retry-after')).toBe('7');
    expect(overloaded.requests).toBe(1);
    expect(openai.requests.length).toBe(sentToOpenAI);
    await billingSettled(stack);
    expect(await balance()).toBe(before);
  });
});

describe('a provider\'s 4xx answer', () => {
  it('in JSON that is no error of the client\'s format reaches the client as Anthropic\'s error JSON', async () => {
    const model = 'route-odd-4xx';
    const odd = await fixedUpstream(404, JSON.stringify({ detail: 'Not Found' }));
    upstreams.push(odd);
    await mockChannel(stack, [model], 'default', { base_url: odd.url });
    const res = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': client.apiKey!, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model, max_tokens: 8, messages: [{ role: 'user', content: 'hello' }] }),
    });
    expect(res.status).toBe(404);
    const body = await res.json() as { type?: string; error?: { type?: string; message?: string } };
    expect(body).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
    expect(typeof body.error?.message).toBe('string');
  });
});

describe('a provider\'s 429 saying the channel\'s own account is out of credit', () => {
  // What OpenAI answers when the operator's organization has no credit left.
  const OPENAI_QUOTA = JSON.stringify({ error: {
    message: 'You exceeded your current quota, please check your plan and billing details.', type: 'insufficient_quota', param: null, code: 'insufficient_quota',
  } });
  // The same from an Anthropic-format provider (a proxy answering Anthropic's billing_error under a 429).
  const ANTHROPIC_BILLING = JSON.stringify({ type: 'error', error: { type: 'billing_error', message: 'Your credit balance is too low to access the Anthropic API.' } });
  const REFUSED = 'refused this gateway\'s own credential or account';

  async function channelFaults(channel: number): Promise<number> {
    const m = parsePromText(await (await fetch(`http://127.0.0.1:${stack.relay.metricsPort}/metrics`)).text());
    return m.get(`gateway_relay_channel_attempts_total{channel="${channel}",outcome="channel"}`) ?? 0;
  }

  // Before: 429 `{"type":"insufficient_quota","code":"insufficient_quota"}`, the code of the client's
  // own balance too low, with a message about rate limiting; the SDK retried it twice.
  it('an OpenAI-format channel\'s insufficient_quota on the last channel: /v1/chat/completions answers 500 saying the provider refused the gateway\'s account, x-should-retry: false (the SDK\'s default retries send it once); a channel fault; nothing billed', async () => {
    const model = 'route-quota-openai';
    const broke = await fixedUpstream(429, OPENAI_QUOTA);
    upstreams.push(broke);
    const channel = await mockChannel(stack, [model], 'default', { base_url: broke.url, key: 'sk-proj-broke', type: 1 });
    const before = await balance();
    const sdk = new OpenAI({ apiKey: client.apiKey!, baseURL: `${stack.relayUrl}/v1` });
    const err = await sdk.chat.completions.create({ model, max_tokens: 8, messages: [{ role: 'user', content: 'hello' }] }).catch((e: unknown) => e) as InstanceType<typeof OpenAI.APIError>;
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect(err.status).toBe(500);
    expect(err.error).toMatchObject({ type: 'server_error', message: expect.stringContaining(REFUSED) });
    expect((err.error as { code?: unknown }).code).not.toBe('insufficient_quota');
    expect(err.headers?.get('x-should-retry')).toBe('false');
    expect(broke.requests).toBe(1);
    expect(await channelFaults(channel)).toBe(1);
    await billingSettled(stack);
    expect(await balance()).toBe(before);
  });

  it('the same channel through /v1/messages: 500 api_error saying so, not a rate_limit_error; the Anthropic SDK\'s default retries send it once; nothing billed', async () => {
    const model = 'route-quota-openai-messages';
    const broke = await fixedUpstream(429, OPENAI_QUOTA);
    upstreams.push(broke);
    await mockChannel(stack, [model], 'default', { base_url: broke.url, key: 'sk-proj-broke', type: 1 });
    const before = await balance();
    const sdk = new Anthropic({ apiKey: client.apiKey!, baseURL: stack.relayUrl });
    const err = await sdk.messages.create({ model, max_tokens: 8, messages: [{ role: 'user', content: 'hello' }] }).catch((e: unknown) => e) as InstanceType<typeof Anthropic.APIError>;
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'api_error', message: expect.stringContaining(REFUSED) } });
    expect(err.headers?.get('x-should-retry')).toBe('false');
    expect(broke.requests).toBe(1);
    await billingSettled(stack);
    expect(await balance()).toBe(before);
  });

  it.each([false, true])('an Anthropic channel\'s 429 billing_error (stream: %s) through /v1/chat/completions: 500 saying so, not insufficient_quota', async (stream) => {
    const model = `route-quota-anthropic-${stream}`;
    const broke = await fixedUpstream(429, ANTHROPIC_BILLING);
    upstreams.push(broke);
    await mockChannel(stack, [model], 'default', { base_url: broke.url });
    const res = await fetch(`${stack.relayUrl}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${client.apiKey!}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, max_tokens: 8, stream, messages: [{ role: 'user', content: 'hello' }] }),
    });
    const body = await res.json() as { error: { type: string; code: unknown; message: string } };
    expect([res.status, res.headers.get('x-should-retry')]).toEqual([500, 'false']);
    expect(body.error).toMatchObject({ type: 'server_error', message: expect.stringContaining(REFUSED) });
    expect(body.error.code).not.toBe('insufficient_quota');
  });

  it('is tried on the model\'s next channel first, which answers; billed once, as that channel\'s answer', async () => {
    const model = 'route-quota-failover';
    const broke = await fixedUpstream(429, OPENAI_QUOTA);
    upstreams.push(broke);
    const channel = await mockChannel(stack, [model], 'default', { base_url: broke.url, key: 'sk-proj-broke', type: 1, priority: 10 });
    await mockChannel(stack, [model], 'default', { base_url: healthy.url, priority: 0 });
    const before = { balance: await balance(), healthy: healthy.requests };
    const { data } = await ask(model);
    expect(data.content).toEqual([{ type: 'text', text: 'hi' }]);
    expect(broke.requests).toBe(1);
    expect(healthy.requests).toBe(before.healthy + 1);
    expect(await channelFaults(channel)).toBe(1);
    await billingSettled(stack);
    expect(await balance()).toBeLessThan(before.balance);
  });

  it('after an earlier channel\'s rate limit, which a retry may outlast: 500 saying the last channel refused, the SDKs\' retries kept (no x-should-retry)', async () => {
    const model = 'route-quota-after-rate-limit';
    const limited = await fixedUpstream(429, JSON.stringify({ type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } }));
    const broke = await fixedUpstream(429, OPENAI_QUOTA);
    upstreams.push(limited, broke);
    await mockChannel(stack, [model], 'default', { base_url: limited.url, priority: 10 });
    await mockChannel(stack, [model], 'default', { base_url: broke.url, key: 'sk-proj-broke', type: 1, priority: 0 });
    const res = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST', headers: { 'x-api-key': client.apiKey!, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model, max_tokens: 8, messages: [{ role: 'user', content: 'hello' }] }),
    });
    const body = await res.json() as { error: { type: string; message: string } };
    expect([res.status, res.headers.get('x-should-retry')]).toEqual([500, null]);
    expect(body.error).toMatchObject({ type: 'api_error', message: expect.stringContaining(REFUSED) });
    expect([limited.requests, broke.requests]).toEqual([1, 1]);
  });

  it('a channel\'s 401 on the only channel: x-should-retry: false too (no retry of the SDKs can succeed)', async () => {
    const model = 'route-refused-no-retry';
    const refusing = await fixedUpstream(401, JSON.stringify({ type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } }));
    upstreams.push(refusing);
    await mockChannel(stack, [model], 'default', { base_url: refusing.url });
    const sdk = new Anthropic({ apiKey: client.apiKey!, baseURL: stack.relayUrl });
    const err = await sdk.messages.create({ model, max_tokens: 8, messages: [{ role: 'user', content: 'hello' }] }).catch((e: unknown) => e) as InstanceType<typeof Anthropic.APIError>;
    expect(err.status).toBe(500);
    expect(err.headers?.get('x-should-retry')).toBe('false');
    expect(refusing.requests).toBe(1);
  });
});
