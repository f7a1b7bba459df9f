// SIGTERM to a relay process (dist/relay/main.js, as deployed) whose Redis is frozen (SIGSTOP) while a
// stream is open: it finishes the stream, keeps the settlement it cannot send in its spool, and exits
// 0 (README: a supervisor's Restart=on-failure and an orchestrator's alerts read the code); the next
// relay on the spool bills it once. Before: closing its Redis connection timed out, the close skipped
// the rest (Postgres, the spool file) and the relay exited 1, "relay close failed" (review faults).
import Anthropic from '@anthropic-ai/sdk';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/project-root.js';
import { freePort } from '../../infra/testing/free-port.js';
import { createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../harness/gateway-stack.js';
import { relayProcessEnv, spawnRelayProcess, withRelayProcess } from '../harness/relay-process.js';
import { startRedisServer, type OwnRedisServer } from '../chaos/redis-server.js';

const MODEL = 'claude-haiku-4-5';
let server: OwnRedisServer;
let stack: GatewayStack;
let account: TestAccount;
let key: string;
let spoolDir: string;

beforeAll(async () => {
  server = await startRedisServer({ port: await freePort(), aof: true });
  stack = await startGatewayStack({ env: { REDIS_URL: server.url }, mock: { tokenDelayMs: 40, outputTokens: 40 } });
  await mockChannel(stack, [MODEL]);
  account = await fundedAccount(stack, 10_000_000);
  key = (await createApiKey(stack, account)).key;
  spoolDir = mkdtempSync(join(tmpdir(), 'stop-redis-frozen-'));
});
afterAll(async () => {
  server?.resume();
  await stack?.close();
  await server?.close();
  if (spoolDir) rmSync(spoolDir, { recursive: true, force: true });
});

describe('SIGTERM while Redis is frozen', () => {
  it('exits 0, and the stream it finished is billed once after Redis resumes', async () => {
    const env = relayProcessEnv(stack.config, { RELAY_SPOOL_DIR: spoolDir, RELAY_SHUTDOWN_GRACE_MS: '3000' });
    const relay = await spawnRelayProcess([join(projectRoot(), 'dist/relay/main.js')], env);
    await withRelayProcess(relay, async () => {
      const client = new Anthropic({ apiKey: key, baseURL: relay.url, maxRetries: 0 });
      const stream = client.messages.stream({ model: MODEL, max_tokens: 40, messages: [{ role: 'user', content: 'hello' }] });
      const { response } = await stream.withResponse();
      const requestId = response.headers.get('x-gateway-request-id')!;
      server.pause();
      relay.proc.kill('SIGTERM');
      const message = await stream.finalMessage();
      expect(message.usage.output_tokens).toBe(40);
      const code = await relay.exited;
      server.resume();
      // A relay started on the same spool directory replays what the stopped one kept.
      const next = await spawnRelayProcess([join(projectRoot(), 'dist/relay/main.js')], env);
      await withRelayProcess(next, async () => {
        const row = await ledgerRow(stack, requestId, 20_000);
        expect(row.completion_tokens).toBe(40);
        const rows = await stack.sql`SELECT count(*)::int AS n FROM ledger WHERE request_id = ${requestId}`;
        expect(rows[0]!.n).toBe(1);
      });
      expect({ code, tail: code === 0 ? '' : relay.output().split('\n').filter((l) => l.includes('"level":50')).slice(-2).join('\n').slice(0, 600) }).toEqual({ code: 0, tail: '' });
    });
  }, 90_000);
});
