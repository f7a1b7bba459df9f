// A master of a Redis Cluster run without replicas and without persistence (REDIS_SETTLE_WAIT_REPLICAS=0,
// as docs/scaling.md allows) is killed while requests of its accounts are at the provider, and comes
// back with its slots and none of its data: their reservations, and the credit slices some were drawn
// from, are gone. Before the session of 2026-12-02 a relay on a cluster never sent such a settlement
// again as lost (an ioredis Cluster sends a node's unanswered commands again without a reconnect the
// relay saw), so every one went unbilled (review "cluster": 15 of 15 requests answered in full, none
// in the ledger or the logs). Now every node's dropped connection is counted (core/quota/
// connection-drops.ts), and a settlement sent after the master is back bills its cost alone, once.
// Its own cluster on ports 7140-7142; runs when TEST_REDIS_CLUSTER=start (make test sets it).
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConnectionDrops } from '../../core/quota/connection-drops.js';
import { relayMetrics } from '../../relay/metrics/relay-metrics.js';
import { createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../harness/gateway-stack.js';
import {
  balanceOf, billOf, LONG_PROMPT, NORMAL_INPUT, NORMAL_OUTPUT, startHoldingProvider, unnamedCost, type HoldingProvider,
} from '../harness/scripted-provider.js';
import { streamedText } from '../harness/sdk-streams.js';
import { until } from '../harness/until.js';
import { CLUSTER_TESTS_ENABLED, MastersOnlyCluster, masterPortOf, withNode } from './test-cluster.js';

const ENABLED = CLUSTER_TESTS_ENABLED;
if (!ENABLED) console.warn('tests/cluster master-lost-no-replicas skipped: set TEST_REDIS_CLUSTER=start to run it on a Redis Cluster started on ports 7140-7142 (make test does)');

const MODEL = 'lost-master-model';
const COST = unnamedCost(NORMAL_INPUT, NORMAL_OUTPUT);
/** Requests of the busy account at once: from the fifth on they are drawn from a credit slice. */
const BUSY = 8;
const FUNDS = 10_000_000;

const cluster = new MastersOnlyCluster(7140, 'masters-only');
/** Holds every answer until the test lets them go. */
let provider: HoldingProvider;
let stack: GatewayStack;

beforeAll(async () => {
  if (!ENABLED) return;
  await cluster.start();
  provider = await startHoldingProvider(MODEL);
  stack = await startGatewayStack({ env: { REDIS_CLUSTER_NODES: cluster.nodes, REDIS_SHARDS: '16', REDIS_SETTLE_WAIT_REPLICAS: '0' } });
  await mockChannel(stack, [MODEL], 'default', { base_url: provider.url });
}, 120_000);
afterAll(async () => {
  await stack?.close();
  await provider?.close();
  cluster.stop();
}, 60_000);


/** A fresh account whose balance lives on `master` (any master when undefined), and that master. */
async function accountOn(master?: number): Promise<{ account: TestAccount; master: number }> {
  for (let tries = 0; tries < 30; tries++) {
    const account = await fundedAccount(stack, FUNDS);
    const on = await masterPortOf(stack.redis, stack.keys.accountBalance(account.id));
    if (master === undefined || on === master) return { account, master: on };
  }
  throw new Error(`no account landed on master ${master}`);
}

async function client(account: TestAccount, input: Record<string, unknown>): Promise<Anthropic> {
  const key = await createApiKey(stack, account, input);
  return new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 });
}

describe.skipIf(!ENABLED)('a master of a cluster without replicas lost under requests in flight', () => {
  it('bills each request whose reservation or credit slice it lost, once, in every book; another master\'s requests as usual', async () => {
    const { account: limited, master: victim } = await accountOn();
    const { account: busy } = await accountOn(victim);
    const other = (await accountOn(victim === cluster.ports[0] ? cluster.ports[1] : cluster.ports[0])).account;
    const before = new Map(await Promise.all([limited, busy, other].map(async (a) => [a.id, await balanceOf(stack, a.id)] as const)));
    const limitedClient = await client(limited, { unlimited_quota: false, remain_quota: 5_000_000 });
    const busyClient = await client(busy, {});
    const otherClient = await client(other, {});
    const billedBefore = relayMetrics.lostReservationsBilled.value;

    const params = { model: MODEL, max_tokens: 100, messages: [{ role: 'user' as const, content: LONG_PROMPT }] };
    const stream = limitedClient.messages.create({ ...params, stream: true }).withResponse();
    const answers = Array.from({ length: BUSY }, () => busyClient.messages.create(params).withResponse());
    const otherAnswers = Array.from({ length: 2 }, () => otherClient.messages.create(params).withResponse());
    // Each is reserved (or drawn from a slice) before it is sent: all of them are held at the provider.
    await until('every request at the provider', () => provider.held === BUSY + 3);

    cluster.killNode(victim);
    cluster.startNode(victim);
    await cluster.waitOk();
    // The relay's cluster client sees the master again (its slot table refreshes every second).
    await until('the master answering the relay', async () => (await stack.redis.exists(stack.keys.accountBalance(busy.id)).then(() => true, () => false)), 20_000);
    await new Promise((r) => setTimeout(r, 1_500));
    provider.release();

    const streamed = await stream;
    expect(await streamedText(streamed.data)).toBe('tok '.repeat(NORMAL_OUTPUT));
    const done = await Promise.all(answers);
    const otherDone = await Promise.all(otherAnswers);
    for (const a of [...done, ...otherDone]) expect(a.data.usage).toMatchObject({ input_tokens: NORMAL_INPUT, output_tokens: NORMAL_OUTPUT });

    // Every answer delivered is billed once, at its price, in every book.
    const limitedRow = await billOf(stack, limited.id, streamed.response.headers.get('x-gateway-request-id')!, before.get(limited.id)!);
    expect(limitedRow.quota).toBe(COST);
    const busyIds = done.map((a) => a.response.headers.get('x-gateway-request-id')!);
    const otherIds = otherDone.map((a) => a.response.headers.get('x-gateway-request-id')!);
    for (const id of [...busyIds, ...otherIds]) expect((await ledgerRow(stack, id, 30_000)).quota).toBe(COST);
    const ids = [...busyIds, ...otherIds];
    const rs = await stack.ch.query({ query: 'SELECT request_id, quota FROM logs FINAL WHERE request_id IN {ids:Array(String)}', query_params: { ids }, format: 'JSONEachRow' });
    const logs = await rs.json<{ request_id: string; quota: string | number }>();
    expect(logs.map((l) => [l.request_id, Number(l.quota)]).sort()).toEqual(ids.map((id) => [id, COST]).sort());
    expect(await balanceOf(stack, busy.id)).toBe(before.get(busy.id)! - BUSY * COST);
    expect(await balanceOf(stack, other.id)).toBe(before.get(other.id)! - 2 * COST);
    const [spent] = await stack.sql`SELECT coalesce(sum(quota), 0)::bigint AS q, count(*)::int AS n FROM ledger WHERE user_id IN (${limited.id}, ${busy.id}, ${other.id}) AND type = 2`;
    expect({ q: Number(spent!.q), n: spent!.n }).toEqual({ q: (BUSY + 3) * COST, n: BUSY + 3 });
    // The mirrors the empty master loaded again hold the same debits as Postgres.
    await until('the mirrors meeting Postgres', async () =>
      Number(await stack.redis.get(stack.keys.accountBalance(busy.id))) === before.get(busy.id)! - BUSY * COST
      && Number(await stack.redis.get(stack.keys.accountBalance(limited.id))) === before.get(limited.id)! - COST, 20_000);
    expect(Number(await stack.redis.get(stack.keys.accountBalance(other.id)))).toBe(before.get(other.id)! - 2 * COST);
    // The limited key's quota too.
    const [key] = await stack.sql`SELECT remain_quota FROM tokens WHERE user_id = ${limited.id}`;
    expect(Number(key!.remain_quota)).toBe(5_000_000 - COST);
    // The victim's requests alone were billed as lost.
    expect(relayMetrics.lostReservationsBilled.value - billedBefore).toBe(BUSY + 1);
  }, 180_000);

  it('counts a node connection that drops, which the cluster client itself does not report (ConnectionDrops)', async () => {
    const drops = new ConnectionDrops(stack.redis);
    try {
      const { account, master } = await accountOn();
      // A key of the account's slot (its hash tag), so on that master.
      const key = `${stack.keys.accountBalance(account.id)}:drops-probe`;
      await stack.redis.set(key, 'before');
      const steady = drops.count;
      expect(await stack.redis.get(key)).toBe('before');
      expect(drops.count).toBe(steady);
      // Every client connection of that master cut: the cluster client stays 'ready' and sends the next
      // command over a node connection made anew; the drop is counted all the same.
      await withNode(master, (r) => r.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes'));
      expect(stack.redis.status).toBe('ready');
      await until('the drop counted', () => drops.count > steady);
      expect(await stack.redis.get(key)).toBe('before');
      await stack.redis.del(key);
    } finally {
      drops.stop();
    }
  }, 60_000);
});
