// A provider's error answered whole (passThroughError) that quotes the channel key JSON-escaped: PHP's
// json_encode writes `/` as `\/`, any writer may write a character as `\uXXXX`, and every JSON client
// decodes either back to the key. Before, the scrub knew the key only as written: a 400/404 passed it
// to the client (the same protocol's bytes, or the other protocol's decoded message), a 5xx's or a
// non-JSON body's text put it in the relay's warn line. Now a JSON body's decoded strings are
// scrubbed, and what is passed on and logged is written from them; other text is scrubbed of every
// JSON spelling of the key (relay/stream/key-forms.ts).
//
// And a provider's 3xx (a redirect, its Location quoting the key) was passed to the client as a 302 with
// an empty error type: it is now the client protocol's 500 api_error, no Location passed on.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/project-root.js';
import { CENSOR } from '../../infra/secrets/credential-text.js';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';
import { relayProcessEnv, spawnRelayProcess, withRelayProcess, type RelayProcess } from '../../tests/harness/relay-process.js';
import { BLOCK_START, chatChunk, LONG_PROMPT, messageStart, startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

/** Built of the base64 alphabet, as AWS-style secrets and many self-hosted tokens are. */
const CHANNEL_KEY = 'zqPHP/KEY+q8Wm3/Nv5Bx7Lk2J';
const ANCHOR = 'Nv5Bx7Lk2J';
const SLASHED = CHANNEL_KEY.replaceAll('/', '\\/');
const U_ESCAPED = [...CHANNEL_KEY].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');

/** The provider's error body, the key spelled `form` (JSON text, inserted as it is). */
function errorJson(model: string, form: string): string {
  const message = `Incorrect API key provided: ${form}`;
  return model.startsWith('o-')
    ? `{"error":{"message":"${message}","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
    : `{"type":"error","error":{"type":"invalid_request_error","message":"${message}"}}`;
}

let stack: GatewayStack;
let provider: ScriptedProvider;
let key: string;

beforeAll(async () => {
  provider = await startScriptedProvider(({ model }, res) => {
    if (model.endsWith('-sse')) {
      // vLLM's stream error, a line that is no JSON and an event of no known name, each quoting the key.
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const open = model.startsWith('o-')
        ? chatChunk({ choices: [{ index: 0, delta: { role: 'assistant', content: 'hi' }, finish_reason: null }] })
        : messageStart(model) + BLOCK_START;
      return void res.end(open
        + `data: {"object":"error","message":"Incorrect API key provided: ${SLASHED}","type":"BadRequestError","code":401}\n\n`
        + `data: {broken Incorrect API key provided: ${CHANNEL_KEY}\n\n`
        + `event: x\ndata: {"message":"${SLASHED}"}\n\n`);
    }
    const status = Number(/-(\d{3})-/.exec(model)![1]);
    if (model.endsWith('-dup')) {
      // Two members of one name: JSON.parse keeps the last, clean one; the first quotes the key as written.
      res.writeHead(status, { 'content-type': 'application/json' });
      const first = errorJson(model, CHANNEL_KEY).slice(1, -1);
      const second = errorJson(model, 'a key').slice(1, -1);
      return void res.end(`{${first},${second}}`);
    }
    const form = model.endsWith('-u') ? U_ESCAPED : SLASHED;
    if (status === 302) {
      res.writeHead(302, { location: `https://login.example/?key=${CHANNEL_KEY}`, 'content-type': 'text/html' });
      return void res.end(`<a href="https://login.example/?key=${CHANNEL_KEY}">moved</a>`);
    }
    if (model.endsWith('-html')) {
      res.writeHead(status, { 'content-type': 'text/html' });
      return void res.end(`<pre>${errorJson(model, form)}</pre>`);
    }
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(errorJson(model, form));
  });
  stack = await startGatewayStack();
  const anthropicModels = ['a-200-sse', 'a-400-php', 'a-404-u', 'a-500-php', 'a-503-u', 'a-400-html', 'a-302-redir', 'a-400-dup'];
  const openaiModels = ['o-200-sse', 'o-400-php', 'o-404-u', 'o-302-redir', 'o-400-dup'];
  for (const m of anthropicModels) await mockChannel(stack, [m], 'default', { base_url: provider.url, key: CHANNEL_KEY });
  for (const m of openaiModels) await mockChannel(stack, [m], 'default', { base_url: provider.url, key: CHANNEL_KEY, type: 1 });
  // A redirecting channel preferred (priority) over a working one for the same model.
  await mockChannel(stack, ['a-302-then-ok'], 'default', { base_url: provider.url, key: CHANNEL_KEY, priority: 10 });
  await mockChannel(stack, ['a-302-then-ok'], 'default', { priority: 0 });
  key = (await createApiKey(stack, await fundedAccount(stack, 10_000_000))).key;
}, 120_000);
afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

const ENDPOINTS = ['/v1/messages', '/v1/chat/completions'] as const;

async function call(url: string, path: string, model: string, stream: boolean): Promise<{ status: number; text: string; headers: Headers }> {
  const body = path === '/v1/messages'
    ? { model, max_tokens: 16, stream, messages: [{ role: 'user', content: LONG_PROMPT }] }
    : { model, max_tokens: 16, stream, messages: [{ role: 'user', content: LONG_PROMPT }] };
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'anthropic-version': '2023-06-01' },
    body: JSON.stringify(body),
    redirect: 'manual',
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** The body as a JSON client reads it: parsed, every escape decoded. */
function decoded(text: string): string {
  return JSON.stringify(JSON.parse(text));
}

function expectNoKey(text: string): void {
  expect(text).not.toContain(ANCHOR);
  expect(text).not.toContain(CHANNEL_KEY);
  expect(text).not.toMatch(/\\+u007a\\+u0071/i);
}

describe('a provider error quoting the channel key JSON-escaped', () => {
  let relay: RelayProcess;

  it('never reaches the client, whatever the pairing, stream or not; nor the relay\'s log', async () => {
    relay = await spawnRelayProcess([join(projectRoot(), 'dist/relay/main.js')], relayProcessEnv(stack.config, {}));
    await withRelayProcess(relay, async () => {
      for (const model of ['a-400-php', 'a-404-u', 'o-400-php', 'o-404-u']) {
        for (const path of ENDPOINTS) {
          for (const stream of [false, true]) {
            const r = await call(relay.url, path, model, stream);
            const where = `${model} ${path} stream=${stream}: ${r.text}`;
            expect(r.status, where).toBe(Number(model.slice(2, 5)));
            expectNoKey(r.text);
            expectNoKey(decoded(r.text));
            expect(decoded(r.text), where).toContain(`Incorrect API key provided: ${CENSOR}`);
          }
        }
      }
      for (const model of ['a-500-php', 'a-503-u', 'a-400-html']) {
        for (const path of ENDPOINTS) {
          const r = await call(relay.url, path, model, false);
          expectNoKey(r.text);
          expectNoKey(decoded(r.text));
        }
      }
      await expect.poll(() => relay.output().split('\n').filter((l) => l.includes('its message is not passed on')).length, { timeout: 5_000 }).toBeGreaterThanOrEqual(3);
      const lines = relay.output().split('\n').filter((l) => l.includes('its message is not passed on'));
      for (const l of lines) expect(l).toContain(CENSOR);
      expectNoKey(relay.output());
    });
  });
});

// Found by review: a body the scrub of its parsed value left unchanged was passed on as the provider
// wrote it, and JSON.parse keeps only the last of two members of one name.
describe('a provider error naming one member twice, the first quoting the channel key', () => {
  it('never reaches the client with the key, on either endpoint', async () => {
    for (const model of ['a-400-dup', 'o-400-dup']) {
      for (const path of ENDPOINTS) {
        const r = await call(stack.relayUrl, path, model, false);
        expect(r.status, `${model} ${path}: ${r.text}`).toBe(400);
        expectNoKey(r.text);
        expectNoKey(decoded(r.text));
      }
    }
  });
});

describe('a stream\'s events that are no error of the protocols, quoting the key', () => {
  it('reach a same-protocol client without it (vLLM\'s {"object":"error"}, data that is no JSON, an unknown event)', async () => {
    for (const [model, path] of [['o-200-sse', '/v1/chat/completions'], ['a-200-sse', '/v1/messages']] as const) {
      const r = await call(stack.relayUrl, path, model, true);
      expect(r.status).toBe(200);
      expectNoKey(r.text);
      expect(r.text).not.toContain(SLASHED);
      expect(r.text, `${model}: ${r.text}`).toContain(CENSOR);
    }
  });
});

describe('a provider\'s 3xx', () => {
  // Before: the client's 500 though another channel of the model answered; the channel was not counted.
  it('is the channel\'s fault: the next channel of the model answers', async () => {
    for (const path of ENDPOINTS) {
      for (const stream of [false, true]) {
        const before = provider.seen.get('a-302-then-ok')?.at ?? 0;
        const r = await call(stack.relayUrl, path, 'a-302-then-ok', stream);
        expect(r.status, `${path} stream=${stream}: ${r.text}`).toBe(200);
        expect(provider.seen.get('a-302-then-ok')!.at, 'the redirecting channel was tried first').toBeGreaterThan(before);
        expectNoKey(r.text);
      }
    }
  });

  it('is the client protocol\'s 500 api_error, nothing of the redirect passed on', async () => {
    for (const model of ['a-302-redir', 'o-302-redir']) {
      for (const path of ENDPOINTS) {
        for (const stream of [false, true]) {
          const r = await call(stack.relayUrl, path, model, stream);
          const where = `${model} ${path} stream=${stream}: ${r.text}`;
          expect(r.status, where).toBe(500);
          expect(r.headers.get('location'), where).toBeNull();
          expectNoKey(r.text);
          const body = JSON.parse(r.text) as { type?: string; error: { type: string; message: string } };
          expect(body.error.type, where).toBe(path === '/v1/messages' ? 'api_error' : 'server_error');
          if (path === '/v1/messages') expect(body.type).toBe('error');
        }
      }
    }
  });
});
