// The relay's edges: no request can crash it (a malformed path is a 400, an exception a 500, the
// process keeps serving); hostile input is a 4xx, never a 500 or a provider retry; what users read of
// a failure is a stable reason, never an address; /metrics is on its own port, not the public one;
// a relay does not silently share a port another one holds.
import { request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../infra/config.js';
import { createLogger } from '../infra/logger.js';
import {
  accountQuota, billingSettled, createApiKey, fundedAccount, mockChannel, startGatewayStack,
  type GatewayStack, type TestAccount,
} from '../tests/harness/gateway-stack.js';
import { parsePromText } from '../core/metrics/prom.js';
import { startRelay } from './server.js';
import { rawRequest } from '../tests/harness/raw-http.js';

const MODEL = 'claude-haiku-4-5';
const MAPPED = 'mapped-model-edge';
const FUNDS = 5_000_000;
let stack: GatewayStack;
let account: TestAccount;
let key: string;
let port: number;

beforeAll(async () => {
  stack = await startGatewayStack();
  port = stack.relay.port;
  await mockChannel(stack, [MODEL]);
  await mockChannel(stack, [MAPPED], 'default', { model_mapping: JSON.stringify({ [MAPPED]: MODEL }) });
  account = await fundedAccount(stack, FUNDS);
  key = (await createApiKey(stack, account)).key;
});
afterAll(async () => {
  await stack?.close();
});

type ErrorJson = { type: string; error: { type: string; message: string } };

async function stillServes(): Promise<void> {
  const health = await fetch(`${stack.relayUrl}/health`);
  expect(health.status).toBe(200);
  const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
  expect((await client.models.list()).data.map((m) => m.id)).toContain(MODEL);
}

describe('a malformed percent-escape in the path', () => {
  for (const path of ['/v1/models/%FF', '/v1/models/%E0%A4%A', '/v1/models/%', '/v1/models/abc%zz']) {
    it(`answers GET ${path} with 400 invalid_request_error, with or without a key, and keeps serving`, async () => {
      for (const [headers, bearer] of [[{}, {}], [{ 'x-api-key': key }, { authorization: `Bearer ${key}` }]] as Record<string, string>[][]) {
        const res = await fetch(`${stack.relayUrl}${path}`, { headers: { ...headers, 'anthropic-version': '2023-06-01' } });
        expect(res.status).toBe(400);
        expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
        // Without anthropic-version and with the key as a bearer token (OpenAI's SDK): the same refusal in OpenAI's error JSON.
        const openai = await fetch(`${stack.relayUrl}${path}`, { headers: bearer });
        expect(openai.status).toBe(400);
        expect(await openai.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'invalid_request' } });
      }
      await stillServes();
    });
  }
});

describe('two credentials', () => {
  it('that differ (x-api-key and Authorization: Bearer) are a 401 naming both, in each route\'s format; the same key in both is served', async () => {
    // An account of its own: the other tests read this file's account's balance.
    const own = await fundedAccount(stack, FUNDS);
    const mine = (await createApiKey(stack, own)).key;
    const other = (await createApiKey(stack, own)).key;
    const chat = new OpenAI({ apiKey: mine, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0, defaultHeaders: { 'x-api-key': other } });
    const refused = await chat.chat.completions.create({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e) as InstanceType<typeof OpenAI.APIError>;
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(refused.message).toMatch(/two different API keys/);
    const body = JSON.stringify({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
    const messages = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST', body, headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', 'x-api-key': mine, authorization: `Bearer ${other}` },
    });
    expect(messages.status).toBe(401);
    expect(await messages.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error', message: 'The request carries two different API keys (in x-api-key and Authorization: Bearer, or in two lines of one of them); send one.' } });
    const models = await fetch(`${stack.relayUrl}/v1/models`, { headers: { 'x-api-key': mine, authorization: `Bearer ${other}` } });
    expect(models.status).toBe(401);
    // The same key in both (a client or proxy adding it twice) is no conflict.
    const same = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST', body, headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', 'x-api-key': mine, authorization: `Bearer ${mine}` },
    });
    expect(same.status).toBe(200);
    await billingSettled(stack);
  });

  it('on two lines of one header (a proxy appending its own) are a 401 too; nothing is billed (review wire: billed to the first line\'s key, silently)', async () => {
    const own = await fundedAccount(stack, FUNDS);
    const mine = (await createApiKey(stack, own)).key;
    const other = (await createApiKey(stack, own)).key;
    const body = JSON.stringify({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
    // Node's client sends a header given as a list as one line per value; fetch would join them.
    const send = (path: string, headers: Record<string, string | string[]>, payload?: string) => new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(`${stack.relayUrl}${path}`, { method: payload === undefined ? 'GET' : 'POST', headers }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => { text += c; });
        res.on('end', () => resolve({ status: res.statusCode!, body: text }));
      });
      req.on('error', reject);
      req.end(payload);
    });
    const json = { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' };
    for (const [path, headers, payload] of [
      ['/v1/messages', { ...json, 'x-api-key': [mine, other] }, body],
      ['/v1/chat/completions', { 'content-type': 'application/json', authorization: [`Bearer ${mine}`, `Bearer ${other}`] }, body],
      ['/v1/messages', { ...json, authorization: ['Basic dTpw', `Bearer ${other}`], 'x-api-key': mine }, body],
      ['/v1/models', { 'x-api-key': [mine, other] }, undefined],
    ] as const) {
      const res = await send(path, headers as unknown as Record<string, string | string[]>, payload);
      expect(res.status, `${path} ${JSON.stringify(headers)}`).toBe(401);
      expect(res.body).toMatch(/two different API keys/);
    }
    // The same key on two lines is that key.
    expect((await send('/v1/messages', { ...json, 'x-api-key': [mine, mine] }, body)).status).toBe(200);
    await billingSettled(stack);
    const [ledger] = await stack.sql`SELECT COUNT(*)::int AS n, COALESCE(SUM(quota), 0)::bigint AS q FROM ledger WHERE user_id = ${own.id} AND type = 2`;
    expect(ledger!.n).toBe(1);
    expect(FUNDS - await accountQuota(stack, own.id)).toBe(Number(ledger!.q));
  });
});

describe('bodies nested too deeply', () => {
  const deep = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;
  const body = (levels: number, model = MODEL) =>
    `{"model":"${model}","max_tokens":5,"metadata":{"x":${deep(levels)}},"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":${deep(levels)}}]}]}`;

  it('count_tokens answers 400 invalid_request_error, not 500', async () => {
    const res = await fetch(`${stack.relayUrl}/v1/messages/count_tokens`, {
      method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: body(50_000),
    });
    expect(res.status).toBe(400);
    const json = (await res.json()) as ErrorJson;
    expect(json.error.type).toBe('invalid_request_error');
    expect(json.error.message).toMatch(/levels deep/);
  });

  it('a model-mapped /v1/messages answers 400 invalid_request_error, not 500, and moves no quota', async () => {
    const res = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: body(50_000, MAPPED),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as ErrorJson).error.type).toBe('invalid_request_error');
    await billingSettled(stack);
    const [u] = await stack.sql`SELECT quota, used_quota FROM users WHERE id = ${account.id}`;
    expect(u).toEqual({ quota: FUNDS, used_quota: 0 });
  });

  it('a body within the depth limit is served, mapped to the channel\'s model', async () => {
    const res = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: body(20, MAPPED),
    });
    expect(res.status).toBe(200);
    expect((stack.mock.requests.at(-1)!.body as { model: string }).model).toBe(MODEL);
  });
});

describe('bodies of too many object keys', () => {
  // 392,000 escaped keys in one object, just under 8 MB: it held the event loop 1.2-1.7 s each.
  const keys = Array.from({ length: 392_000 }, (_, i) => `"\\u0061\\u0062${i.toString(36)}":0`).join(',');
  const body = `{"metadata":{${keys}},"model":"${MODEL}","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`;

  it('are refused 400 in each route\'s error format, naming the limit, and move no quota', async () => {
    await billingSettled(stack);
    const [before] = await stack.sql`SELECT quota, used_quota FROM users WHERE id = ${account.id}`;
    for (const [path, headers, format] of [
      ['/v1/messages', { 'x-api-key': key, 'anthropic-version': '2023-06-01' }, 'anthropic'],
      ['/v1/messages/count_tokens', { 'x-api-key': key }, 'anthropic'],
      ['/v1/chat/completions', { authorization: `Bearer ${key}` }, 'openai'],
    ] as const) {
      const res = await fetch(`${stack.relayUrl}${path}`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body });
      expect(res.status, path).toBe(400);
      const json = (await res.json()) as ErrorJson & { type?: string };
      // So large a body may hold more keys than 50,000, but no more distinct names (raw-json-guard.ts).
      expect(json.error.message, path).toMatch(/more than 50,000 distinct object key names/);
      if (format === 'anthropic') expect(json.type).toBe('error');
      expect(json.error.type).toBe('invalid_request_error');
    }
    await billingSettled(stack);
    const [u] = await stack.sql`SELECT quota, used_quota FROM users WHERE id = ${account.id}`;
    expect(u).toEqual(before);
  });
});

describe('a long agent conversation', () => {
  // Before: refused 400 for holding more than 50,000 object keys, though a model of a 1M-token window
  // takes it (3,900 tool round trips, 1.7 MB). Its keys repeat a few names.
  it('of 3,900 tool round trips is served, not refused for its object keys', async () => {
    const messages: unknown[] = [{ role: 'user', content: 'Fix the failing tests in this repository.' }];
    for (let i = 0; i < 3900; i++) {
      const id = `toolu_${String(i).padStart(20, '0')}`;
      messages.push({ role: 'assistant', content: [{ type: 'tool_use', id, name: 'Bash', input: { command: `sed -n ${i},${i + 40}p src/f${i % 50}.ts`, description: 'Read it' } }] });
      messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: 'const x = f(y); '.repeat(10) }] });
    }
    messages.push({ role: 'user', content: 'Go on.' });
    const body = JSON.stringify({ model: MODEL, max_tokens: 5, messages });
    const res = await fetch(`${stack.relayUrl}/v1/messages`, { method: 'POST', headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' }, body });
    expect(res.status, (await res.clone().text()).slice(0, 300)).toBe(200);
    await res.arrayBuffer();
  });
});

describe('bodies of too many values and no key', () => {
  // 8 MB of nested arrays in a field the relay passes on: no key to count, and 1-2 s of the event loop each.
  const nested = Array.from({ length: 33_000 }, () => `${'['.repeat(120)}${']'.repeat(120)}`).join(',');
  const body = `{"model":"${MODEL}","max_tokens":5,"metadata":{"x":[${nested}]},"messages":[{"role":"user","content":"hi"}]}`;

  it('are refused 400 in each route\'s error format, naming the limit', async () => {
    for (const [path, headers] of [
      ['/v1/messages', { 'x-api-key': key, 'anthropic-version': '2023-06-01' }],
      ['/v1/messages/count_tokens', { 'x-api-key': key }],
      ['/v1/chat/completions', { authorization: `Bearer ${key}` }],
    ] as const) {
      const res = await fetch(`${stack.relayUrl}${path}`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body });
      expect(res.status, path).toBe(400);
      const json = (await res.json()) as ErrorJson;
      expect(json.error.type).toBe('invalid_request_error');
      // A body of 8 MB may hold a value per 16 bytes, up to 500,000; this one holds 7.9 million.
      expect(json.error.message, path).toMatch(/more than 497,\d{3} JSON values/);
    }
  });
});

describe('forwarded headers with characters HTTP does not allow', () => {
  const payload = JSON.stringify({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
  const head = (name: string, value: string) => [
    'POST /v1/messages HTTP/1.1', 'host: relay', `x-api-key: ${key}`, 'content-type: application/json',
    `${name}: ${value}`, `content-length: ${Buffer.byteLength(payload)}`,
  ].join('\r\n');

  // uWS's own parser drops a request with a control character other than HTAB in a header value (it
  // never reaches the relay's code, and uWS does not answer it); DEL (0x7f) gets through, and undici
  // refuses to send it.
  for (const [name, value] of [['anthropic-beta', 'prompt-caching-2024-07-31\x7f'], ['anthropic-version', '2023-06-01\x7f']] as const) {
    it(`answers ${name}: ${JSON.stringify(value)} with 400 invalid_request_error, before any provider is tried`, async () => {
      const seen = stack.mock.stats.requests;
      const r = await rawRequest(port, head(name, value), payload);
      expect(r.status).toBe(400);
      expect(JSON.parse(r.body)).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringContaining(name) } });
      expect(stack.mock.stats.requests).toBe(seen);
    });
  }

  it('never forwards a header value with NUL or another control character, and keeps serving', async () => {
    const seen = stack.mock.stats.requests;
    for (const value of ['a\x00b', 'a\x01b', 'a\x1bb']) {
      const r = await rawRequest(port, head('anthropic-beta', value), payload, 300).catch(() => null);
      if (r) expect(r.status).toBeLessThan(500);
    }
    expect(stack.mock.stats.requests).toBe(seen);
    await stillServes();
  });
});

describe('what a failed request tells its user', () => {
  it('a provider that cannot be reached reads "provider connection failed", without the address or the exception', async () => {
    const refused = await closedPort();
    const model = 'unreachable-model-edge';
    await mockChannel(stack, [model], 'default', { base_url: `http://127.0.0.1:${refused}` });
    const res = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ model, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(text).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|:\d{3,5}\b/);
    const requestId = res.headers.get('x-gateway-request-id')!;
    await billingSettled(stack);
    const rows = await stack.ch.query({ query: 'SELECT content FROM logs FINAL WHERE request_id = {r:String}', query_params: { r: requestId }, format: 'JSONEachRow' });
    const [row] = (await rows.json()) as { content: string }[];
    expect(row!.content).toMatch(/^provider connection failed;/);
    expect(row!.content).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|channel \d/);
  });
});

describe('/metrics', () => {
  it('is not served on the public relay port', async () => {
    const res = await fetch(`${stack.relayUrl}/metrics`);
    expect(res.status).toBe(404);
    expect(((await res.json()) as ErrorJson).error.type).toBe('not_found_error');
  });

  it('is served on RELAY_METRICS_PORT, and scraping changes no figure', async () => {
    expect(stack.relay.metricsPort).toBeGreaterThan(0);
    const url = `http://127.0.0.1:${stack.relay.metricsPort}/metrics`;
    const first = parsePromText(await (await fetch(url)).text());
    const second = parsePromText(await (await fetch(url)).text());
    expect(first.get('gateway_relay_handler_errors_total')).toBeGreaterThanOrEqual(0);
    expect(second.get('nodejs_eventloop_delay_p99_seconds')).toBe(first.get('nodejs_eventloop_delay_p99_seconds'));
    expect(second.get('nodejs_eventloop_delay_max_seconds')).toBeGreaterThanOrEqual(first.get('nodejs_eventloop_delay_max_seconds')!);
  });
});

describe('a port another relay holds', () => {
  const config = (p: number, reuse: boolean): Config => ({ ...stack.config, RELAY_PORT: p, RELAY_REUSE_PORT: reuse, RELAY_METRICS_PORT: 'off' });
  const log = () => createLogger(stack.config, 'test');

  it('fails the start-up naming the port, unless RELAY_REUSE_PORT asks to share it', async () => {
    const p = await closedPort();
    const first = await startRelay(config(p, false), log());
    try {
      await expect(startRelay(config(p, false), log())).rejects.toThrow(new RegExp(`127\\.0\\.0\\.1:${p}\\b.*in use`));
      await expect(startRelay(config(p, true), log())).rejects.toThrow(new RegExp(`:${p}\\b`));
    } finally {
      await first.close();
    }
    const a = await startRelay(config(p, true), log());
    const b = await startRelay(config(p, true), log());
    await a.close();
    await b.close();
  });
});

describe('a KEY_SECRET that opens no channel credential', () => {
  it('fails the start-up saying so, where the relay started, reported healthy and answered every key 401', async () => {
    const p = await closedPort();
    const other: Config = { ...stack.config, KEY_SECRET: 'another-key-secret-0123456789', RELAY_PORT: p, RELAY_METRICS_PORT: 'off' };
    await expect(startRelay(other, createLogger(stack.config, 'test'))).rejects.toThrow(/KEY_SECRET opens none of the \d+ enabled channels' credentials/);
    // Nothing was left listening.
    const probe = await fetch(`http://127.0.0.1:${p}/health`).then(() => 'answered', () => 'refused');
    expect(probe).toBe('refused');
    // The right secret still starts.
    const right = await startRelay({ ...stack.config, RELAY_PORT: p, RELAY_METRICS_PORT: 'off' }, createLogger(stack.config, 'test'));
    await right.close();
  });
});

/** A port nothing listens on (taken from the OS, then released). */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const p = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return p;
}
