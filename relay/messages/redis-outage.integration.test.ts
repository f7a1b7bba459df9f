// While the relay's Redis is away, /v1/messages is refused at once with Anthropic's overloaded error
// (quota_store_unavailable), not left hanging until Redis returns, and nothing is billed: whether
// Redis stopped answering on an open connection (a stalled process: the reservation call times out)
// or the connection is gone (a killed process: the request is refused before it is reserved).
import Anthropic from '@anthropic-ai/sdk';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  accountQuota,
  billingSettled, createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';
import { freePort } from '../../infra/testing/free-port.js';

const MODEL = 'claude-haiku-4-5';
const FUNDS = 10_000_000;
const COMMAND_TIMEOUT_MS = 500;

let redisPort: number;
// AOF on a disk of its own: a killed Redis comes back with its data (balances, the billing group).
let redisDir: string;
let redisProc: ChildProcess | null = null;
let stack: GatewayStack;
let account: TestAccount;
let key: string;

async function startRedis(): Promise<void> {
  const proc = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'yes', '--appendfsync', 'always', '--dir', redisDir], { stdio: 'ignore' });
  redisProc = proc;
  const deadline = Date.now() + 5000;
  for (;;) {
    const up = await new Promise<boolean>((resolve) => {
      const c = spawn('redis-cli', ['-p', String(redisPort), 'ping'], { stdio: ['ignore', 'pipe', 'ignore'] });
      let out = '';
      c.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
      c.on('close', () => resolve(out.includes('PONG')));
    });
    if (up) return;
    if (Date.now() > deadline) throw new Error('redis-server did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  if (process.env.TEST_REDIS_CLUSTER_NODES) return;
  redisPort = await freePort();
  redisDir = mkdtempSync(join(tmpdir(), 'redis-outage-'));
  await startRedis();
  stack = await startGatewayStack({
    env: { REDIS_URL: `redis://127.0.0.1:${redisPort}`, RELAY_REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS) },
  });
  await mockChannel(stack, [MODEL]);
  account = await fundedAccount(stack, FUNDS);
  key = (await createApiKey(stack, account)).key;
});
afterAll(async () => {
  if (redisProc && redisProc.exitCode === null) redisProc.kill('SIGCONT');
  await stack?.close();
  redisProc?.kill('SIGKILL');
  if (redisDir) rmSync(redisDir, { recursive: true, force: true });
});

const balance = (): Promise<number> => accountQuota(stack, account.id);

/** One request while Redis is away: its status, error type, request id and how long it took. */
async function refusedRequest(): Promise<{ status: number; type: string; requestId: string; ms: number }> {
  // No retries: the SDK retries 529, and what is measured is one answer. The timeout only ends a hang.
  const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0, timeout: 5000 });
  const t0 = Date.now();
  try {
    await client.messages.create({ model: MODEL, max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }] });
  } catch (err) {
    if (err instanceof Anthropic.APIError) {
      const body = err.error as { error?: { type?: string } } | undefined;
      return { status: err.status ?? 0, type: body?.error?.type ?? '', requestId: err.headers?.get('x-gateway-request-id') ?? '', ms: Date.now() - t0 };
    }
    throw err;
  }
  throw new Error('the request was served while Redis was away');
}

// The relay test set on a Redis Cluster (TEST_REDIS_CLUSTER_NODES, run-tests.sh's second pass) gives
// every stack the cluster, so this file's own Redis behind a proxy it cuts would not be the relay's.
const ON_CLUSTER = Boolean(process.env.TEST_REDIS_CLUSTER_NODES);
if (ON_CLUSTER) console.warn('redis-outage.integration.test.ts skipped on a Redis Cluster: it cuts one Redis of its own through a proxy (a cluster failover is tests/cluster)');

describe.skipIf(ON_CLUSTER)('the relay with its Redis away', () => {
  it('serves normally while Redis is up (the key is cached)', async () => {
    const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
    const { data, response } = await client.messages.create({ model: MODEL, max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }] }).withResponse();
    expect(data.type).toBe('message');
    await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
  });

  it('answers 529 overloaded_error within the command timeout when Redis stalls, and bills nothing', async () => {
    await billingSettled(stack);
    const before = await balance();
    redisProc!.kill('SIGSTOP');
    let refused;
    try {
      refused = await refusedRequest();
    } finally {
      redisProc!.kill('SIGCONT');
    }
    expect(refused).toMatchObject({ status: 529, type: 'overloaded_error' });
    expect(refused.ms).toBeLessThan(2000);
    // The reservation Redis made once it ran again was released by the relay's failed settlement.
    const deadline = Date.now() + 10_000;
    while (Number(await stack.redis.zcard(stack.keys.reservationDeadlines())) > 0) {
      if (Date.now() > deadline) throw new Error('the timed-out reservation was never released');
      await new Promise((r) => setTimeout(r, 50));
    }
    await billingSettled(stack);
    expect(await balance()).toBe(before);
    expect(await stack.quota.accountBalance(account.id)).toBe(before);
    const rows = await stack.sql`SELECT quota FROM ledger WHERE request_id = ${refused.requestId}`;
    expect(rows.every((r) => Number(r.quota) === 0)).toBe(true);
  });

  it('answers 529 overloaded_error at once when Redis is gone, and bills nothing', async () => {
    await billingSettled(stack);
    const before = await balance();
    redisProc!.kill('SIGKILL');
    await new Promise<void>((resolve) => redisProc!.once('exit', () => resolve()));
    const refused = await refusedRequest();
    expect(refused).toMatchObject({ status: 529, type: 'overloaded_error' });
    expect(refused.ms).toBeLessThan(2000);
    // count_tokens is a free endpoint; /v1/models needs only the cached key and the routes.
    const models = await fetch(`${stack.relayUrl}/v1/models`, { headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01' } });
    expect(models.status).toBe(200);
    await startRedis();
    expect(await balance()).toBe(before);
    const rows = await stack.sql`SELECT quota FROM ledger WHERE request_id = ${refused.requestId}`;
    expect(rows).toHaveLength(0);
  });
});
