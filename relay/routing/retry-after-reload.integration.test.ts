// A retry goes to the channels as they are when it is sent. The next channel was picked before the
// first attempt began, so a channel disabled, deleted or moved (base_url, key) while that attempt ran
// still got the retry as it was: a deleted channel served it, and its bill was logged on the deleted
// channel's id, a channel moved to another provider sent it to the old one.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleCall, createApiKey, fundedAccount, ledgerRow, MOCK_CHANNEL_KEY, priceModels, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';
import { normalMessage, startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

let stack: GatewayStack;
let slowFailing: ScriptedProvider;
let answering: ScriptedProvider;
let moved: ScriptedProvider;
let slowRefusing: ScriptedProvider;
const hits: string[] = [];
let key: string;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  // Overloaded, after 600 ms: the window in which the next channel changes.
  slowFailing = await startScriptedProvider(({ model }, res) => {
    hits.push(`slow:${model}`);
    setTimeout(() => {
      res.writeHead(529, { 'content-type': 'application/json' });
      res.end('{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}');
    }, 600);
  });
  const answer = (tag: string) => startScriptedProvider(({ model }, res) => {
    hits.push(`${tag}:${model}`);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(normalMessage(model));
  });
  // Refuses the channel's own credential, after 600 ms.
  slowRefusing = await startScriptedProvider(({ model }, res) => {
    hits.push(`refusing:${model}`);
    setTimeout(() => {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end('{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}');
    }, 600);
  });
  answering = await answer('second');
  moved = await answer('moved');
  stack = await startGatewayStack({ env: { RELAY_MAX_TRIES: '3' } });
  key = (await createApiKey(stack, await fundedAccount(stack, 10_000_000))).key;
});
afterAll(async () => {
  await stack?.close();
  for (const p of [slowFailing, slowRefusing, answering, moved]) await p?.close();
});

async function channel(model: string, baseUrl: string, priority: number): Promise<number> {
  await priceModels(stack, [model]);
  const { json } = await consoleCall<{ id: number }>(stack, 'POST', '/api/channel/', stack.adminToken, {
    // No automatic disabling: a refusing channel stays.
    name: `c-${model}-${priority}`, key: MOCK_CHANNEL_KEY, models: model, group: 'default', base_url: baseUrl, priority, auto_ban: 0,
  });
  if (!json.success) throw new Error(json.message);
  while (!stack.relay.hasChannel(json.data!.id)) await sleep(10);
  return json.data!.id;
}

/** A request whose first channel fails slowly; `change` runs 150 ms in, on the second channel. */
async function retried(model: string, change: (second: number) => Promise<unknown>): Promise<{ status: number; requestId: string; seen: string[] }> {
  await channel(model, slowFailing.url, 10);
  const second = await channel(model, answering.url, 0);
  hits.length = 0;
  const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
  const answer = client.messages.create({ model, max_tokens: 20, messages: [{ role: 'user', content: 'hello' }] }).withResponse()
    .then((r) => ({ status: 200, requestId: r.response.headers.get('x-gateway-request-id')! }), (e: InstanceType<typeof Anthropic.APIError>) => ({ status: e.status ?? 0, requestId: '' }));
  await sleep(150);
  await change(second);
  const r = await answer;
  return { ...r, seen: [...hits] };
}

describe('a channel changed while the first attempt runs', () => {
  it('disabled: the retry is not sent to it; the client hears the first channel\'s overload', async () => {
    const r = await retried('rar-disabled', async (second) => {
      expect((await consoleCall(stack, 'PUT', '/api/channel/', stack.adminToken, { id: second, status: 2 })).json.success).toBe(true);
      while (stack.relay.hasChannel(second)) await sleep(5);
    });
    expect(r.seen).toEqual(['slow:rar-disabled']);
    expect(r.status).toBe(529);
  });

  it('deleted: the retry is not sent to it', async () => {
    const r = await retried('rar-deleted', async (second) => {
      expect((await consoleCall(stack, 'DELETE', `/api/channel/${second}`, stack.adminToken)).json.success).toBe(true);
      while (stack.relay.hasChannel(second)) await sleep(5);
    });
    expect(r.seen).toEqual(['slow:rar-deleted']);
    expect(r.status).toBe(529);
  });

  it('moved to another provider: the retry goes where it is now, and is billed there', async () => {
    let secondId = 0;
    const r = await retried('rar-moved', async (second) => {
      secondId = second;
      const put = await consoleCall(stack, 'PUT', '/api/channel/', stack.adminToken, { id: second, base_url: moved.url, key: MOCK_CHANNEL_KEY });
      expect(put.json.success, put.json.message).toBe(true);
      // The reload lands within milliseconds of the announcement; the first attempt runs 450 ms more.
      await sleep(200);
    });
    expect(r.status).toBe(200);
    expect(r.seen).toEqual(['slow:rar-moved', 'moved:rar-moved']);
    expect((await ledgerRow(stack, r.requestId)).channel_id).toBe(secondId);
  });

  it('the first refusing its own credential, the other disabled: the 500 tells the client a retry cannot help', async () => {
    await channel('rar-refused', slowRefusing.url, 10);
    const second = await channel('rar-refused', answering.url, 0);
    hits.length = 0;
    const answer = fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key, 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'rar-refused', max_tokens: 20, messages: [{ role: 'user', content: 'hello' }] }),
    });
    await sleep(150);
    expect((await consoleCall(stack, 'PUT', '/api/channel/', stack.adminToken, { id: second, status: 2 })).json.success).toBe(true);
    while (stack.relay.hasChannel(second)) await sleep(5);
    const r = await answer;
    await r.text();
    expect(hits).toEqual(['refusing:rar-refused']);
    expect({ status: r.status, retry: r.headers.get('x-should-retry') }).toEqual({ status: 500, retry: 'false' });
  });
});
