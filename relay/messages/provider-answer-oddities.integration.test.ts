// Provider answers that are neither a plain 200 nor an error, found by a review from the provider's
// side: a success status other than 200 (a proxy's 201, a cache's 203, a 204), a retry-after holding
// text, and an answer read whole (a request without stream) whose body never ends, a byte or a ping at
// a time, each of which restarts undici's body timeout. Timeouts are short here (3 s) and the
// reservation heartbeat beats every second (RESERVATION_TTL_SEC 3).
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { relayMetrics } from '../metrics/relay-metrics.js';
import { billingSettled, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../../tests/harness/gateway-stack.js';
import {
  balanceOf, billOf, chatCompletion, LONG_PROMPT, messageStart, NORMAL_INPUT, NORMAL_OUTPUT, normalMessage, normalStream,
  PING, startScriptedProvider, unnamedCost, type ScriptedProvider,
} from '../../tests/harness/scripted-provider.js';

const NORMAL = unnamedCost(NORMAL_INPUT, NORMAL_OUTPUT);
/** Reservations the relays of this process hold now. */
const openReservations = () => relayMetrics.opened.value - relayMetrics.closed.value;
const FUNDS = 100_000_000;

let stack: GatewayStack;
let provider: ScriptedProvider;
let account: TestAccount;
let key: string;
let anthropic: Anthropic;
let openai: OpenAI;
const messages = [{ role: 'user' as const, content: LONG_PROMPT }];

beforeAll(async () => {
  provider = await startScriptedProvider(({ model }, res) => {
    switch (model) {
      case 'status-201': return void res.writeHead(201, { 'content-type': 'application/json' }).end(normalMessage(model));
      case 'oai-status-203': return void res.writeHead(203, { 'content-type': 'application/json' })
        .end(chatCompletion({ prompt_tokens: NORMAL_INPUT, completion_tokens: NORMAL_OUTPUT, total_tokens: NORMAL_INPUT + NORMAL_OUTPUT }));
      case 'status-201-stream': return void res.writeHead(201, { 'content-type': 'text/event-stream' }).end(normalStream(model));
      case 'status-204': return void res.writeHead(204).end();
      case 'retry-after-text': return void res.writeHead(429, { 'content-type': 'application/json', 'retry-after': 'soon, maybe; org-123 db-7' })
        .end(JSON.stringify({ type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } }));
      case 'retry-after-seconds': return void res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '17' })
        .end(JSON.stringify({ type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } }));
      case 'json-trickle':
      case 'folded-pings': {
        // 200, then a byte (or a ping) every 500 ms, never ending: no pause reaches the body timeout.
        res.writeHead(200, { 'content-type': model === 'json-trickle' ? 'application/json' : 'text/event-stream' });
        res.write(model === 'json-trickle' ? '{"id":"msg_1","type":"message","content":[{"type":"text","text":"' : messageStart(model));
        const timer = setInterval(() => (res.destroyed ? clearInterval(timer) : res.write(model === 'json-trickle' ? 'a' : PING)), 500);
        return;
      }
      default: return void res.writeHead(500).end();
    }
  });
  stack = await startGatewayStack({ env: { UPSTREAM_BODY_TIMEOUT_MS: '3000', UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS: '3000', RESERVATION_TTL_SEC: '3' } });
  await mockChannel(stack, ['status-201', 'status-201-stream', 'status-204', 'retry-after-text', 'retry-after-seconds', 'json-trickle', 'folded-pings'], 'default', { base_url: provider.url });
  await mockChannel(stack, ['oai-status-203'], 'default', { base_url: provider.url, type: 1, key: 'sk-x' });
  account = await fundedAccount(stack, FUNDS);
  key = (await createApiKey(stack, account)).key;
  anthropic = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
  openai = new OpenAI({ apiKey: key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
}, 120_000);
afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

describe('a success status other than 200', () => {
  it('a 201 holding a whole answer: the SDK gets the Message under a 200, billed what the provider stated', async () => {
    const before = await balanceOf(stack, account.id);
    const { data, response } = await anthropic.messages.create({ model: 'status-201', max_tokens: 100, messages }).withResponse();
    expect({ status: response.status, type: data.type, stop: data.stop_reason }).toEqual({ status: 200, type: 'message', stop: 'end_turn' });
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row.quota).toBe(NORMAL);
  });

  it('a 203 holding a Chat Completion: the openai SDK gets the completion, billed', async () => {
    const before = await balanceOf(stack, account.id);
    const { data, response } = await openai.chat.completions.create({ model: 'oai-status-203', max_tokens: 100, messages }).withResponse();
    expect({ status: response.status, object: data.object, choices: data.choices.length }).toEqual({ status: 200, object: 'chat.completion', choices: 1 });
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row.quota).toBe(NORMAL);
  });

  it('a 201 stream: the SDK reads every event to message_stop, billed', async () => {
    const before = await balanceOf(stack, account.id);
    const { data: stream, response } = await anthropic.messages.create({ model: 'status-201-stream', max_tokens: 100, stream: true, messages }).withResponse();
    const types: string[] = [];
    for await (const e of stream) types.push(e.type);
    expect(types.at(-1)).toBe('message_stop');
    const row = await billOf(stack, account.id, response.headers.get('x-gateway-request-id')!, before);
    expect(row.quota).toBe(NORMAL);
  });

  it('a 204: no answer to read, the relay\'s 500 api_error, billed nothing', async () => {
    const before = await balanceOf(stack, account.id);
    const err = await anthropic.messages.create({ model: 'status-204', max_tokens: 100, messages }).catch((e: unknown) => e) as InstanceType<typeof Anthropic.APIError>;
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    const row = await billOf(stack, account.id, err.headers!.get('x-gateway-request-id')!, before);
    expect(row.quota).toBe(0);
  });
});

describe('a provider\'s retry-after', () => {
  async function retryAfter(model: string): Promise<string | null> {
    const res = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model, max_tokens: 100, messages }),
    });
    await res.arrayBuffer();
    expect(res.status).toBe(429);
    return res.headers.get('retry-after');
  }

  it('is passed on when it is delay-seconds', async () => {
    expect(await retryAfter('retry-after-seconds')).toBe('17');
  });

  it('is left out when it holds anything else (the provider\'s text, which its answer\'s is replaced for)', async () => {
    expect(await retryAfter('retry-after-text')).toBeNull();
  });
});

describe('an answer read whole whose body never ends', () => {
  it.each(['json-trickle', 'folded-pings'])('%s: the waiting client is answered 500 within the bound and a beat, billed nothing', async (model) => {
    const before = await balanceOf(stack, account.id);
    // Uncut, the SDK's own timeout ends the call (APIConnectionTimeoutError, not a 500).
    const err = await anthropic.messages.create({ model, max_tokens: 100, messages }, { timeout: 15_000 }).catch((e: unknown) => e) as InstanceType<typeof Anthropic.APIError>;
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    expect(err.message).toMatch(/stopped answering/);
    await expect.poll(() => provider.seen.get(model)!.closedAt, { timeout: 2_000 }).toBeGreaterThan(0);
    const row = await billOf(stack, account.id, err.headers!.get('x-gateway-request-id')!, before);
    expect(row.quota).toBe(0);
  }, 20_000);

  it.each(['json-trickle', 'folded-pings'])('%s: a client that left lets the provider and the reservation go', async (model) => {
    const own = await fundedAccount(stack, 10_000_000);
    const ownKey = (await createApiKey(stack, own)).key;
    const openBefore = openReservations();
    const ac = new AbortController();
    const call = fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST', signal: ac.signal,
      headers: { 'x-api-key': ownKey, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model, max_tokens: 100, messages }),
    }).catch(() => null);
    // This request's own arrival at the provider (the test before asked for the same model).
    const prior = provider.seen.get(model);
    await expect.poll(() => provider.seen.get(model) !== prior, { timeout: 5_000 }).toBe(true);
    const seen = provider.seen.get(model)!;
    await new Promise((r) => setTimeout(r, 500));
    ac.abort();
    await call;
    expect(seen.closedAt).toBe(0);
    await expect.poll(() => seen.closedAt, { timeout: 10_000 }).toBeGreaterThan(0);
    // The exchange ended and its reservation was closed; nothing was billed.
    await expect.poll(openReservations, { timeout: 5_000 }).toBe(openBefore);
    await billingSettled(stack);
    expect(await balanceOf(stack, own.id)).toBe(10_000_000);
  }, 20_000);
});
