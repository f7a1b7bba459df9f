// `make down` (infra/scripts/stop-all.sh) in the middle of a slow stream, on a relay as `make run`
// starts it (node dist/relay/main.js under infra/launch/supervise-main.js, its PID in .run/relay.pid:
// make build first): the stream is finished to the client and billed exactly once.
//
// stop-all.sh gave every service 5 s between SIGTERM and SIGKILL, the relay too, though it drains for
// RELAY_SHUTDOWN_GRACE_MS (30 s by default): a stream with more than 5 s to go was cut with no end
// event and its delivered tokens never billed (the reaper released the reservation: served free).
// Here the stream still has about 6 s to go when the script runs, and the script is not told the
// grace: it reads it from the relay's own environment, as it must when `make down` runs in another
// shell than `make run` did.
import Anthropic from '@anthropic-ai/sdk';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/project-root.js';
import {
  createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../harness/gateway-stack.js';
import { relayProcessEnv, type RelayProcess, spawnRelayProcess } from '../harness/relay-process.js';

const MODEL = 'claude-haiku-4-5';
// claude-haiku-4-5: model ratio 0.5, completion ratio 5, group default 1 (core/pricing/ratios.ts).
const cost = (input: number, output: number) => Math.round((input + output * 5) * 0.5);
const OUTPUT = 70;
const TOKEN_DELAY_MS = 100;
const STOP_AT_DELTA = 8;
const GRACE_MS = 20_000;

let stack: GatewayStack;
let account: TestAccount;
let key: string;
let root: string;

beforeAll(async () => {
  stack = await startGatewayStack({ mock: { tokenDelayMs: TOKEN_DELAY_MS, outputTokens: OUTPUT } });
  await mockChannel(stack, [MODEL]);
  account = await fundedAccount(stack, 10_000_000);
  key = (await createApiKey(stack, account)).key;
  // A checkout of the stop script alone: it works from the directory two above it, on .run/.
  root = mkdtempSync(join(tmpdir(), 'stop-drain-'));
  cpSync(join(projectRoot(), 'infra/scripts/stop-all.sh'), join(root, 'infra/scripts/stop-all.sh'));
  mkdirSync(join(root, '.run'));
});
afterAll(async () => {
  await stack?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

/** The relay as `make run` starts it, under its supervisor (its PID in .run/relay.pid), on this stack's database and Redis prefix. */
async function startSupervisedRelay(): Promise<RelayProcess & { supervisor: ChildProcess }> {
  const env = relayProcessEnv(stack.config, { RELAY_SPOOL_DIR: join(root, 'spool'), RELAY_SHUTDOWN_GRACE_MS: String(GRACE_MS) });
  const dist = join(projectRoot(), 'dist');
  const relay = await spawnRelayProcess([join(dist, 'infra/launch/supervise-main.js'), 'relay', '--', join(dist, 'relay/main.js')], env, root);
  writeFileSync(join(root, '.run/relay.pid'), `${relay.proc.pid}\n`);
  return { ...relay, supervisor: relay.proc };
}

/** `bash infra/scripts/stop-all.sh relay` in the scratch checkout, from a shell that does not set the grace. */
function stopAll(): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
  const env = { ...process.env };
  delete env.RELAY_SHUTDOWN_GRACE_MS;
  const started = Date.now();
  const p = spawn('bash', [join(root, 'infra/scripts/stop-all.sh'), 'relay'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  p.stdout.on('data', (d: Buffer) => { stdout += d.toString(); });
  p.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
  return new Promise((resolve) => p.once('close', (code) => resolve({ code, stdout, stderr, ms: Date.now() - started })));
}

describe('make down during a slow stream', () => {
  it('waits for the relay to drain: the stream finishes and is billed exactly once', async () => {
    const relay = await startSupervisedRelay();
    try {
      const [before] = await stack.sql`SELECT quota FROM users WHERE id = ${account.id}`;
      const client = new Anthropic({ apiKey: key, baseURL: relay.url, maxRetries: 0 });
      const stream = client.messages.stream({ model: MODEL, max_tokens: OUTPUT, messages: [{ role: 'user', content: 'Tell me a story' }] });
      let deltas = 0;
      let input = 0;
      const stopping: { run?: ReturnType<typeof stopAll> } = {};
      stream.on('streamEvent', (e) => {
        if (e.type === 'message_start') input = e.message.usage.input_tokens;
        if (e.type === 'content_block_delta' && e.delta.type === 'text_delta' && ++deltas === STOP_AT_DELTA) stopping.run = stopAll();
      });
      const message = await stream.finalMessage();
      const { response } = await stream.withResponse();
      const requestId = response.headers.get('x-gateway-request-id')!;
      expect(stopping.run).toBeDefined();
      expect(deltas).toBe(OUTPUT);
      expect(message.usage.output_tokens).toBe(OUTPUT);

      const stop = await stopping.run!;
      expect(stop.code).toBe(0);
      // Told the grace by the relay's environment (20 s), plus the relay's close; it said so.
      expect(stop.stdout).toContain(`relay (${relay.supervisor.pid}): stopping; waiting up to ${GRACE_MS / 1000 + 15} s for its drain`);
      expect(stop.stdout).toMatch(/^stopped relay \(\d+\) after \d+ s$/m);
      expect(stop.stderr).not.toContain('killed');
      // More than the 5 s the script gave before: the stream had (OUTPUT - STOP_AT_DELTA) × 100 ms to go.
      expect(stop.ms).toBeGreaterThan(5_000);
      expect(await relay.exited).toBe(0);

      const row = await ledgerRow(stack, requestId);
      expect(row).toMatchObject({ completion_tokens: OUTPUT, prompt_tokens: input, quota: cost(input, OUTPUT) });
      const rows = await stack.sql`SELECT count(*)::int AS n FROM ledger WHERE request_id = ${requestId}`;
      expect(rows[0]!.n).toBe(1);
      const [after] = await stack.sql`SELECT quota FROM users WHERE id = ${account.id}`;
      expect((before!.quota as number) - (after!.quota as number)).toBe(cost(input, OUTPUT));
      // Nothing left open for the reaper to release.
      expect(await stack.redis.zcard(stack.keys.reservationDeadlines())).toBe(0);
    } catch (err) {
      throw new Error(`${(err as Error).message}\nrelay output:\n${relay.output().slice(-3000)}`);
    } finally {
      if (relay.supervisor.exitCode === null) {
        spawnSync('pkill', ['-9', '-P', String(relay.supervisor.pid)]);
        relay.supervisor.kill('SIGKILL');
      }
    }
  }, 30_000);
});
