// A request refused before its body is all in (too large for MAX_BODY_BYTES, an unknown key, a path
// that does not exist) is answered once its body has been read and dropped (free-request.ts
// BodyLinger): answered and closed while the client still sent, the client's kernel got a reset and
// the official SDKs reported a connection error (EPIPE) instead of the 413 or 401, 7 times in 10.
// Driven with both official SDKs, no retries, each case 10 times in a row, against a relay process
// (node dist/relay/main.js: make build first), as deployed: a relay in the test's own process shares
// its event loop with the client, which has then always sent its body before the relay reads it.
// Nothing is billed.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../infra/project-root.js';
import { freePort } from '../infra/testing/free-port.js';
import { settledAccountQuota, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../tests/harness/gateway-stack.js';

const MODEL = 'claude-sonnet-4-5';
const MiB = 1024 * 1024;
const TRIES = 10;

let stack: GatewayStack;
let account: TestAccount;
let key: string;
let relay: ChildProcess | undefined;
let relayUrl: string;
let spoolDir: string;
beforeAll(async () => {
  stack = await startGatewayStack();
  await mockChannel(stack, [MODEL]);
  account = await fundedAccount(stack, 10_000_000);
  key = (await createApiKey(stack, account)).key;
  spoolDir = mkdtempSync(join(tmpdir(), 'relay-linger-'));
  const c = stack.config;
  const port = await freePort();
  relay = spawn(process.execPath, [join(projectRoot(), 'dist/relay/main.js')], {
    env: {
      ...process.env, NODE_ENV: 'test', LOG_LEVEL: 'info',
      DATABASE_URL: c.DATABASE_URL, REDIS_URL: c.REDIS_URL, REDIS_PREFIX: c.REDIS_PREFIX, KEY_SECRET: c.KEY_SECRET,
      ...(c.REDIS_CLUSTER_NODES ? { REDIS_CLUSTER_NODES: c.REDIS_CLUSTER_NODES } : {}),
      ...(c.REDIS_SHARDS !== undefined ? { REDIS_SHARDS: String(c.REDIS_SHARDS) } : {}),
      CLICKHOUSE_URL: c.CLICKHOUSE_URL, CLICKHOUSE_DATABASE: c.CLICKHOUSE_DATABASE,
      RELAY_HOST: '127.0.0.1', RELAY_PORT: String(port), RELAY_METRICS_PORT: 'off', RELAY_SPOOL_DIR: spoolDir,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  relay.stdout!.on('data', (d: Buffer) => { output += d.toString(); });
  relay.stderr!.on('data', (d: Buffer) => { output += d.toString(); });
  while (!output.includes('relay listening')) {
    if (relay.exitCode !== null) throw new Error(`the relay exited at start-up: ${output}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  relayUrl = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  if (relay && relay.exitCode === null) {
    const exited = new Promise((r) => relay!.once('exit', r));
    relay.kill('SIGTERM');
    await exited;
  }
  await stack?.close();
  if (spoolDir) rmSync(spoolDir, { recursive: true, force: true });
});

/** What each of TRIES calls ended in: an HTTP status, or the error's class name when no answer was read. */
async function outcomes(call: () => Promise<unknown>): Promise<(number | string)[]> {
  const seen: (number | string)[] = [];
  for (let i = 0; i < TRIES; i++) {
    try {
      await call();
      seen.push(200);
    } catch (err) {
      seen.push(typeof (err as { status?: unknown }).status === 'number' ? (err as { status: number }).status : (err as Error).constructor.name);
    }
  }
  return seen;
}

const balance = (): Promise<number> => settledAccountQuota(stack, account.id);

describe('a refusal before the body is all in reaches the client', () => {
  it('413 for a 9 MiB Messages body, through the Anthropic SDK, in its error format', async () => {
    const anthropic = new Anthropic({ apiKey: key, baseURL: relayUrl, maxRetries: 0 });
    const before = await balance();
    const big = 'a'.repeat(9 * MiB);
    expect(await outcomes(() => anthropic.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: big }] })))
      .toEqual(Array(TRIES).fill(413));
    const err = await anthropic.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: big }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: 'error', error: { type: 'request_too_large' } });
    expect(await balance()).toBe(before);
  });

  it('401 for an unknown key with a 4 MiB body, and for no key', async () => {
    const big = 'b'.repeat(4 * MiB);
    const stranger = new Anthropic({ apiKey: `sk-${'x'.repeat(48)}`, baseURL: relayUrl, maxRetries: 0 });
    expect(await outcomes(() => stranger.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: big }] })))
      .toEqual(Array(TRIES).fill(401));
    const bare = await outcomes(() => fetch(`${relayUrl}/v1/messages`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: big }] }),
    }).then((r) => { throw Object.assign(new Error('answered'), { status: r.status }); }));
    expect(bare).toEqual(Array(TRIES).fill(401));
  });

  it('413 for a 9 MiB Chat Completions body through the OpenAI SDK, and for count_tokens', async () => {
    const openai = new OpenAI({ apiKey: key, baseURL: `${relayUrl}/v1`, maxRetries: 0 });
    const big = 'c'.repeat(9 * MiB);
    expect(await outcomes(() => openai.chat.completions.create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: big }] })))
      .toEqual(Array(TRIES).fill(413));
    const anthropic = new Anthropic({ apiKey: key, baseURL: relayUrl, maxRetries: 0 });
    expect(await outcomes(() => anthropic.messages.countTokens({ model: MODEL, messages: [{ role: 'user', content: big }] })))
      .toEqual(Array(TRIES).fill(413));
  });

  it('404 for a 4 MiB body sent to an endpoint the gateway does not serve, and the relay serves on', async () => {
    const big = 'd'.repeat(4 * MiB);
    const answers = await outcomes(() => fetch(`${relayUrl}/v1/messages/batches`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body: JSON.stringify({ requests: [big] }),
    }).then((r) => { throw Object.assign(new Error('answered'), { status: r.status }); }));
    expect(answers).toEqual(Array(TRIES).fill(404));
    const anthropic = new Anthropic({ apiKey: key, baseURL: relayUrl, maxRetries: 0 });
    const ok = await anthropic.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'Hello' }] });
    expect(ok.type).toBe('message');
  });
});
