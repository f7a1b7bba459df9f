// Issue 15, item 1: a relay killed while Redis cannot take its settlements loses none of them. The
// relay runs in a child process whose Redis connections go through a TCP proxy the test controls:
// requests are reserved, the proxy then swallows everything the relay sends, the answers reach the
// client, the relay is killed with SIGKILL, the proxy lets traffic through again and a new relay on
// the same spool directory replays what the dead one had written down. Every answered request must be
// billed exactly once: ledger rows = answered requests, users.quota = funded − Σ ledger, and the
// Redis mirror agrees. (A SIGSTOPped Redis would not do: it executes what sits in its socket buffer
// when it resumes, even from a client that died meanwhile.)
import Anthropic from '@anthropic-ai/sdk';
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeUsageEvent, LOG_TYPE, usageEvent } from '../../core/usage/usage-event.js';
import { createLogger } from '../../infra/logger.js';
import { SettlementSpool } from '../../relay/messages/settlement-spool.js';
import {
  billingSettled, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack,
} from '../harness/gateway-stack.js';

const MODEL = 'claude-haiku-4-5';
const FUNDS = 50_000_000;

let stack: GatewayStack;
let proxy: CuttableProxy;
let spoolDir: string;

/** A TCP proxy to Redis that can stop passing anything on (what it receives meanwhile is dropped). */
class CuttableProxy {
  cut = false;
  readonly sockets = new Set<Socket>();
  constructor(readonly server: Server) {}

  static async start(target: { host: string; port: number }): Promise<CuttableProxy> {
    const server = createServer();
    const p = new CuttableProxy(server);
    server.on('connection', (client) => {
      const upstream = connect(target.port, target.host);
      p.sockets.add(client);
      p.sockets.add(upstream);
      client.on('data', (d) => { if (!p.cut) upstream.write(d); });
      upstream.on('data', (d) => { if (!p.cut) client.write(d); });
      const end = () => { client.destroy(); upstream.destroy(); p.sockets.delete(client); p.sockets.delete(upstream); };
      client.on('close', end);
      upstream.on('close', end);
      client.on('error', end);
      upstream.on('error', end);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return p;
  }

  get port(): number {
    return (this.server.address() as { port: number }).port;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => this.server.close(r));
  }
}

async function startRelayChild(): Promise<{ proc: ChildProcess; port: number; output: () => string }> {
  const env = {
    DATABASE_URL: stack.config.DATABASE_URL, CLICKHOUSE_DATABASE: stack.config.CLICKHOUSE_DATABASE,
    REDIS_PREFIX: stack.config.REDIS_PREFIX, KEY_SECRET: stack.config.KEY_SECRET, LOG_LEVEL: 'warn',
    REDIS_URL: `redis://127.0.0.1:${proxy.port}/0`, RELAY_SPOOL_DIR: spoolDir, RELAY_CREDIT_SLICE_TTL_MS: '1000',
  };
  const script = fileURLToPath(new URL('./spool-relay-child.mjs', import.meta.url));
  const proc = fork(script, [], { execArgv: [], stdio: ['ignore', 'pipe', 'pipe', 'ipc'], env: { ...process.env, SPOOL_RELAY_ENV: JSON.stringify(env) } });
  let out = '';
  const keep = (d: Buffer) => { out = (out + d.toString()).slice(-6000); };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  const port = await new Promise<number>((resolve, reject) => {
    proc.once('message', (m: { port: number }) => resolve(m.port));
    proc.once('exit', (code, signal) => reject(new Error(`relay child exited at start (${code ?? signal}): ${out}`)));
  });
  return { proc, port, output: () => out };
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  // Non-streaming answers come after 1.5 s, streams deliver their first token then: time to cut Redis
  // after the reservations.
  // The reaper looks often: it gives back the credit slice the killed relay held.
  // What the slice held stays held RESERVATION_TTL_SEC more (the relay might be paused, not dead): 3 s here.
  stack = await startGatewayStack({ mock: { firstTokenDelayMs: 1500, tokenDelayMs: 5 }, env: { RESERVATION_REAP_INTERVAL_MS: '200', RESERVATION_TTL_SEC: '3' } });
  await mockChannel(stack, [MODEL]);
  const url = new URL(stack.config.REDIS_URL);
  proxy = await CuttableProxy.start({ host: url.hostname, port: Number(url.port || 6379) });
  spoolDir = mkdtempSync(join(tmpdir(), 'relay-spool-'));
}, 60_000);

afterAll(async () => {
  await proxy?.close();
  await stack?.close();
  if (spoolDir) rmSync(spoolDir, { recursive: true, force: true });
});

describe('settlement spool', () => {
  it('bills every answered request exactly once when the relay is killed while Redis cannot take settlements', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account);
    let relay = await startRelayChild();
    const client = new Anthropic({ apiKey: key.key, baseURL: `http://127.0.0.1:${relay.port}`, maxRetries: 0 });
    // The child learns channels from Postgres at start: wait until it routes the model.
    await waitFor('the relay child to route the model', async () => {
      const r = await fetch(`http://127.0.0.1:${relay.port}/v1/models/${MODEL}`, { headers: { 'x-api-key': key.key } });
      return r.status === 200;
    });

    const body = { model: MODEL, max_tokens: 40, messages: [{ role: 'user' as const, content: 'Tell me about spools.' }] };
    // One answered before the cut: the child's Redis connection is ready (until it is, requests are
    // refused 529), and it is billed like the others.
    await client.messages.create(body);
    const plain = Array.from({ length: 4 }, () => client.messages.create(body));
    const streamed = Array.from({ length: 4 }, async () => {
      const s = client.messages.stream(body);
      return s.finalMessage();
    });
    // Reserved (each reservation is a Redis round trip of a few ms), answers not yet generated.
    await new Promise((r) => setTimeout(r, 700));
    proxy.cut = true;
    const answers = await Promise.allSettled([...plain, ...streamed]);
    const answered = 1 + answers.filter((a) => a.status === 'fulfilled').length;
    expect(answers.filter((a) => a.status === 'rejected').map((a) => String((a as PromiseRejectedResult).reason)), relay.output()).toEqual([]);
    expect(answered).toBe(9);
    // The settlements are now somewhere between the relay's memory and a Redis that does not answer.
    await new Promise((r) => setTimeout(r, 300));
    relay.proc.kill('SIGKILL');
    await new Promise((r) => relay.proc.once('exit', r));
    proxy.cut = false;

    relay = await startRelayChild();
    try {
      let billed = 0;
      await waitFor('every answered request in the ledger', async () => {
        await billingSettled(stack);
        const [row] = await stack.sql`SELECT COUNT(*)::int AS n FROM ledger WHERE user_id = ${account.id} AND type IN (2, 5)`;
        billed = row!.n;
        return billed >= answered;
      }).catch((err: Error) => {
        throw new Error(`${err.message}: ${answered} answered, ${billed} billed; relay output: ${relay.output().slice(-1500)}`);
      });
      await billingSettled(stack);
      const [ledger] = await stack.sql`SELECT COALESCE(SUM(quota), 0)::bigint AS q, COUNT(*)::int AS n, COUNT(DISTINCT request_id)::int AS d FROM ledger WHERE user_id = ${account.id} AND type IN (2, 5)`;
      const [user] = await stack.sql`SELECT quota FROM users WHERE id = ${account.id}`;
      expect(ledger!.n).toBe(answered);
      expect(ledger!.d).toBe(answered);
      expect(Number(ledger!.q)).toBeGreaterThan(0);
      expect(Number(user!.quota)).toBe(FUNDS - Number(ledger!.q));
      // What the killed relay's credit slice held comes back when the reaper finds its deadline, then its hold's, passed.
      await waitFor('the killed relay\'s credit slice to be given back', async () =>
        !(await stack.redis.zrange(stack.keys.reservationDeadlines(), '0', '-1')).some((m) => m.startsWith(`${account.id}:`)));
      expect(await stack.quota.accountBalance(account.id)).toBe(Number(user!.quota));
    } finally {
      relay.proc.kill('SIGKILL');
    }
  }, 60_000);

  it('changes nothing when it replays a settlement Redis already took', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const key = await createApiKey(stack, account);
    const [token] = await stack.sql`SELECT id FROM tokens WHERE user_id = ${account.id}`;
    const requestId = `spool-replay-${Date.now()}`;
    const reserved = await stack.quota.reserve({
      rpmLimit: 0, tpmLimit: 0, userId: account.id, tokenId: Number(token!.id), tokenLimited: false,
      requestId, amount: 1000, deadlineMs: Date.now() + 60_000,
    });
    expect(reserved).toBe('reserved');
    const event = usageEvent({
      type: LOG_TYPE.consume, request_id: requestId, upstream_request_id: '', user_id: account.id, username: account.username,
      token_id: Number(token!.id), token_name: 'k', token_limited: false, channel: 0, model_name: MODEL, group: 'default', quota: 300,
      prompt_tokens: 10, completion_tokens: 10, cache_tokens: 0, cache_read_tokens: 0, cache_write_5m_tokens: 0, cache_write_1h_tokens: 0,
      is_stream: false, use_time_ms: 1, created_at: Math.floor(Date.now() / 1000), content: 'spool replay test', ip: '127.0.0.1',
    });
    const settlement = { userId: account.id, tokenId: Number(token!.id), requestId, cost: 300, eventJson: encodeUsageEvent(event), tokens: 0 };
    // Redis took it; the relay died before writing its done line.
    expect(await stack.quota.settle(settlement)).toBe(true);
    await billingSettled(stack);
    const balance = await stack.quota.accountBalance(account.id);
    const streamLength = await stack.redis.xlen(stack.keys.usageStream());
    const dir = mkdtempSync(join(tmpdir(), 'relay-spool-replay-'));
    try {
      // pid 2^22+1 is above Linux's pid_max: a relay that is certainly not running.
      writeFileSync(join(dir, 'relay-4194305-0a0b0c0d.spool'), `S ${JSON.stringify(settlement)}\n`);
      const spool = SettlementSpool.open(dir, createLogger(stack.config, 'test'));
      expect(spool.pendingCount).toBe(1);
      const answers: unknown[] = [];
      expect(await spool.replay(async (s) => {
        const settled = await stack.quota.settle(s);
        answers.push(settled);
        return settled;
      })).toBe(1);
      expect(answers).toEqual([false]);
      expect(spool.pendingCount).toBe(0);
      spool.close();
      // Nothing pending: the file is gone.
      expect(existsSync(spool.path)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(await stack.quota.accountBalance(account.id)).toBe(balance);
    expect(await stack.redis.xlen(stack.keys.usageStream())).toBe(streamLength);
    await billingSettled(stack);
    const [ledger] = await stack.sql`SELECT COUNT(*)::int AS n, COALESCE(SUM(quota), 0)::bigint AS q FROM ledger WHERE user_id = ${account.id} AND type IN (2, 5)`;
    const [user] = await stack.sql`SELECT quota FROM users WHERE id = ${account.id}`;
    expect(ledger!.n).toBe(1);
    expect(Number(ledger!.q)).toBe(300);
    expect(Number(user!.quota)).toBe(FUNDS - 300);
    void key;
  }, 30_000);
});
