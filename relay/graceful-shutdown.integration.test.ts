// SIGTERM to a relay process (node dist/relay/main.js, as deployed: make build first) in the middle of
// a slow stream: the relay stops accepting, the stream is finished to the client, its settlement is
// taken by Redis before the process goes, the request is billed exactly once, and the exit code is 0.
// The same for a request whose body is still arriving when the signal comes: it is served, not cut.
import Anthropic from '@anthropic-ai/sdk';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../infra/project-root.js';
import {
  accountQuota,
  createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../tests/harness/gateway-stack.js';
import { relayProcessEnv, type RelayProcess, spawnRelayProcess, withRelayProcess } from '../tests/harness/relay-process.js';

const MODEL = 'claude-haiku-4-5';
// claude-haiku-4-5: model ratio 0.5, completion ratio 5, group default 1 (core/pricing/ratios.ts).
const cost = (input: number, output: number) => Math.round((input + output * 5) * 0.5);
const FUNDS = 10_000_000;
const OUTPUT = 60;
const TOKEN_DELAY_MS = 40;

let stack: GatewayStack;
let account: TestAccount;
let key: string;
let spoolDir: string;

beforeAll(async () => {
  stack = await startGatewayStack({ mock: { tokenDelayMs: TOKEN_DELAY_MS, outputTokens: OUTPUT } });
  await mockChannel(stack, [MODEL]);
  account = await fundedAccount(stack, FUNDS);
  key = (await createApiKey(stack, account)).key;
  spoolDir = mkdtempSync(join(tmpdir(), 'relay-shutdown-'));
});
afterAll(async () => {
  await stack?.close();
  if (spoolDir) rmSync(spoolDir, { recursive: true, force: true });
});

/** The relay as deployed, on this stack's database, Redis prefix and key secret. */
function startRelayProcess(graceMs = 20_000): Promise<RelayProcess> {
  const env = relayProcessEnv(stack.config, { RELAY_SPOOL_DIR: spoolDir, RELAY_SHUTDOWN_GRACE_MS: String(graceMs) });
  return spawnRelayProcess([join(projectRoot(), 'dist/relay/main.js')], env);
}

const balance = (): Promise<number> => accountQuota(stack, account.id);

/** One ledger row for the request, and Postgres and the Redis mirror both `quota` below `before`. */
async function expectBilledOnce(requestId: string, before: number, quota: number): Promise<void> {
  const rows = await stack.sql`SELECT count(*)::int AS n FROM ledger WHERE request_id = ${requestId}`;
  expect(rows[0]!.n).toBe(1);
  expect(await balance()).toBe(before - quota);
  expect(await stack.quota.accountBalance(account.id)).toBe(before - quota);
}

describe('a relay process sent SIGTERM during a slow stream', () => {
  it('finishes the stream, bills it exactly once, and exits 0', async () => {
    const relay = await startRelayProcess();
    await withRelayProcess(relay, async () => {
      const before = await balance();
      const client = new Anthropic({ apiKey: key, baseURL: relay.url, maxRetries: 0 });
      const stream = client.messages.stream({ model: MODEL, max_tokens: OUTPUT, messages: [{ role: 'user', content: 'Tell me a story' }] });
      let deltas = 0;
      let input = 0;
      let signalled = false;
      stream.on('streamEvent', (e) => {
        if (e.type === 'message_start') input = e.message.usage.input_tokens;
        if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') {
          deltas++;
          if (deltas === 5 && !signalled) {
            signalled = true;
            relay.proc.kill('SIGTERM');
          }
        }
      });
      const message = await stream.finalMessage();
      const { response } = await stream.withResponse();
      const requestId = response.headers.get('x-gateway-request-id')!;
      expect(signalled).toBe(true);
      expect(deltas).toBe(OUTPUT);
      expect(message.usage.output_tokens).toBe(OUTPUT);

      // The relay no longer accepts connections while it drains, and goes with exit code 0.
      await expect(fetch(`${relay.url}/health`)).rejects.toThrow();
      expect(await relay.exited).toBe(0);

      const row = await ledgerRow(stack, requestId);
      expect(row).toMatchObject({ completion_tokens: OUTPUT, prompt_tokens: input, quota: cost(input, OUTPUT) });
      await expectBilledOnce(requestId, before, cost(input, OUTPUT));
      // Nothing left open for the reaper.
      expect(await stack.redis.zcard(stack.keys.reservationDeadlines())).toBe(0);
    });
  }, 30_000);

  it('cuts a stream still running when the grace is over, bills what it delivered, once, and exits 0', async () => {
    // A grace far shorter than the stream (60 tokens, one every 40 ms).
    const relay = await startRelayProcess(300);
    await withRelayProcess(relay, async () => {
      const before = await balance();
      const client = new Anthropic({ apiKey: key, baseURL: relay.url, maxRetries: 0 });
      const stream = client.messages.stream({ model: MODEL, max_tokens: OUTPUT, messages: [{ role: 'user', content: 'Tell me a long story' }] });
      let deltas = 0;
      let signalled = false;
      stream.on('streamEvent', (e) => {
        if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') {
          deltas++;
          if (deltas === 3 && !signalled) {
            signalled = true;
            relay.proc.kill('SIGTERM');
          }
        }
      });
      const { response } = await stream.withResponse();
      const requestId = response.headers.get('x-gateway-request-id')!;
      // The client is told in Anthropic's error event that the relay cut it, not that the provider
      // failed (it said "The model provider stream failed." before: review operator).
      const failure = await stream.finalMessage().catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(Anthropic.APIError);
      expect((failure as Error).message).toContain('overloaded_error');
      expect((failure as Error).message).toContain('The relay is shutting down and cut this stream; what was delivered is billed.');
      expect(await relay.exited).toBe(0);
      expect(deltas).toBeGreaterThanOrEqual(3);
      expect(deltas).toBeLessThan(OUTPUT);
      // Billed for the text delivered (the mock's tokens are one delta each), once; nothing left open.
      const row = await ledgerRow(stack, requestId);
      expect(row.completion_tokens).toBe(deltas);
      expect(row.quota).toBe(cost(row.prompt_tokens, deltas));
      await expectBilledOnce(requestId, before, row.quota);
      expect(await stack.redis.zcard(stack.keys.reservationDeadlines())).toBe(0);
    });
  }, 30_000);

  it('answers a non-streaming request it cuts when the grace is over 529 (the relay closing: retry), not 500 "the provider\'s connection was lost"; nothing billed', async () => {
    const relay = await startRelayProcess(300);
    await withRelayProcess(relay, async () => {
      const before = await balance();
      const client = new Anthropic({ apiKey: key, baseURL: relay.url, maxRetries: 0 });
      // The mock takes 60 × 40 ms to generate the whole answer: far past the grace.
      const call = client.messages.create({ model: MODEL, max_tokens: OUTPUT, messages: [{ role: 'user', content: 'Tell me a long story' }] }).catch((e: unknown) => e);
      await new Promise((r) => setTimeout(r, 300));
      relay.proc.kill('SIGTERM');
      const err = await call as InstanceType<typeof Anthropic.APIError>;
      expect(err).toBeInstanceOf(Anthropic.APIError);
      expect(err.status).toBe(529);
      expect(err.error).toMatchObject({ type: 'error', error: { type: 'overloaded_error', message: expect.stringMatching(/shutting down/) } });
      expect(await relay.exited).toBe(0);
      expect(await balance()).toBe(before);
      expect(await stack.redis.zcard(stack.keys.reservationDeadlines())).toBe(0);
    });
  }, 30_000);

  it('serves a request whose body was still arriving, bills it exactly once, and exits 0', async () => {
    const relay = await startRelayProcess();
    await withRelayProcess(relay, async () => {
      const before = await balance();
      const body = JSON.stringify({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] });
      const cut = Math.floor(body.length / 2);
      const answer = new Promise<{ status: number; body: string; requestId: string }>((resolve, reject) => {
        const req = request(`${relay.url}/v1/messages`, {
          method: 'POST',
          headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
        }, (res) => {
          let text = '';
          res.on('data', (d: Buffer) => { text += d.toString(); });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, requestId: String(res.headers['x-gateway-request-id'] ?? '') }));
          res.on('error', reject);
        });
        req.on('error', reject);
        req.write(body.slice(0, cut));
        // The relay has the request's headers (the exchange is in progress) when the signal comes.
        setTimeout(() => {
          relay.proc.kill('SIGTERM');
          setTimeout(() => req.end(body.slice(cut)), 300);
        }, 200);
      });
      const { status, body: text, requestId } = await answer;
      expect(status).toBe(200);
      const message = JSON.parse(text) as { usage: { input_tokens: number; output_tokens: number } };
      expect(await relay.exited).toBe(0);

      const { input_tokens: input, output_tokens: output } = message.usage;
      const row = await ledgerRow(stack, requestId);
      expect(row).toMatchObject({ completion_tokens: output, prompt_tokens: input, quota: cost(input, output) });
      await expectBilledOnce(requestId, before, cost(input, output));
    });
  }, 30_000);
});
