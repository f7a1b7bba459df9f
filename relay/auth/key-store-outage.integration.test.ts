// The relay with its Postgres unreachable (a TCP proxy between this relay and Postgres, cut as a
// network partition would: tests/chaos/tcp-proxy.ts) while its key cache must read a key again:
//   - a key the relay has not seen is answered 529 overloaded_error on every route, in each route's
//     format (Anthropic's JSON, OpenAI's with code key_store_unavailable on /v1/chat/completions), as
//     a Redis outage is, never 500;
//   - a key it read within KEY_CACHE_STALE_MS is still served from the expired entry (the Redis
//     mirrors hold the balances), and billed;
//   - past that window it is refused with the same 529;
//   - once Postgres answers again, a key revoked during the outage stops within KEY_CACHE_TTL_MS (plus
//     the Postgres client's reconnect, at most 2 s), although no invalidation message told the relay.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRelay, type RunningRelay } from '../server.js';
import { createLogger } from '../../infra/logger.js';
import { startTcpProxy, type TcpProxy } from '../../tests/chaos/tcp-proxy.js';
import {
  billingSettled, createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

const MODEL = 'claude-haiku-4-5';
const TTL_MS = 200;
const STALE_MS = 4000;

let stack: GatewayStack;
let proxy: TcpProxy;
let relay: RunningRelay;
let relayUrl: string;
let account: TestAccount;
/** Used before the outage: in the relay's cache. */
let known: { id: number; key: string };
/** Never used before the outage. */
let unseen: { id: number; key: string };

beforeAll(async () => {
  stack = await startGatewayStack();
  await mockChannel(stack, [MODEL]);
  account = await fundedAccount(stack, 10_000_000);
  known = await createApiKey(stack, account);
  unseen = await createApiKey(stack, account);
  const db = new URL(stack.config.DATABASE_URL);
  proxy = await startTcpProxy({ host: db.hostname, port: Number(db.port || 5432) });
  db.host = `127.0.0.1:${proxy.port}`;
  // This relay alone reaches Postgres through the proxy; the stack (console, billing) does not.
  const config = { ...stack.config, DATABASE_URL: db.toString(), KEY_CACHE_TTL_MS: TTL_MS, KEY_CACHE_STALE_MS: STALE_MS };
  relay = await startRelay(config, createLogger(config, 'test'));
  relayUrl = `http://127.0.0.1:${relay.port}`;
});
afterAll(async () => {
  proxy?.restore();
  await relay?.close();
  await proxy?.close();
  await stack?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function anthropic(key: string): Anthropic {
  return new Anthropic({ apiKey: key, baseURL: relayUrl, maxRetries: 0, timeout: 10_000 });
}

async function message(key: string): Promise<{ status: number; type?: string; message?: string; requestId?: string }> {
  try {
    const { response } = await anthropic(key).messages.create({ model: MODEL, max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }] }).withResponse();
    return { status: response.status, requestId: response.headers.get('x-gateway-request-id') ?? '' };
  } catch (err) {
    if (!(err instanceof Anthropic.APIError)) throw err;
    const body = err.error as { error?: { type?: string; message?: string } } | undefined;
    return { status: err.status ?? 0, type: body?.error?.type, message: body?.error?.message };
  }
}

async function inFlight(): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${relay.metricsPort}/metrics`)).text();
  return Number(/^gateway_relay_requests_in_flight (\S+)$/m.exec(text)![1]);
}

describe('the relay with its Postgres unreachable', () => {
  it('serves the key normally while Postgres answers (the key is cached)', async () => {
    const r = await message(known.key);
    expect(r.status).toBe(200);
    await ledgerRow(stack, r.requestId!);
  });

  it('answers 529 overloaded_error on every route for a key it must read, and serves a recently known key', async () => {
    await billingSettled(stack);
    proxy.cut();
    await sleep(TTL_MS * 2);

    // The key read before the outage: its expired entry is served, and the request is billed.
    const served = await message(known.key);
    expect(served.status).toBe(200);
    await ledgerRow(stack, served.requestId!);

    const refused = await message(unseen.key);
    expect(refused).toMatchObject({ status: 529, type: 'overloaded_error' });
    expect(refused.message).toMatch(/database/);

    const chat = await new OpenAI({ apiKey: unseen.key, baseURL: `${relayUrl}/v1`, maxRetries: 0, timeout: 10_000 }).chat.completions
      .create({ model: MODEL, max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }] })
      .then(() => null, (err: unknown) => err);
    expect(chat).toBeInstanceOf(OpenAI.APIError);
    expect((chat as InstanceType<typeof OpenAI.APIError>).status).toBe(529);
    expect((chat as InstanceType<typeof OpenAI.APIError>).code).toBe('key_store_unavailable');
    expect((chat as InstanceType<typeof OpenAI.APIError>).type).toBe('server_error');

    const count = await anthropic(unseen.key).messages.countTokens({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }] })
      .then(() => null, (err: unknown) => err);
    expect(count).toBeInstanceOf(Anthropic.APIError);
    expect((count as InstanceType<typeof Anthropic.APIError>).status).toBe(529);

    const models = await fetch(`${relayUrl}/v1/models`, { headers: { 'x-api-key': unseen.key, 'anthropic-version': '2023-06-01' } });
    expect(models.status).toBe(529);
    expect(((await models.json()) as { error: { type: string } }).error.type).toBe('overloaded_error');

    // Past KEY_CACHE_STALE_MS it is refused like a key never seen.
    await sleep(STALE_MS);
    expect(await message(known.key)).toMatchObject({ status: 529, type: 'overloaded_error' });
    expect(await inFlight()).toBe(0);
  });

  it('stops a key revoked during the outage once Postgres answers, without an invalidation message', async () => {
    proxy.restore();
    await expect.poll(async () => (await message(known.key)).status, { timeout: 10_000, interval: 100 }).toBe(200);
    proxy.cut();
    // Revoked behind the relay's back (no invalidation message): only a re-read can tell it.
    await stack.sql`UPDATE tokens SET status = 2 WHERE id = ${known.id}`;
    await sleep(TTL_MS * 2);
    expect((await message(known.key)).status).toBe(200); // stale entry, within KEY_CACHE_STALE_MS
    proxy.restore();
    // KEY_CACHE_TTL_MS after Postgres answers again (plus the client's reconnect, at most 2 s).
    await expect.poll(async () => (await message(known.key)).status, { timeout: 10_000, interval: 100 }).toBe(401);
    expect(await inFlight()).toBe(0);
  });
});
