// Cross-origin calls from a web page, in a real browser (Debian's chromium driven by playwright-core):
// a page served from another origin calls the relay with an API key in a header, as browser chat
// front ends and the SDKs with dangerouslyAllowBrowser do. The browser sends its preflight, checks the
// answer's CORS headers, and only then hands the page the answer: a request the relay does not allow
// fails in the page with a TypeError. Before, OPTIONS was a 404 and no answer carried
// Access-Control-Allow-Origin, so every such call failed. Also HEAD /health, for load balancers.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  billingSettled, createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../tests/harness/gateway-stack.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const MODEL = 'claude-haiku-4-5';

let stack: GatewayStack;
let account: TestAccount;
let apiKey: string;
let browser: Browser;
let page: Server;
let pageUrl: string;

beforeAll(async () => {
  stack = await startGatewayStack();
  await mockChannel(stack, [MODEL]);
  account = await fundedAccount(stack, 10_000_000);
  apiKey = (await createApiKey(stack, account)).key;
  // The web app's own origin: another port is another origin.
  page = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>app</title>'));
  await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
  pageUrl = `http://127.0.0.1:${(page.address() as AddressInfo).port}/`;
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await new Promise<void>((resolve) => (page ? page.close(() => resolve()) : resolve()));
  await stack?.close();
});

/** Runs fetch in the page (origin pageUrl) and returns what the page could read, or the error it got. */
async function fetchFromPage(url: string, init: { method: string; headers: Record<string, string>; body?: string }) {
  const context = await browser.newContext();
  try {
    const tab = await context.newPage();
    await tab.goto(pageUrl);
    return await tab.evaluate(async ({ url, init }) => {
      try {
        const res = await fetch(url, init);
        return { status: res.status, body: await res.text(), requestId: res.headers.get('x-gateway-request-id'), error: null };
      } catch (e) {
        return { status: 0, body: '', requestId: null, error: String(e) };
      }
    }, { url, init });
  } finally {
    await context.close();
  }
}

describe('a page of another origin calling the relay', () => {
  it('POST /v1/chat/completions with a Bearer key (a preflighted request): the page reads the answer, billed exactly once', async () => {
    const out = await fetchFromPage(`${stack.relayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'x-stainless-os': 'browser' },
      body: JSON.stringify({ model: MODEL, max_tokens: 16, messages: [{ role: 'user', content: 'Hello from a browser' }] }),
    });
    expect(out.error).toBeNull();
    expect(out.status).toBe(200);
    expect(JSON.parse(out.body)).toMatchObject({ object: 'chat.completion', choices: [{ message: { role: 'assistant' } }] });
    // Exposed to the page: the request id the SDKs show.
    expect(out.requestId).toMatch(/^[0-9a-f-]{36}$/);
    const row = await ledgerRow(stack, out.requestId!);
    expect(row.quota).toBeGreaterThan(0);
    await billingSettled(stack);
    const [u] = await stack.sql`SELECT quota FROM users WHERE id = ${account.id}`;
    expect(Number(u!.quota)).toBe(10_000_000 - row.quota);
  });

  it('a streamed /v1/messages with x-api-key and anthropic-version: the page reads the events', async () => {
    const out = await fetchFromPage(`${stack.relayUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': apiKey, 'anthropic-version': '2023-06-01', 'anthropic-dangerous-direct-browser-access': 'true', 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, max_tokens: 16, stream: true, messages: [{ role: 'user', content: 'Hello' }] }),
    });
    expect(out.error).toBeNull();
    expect(out.status).toBe(200);
    expect(out.body).toContain('event: message_stop');
  });

  it('an error answer is readable too: a wrong key gives the page the 401 and its JSON, not a network error', async () => {
    const out = await fetchFromPage(`${stack.relayUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': `sk-${'a'.repeat(48)}`, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, max_tokens: 16, messages: [{ role: 'user', content: 'Hello' }] }),
    });
    expect(out.error).toBeNull();
    expect(out.status).toBe(401);
    expect(JSON.parse(out.body)).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
  });

  it('GET /v1/models with a Bearer key', async () => {
    const out = await fetchFromPage(`${stack.relayUrl}/v1/models`, { method: 'GET', headers: { authorization: `Bearer ${apiKey}` } });
    expect(out.error).toBeNull();
    expect(JSON.parse(out.body)).toMatchObject({ object: 'list', data: [{ id: MODEL }] });
  });
});

describe('the preflight itself', () => {
  it('204: any origin, the methods, the headers asked for as named; a header list that is none gets the default list', async () => {
    const res = await fetch(`${stack.relayUrl}/v1/chat/completions`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, x-stainless-retry-count' },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-allow-methods')).toContain('POST');
    expect(res.headers.get('access-control-allow-headers')).toBe('authorization, content-type, x-stainless-retry-count');
    expect(Number(res.headers.get('access-control-max-age'))).toBeGreaterThan(0);
    // The allowed headers echo the request's, so a cache keys the answer on them.
    expect(res.headers.get('vary')).toBe('Access-Control-Request-Headers');
    expect(await res.text()).toBe('');
    const odd = await fetch(`${stack.relayUrl}/v1/messages`, { method: 'OPTIONS', headers: { 'access-control-request-headers': 'a b, (c)' } });
    expect(odd.status).toBe(204);
    expect(odd.headers.get('access-control-allow-headers')).toContain('x-api-key');
  });
});

describe('HEAD /health', () => {
  it('200 with the length of GET\'s body and no body', async () => {
    const res = await fetch(`${stack.relayUrl}/health`, { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-length')).toBe(String('{"status":"ok"}'.length));
    expect(await res.text()).toBe('');
  });
});
