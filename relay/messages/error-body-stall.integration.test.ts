// A stream request whose provider answers with an error status, or with a JSON answer, and then
// trickles its body a byte at a time: undici's body timeout restarts with every byte, so the relay
// waited for the body's end for ever (review provider: the client waited 45 s with its reservation
// open, and the next channel was never tried). The body is now read within a bound: an error's
// within UPSTREAM_HEADERS_TIMEOUT_MS, a JSON answer's within UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS, as a
// request without `stream` has its answer read whole.
import Anthropic from '@anthropic-ai/sdk';
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { billingSettled, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../../tests/harness/gateway-stack.js';
import { normalMessage, startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

let stack: GatewayStack;
let trickling: ScriptedProvider;
let account: TestAccount;
let key: string;
const timers = new Set<NodeJS.Timeout>();
const FUNDS = 100_000_000;

function trickle(res: ServerResponse, status: number, head: string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.write(head);
  const t = setInterval(() => (res.destroyed ? clearInterval(t) : res.write('a')), 200);
  timers.add(t);
}

beforeAll(async () => {
  trickling = await startScriptedProvider(({ model }, res) => {
    if (model === 'stall-529' || model === 'stall-529-alone') return trickle(res, 529, '{"type":"error","error":{"type":"overloaded_error","message":"');
    if (model === 'stall-json') return trickle(res, 200, normalMessage(model).slice(0, 100));
    res.writeHead(500);
    res.end();
  });
  stack = await startGatewayStack({ env: { CHANNEL_COOLDOWN_FAILURES: '0', UPSTREAM_HEADERS_TIMEOUT_MS: '1500', UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS: '2500' } });
  // The trickling channel first; the mock (a provider that answers) after it, for stall-529 only.
  await mockChannel(stack, ['stall-529', 'stall-529-alone', 'stall-json'], 'default', { base_url: trickling.url, priority: 10 });
  await mockChannel(stack, ['stall-529'], 'default', { priority: 0 });
  account = await fundedAccount(stack, FUNDS);
  key = (await createApiKey(stack, account)).key;
}, 120_000);

afterAll(async () => {
  for (const t of timers) clearInterval(t);
  await stack?.close();
  await trickling?.close();
});

async function ledgerOf(): Promise<{ n: number; quota: number; balance: number }> {
  await billingSettled(stack);
  const [row] = await stack.sql`SELECT COUNT(*)::int AS n, COALESCE(SUM(quota), 0)::bigint AS q FROM ledger WHERE user_id = ${account.id} AND type = 2`;
  const [user] = await stack.sql`SELECT quota FROM users WHERE id = ${account.id}`;
  return { n: row!.n, quota: Number(row!.q), balance: Number(user!.quota) };
}

describe('a stream request whose provider trickles a body that is no stream', () => {
  const client = () => new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0, timeout: 30_000 });

  it('an overloaded error trickled: its read is cut, and the next channel answers the stream', async () => {
    const before = await ledgerOf();
    const stream = client().messages.stream({ model: 'stall-529', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] });
    const message = await stream.finalMessage();
    expect(message.content.length).toBeGreaterThan(0);
    expect(message.usage.output_tokens).toBeGreaterThan(0);
    // The trickling provider is let go.
    await vi.waitFor(() => expect(trickling.seen.get('stall-529')!.closedAt).toBeGreaterThan(0), { timeout: 5_000 });
    const after = await ledgerOf();
    expect(after.n - before.n).toBe(1);
    expect(after.quota - before.quota).toBeGreaterThan(0);
    expect(before.balance - after.balance).toBe(after.quota - before.quota);
  }, 60_000);

  it('with no other channel: the client gets an error of its protocol, and nothing is billed', async () => {
    const before = await ledgerOf();
    const err = await client().messages.create({ model: 'stall-529-alone', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'hi' }] })
      .then(async (s) => { for await (const _ of s); return null; }, (e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(529);
    await vi.waitFor(() => expect(trickling.seen.get('stall-529-alone')!.closedAt).toBeGreaterThan(0), { timeout: 5_000 });
    const after = await ledgerOf();
    expect(after.balance).toBe(before.balance);
  }, 60_000);

  it('a JSON answer trickled: its read is cut, the client hears the provider stopped answering, and nothing is billed', async () => {
    const before = await ledgerOf();
    const err = await client().messages.create({ model: 'stall-json', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'hi' }] })
      .then(async (s) => { for await (const _ of s); return null; }, (e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(String((err as Error).message)).toMatch(/stopped answering/i);
    await vi.waitFor(() => expect(trickling.seen.get('stall-json')!.closedAt).toBeGreaterThan(0), { timeout: 5_000 });
    const after = await ledgerOf();
    expect(after.balance).toBe(before.balance);
  }, 60_000);
});
