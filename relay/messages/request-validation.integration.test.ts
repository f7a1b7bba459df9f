// Input at the edge: the key comes first (from the headers alone, before any body byte is kept), then
// the body is validated; each bad input gets Anthropic's error JSON with the right status, and no
// quota moves.
import { gzipSync } from 'node:zlib';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawRequest } from '../../tests/harness/raw-http.js';
import {
  billingSettled, createApiKey, fundedAccount, mockChannel, startGatewayStack,
  type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

const MODEL = 'claude-haiku-4-5';
let stack: GatewayStack;
let account: TestAccount;
let key: string;
const FUNDS = 1_000_000;

beforeAll(async () => {
  stack = await startGatewayStack({ env: { MAX_BODY_BYTES: String(64 * 1024) } });
  await mockChannel(stack, [MODEL]);
  account = await fundedAccount(stack, FUNDS);
  key = (await createApiKey(stack, account)).key;
});
afterAll(async () => {
  await stack?.close();
});

async function post(body: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${stack.relayUrl}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers },
    body,
  });
  return { status: res.status, json: (await res.json()) as { type: string; error: { type: string; message: string } } };
}

const valid = { model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };

/** Of our shape, and no account holds it. */
const UNKNOWN_KEY = 'sk-' + 'A'.repeat(48);

describe('the key before the body', () => {
  const cases: [string, Record<string, string>, string][] = [
    ['no key', {}, 'missing_api_key'],
    ['a key not of our shape', { 'x-api-key': 'sk-unknownunknownunknown' }, 'invalid_api_key'],
    ['a key of our shape no account holds', { 'x-api-key': UNKNOWN_KEY }, 'invalid_api_key'],
    ['an unknown key as a bearer token', { authorization: `Bearer ${UNKNOWN_KEY}` }, 'invalid_api_key'],
  ];
  for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
    for (const [what, headers] of cases) {
      it(`${path}: answers ${what} with 401 authentication_error, whatever the body`, async () => {
        for (const body of ['{"model": "x",', JSON.stringify(valid), '[1,2,3]']) {
          const res = await fetch(`${stack.relayUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
          expect(res.status).toBe(401);
          expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
        }
      });

      it(`${path}: answers ${what} without waiting for the body`, async () => {
        // 60 KB promised (under MAX_BODY_BYTES), nothing sent: the answer can only come from the
        // headers and the key's lookup, once the body has stalled (LINGER_STALL_MS, free-request.ts).
        const head = [`POST ${path} HTTP/1.1`, 'host: relay', 'content-type: application/json', 'content-length: 60000',
          ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)].join('\r\n');
        const r = await rawRequest(stack.relay.port, head, '', 3000);
        expect(r.status).toBe(401);
        expect(JSON.parse(r.body)).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
      });
    }
  }

  it('carries request_id in its error JSON, as Anthropic\'s does: the gateway\'s request id (a free endpoint\'s refusal too, as in its headers)', async () => {
    const res = await fetch(`${stack.relayUrl}/v1/messages`, { method: 'POST', headers: { 'x-api-key': UNKNOWN_KEY, 'content-type': 'application/json' }, body: '{}' });
    const body = await res.json() as { request_id?: unknown };
    expect(body.request_id).toBe(res.headers.get('x-gateway-request-id'));
    expect(body.request_id).toMatch(/^[0-9a-f-]{36}$/);
    const free = await fetch(`${stack.relayUrl}/v1/messages/count_tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    const freeBody = await free.json() as { request_id?: unknown };
    expect(freeBody).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
    expect(freeBody.request_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(freeBody.request_id).toBe(free.headers.get('x-gateway-request-id'));
    expect(free.headers.get('request-id')).toBe(freeBody.request_id);
  });

  it('names the missing key and the invalid one apart', async () => {
    const post = (headers: Record<string, string>) => fetch(`${stack.relayUrl}/v1/messages`, { method: 'POST', headers, body: '{' })
      .then((r) => r.json() as Promise<{ error: { message: string } }>);
    expect((await post({})).error.message).toMatch(/No API key/);
    expect((await post({ 'x-api-key': UNKNOWN_KEY })).error.message).toMatch(/Invalid API key/);
  });
});

describe('the request body', () => {
  const cases: [string, string, RegExp][] = [
    ['invalid JSON', '{"model": "x",', /JSON/],
    ['a missing model', JSON.stringify({ ...valid, model: undefined }), /model/],
    ['missing messages', JSON.stringify({ ...valid, messages: undefined }), /messages/],
    ['a missing max_tokens', JSON.stringify({ ...valid, max_tokens: undefined }), /max_tokens/],
    ['a max_tokens of the wrong type', JSON.stringify({ ...valid, max_tokens: '10' }), /max_tokens/],
    ['a fractional max_tokens', JSON.stringify({ ...valid, max_tokens: 1.5 }), /max_tokens/],
    ['messages of the wrong type', JSON.stringify({ ...valid, messages: 'hello' }), /messages/],
    ['a message with an unknown role', JSON.stringify({ ...valid, messages: [{ role: 'robot', content: 'x' }] }), /role/],
    ['a stream that is not a boolean', JSON.stringify({ ...valid, stream: 'yes' }), /stream/],
    ['a body that is not an object', '[1,2,3]', /invalid|expected/i],
    // A provider that keeps the first of two equal keys would run what was not reserved or billed.
    ['max_tokens named twice', `{"model":"${MODEL}","max_tokens":100000,"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`, /"max_tokens" twice/],
    ['model named twice, once escaped', `{"model":"${MODEL}","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"mod\\u0065l":"${MODEL}"}`, /"model" twice/],
    // Billed by the provider above the standard rates the relay prices (unpriced-fields.ts).
    ['fast mode', JSON.stringify({ ...valid, speed: 'fast' }), /^speed: only "standard"/],
    ['US-only inference', JSON.stringify({ ...valid, inference_geo: 'us' }), /^inference_geo: only "global"/],
    ['server-side compaction by context_management', JSON.stringify({ ...valid, context_management: { edits: [{ type: 'clear_tool_uses_20250919' }, { type: 'compact_20260112', trigger: { type: 'input_tokens', value: 50000 } }] } }), /^context_management\.edits\.1\.type: server-side compaction/],
    ['server-side compaction by its parameter', JSON.stringify({ ...valid, compaction: { type: 'auto' } }), /^compaction: server-side compaction/],
    // Container time is billed by the hour beyond tokens: before, both passed and were billed tokens only.
    ['a code execution tool', JSON.stringify({ ...valid, tools: [{ type: 'custom', name: 'f', input_schema: { type: 'object' } }, { type: 'code_execution_20250825', name: 'code_execution' }] }), /^tools\.1\.type: code execution/],
    ['a container', JSON.stringify({ ...valid, container: 'container_1' }), /^container: code execution/],
    // Reported only in usage.iterations, at another model's rates: before, each passed and was billed
    // the requested model's top-level usage (a Haiku turn Opus served: 750 quota for 76,400).
    ['server-side fallback', JSON.stringify({ ...valid, fallbacks: [{ model: 'claude-opus-4-5', max_tokens: 8000 }] }), /^fallbacks: server-side fallback/],
    ['the default fallbacks', JSON.stringify({ ...valid, fallbacks: 'default' }), /^fallbacks: server-side fallback/],
    ['a fallback credit token', JSON.stringify({ ...valid, fallback_credit_token: 'fct_1' }), /^fallback_credit_token:/],
    ['an advisor tool', JSON.stringify({ ...valid, tools: [{ type: 'advisor_20260301', name: 'advisor', model: 'claude-opus-4-5' }] }), /^tools\.0\.type: the advisor tool/],
    // A continued thread's prompt is held by the provider, beyond the bytes that bound the reservation.
    ['a server-held thread', JSON.stringify({ ...valid, thread: { type: 'continue', previous_message_id: 'msg_1' } }), /^thread: server-held/],
    // The gateway serves no Files API: a file id names a file of the operator's organization
    // (file-references.ts). Before, each was forwarded under the channel's credential.
    ['an image named by file id', JSON.stringify({ ...valid, messages: [{ role: 'user', content: [{ type: 'text', text: 'what is it?' }, { type: 'image', source: { type: 'file', file_id: 'file_011CNha8iCJcU1wXNR6q4V8w' } }] }] }), /^messages\.0\.content\.1\.source: content named by file id is not served/],
    ['a document named by file id inside a tool result', JSON.stringify({ ...valid, messages: [
      { role: 'user', content: 'read it' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'document', source: { type: 'file', file_id: 'file_1' } }] }] },
    ] }), /^messages\.2\.content\.0\.content\.0\.source: content named by file id/],
    ['a file source spelt with escapes', `{"model":"${MODEL}","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"fil\\u0065","fil\\u0065_id":"file_1"}}]}]}`, /^messages\.0\.content\.0\.source: content named by file id/],
    ['a container upload', JSON.stringify({ ...valid, messages: [{ role: 'user', content: [{ type: 'container_upload', file_id: 'file_1' }] }] }), /^messages\.0\.content\.0: content named by file id/],
    ['billing to a user profile', JSON.stringify({ ...valid, billing_policy: { type: 'billing_policy', bill_to: 'user_profile' } }), /^billing_policy\.bill_to: only "self"/],
    ['a content block naming its type twice', `{"model":"${MODEL}","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="},"type":"text","text":"hi"}]}]}`, /"type" twice/],
  ];
  for (const [what, body, message] of cases) {
    it(`answers ${what} with 400 invalid_request_error naming the field`, async () => {
      const r = await post(body);
      expect(r.status).toBe(400);
      expect(r.json).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
      expect(r.json.error.message).toMatch(message);
    });
  }

  it('serves a body that names "file_id" otherwise: a tool\'s parameter, its input, a text, base64 and URL sources', async () => {
    const body = {
      ...valid,
      tools: [{ name: 'open_file', description: 'opens a file', input_schema: { type: 'object', properties: { file_id: { type: 'string' } } } }],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'open "file_id" 7' }, { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'open_file', input: { file_id: 'file_7' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }] }] },
      ],
    };
    // Another account's key: this file's account must move no quota (below).
    const other = (await createApiKey(stack, await fundedAccount(stack, FUNDS))).key;
    const r = await post(JSON.stringify(body), { 'x-api-key': other });
    expect(r.status, JSON.stringify(r.json)).toBe(200);
  });

  it('forwards no body that names a key twice, on /v1/messages or count_tokens', async () => {
    const before = stack.mock.requests.length;
    const body = `{"model":"${MODEL}","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"model":"${MODEL}"}`;
    expect((await post(body)).status).toBe(400);
    const counted = await fetch(`${stack.relayUrl}/v1/messages/count_tokens`, {
      method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body,
    });
    expect(counted.status).toBe(400);
    expect(await counted.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringMatching(/"model" twice/) } });
    expect(stack.mock.requests.length).toBe(before);
  });

  it('refuses a body that is not valid UTF-8 with 400, forwarding nothing (it was sent to the provider byte for byte)', async () => {
    const before = stack.mock.requests.length;
    const body = Buffer.concat([Buffer.from(`{"model":"${MODEL}","max_tokens":2,"messages":[{"role":"user","content":"A`), Buffer.from([0xff, 0xfe]), Buffer.from('B"}]}')]);
    for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
      const res = await fetch(`${stack.relayUrl}${path}`, {
        method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body,
      });
      expect(res.status, path).toBe(400);
      expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringMatching(/UTF-8/) } });
    }
    expect(stack.mock.requests.length).toBe(before);
  });

  it('refuses a compressed body with 415 in the route\'s error JSON (a gzip body was "not valid JSON", a zstd label ignored); identity passes', async () => {
    const before = stack.mock.requests.length;
    const gz = gzipSync(JSON.stringify(valid));
    for (const [path, auth] of [['/v1/messages', { 'x-api-key': key, 'anthropic-version': '2023-06-01' }], ['/v1/messages/count_tokens', { 'x-api-key': key }]] as const) {
      const res = await fetch(`${stack.relayUrl}${path}`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: gz });
      expect(res.status, path).toBe(415);
      expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringMatching(/Content-Encoding/) } });
    }
    const chat = await fetch(`${stack.relayUrl}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-encoding': 'zstd' },
      body: JSON.stringify({ model: MODEL, max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(chat.status).toBe(415);
    expect(await chat.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'unsupported_encoding' } });
    expect(stack.mock.requests.length).toBe(before);
    // Another account's key: this one's balance is checked untouched below.
    const other = (await createApiKey(stack, await fundedAccount(stack, 100_000))).key;
    expect((await post(JSON.stringify(valid), { 'x-api-key': other, 'content-encoding': 'identity' })).status).toBe(200);
  });

  it('answers a body over MAX_BODY_BYTES with 413 request_too_large', async () => {
    const big = JSON.stringify({ ...valid, messages: [{ role: 'user', content: 'x'.repeat(70 * 1024) }] });
    const r = await post(big);
    expect(r.status).toBe(413);
    expect(r.json.error.type).toBe('request_too_large');
  });

  it('answers through the SDK with its typed error', async () => {
    const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
    const err = await client.messages
      .create({ model: MODEL, max_tokens: -1, messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
  });

  it('moved no quota for any of them', async () => {
    await billingSettled(stack);
    const [u] = await stack.sql`SELECT quota, used_quota FROM users WHERE id = ${account.id}`;
    expect(u).toEqual({ quota: FUNDS, used_quota: 0 });
    expect((await stack.quota.accountBalance(account.id)) ?? FUNDS).toBe(FUNDS);
  });
});

describe('fields whose standard values are priced', () => {
  it('forwards speed "standard", inference_geo "global", context editing that only clears, fallbacks null and billing to self, and bills each', async () => {
    const before = stack.mock.requests.length;
    const extras = [
      { speed: 'standard' }, { inference_geo: 'global' }, { context_management: { edits: [{ type: 'clear_tool_uses_20250919' }] } },
      { fallbacks: null }, { fallbacks: [] }, { billing_policy: { type: 'billing_policy', bill_to: 'self' } },
    ];
    for (const extra of extras) {
      const r = await post(JSON.stringify({ ...valid, ...extra }));
      expect(r.status, JSON.stringify(extra)).toBe(200);
      expect(stack.mock.requests.at(-1)!.body).toMatchObject(extra);
    }
    expect(stack.mock.requests.length).toBe(before + extras.length);
  });

  it('answers the fields the relay cannot price through the SDK as a BadRequestError, with nothing forwarded', async () => {
    const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
    const before = stack.mock.requests.length;
    const err = await client.messages
      .create({ model: MODEL, max_tokens: 10, messages: [{ role: 'user', content: 'x' }], speed: 'fast' } as Anthropic.MessageCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as InstanceType<typeof Anthropic.BadRequestError>).message).toMatch(/speed/);
    expect(stack.mock.requests.length).toBe(before);
  });
});

describe('headers', () => {
  it('passes anthropic-version and anthropic-beta through to the provider', async () => {
    const r = await post(JSON.stringify(valid), { 'anthropic-version': '2023-06-01', 'anthropic-beta': 'prompt-caching-2024-07-31' });
    expect(r.status).toBe(200);
    const seen = stack.mock.requests.at(-1)!;
    expect(seen.headers['anthropic-version']).toBe('2023-06-01');
    expect(seen.headers['anthropic-beta']).toBe('prompt-caching-2024-07-31');
  });

  // Before: only the first line reached the provider (uWS's getHeader reads one line), the second
  // beta dropped without a word, and the relay's own reading of the betas (context-1m) missed it too.
  it('passes anthropic-beta sent on several lines as one list', async () => {
    const body = JSON.stringify(valid);
    const head = ['POST /v1/messages HTTP/1.1', 'host: relay', 'content-type: application/json', `content-length: ${Buffer.byteLength(body)}`,
      `x-api-key: ${key}`, 'anthropic-version: 2023-06-01', 'anthropic-beta: prompt-caching-2024-07-31', 'anthropic-beta: context-1m-2025-08-07'].join('\r\n');
    const r = await rawRequest(stack.relay.port, head, body);
    expect(r.status, r.body).toBe(200);
    expect(stack.mock.requests.at(-1)!.headers['anthropic-beta']).toBe('prompt-caching-2024-07-31, context-1m-2025-08-07');
  });

  it('answers an unknown path with 404 not_found_error', async () => {
    const res = await fetch(`${stack.relayUrl}/v1/nothing`, { headers: { 'x-api-key': key } });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
  });
});
