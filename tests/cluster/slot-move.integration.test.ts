// A graceful slot move (CLUSTER FAILOVER on a replica) under load, on a cluster of 3 masters and 3
// replicas of its own (ports 7130-7135, started here and stopped after). ioredis follows a MOVED only
// when every error of an auto-pipelined batch is the same, and a MOVED names its slot: a batch of
// commands for several shards of the moved node got several MOVEDs, no redirect and no slot-table
// refresh, and failed that way for as long as the load kept batching. Relays refused requests; the
// billing worker's lease renewal (one batch of every held shard) threw on every try and it billed
// nothing until restarted. Here no request and no store call fails at all (a script or read answered
// MOVED is sent again once the slot table follows the MOVED: infra/redis/client.ts, resendAfterMoved),
// and billing keeps its shards and bills every request served.
// Runs when TEST_REDIS_CLUSTER=start (make test sets it).
import Anthropic from '@anthropic-ai/sdk';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  billingSettled, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack,
} from '../harness/gateway-stack.js';
import { loadConfig } from '../../infra/config.js';
import { createRedis, retryOnMoved } from '../../infra/redis/client.js';
import { CLUSTER_TESTS_ENABLED, keySlot, TestCluster, withNode } from './test-cluster.js';

const ENABLED = CLUSTER_TESTS_ENABLED;
if (!ENABLED) console.warn('tests/cluster slot-move skipped: set TEST_REDIS_CLUSTER=start to run it on a Redis Cluster started on ports 7130-7135 (make test does)');

const BASE_PORT = 7130;
const cluster = new TestCluster(BASE_PORT, 'slot-move');
const NODES = cluster.nodes;
const SHARDS = 16;
const MODEL = 'claude-haiku-4-5';
const FUNDS = 50_000_000;
const ACCOUNTS = 12;
/** From the promotion: the load must go on at least this long (requests counted after it). */
const RECOVERY_MS = 2000;
const LOAD_AFTER_MS = 8000;

let spoolDir = '';
let stack: GatewayStack | undefined;

/** Slot ranges with their master's and replicas' ports, as a node other than the clients' sees them. */
async function slotTable(): Promise<{ from: number; to: number; master: number; replicas: number[] }[]> {
  const ranges = await withNode(BASE_PORT, (r) => r.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, ...unknown[]], ...[string, number, ...unknown[]][]][];
  return ranges.map(([from, to, master, ...replicas]) => ({ from, to, master: Number(master[1]), replicas: replicas.map((x) => Number(x[1])) }));
}

/** Every range has a replica whose link to its master is up. */
async function replicasInSync(table: Awaited<ReturnType<typeof slotTable>>): Promise<boolean> {
  if (table.some((r) => r.replicas.length === 0)) return false;
  const infos = await Promise.all(table.map((r) => withNode(r.replicas[0]!, (n) => n.info('replication'))));
  return infos.every((i) => i.includes('master_link_status:up'));
}

interface Outcome { startedAt: number; ok: boolean; error?: string }

describe.skipIf(!ENABLED)('a graceful slot move (CLUSTER FAILOVER, a reshard) under load', () => {
  beforeAll(() => {
    spoolDir = mkdtempSync(join(tmpdir(), 'slot-move-spool-'));
    cluster.start();
  }, 90_000);

  afterAll(async () => {
    await stack?.close().catch(() => undefined);
    cluster.stop();
    if (spoolDir) rmSync(spoolDir, { recursive: true, force: true });
  }, 60_000);

  it('sends a batch MOVED to several slots on to the nodes the MOVEDs name, though the reload answers the old table', async () => {
    const table = await slotTable();
    const [a, b] = [table[0]!, table.find((r) => r.master !== table[0]!.master)!];
    // Two keys of different slots of master a, the client's table pointing both at master b, and a
    // reload that changes nothing: as when the reload asks a node that has not heard of a promotion.
    const keys: string[] = [];
    for (let i = 0; keys.length < 2; i++) {
      const key = `slot-move-stale:${i}`;
      const slot = keySlot(key);
      if (slot >= a.from && slot <= a.to && (keys.length === 0 || keySlot(keys[0]!) !== slot)) keys.push(key);
    }
    const redis = createRedis(loadConfig({ REDIS_CLUSTER_NODES: NODES }), 'slot-move-stale');
    try {
      await redis.ping();
      const slots = (redis as unknown as { slots: string[][] }).slots;
      for (const key of keys) slots[keySlot(key)] = [`127.0.0.1:${b.master}`];
      let reloads = 0;
      (redis as unknown as { refreshSlotsCache: (cb?: (err?: Error) => void) => void }).refreshSlotsCache = (cb) => { reloads++; cb?.(); };
      // One tick: one auto-pipelined batch to b, answered with a MOVED per slot, which ioredis does not follow.
      const sent: string[] = [];
      const results = await Promise.all(keys.map((key, i) => retryOnMoved(redis, () => { sent.push(key); return redis.set(key, String(i)); })));
      expect(results).toEqual(['OK', 'OK']);
      expect(sent, 'each key sent twice: MOVED, then to the MOVED\'s node').toHaveLength(4);
      expect(reloads).toBeGreaterThanOrEqual(1);
      for (const key of keys) expect(slots[keySlot(key)]).toEqual([`127.0.0.1:${a.master}`]);
      expect(await withNode(a.master, (r) => Promise.all(keys.map((k) => r.get(k))))).toEqual(['0', '1']);
    } finally {
      redis.disconnect();
    }
  });

  it('a script whose slot is being resharded (TRYAGAIN, ASK while its keys move) is sent again until the move ends: none fails', async () => {
    // Before: every call answered TRYAGAIN or ASK failed at once (the relay's 529 for the accounts of
    // that slot for the whole move: ioredis retries neither inside an auto-pipelined batch).
    const table = await slotTable();
    const tag = '{reshard-probe}';
    const slot = keySlot(tag);
    const source = table.find((r) => slot >= r.from && slot <= r.to)!.master;
    const target = table.find((r) => r.master !== source)!.master;
    const sourceId = await withNode(source, (r) => r.call('CLUSTER', 'MYID') as Promise<string>);
    const targetId = await withNode(target, (r) => r.call('CLUSTER', 'MYID') as Promise<string>);
    const redis = createRedis(loadConfig({ REDIS_CLUSTER_NODES: NODES }), 'slot-reshard');
    try {
      // Keys of the slot for the move to carry, in batches, so that it takes a few hundred milliseconds.
      for (let i = 0; i < 300; i++) await redis.set(`${tag}:old:${i}`, 'x');
      // As the reservation script does: an existing key read and changed, a new key made.
      const script = "redis.call('INCR', KEYS[1]); redis.call('SET', KEYS[2], '1'); return 1";
      let calls = 0;
      let stop = false;
      const outcomes: string[] = [];
      const load = (async () => {
        while (!stop) {
          const n = calls++;
          outcomes.push(await retryOnMoved(redis, () => redis.eval(script, 2, `${tag}:counter`, `${tag}:new:${n}`) as Promise<number>)
            .then(() => 'ok', (err: Error) => err.message));
          await new Promise((r) => setTimeout(r, 5));
        }
      })();
      await new Promise((r) => setTimeout(r, 50));
      await withNode(target, (r) => r.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', sourceId));
      await withNode(source, (r) => r.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', targetId));
      for (;;) {
        const keys = await withNode(source, (r) => r.call('CLUSTER', 'GETKEYSINSLOT', slot, 25) as Promise<string[]>);
        if (keys.length === 0) break;
        await withNode(source, (r) => r.call('MIGRATE', '127.0.0.1', target, '', 0, 5000, 'KEYS', ...keys));
        await new Promise((r) => setTimeout(r, 20));
      }
      for (const port of new Set(table.map((r) => r.master))) await withNode(port, (r) => r.call('CLUSTER', 'SETSLOT', slot, 'NODE', targetId));
      await new Promise((r) => setTimeout(r, 300));
      stop = true;
      await load;
      expect(outcomes.filter((o) => o !== 'ok')).toEqual([]);
      expect(outcomes.length).toBeGreaterThan(20);
      expect(Number(await redis.get(`${tag}:counter`))).toBe(outcomes.length);
    } finally {
      redis.disconnect();
    }
  });

  it('serves and answers the store through the promotion with nothing refused, and bills every request', async () => {
    stack = await startGatewayStack({
      env: {
        REDIS_CLUSTER_NODES: NODES, REDIS_SHARDS: String(SHARDS), RELAY_SPOOL_DIR: spoolDir,
        // Renewed every second: the worker renews its leases several times while the load runs.
        BILLING_SHARD_LEASE_MS: '3000', RELAY_SPOOL_REPLAY_INTERVAL_MS: '500',
      },
    });
    const s = stack;
    await mockChannel(s, [MODEL]);
    const accounts: { id: number; tokenId: number; client: Anthropic }[] = [];
    for (let i = 0; i < ACCOUNTS; i++) {
      const account = await fundedAccount(s, FUNDS);
      const { id: tokenId, key } = await createApiKey(s, account);
      accounts.push({ id: account.id, tokenId, client: new Anthropic({ apiKey: key, baseURL: s.relayUrl, maxRetries: 0 }) });
    }
    expect(new Set(accounts.map((a) => s.keys.shardOf(a.id))).size).toBe(ACCOUNTS);

    // The master serving the most of these accounts' shards, so that batches to it span several; its
    // replica, once in sync (a cluster just formed lists its replicas a little later).
    let table = await slotTable();
    const syncedBy = Date.now() + 20_000;
    while (!(await replicasInSync(table))) {
      if (Date.now() > syncedBy) throw new Error(`replicas not in sync after 20 s: ${JSON.stringify(table)}`);
      await new Promise((r) => setTimeout(r, 200));
      table = await slotTable();
    }
    const masterOf = (id: number) => table.find((r) => keySlot(s.keys.accountBalance(id)) >= r.from && keySlot(s.keys.accountBalance(id)) <= r.to)!;
    const byMaster = new Map<number, number>();
    for (const a of accounts) byMaster.set(masterOf(a.id).master, (byMaster.get(masterOf(a.id).master) ?? 0) + 1);
    const [moved, onIt] = [...byMaster].sort((x, y) => y[1] - x[1])[0]!;
    expect(onIt).toBeGreaterThanOrEqual(2);
    const replica = table.find((r) => r.master === moved)!.replicas[0]!;

    // Waves of one request per account, and of the store's reads of every account, each wave at once.
    const requests: Outcome[] = [];
    const reads: Outcome[] = [];
    let stopAt = Infinity;
    const record = async (into: Outcome[], f: () => Promise<unknown>) => {
      const startedAt = Date.now();
      try {
        await f();
        into.push({ startedAt, ok: true });
      } catch (err) {
        into.push({ startedAt, ok: false, error: (err as Error).message });
      }
    };
    const relayLoad = (async () => {
      for (let n = 0; Date.now() < stopAt; n++) {
        await Promise.all(accounts.map((a) => record(requests, () => a.client.messages.create({ model: MODEL, max_tokens: 16, messages: [{ role: 'user', content: `hello ${n}` }] }))));
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const storeLoad = (async () => {
      while (Date.now() < stopAt) {
        // Per account: a mirror read, a script (a per-minute count slot of the key's: it moves no money)
        // and the console's balance read (a MULTI, which ioredis redirects whole).
        await Promise.all(accounts.map((a) => record(reads, () => Promise.all([
          s.quota.accountBalance(a.id), s.quota.takeCountSlot(a.id, a.tokenId, 1_000_000_000), s.quota.accountSpendable(a.id, []),
        ]))));
        await new Promise((r) => setTimeout(r, 20));
      }
    })();

    await new Promise((r) => setTimeout(r, 2000));
    const before = requests.length;
    expect(before).toBeGreaterThan(0);
    expect(requests.filter((o) => !o.ok), 'before the failover').toEqual([]);

    await withNode(replica, (r) => r.call('CLUSTER', 'FAILOVER'));
    const promotedBy = Date.now() + 15_000;
    while ((await withNode(replica, (r) => r.call('ROLE')) as [string])[0] !== 'master') {
      if (Date.now() > promotedBy) throw new Error('the replica was not promoted');
      await new Promise((r) => setTimeout(r, 50));
    }
    const promotedAt = Date.now();
    await new Promise((r) => setTimeout(r, 1000));
    const ledgerAt = async () => {
      const [r] = await s.sql`SELECT COUNT(*)::int AS n FROM ledger WHERE type = 2 AND user_id IN ${s.sql(accounts.map((a) => a.id))}`;
      return r!.n as number;
    };
    const billedEarly = await ledgerAt();
    stopAt = promotedAt + LOAD_AFTER_MS;
    await Promise.all([relayLoad, storeLoad]);
    const billedLate = await ledgerAt();

    const after = requests.filter((o) => o.startedAt >= promotedAt + RECOVERY_MS);
    expect(after.length).toBeGreaterThan(ACCOUNTS);
    // A reservation or store call answered MOVED is sent again once the slot table follows the MOVED
    // (resendAfterMoved, infra/redis/client.ts): none fails at all. Before, 3 to 12 requests and 20 to
    // 76 store calls a run failed in the first half second; with a reload alone and no use of the
    // MOVED's own node, 4 requests were refused 1 ms after the promotion in one CI run (the reload had
    // read the old table from a node that had not yet heard of the promotion).
    expect(requests.filter((o) => !o.ok).map((o) => `${o.startedAt - promotedAt} ms: ${o.error}`), 'requests refused around the slot move').toEqual([]);
    expect(reads.filter((o) => !o.ok).map((o) => `${o.startedAt - promotedAt} ms: ${o.error}`), 'store calls failed around the slot move').toEqual([]);

    // Billing kept going: rows kept appearing after the failover, every request served is billed,
    // and the one worker still holds every shard.
    expect(billedLate, 'ledger rows written while the load ran on after the failover').toBeGreaterThan(billedEarly);
    await billingSettled(s, 20_000);
    // A settlement the failover failed is retried, or replayed from the spool: billed a little later.
    const served = requests.filter((o) => o.ok).length;
    const billedBy = Date.now() + 20_000;
    while ((await ledgerAt()) < served && Date.now() < billedBy) await new Promise((r) => setTimeout(r, 200));
    expect(await ledgerAt(), 'one ledger row per request served').toBe(served);
    expect(s.billing.worker.heldShards()).toHaveLength(SHARDS);
  }, 120_000);
});
