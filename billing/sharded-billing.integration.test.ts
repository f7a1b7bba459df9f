// Billing workers sharing the shard streams of the sharded key layout (REDIS_SHARDS > 0), here on the
// single test Redis (the layout is the same on a cluster; tests/cluster/ runs it there): each shard is
// consumed by one worker at a time, the shards are shared fairly, a stopped worker's shards go to the
// others, entries a dead worker read are claimed, and every event reaches Postgres exactly once.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClickHouse } from '../infra/clickhouse/client.js';
import { createLogger } from '../infra/logger.js';
import { createSql } from '../infra/postgres/client.js';
import { createRedis } from '../infra/redis/client.js';
import { redisKeys } from '../infra/redis/keys.js';
import { testConfig } from '../infra/testing/test-config.js';
import { BILLING_GROUP, BillingWorker } from './billing-worker.js';
import { defineScripts } from '../core/quota/scripts.js';
import { encodeUsageEvent, type UsageEvent } from '../core/usage/usage-event.js';

const SHARDS = 8;
const LEASE_MS = 600;
const config = testConfig({ REDIS_SHARDS: String(SHARDS) });
const sql = createSql(config);
const redis = createRedis(config, 'sharded-billing-test');
const ch = createClickHouse(config);
const keys = redisKeys(config.REDIS_PREFIX, SHARDS);
const log = createLogger(config, 'sharded-billing-test');
/** One account per shard (consecutive ids cover every residue), each with a key. */
const accounts: { userId: number; tokenId: number }[] = [];
const workers: BillingWorker[] = [];

function worker(consumer: string, claimIdleMs = 300): BillingWorker {
  const w = new BillingWorker(redis, sql, ch, log, {
    stream: keys.usageStream(), deadLetterStream: keys.usageDeadLetterStream(), consumer,
    batchSize: 100, blockMs: 20, claimIdleMs, minBatchIntervalMs: 0, sharded: { keys, leaseMs: LEASE_MS },
  });
  workers.push(w);
  return w;
}

function usage(a: { userId: number; tokenId: number }, quota: number): UsageEvent {
  return {
    v: 1, type: 2, request_id: randomUUID(), upstream_request_id: 'req_x', user_id: a.userId, username: 'sharded',
    token_id: a.tokenId, token_name: 'k', token_limited: false, channel: 0, model_name: 'claude-haiku-4-5', group: 'default',
    quota, prompt_tokens: 10, completion_tokens: 20, is_stream: false, use_time_ms: 100,
    created_at: Math.floor(Date.now() / 1000), content: 'test',
  };
}

/** Appends `n` events of `quota` per account, each to its account's shard stream. */
async function appendAll(n: number, quota: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    for (const a of accounts) await redis.xadd(keys.usageStream(keys.shardOf(a.userId)), '*', 'e', encodeUsageEvent(usage(a, quota)));
  }
}

async function streamsEmpty(): Promise<boolean> {
  for (let s = 0; s < SHARDS; s++) if ((await redis.xlen(keys.usageStream(s))) > 0) return false;
  return true;
}

async function ledger(): Promise<{ rows: number; quota: number; distinct: number }> {
  const ids = accounts.map((a) => a.userId);
  const [r] = await sql`SELECT COUNT(*)::int AS rows, COALESCE(SUM(quota), 0)::bigint AS quota, COUNT(DISTINCT request_id)::int AS distinct
                        FROM ledger WHERE user_id IN ${sql(ids)}`;
  return { rows: r!.rows as number, quota: Number(r!.quota), distinct: r!.distinct as number };
}

async function usersQuota(): Promise<number> {
  const [r] = await sql`SELECT SUM(quota)::bigint AS q FROM users WHERE id IN ${sql(accounts.map((a) => a.userId))}`;
  return Number(r!.q);
}

async function waitFor(check: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
}

const FUNDED = 1_000_000;

beforeAll(async () => {
  for (let i = 0; i < SHARDS; i++) {
    const name = `sharded-${randomUUID().slice(0, 8)}`;
    const [u] = await sql`INSERT INTO users (username, password_hash, quota, aff_code) VALUES (${name}, 'x', ${FUNDED}, ${name}) RETURNING id`;
    const [t] = await sql`INSERT INTO tokens (user_id, name, key_hash, key_ciphertext, key_mask, remain_quota)
                          VALUES (${u!.id}, 'k', ${Buffer.from(name)}, ${Buffer.from('x')}, 'sk-…', 0) RETURNING id`;
    accounts.push({ userId: u!.id as number, tokenId: t!.id as number });
  }
  expect(new Set(accounts.map((a) => keys.shardOf(a.userId))).size).toBe(SHARDS);
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  const left = await redis.keys(`${config.REDIS_PREFIX}:*`);
  if (left.length) await redis.del(...left);
  redis.disconnect();
  await sql.end();
  await ch.close();
});

describe('billing workers on shard streams', () => {
  it('two workers share the shards without overlap and bill every event once', async () => {
    const a = worker('wa');
    const b = worker('wb');
    await a.start();
    await b.start();
    // Fair share: after a few lease refreshes each holds half, none twice.
    await waitFor(() => a.heldShards().length === SHARDS / 2 && b.heldShards().length === SHARDS / 2, 10_000);
    expect(new Set([...a.heldShards(), ...b.heldShards()]).size).toBe(SHARDS);
    for (let s = 0; s < SHARDS; s++) {
      const holder = await redis.get(keys.billingShardLease(s));
      expect(holder).toBe(a.heldShards().includes(s) ? 'wa' : 'wb');
    }

    await appendAll(25, 7);
    await waitFor(streamsEmpty);
    await waitFor(async () => (await ledger()).rows === 25 * SHARDS);
    expect(await ledger()).toEqual({ rows: 25 * SHARDS, quota: 25 * SHARDS * 7, distinct: 25 * SHARDS });
    expect(await usersQuota()).toBe(SHARDS * FUNDED - 25 * SHARDS * 7);
  });

  it('a stopped worker gives its shards up: the other takes them all and bills on', async () => {
    const [a, b] = workers as [BillingWorker, BillingWorker];
    await a.stop();
    await waitFor(() => b.heldShards().length === SHARDS, 10_000);
    await appendAll(5, 3);
    await waitFor(streamsEmpty);
    await waitFor(async () => (await ledger()).rows === 30 * SHARDS);
    expect(await ledger()).toEqual({ rows: 30 * SHARDS, quota: 25 * SHARDS * 7 + 5 * SHARDS * 3, distinct: 30 * SHARDS });
  });

  it('entries a dead worker read and never acknowledged are claimed and billed once', async () => {
    const before = await ledger();
    await appendAll(2, 11);
    const b = workers[1]!;
    // A worker that read a shard's entries and died before acknowledging: they are pending under its name.
    const shard = keys.shardOf(accounts[3]!.userId);
    await redis.xadd(keys.usageStream(shard), '*', 'e', encodeUsageEvent(usage(accounts[3]!, 13)));
    await redis.xreadgroup('GROUP', BILLING_GROUP, 'dead-worker', 'COUNT', 100, 'STREAMS', keys.usageStream(shard), '>');
    await waitFor(streamsEmpty);
    expect(((await redis.xpending(keys.usageStream(shard), BILLING_GROUP)) as [number])[0]).toBe(0);
    const after = await ledger();
    expect(after.rows - before.rows).toBe(2 * SHARDS + 1);
    expect(after.quota - before.quota).toBe(2 * SHARDS * 11 + 13);
    expect(after.distinct).toBe(after.rows);
    expect(b.heldShards()).toHaveLength(SHARDS);
  });

  it('a worker gaining a shard bills what its former holder read at once, not after the claim idle time', async () => {
    const b = workers[1]!;
    await b.stop();
    const before = await ledger();
    // The shard's former holder read 3 entries and was cut off (its lease runs out, nobody renews it).
    const shard = keys.shardOf(accounts[5]!.userId);
    await redis.set(keys.billingShardLease(shard), 'cut-off-worker', 'PX', LEASE_MS);
    for (let i = 0; i < 3; i++) await redis.xadd(keys.usageStream(shard), '*', 'e', encodeUsageEvent(usage(accounts[5]!, 17)));
    await redis.xreadgroup('GROUP', BILLING_GROUP, 'cut-off-worker', 'COUNT', 100, 'STREAMS', keys.usageStream(shard), '>');
    // Claim idle time a minute: only the lease hand-over can bring these in within the wait below (before,
    // they waited out BILLING_CLAIM_IDLE_MS, 30 s by default: the cluster failover test's books closed late).
    const c = worker('wc', 60_000);
    await c.start();
    await waitFor(() => c.heldShards().includes(shard), 10_000);
    await waitFor(async () => (await ledger()).rows === before.rows + 3, 10_000);
    const after = await ledger();
    expect(after.quota - before.quota).toBe(3 * 17);
    expect(after.distinct).toBe(after.rows);
    await waitFor(streamsEmpty);
    expect(((await redis.xpending(keys.usageStream(shard), BILLING_GROUP)) as [number])[0]).toBe(0);
  });
});

describe('holdShardLease-1.lua', () => {
  type Hold = (key: string, holder: string, ms: number, mode: string) => Promise<number>;
  const hold = (redis as unknown as Record<string, Hold>)[defineScripts(redis).get('holdShardLease')!.command]!.bind(redis) as Hold;
  const key = keys.billingShardLease(SHARDS - 1) + ':script-test';

  it('gives a free lease, renews it for its holder only, releases it for its holder only, and lets it run out', async () => {
    expect(Number(await hold(key, 'w1', 5000, 'hold'))).toBe(1);
    expect(Number(await hold(key, 'w2', 5000, 'hold'))).toBe(0);
    expect(await redis.get(key)).toBe('w1');
    expect(Number(await hold(key, 'w1', 300, 'hold'))).toBe(1); // renewed with the new length
    expect(Number(await redis.pttl(key))).toBeLessThanOrEqual(300);
    expect(Number(await hold(key, 'w2', 5000, 'release'))).toBe(0);
    expect(await redis.get(key)).toBe('w1');
    expect(Number(await hold(key, 'w1', 5000, 'release'))).toBe(1);
    expect(await redis.get(key)).toBeNull();
    expect(Number(await hold(key, 'w2', 100, 'hold'))).toBe(1);
    await new Promise((r) => setTimeout(r, 150));
    expect(Number(await hold(key, 'w1', 5000, 'hold'))).toBe(1); // w2's lease ran out
    expect(await redis.get(key)).toBe('w1');
  });
});
