// How long the relay holds a provider's stream, and the reservation with it, when nothing comes but
// keep-alives (`event: ping`, which a provider may send every few hundred milliseconds for ever).
//
// Before: a client that left before message_start, against a provider that only pings, held the
// exchange and its reservation (renewed by the heartbeat) for as long as the provider pinged, since
// pings reset the body timeout and satisfied the stall check, and the wait for the usage was bounded
// only after the generation. A client still reading such a stream after its content stopped waited
// as long. Now a client's leaving bounds the wait for what the provider bills in every state
// (USAGE_TAIL_WAIT_MS), and the stall check counts only the stream's events, not its pings: a stream
// with no event for UPSTREAM_BODY_TIMEOUT_MS is cut and settled for what it delivered.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';
import {
  billOf, BLOCK_START, LONG_PROMPT, messageStart, NORMAL_INPUT, PING, startScriptedProvider, TOK, unnamedCost, type ScriptedProvider,
} from '../../tests/harness/scripted-provider.js';
import { USAGE_TAIL_WAIT_MS } from './stream-relay.js';

const FUNDS = 10_000_000;
const PING_MS = 200;
const DELTAS = 10;
const BODY_TIMEOUT_MS = 1500;

let provider: ScriptedProvider;

beforeAll(async () => {
  provider = await startScriptedProvider(({ model }, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (model === 'start-then-pings') res.write(messageStart(model) + BLOCK_START + TOK.repeat(DELTAS));
    else res.write(PING);
    const timer = setInterval(() => (res.destroyed ? clearInterval(timer) : res.write(PING)), PING_MS);
  });
});
afterAll(async () => {
  await provider?.close();
});

function post(stack: GatewayStack, key: string, model: string, signal?: AbortSignal): Promise<Response> {
  return fetch(`${stack.relayUrl}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify({ model, max_tokens: 100, stream: true, messages: [{ role: 'user', content: LONG_PROMPT }] }),
    signal,
  });
}

async function closed(model: string, within: number): Promise<number> {
  const deadline = performance.now() + within;
  while (provider.seen.get(model)!.closedAt === 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 25));
  return provider.seen.get(model)!.closedAt;
}

describe('a client that leaves before message_start, from a provider that only pings', () => {
  let stack: GatewayStack;
  beforeAll(async () => {
    stack = await startGatewayStack();
    await mockChannel(stack, ['pings-only'], 'default', { base_url: provider.url });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('lets the provider go USAGE_TAIL_WAIT_MS after the client left, and settles the reservation at 0', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const { key } = await createApiKey(stack, account);
    const ctl = new AbortController();
    const res = await post(stack, key, 'pings-only', ctl.signal);
    expect(res.status).toBe(200);
    const requestId = res.headers.get('x-gateway-request-id')!;
    await new Promise((r) => setTimeout(r, 300));
    const leftAt = performance.now();
    ctl.abort();
    const closedAt = await closed('pings-only', USAGE_TAIL_WAIT_MS + 5000);
    expect(closedAt).toBeGreaterThan(0);
    expect(closedAt - leftAt).toBeLessThan(USAGE_TAIL_WAIT_MS + 2000);
    // Nothing stated, nothing delivered: an error row at 0, as a request whose provider never answered.
    const row = await billOf(stack, account.id, requestId, FUNDS);
    expect(row).toMatchObject({ quota: 0, type: 5 });
    // The reservation is released: the mirror holds the whole balance again.
    expect(await stack.quota.accountBalance(account.id)).toBe(FUNDS);
  }, 30_000);
});

describe('a client still reading a stream whose content stopped, while the provider pings', () => {
  let stack: GatewayStack;
  beforeAll(async () => {
    // The heartbeat beats every TTL / 3 = 1 s; the stall check cuts after BODY_TIMEOUT_MS without an event.
    stack = await startGatewayStack({ env: { RESERVATION_TTL_SEC: '3', UPSTREAM_BODY_TIMEOUT_MS: String(BODY_TIMEOUT_MS) } });
    await mockChannel(stack, ['start-then-pings'], 'default', { base_url: provider.url });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('is cut once no event came for the body timeout, and billed the input and the text delivered', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const { key } = await createApiKey(stack, account);
    const t0 = performance.now();
    const ctl = new AbortController();
    const guard = setTimeout(() => ctl.abort(), 15_000);
    const res = await post(stack, key, 'start-then-pings', ctl.signal);
    const text = await res.text().catch(() => '(aborted by the test: the stream was never cut)');
    clearTimeout(guard);
    expect(text).toContain('event: error');
    expect(performance.now() - t0).toBeLessThan(BODY_TIMEOUT_MS + 3000);
    const row = await billOf(stack, account.id, res.headers.get('x-gateway-request-id')!, FUNDS);
    expect(row).toMatchObject({ prompt_tokens: NORMAL_INPUT, completion_tokens: DELTAS, quota: unnamedCost(NORMAL_INPUT, DELTAS) });
    expect(await closed('start-then-pings', 2000)).toBeGreaterThan(0);
  }, 30_000);
});
