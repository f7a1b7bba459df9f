// The relay's count of exchanges in flight (gateway_relay_requests_in_flight, which SIGTERM's drain
// waits on) against a relay process (node dist/relay/main.js: make build first):
//   - it is back to 0 after exchanges that failed in every way a client can make them fail (no key, a
//     made-up key, bad JSON, an invalid body, an unknown model, a body too large, a client gone
//     mid-stream, the provider's 529 and 400), on both protocols;
//   - SIGTERM while clients keep sending on their kept-alive connections: the relay drains and exits 0
//     without waiting out its grace. It used to keep serving each new request arriving on an open
//     connection, so the count never reached 0 under load (the chaos suite, issue 15: the whole 30 s
//     grace, with the load's 8-9 requests in flight). Now every answer during the drain closes its
//     connection, and the clients' next requests go elsewhere.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../infra/project-root.js';
import {
  createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack,
} from '../tests/harness/gateway-stack.js';
import { freePort } from '../infra/testing/free-port.js';

const MODEL = 'claude-haiku-4-5';
let stack: GatewayStack;
let key: string;
let spoolDir: string;

beforeAll(async () => {
  stack = await startGatewayStack({ mock: { tokenDelayMs: 20, outputTokens: 10 } });
  // Models whose names make the mock answer that error (bench/mock-upstream/knobs.ts).
  await mockChannel(stack, [MODEL, 'claude-x-error529', 'claude-x-error400']);
  key = (await createApiKey(stack, await fundedAccount(stack, 100_000_000))).key;
  spoolDir = mkdtempSync(join(tmpdir(), 'relay-drain-'));
});
afterAll(async () => {
  await stack?.close();
  if (spoolDir) rmSync(spoolDir, { recursive: true, force: true });
});

describe('a relay process', () => {
  it('counts every failed exchange out, and drains on SIGTERM while clients keep their connections busy', async () => {
    const c = stack.config;
    const [port, metricsPort] = [await freePort(), await freePort()];
    const proc = spawn(process.execPath, [join(projectRoot(), 'dist/relay/main.js')], {
      env: {
        ...process.env, NODE_ENV: 'test', LOG_LEVEL: 'info',
        DATABASE_URL: c.DATABASE_URL, REDIS_URL: c.REDIS_URL, REDIS_PREFIX: c.REDIS_PREFIX, KEY_SECRET: c.KEY_SECRET,
        // The stack's Redis as the stack reaches it: a Redis Cluster in the scaled-out pass of `make test`.
        ...(c.REDIS_CLUSTER_NODES ? { REDIS_CLUSTER_NODES: c.REDIS_CLUSTER_NODES } : {}),
        ...(c.REDIS_SHARDS !== undefined ? { REDIS_SHARDS: String(c.REDIS_SHARDS) } : {}),
        CLICKHOUSE_URL: c.CLICKHOUSE_URL, CLICKHOUSE_DATABASE: c.CLICKHOUSE_DATABASE, MAX_BODY_BYTES: '100000',
        RELAY_HOST: '127.0.0.1', RELAY_PORT: String(port), RELAY_METRICS_PORT: String(metricsPort), RELAY_SPOOL_DIR: spoolDir,
        // Far beyond the test's own timeout: a drain that does not finish fails the test.
        RELAY_SHUTDOWN_GRACE_MS: '600000',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    proc.stdout!.on('data', (d: Buffer) => { output += d.toString(); });
    proc.stderr!.on('data', (d: Buffer) => { output += d.toString(); });
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    const url = `http://127.0.0.1:${port}`;
    try {
      while (!output.includes('relay listening')) {
        if (proc.exitCode !== null) throw new Error('the relay exited at start-up');
        await new Promise((r) => setTimeout(r, 50));
      }
      const inFlight = async () => {
        const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
        return Number(/^gateway_relay_requests_in_flight (\S+)$/m.exec(text)![1]);
      };
      const post = (path: string, body: string, apiKey = key) => fetch(`${url}${path}`, {
        method: 'POST', body, headers: { 'x-api-key': apiKey, authorization: `Bearer ${apiKey}`, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      }).then(async (r) => { await r.arrayBuffer(); return r.status; });
      const ok = JSON.stringify({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] });
      for (const path of ['/v1/messages', '/v1/chat/completions']) {
        expect(await post(path, ok, '')).toBe(401);
        expect(await post(path, ok, `sk-${'a'.repeat(48)}`)).toBe(401);
        expect(await post(path, '{"model":')).toBe(400);
        expect(await post(path, JSON.stringify({ model: MODEL }))).toBe(400);
        expect(await post(path, JSON.stringify({ model: 'no-such-model', max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] }))).toBe(404);
        expect(await post(path, JSON.stringify({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'x'.repeat(200_000) }] }))).toBe(413);
        for (const status of [529, 400]) {
          expect(await post(path, JSON.stringify({ model: `claude-x-error${status}`, max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] }))).toBe(status);
        }
      }
      // A client that leaves mid-stream, on each protocol.
      const gone = new AbortController();
      const stream = await new Anthropic({ apiKey: key, baseURL: url, maxRetries: 0 }).messages
        .create({ model: MODEL, max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'Hi' }] }, { signal: gone.signal });
      for await (const e of stream) if (e.type === 'content_block_delta') break;
      const chat = await new OpenAI({ apiKey: key, baseURL: `${url}/v1`, maxRetries: 0 }).chat.completions
        .create({ model: MODEL, max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'Hi' }] });
      for await (const chunk of chat) if (chunk.choices[0]?.delta?.content) break;
      await expect.poll(inFlight, { timeout: 5000 }).toBe(0);

      // Clients each sending request after request on its kept-alive connection: streaming ones and
      // ones taking JSON answers, both must end whole during the drain. The signal comes while every
      // streaming client is mid-stream, so their requests are surely in progress at the relay (a
      // request the client had only begun to send could still be on its way when the relay exits).
      const STREAMING = 4;
      const CLIENTS = 6;
      // One connection per client (its own undici pool), so "the connection a client keeps sending on"
      // is one connection: a shared pool would hand the drain's requests every idle connection it holds.
      const agents = Array.from({ length: CLIENTS }, () => new Agent({ connections: 1 }));
      const clients = agents.map((dispatcher) => new Anthropic({
        apiKey: key, baseURL: url, maxRetries: 0,
        fetch: ((input: string, init?: object) => undiciFetch(input, { ...init, dispatcher } as never)) as unknown as typeof fetch,
      }));
      let served = 0;
      // Answers to requests begun once the relay was seen draining: a relay that keeps serving kept-alive
      // connections serves them on and on; one that closes each connection after its answer serves at
      // most one per client (begun on its connection, whose last answer came before the drain).
      let servedBegunInDrain = 0;
      let signalled = false;
      let midStream = 0;
      const params = { model: MODEL, max_tokens: 10, messages: [{ role: 'user' as const, content: 'Hi' }] };
      const loops = Array.from({ length: CLIENTS }, async (_, i) => {
        for (;;) {
          const sentBeforeSignal = !signalled;
          const begunInDrain = output.includes('relay stopping');
          let inStream = false;
          try {
            let m: Anthropic.Message;
            if (i < STREAMING) {
              const s = clients[i]!.messages.stream(params);
              s.once('text', () => { inStream = true; midStream++; });
              m = await s.finalMessage();
            } else {
              m = await clients[i]!.messages.create(params);
            }
            expect(m.usage.output_tokens).toBe(10);
            served++;
            if (begunInDrain) servedBegunInDrain++;
          } catch (err) {
            // The draining relay closed the connection and accepts no new one; what was sent before must be served.
            if (!sentBeforeSignal) return;
            throw new Error(`a request sent before the signal failed: ${(err as Error).message}`);
          } finally {
            if (inStream) midStream--;
          }
        }
      });
      while (served < 8 || midStream < STREAMING) await new Promise((r) => setTimeout(r, 2));
      signalled = true;
      proc.kill('SIGTERM');
      await Promise.all(loops);
      await Promise.all(agents.map((a) => a.close()));
      expect(await exited).toBe(0);
      expect(output).not.toContain('shutdown grace over');
      expect(servedBegunInDrain).toBeLessThanOrEqual(CLIENTS);
    } catch (err) {
      throw new Error(`${(err as Error).message}\nrelay output:\n${output.slice(-3000)}`);
    } finally {
      if (proc.exitCode === null) proc.kill('SIGKILL');
    }
  }, 60_000);
});
