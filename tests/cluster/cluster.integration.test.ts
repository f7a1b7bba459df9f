// The gateway scaled out on a Redis Cluster (3 masters, 3 replicas; infra/scripts/redis-cluster.sh on
// ports 7100-7105, started here and stopped after): two relays (one in this process, one a process of
// its own from dist/, so make build first) and two billing workers (likewise) over 16 virtual shards.
// Invalidations reach both relays, a key's rate limit holds across them, the money audit is exact
// after load spread over both, and again after a master is killed under load and its replica takes
// over. Runs when TEST_REDIS_CLUSTER=start (make test sets it); skipped otherwise, saying so.
import Anthropic from '@anthropic-ai/sdk';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/project-root.js';
import {
  billingSettled, consoleCall, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount, storeOptions
} from '../harness/gateway-stack.js';
import { CLUSTER_TESTS_ENABLED, masterPortOf, TestCluster } from './test-cluster.js';

const ENABLED = CLUSTER_TESTS_ENABLED;
if (!ENABLED) console.warn('tests/cluster skipped: set TEST_REDIS_CLUSTER=start to run them on a Redis Cluster started on ports 7100-7105 (make test does)');

const BASE_PORT = 7100;
const cluster = new TestCluster(BASE_PORT, 'test');
const NODES = cluster.nodes;
const SHARDS = 16;
const MODEL = 'claude-haiku-4-5';
const FUNDS = 50_000_000;
const ACCOUNTS = 6;

let spoolDir = '';
let stack: GatewayStack;
const children: ChildProcess[] = [];
let relayUrls: string[] = [];
let accounts: { account: TestAccount; key: string; id: number }[] = [];

/** A process of dist/ on this stack's database, cluster, prefix and secret; resolves once `ready` matched its output. */
async function startChild(script: string, extra: Record<string, string>, ready: RegExp): Promise<{ proc: ChildProcess; match: RegExpExecArray }> {
  const c = stack.config;
  const env: Record<string, string> = {
    ...process.env as Record<string, string>,
    NODE_ENV: 'test', LOG_LEVEL: 'info',
    DATABASE_URL: c.DATABASE_URL, REDIS_CLUSTER_NODES: NODES, REDIS_SHARDS: String(SHARDS), REDIS_PREFIX: c.REDIS_PREFIX,
    KEY_SECRET: c.KEY_SECRET, CLICKHOUSE_URL: c.CLICKHOUSE_URL, CLICKHOUSE_DATABASE: c.CLICKHOUSE_DATABASE,
    KEY_CACHE_TTL_MS: String(c.KEY_CACHE_TTL_MS), BILLING_CLAIM_IDLE_MS: String(c.BILLING_CLAIM_IDLE_MS),
    BILLING_SHARD_LEASE_MS: String(c.BILLING_SHARD_LEASE_MS), BILLING_BLOCK_MS: '20', BILLING_MIN_BATCH_INTERVAL_MS: '0',
    RESERVATION_REAP_INTERVAL_MS: String(c.RESERVATION_REAP_INTERVAL_MS), ...extra,
  };
  const proc = spawn(process.execPath, [join(projectRoot(), script)], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(proc);
  let output = '';
  const match = await new Promise<RegExpExecArray>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start:\n${output}`)), 20_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      const m = ready.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', onData);
    proc.once('exit', (code) => reject(new Error(`${script} exited (${code}) before it was ready:\n${output}`)));
  });
  return { proc, match };
}

function client(key: string, i: number): Anthropic {
  return new Anthropic({ apiKey: key, baseURL: relayUrls[i % relayUrls.length]!, maxRetries: 0 });
}

/**
 * The 5xx answers other than 529, with the relay and the error's message ("Internal error." is an
 * exception in the exchange, "could not be reached" the provider): what a failed status check shows.
 */
const unexpectedAnswers: string[] = [];

/** One request through relay i % 2, streaming every third; its status (0: no answer). */
async function call(key: string, i: number): Promise<number> {
  try {
    const c = client(key, i);
    const params = { model: MODEL, max_tokens: 16, messages: [{ role: 'user' as const, content: `hello ${i}` }] };
    if (i % 3 === 0) await c.messages.stream(params).finalMessage();
    else await c.messages.create(params);
    return 200;
  } catch (err) {
    const status = (err as { status?: number }).status ?? 0;
    if (status >= 500 && status !== 529) unexpectedAnswers.push(`relay ${i % relayUrls.length}, request ${i}${i % 3 === 0 ? ' (stream)' : ''}: ${(err as Error).message}`);
    return status;
  }
}

/**
 * Postgres is the book of record: every account's users.quota is what it was funded minus its ledger,
 * its Redis mirror equals users.quota (nothing reserved or unsettled once drained), and ClickHouse
 * logged the ledger's sum. Returns the ledger rows per account.
 */
async function audit(mirrorsLoaded = true, billingTimeoutMs = 30_000): Promise<number[]> {
  // Settlements a failover stalled are replayed from the relays' spools: the books are closed once no
  // reservation of these accounts is open any more and billing has taken every event.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const open: string[] = [];
    for (const { id } of accounts) {
      const members = (await stack.redis.zscan(stack.keys.reservationDeadlines(stack.keys.shardOf(id)), '0', 'MATCH', `${id}:*`, 'COUNT', 10_000))[1];
      for (let i = 0; i < members.length; i += 2) open.push(members[i]!);
    }
    if (open.length === 0) break;
    if (Date.now() > deadline) throw new Error(`reservations still open after 30 s: ${open.join(', ')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  await billingSettled(stack, billingTimeoutMs);
  const rows: number[] = [];
  for (const { id } of accounts) {
    const [u] = await stack.sql`SELECT quota FROM users WHERE id = ${id}`;
    // Consumption (2) and error (5) rows move money; the funding was set as an absolute quota.
    const [l] = await stack.sql`SELECT COUNT(*) FILTER (WHERE type = 2)::int AS n, COALESCE(SUM(quota), 0)::bigint AS q
                                FROM ledger WHERE user_id = ${id} AND type IN (2, 5)`;
    expect(Number(u!.quota), `account ${id}: users.quota = funded - consumption`).toBe(FUNDS - Number(l!.q));
    // Before an account's first request its mirror is not loaded yet (seeded from Postgres on use).
    const mirror = await stack.quota.accountBalance(id);
    if (mirrorsLoaded || mirror !== null) expect(mirror, `account ${id}: mirror = users.quota`).toBe(Number(u!.quota));
    const rs = await stack.ch.query({ query: 'SELECT sum(quota) AS q FROM logs FINAL WHERE user_id = {u:UInt64} AND type IN (2, 5)', query_params: { u: id }, format: 'JSONEachRow' });
    const [logged] = await rs.json<{ q: string | number }>();
    expect(Number(logged?.q ?? 0), `account ${id}: ClickHouse = ledger`).toBe(Number(l!.q));
    rows.push(l!.n as number);
  }
  return rows;
}



/** A key served by both relays, deleted in the console: each relay refuses it within 5 s (its cache lives 10 min). */
async function deletedKeyRefusedByBothRelays(): Promise<void> {
  const account = accounts[0]!.account;
  const key = await createApiKey(stack, account);
  expect(await call(key.key, 0)).toBe(200);
  expect(await call(key.key, 1)).toBe(200);
  const del = await consoleCall(stack, 'DELETE', `/api/token/${key.id}`, account.token);
  expect(del.json.success).toBe(true);
  for (const i of [0, 1]) {
    const deadline = Date.now() + 5000;
    let status = 0;
    while ((status = await call(key.key, i)) !== 401 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(status, `relay ${i}`).toBe(401);
  }
}

async function ledgerCount(): Promise<number> {
  const [r] = await stack.sql`SELECT COUNT(*)::int AS n FROM ledger WHERE type = 2 AND user_id IN ${stack.sql(accounts.map((a) => a.id))}`;
  return r!.n as number;
}

describe.skipIf(!ENABLED)('the gateway on a Redis Cluster, two relays, two billing workers', () => {
  beforeAll(async () => {
    spoolDir = mkdtempSync(join(tmpdir(), 'cluster-spool-'));
    cluster.start();
    stack = await startGatewayStack({
      env: {
        REDIS_CLUSTER_NODES: NODES, REDIS_SHARDS: String(SHARDS), RELAY_SPOOL_DIR: spoolDir,
        // Only an invalidation, not the cache's age, can make a relay drop a deleted key.
        KEY_CACHE_TTL_MS: '600000',
        BILLING_CLAIM_IDLE_MS: '2000', BILLING_SHARD_LEASE_MS: '2000', RESERVATION_REAP_INTERVAL_MS: '1000',
      },
    });
    const relay2 = await startChild('dist/relay/main.js', { RELAY_HOST: '127.0.0.1', RELAY_PORT: '0', RELAY_METRICS_PORT: 'off', RELAY_SPOOL_DIR: spoolDir },
      /"port":(\d+)[^\n]*relay listening|relay listening[^\n]*"port":(\d+)/);
    await startChild('dist/billing/main.js', { BILLING_CONSUMER: 'billing-2', BILLING_METRICS_PORT: '0' }, /billing worker started/);
    relayUrls = [stack.relayUrl, `http://127.0.0.1:${relay2.match[1] ?? relay2.match[2]}`];
    await mockChannel(stack, [MODEL]);
    for (let i = 0; i < ACCOUNTS; i++) {
      const account = await fundedAccount(stack, FUNDS);
      accounts.push({ account, id: account.id, key: (await createApiKey(stack, account)).key });
    }
    // The second relay learns of the channel from the console's announcement through the cluster.
    const deadline = Date.now() + 10_000;
    while ((await call(accounts[0]!.key, 1)) !== 200) {
      if (Date.now() > deadline) throw new Error('the second relay never served the new channel');
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 120_000);

  afterAll(async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
    await Promise.all(children.map((c) => c.exitCode === null ? new Promise((r) => c.once('exit', r)) : undefined));
    await stack?.close().catch(() => undefined);
    cluster.stop();
    if (spoolDir) rmSync(spoolDir, { recursive: true, force: true });
  }, 60_000);

  it('spreads the accounts over shards on every master, and both billing workers hold a share', async () => {
    const masters = new Set<number>();
    for (const { id } of accounts) {
      masters.add(await masterPortOf(stack.redis, stack.keys.accountBalance(id)));
    }
    expect(masters.size).toBeGreaterThan(1);
    // The workers share the shards by their leases (2 s here): read while one passes from one worker
    // to the other, a lease is briefly held by none (CI: 3 values, a null among them). The share is
    // read once it is settled, within a few lease periods.
    const readLeases = () => Promise.all(Array.from({ length: SHARDS }, (_, s) => stack.redis.get(stack.keys.billingShardLease(s))));
    let leases = await readLeases();
    for (const deadline = Date.now() + 10_000; (new Set(leases).size !== 2 || leases.includes(null)) && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 100));
      leases = await readLeases();
    }
    expect(new Set(leases).size).toBe(2);
    expect(leases.every((h) => h !== null)).toBe(true);
  });

  it('delivers a console invalidation to both relays: a deleted key is refused by each', async () => {
    await deletedKeyRefusedByBothRelays();
  });

  it('holds a key\'s requests-per-minute limit across both relays', async () => {
    // The window slides (reserveQuota-8.lua): no wait for the start of a minute.
    const account = accounts[1]!.account;
    const key = await createApiKey(stack, account);
    const set = await consoleCall(stack, 'PUT', '/api/token/', account.token, { id: key.id, rate_limit_rpm: 4 });
    expect(set.json.success).toBe(true);
    await new Promise((r) => setTimeout(r, 300)); // the key's new limit reaches both relays' caches
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) statuses.push(await call(key.key, i));
    expect(statuses.filter((s) => s === 200)).toHaveLength(4);
    expect(statuses.filter((s) => s === 429)).toHaveLength(6);
  });

  // A group's limit is the account's (reserveQuota-8.lua KEYS 7-8): its window is in the account's
  // slot, whichever relay and key a request comes through; the tokens held there are corrected by the
  // settlement (settleReservations-9n.lua KEYS 9, the same slot).
  it('holds a group\'s requests-per-minute limit for an account across both relays and three keys', async () => {
    const account = await fundedAccount(stack, FUNDS);
    const keys = [await createApiKey(stack, account), await createApiKey(stack, account), await createApiKey(stack, account)];
    await storeOptions(stack, { GroupRateLimits: '{"default":{"rpm":4,"tpm":1000000}}' }); // reaches both relays
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 10; i++) statuses.push(await call(keys[i % 3]!.key, i));
      expect(statuses.filter((s) => s === 200)).toHaveLength(4);
      expect(statuses.filter((s) => s === 429)).toHaveLength(6);
      await billingSettled(stack);
      // Each settled request's hold became its tokens used: the window holds what the 4 used.
      const [used] = await stack.sql`SELECT coalesce(sum(prompt_tokens + completion_tokens), 0)::int AS tokens FROM ledger WHERE user_id = ${account.id} AND type = 2`;
      const window = await stack.redis.hgetall(stack.keys.accountTokensInGroupWindow(account.id, 'default'));
      expect(Object.values(window).reduce((sum, n) => sum + Number(n), 0)).toBe(used!.tokens);
    } finally {
      await storeOptions(stack, { GroupRateLimits: null }, 0);
    }
  });

  it('bills load spread over both relays exactly: Postgres, mirrors and ClickHouse agree', async () => {
    await audit(false); // the earlier tests' requests billed first: the count below is this test's
    const before = await ledgerCount();
    const N = 240;
    let next = 0;
    const statuses: number[] = [];
    await Promise.all(Array.from({ length: 12 }, async () => {
      for (let i; (i = next++) < N;) statuses.push(await call(accounts[i % ACCOUNTS]!.key, i));
    }));
    expect(statuses.filter((s) => s === 200)).toHaveLength(N);
    await audit();
    expect((await ledgerCount()) - before).toBe(N);
  });

  it('stays exact when a master is killed under load and its replica takes over', async () => {
    await audit(false);
    const before = await ledgerCount();
    // The master of account 2's shard.
    const victim = await masterPortOf(stack.redis, stack.keys.accountBalance(accounts[2]!.id));
    const pid = cluster.pidOf(victim);

    let ok = 0;
    const failures: number[] = [];
    let stop = false;
    let i = 0;
    const load = Promise.all(Array.from({ length: 6 }, async () => {
      while (!stop) {
        const n = i++;
        const status = await call(accounts[n % ACCOUNTS]!.key, n);
        if (status === 200) ok++;
        else failures.push(status);
      }
    }));
    await new Promise((r) => setTimeout(r, 1500));
    process.kill(pid, 'SIGKILL');
    // The replica is promoted after cluster-node-timeout (2 s) and an election; load goes on through it.
    const promotedBy = Date.now() + 20_000;
    while ((await masterPortOf(stack.redis, stack.keys.accountBalance(accounts[2]!.id)).catch(() => victim)) === victim) {
      if (Date.now() > promotedBy) throw new Error('no replica took over');
      await new Promise((r) => setTimeout(r, 200));
    }
    const okAtFailover = ok;
    await new Promise((r) => setTimeout(r, 3000));
    stop = true;
    await load;
    // Requests after the failover were served: the replica took over.
    expect(ok).toBeGreaterThan(okAtFailover);
    // A request refused during the failover (529 while its shard had no master) is not billed.
    for (const s of failures) expect([529, 0], unexpectedAnswers.join('\n')).toContain(s);
    // A worker whose shard lease ran out while the shard had no master leaves its read entries pending;
    // the worker the lease moves to claims them at once (billing-worker.ts). The wait is generous for a
    // loaded CI machine: correctness, not speed, is what this audit checks.
    await audit(true, 90_000);
    // Every answered request billed exactly once, none of the refused ones.
    expect((await ledgerCount()) - before).toBe(ok);
    // The relays' subscriptions outlive the failover (a subscriber on the killed node moves to another).
    await deletedKeyRefusedByBothRelays();
  }, 180_000);
});
