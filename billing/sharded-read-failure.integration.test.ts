// A read of one shard's stream failing (its node failing over, a batch of commands MOVED) while the
// worker reads its other shards in the same round. Before, the round failed whole at the first
// failure while the other shards' reads went on in the background: a read that delivered entries
// after the round had failed left them pending under the worker's own name and out of its list of
// shards to re-read, so they waited out BILLING_CLAIM_IDLE_MS (30 s by default: the cluster slot-move
// test's books closed late under load); and while one shard kept failing, no shard was billed at all.
// A shard whose group is gone gets it back without holding up the others.
// Here on the single test Redis with the sharded key layout and the mirrors as billing/service.ts
// configures them; the failures and the slow reply are injected around the real read script.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createClickHouse } from '../infra/clickhouse/client.js';
import { createLogger } from '../infra/logger.js';
import { createSql } from '../infra/postgres/client.js';
import { createRedis } from '../infra/redis/client.js';
import { redisKeys } from '../infra/redis/keys.js';
import { testConfig } from '../infra/testing/test-config.js';
import { postgresBalanceSource } from '../core/quota/postgres-balance-source.js';
import { QuotaStore } from '../core/quota/quota-store.js';
import { encodeUsageEvent, type UsageEvent } from '../core/usage/usage-event.js';
import { BILLING_GROUP, BillingWorker } from './billing-worker.js';
import { billingMetrics } from './metrics/billing-metrics.js';

const SHARDS = 4;
/** Longer than every wait below: an entry that only a claim could bring back fails the test. */
const CLAIM_IDLE_MS = 60_000;
const config = testConfig({ REDIS_SHARDS: String(SHARDS) });
const sql = createSql(config);
const redis = createRedis(config, 'sharded-read-failure-test');
const ch = createClickHouse(config);
const keys = redisKeys(config.REDIS_PREFIX, SHARDS);
const log = createLogger(config, 'sharded-read-failure-test');
const accounts: { userId: number; tokenId: number }[] = [];
let worker: BillingWorker | undefined;

type Call = (...args: (string | number)[]) => Promise<unknown>;
/** A read script call: 'read' with '0' (this consumer's pending entries) or '>' (new ones), or 'claim'. */
interface ReadCall { mode: string; arg: string }
type Hook = (call: ReadCall, read: () => Promise<unknown>) => Promise<unknown>;

/** What the next read calls meet, by shard; a hook is called instead of the read and may run it. */
const faults = new Map<number, Hook>();

function shardOfStream(stream: string): number {
  for (let s = 0; s < SHARDS; s++) if (keys.usageStream(s) === stream) return s;
  return -1;
}

/** The worker's Redis connection, with every call of the read script (readUsageEntries) going through `faults`. */
function faultyRedis(real: Redis): Redis {
  return new Proxy(real, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof prop !== 'string' || !prop.startsWith('readUsageEntries:') || typeof value !== 'function') return value;
      return (...args: (string | number)[]) => {
        // (stream, incarnation key, new incarnation, group, consumer, count, mode, id or min idle)
        const read = () => (value as Call).apply(target, args);
        const hook = faults.get(shardOfStream(String(args[0])));
        return hook ? hook({ mode: String(args[6]), arg: String(args[7]) }, read) : read();
      };
    },
  });
}

function signal(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => { resolve = r; });
  return { promise, resolve };
}

const injectedMoved = () => new Error('MOVED 0 127.0.0.1:1 (injected: the shard\'s node failed over)');

function usage(a: { userId: number; tokenId: number }, quota: number): UsageEvent {
  return {
    v: 1, type: 2, request_id: randomUUID(), upstream_request_id: 'req_x', user_id: a.userId, username: 'read-failure',
    token_id: a.tokenId, token_name: 'k', token_limited: false, channel: 0, model_name: 'claude-haiku-4-5', group: 'default',
    quota, prompt_tokens: 10, completion_tokens: 20, is_stream: false, use_time_ms: 100,
    created_at: Math.floor(Date.now() / 1000), content: 'test',
  };
}

const accountOf = (shard: number) => accounts.find((a) => keys.shardOf(a.userId) === shard)!;

async function append(shard: number, n: number, quota: number): Promise<void> {
  for (let i = 0; i < n; i++) await redis.xadd(keys.usageStream(shard), '*', 'e', encodeUsageEvent(usage(accountOf(shard), quota)));
}

async function ledgerOf(shard: number): Promise<{ rows: number; quota: number }> {
  const [r] = await sql`SELECT COUNT(*)::int AS rows, COALESCE(SUM(quota), 0)::bigint AS quota FROM ledger WHERE user_id = ${accountOf(shard).userId}`;
  return { rows: r!.rows as number, quota: Number(r!.quota) };
}

async function pendingOf(shard: number): Promise<number> {
  return ((await redis.xpending(keys.usageStream(shard), BILLING_GROUP)) as [number])[0];
}

async function waitFor(check: () => Promise<boolean> | boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  for (let i = 0; i < SHARDS; i++) {
    const name = `readfail-${randomUUID().slice(0, 8)}`;
    const [u] = await sql`INSERT INTO users (username, password_hash, quota, aff_code) VALUES (${name}, 'x', 1000000, ${name}) RETURNING id`;
    const [t] = await sql`INSERT INTO tokens (user_id, name, key_hash, key_ciphertext, key_mask, remain_quota)
                          VALUES (${u!.id}, 'k', ${Buffer.from(name)}, ${Buffer.from('x')}, 'sk-…', 0) RETURNING id`;
    accounts.push({ userId: u!.id as number, tokenId: t!.id as number });
  }
  expect(new Set(accounts.map((a) => keys.shardOf(a.userId))).size).toBe(SHARDS);
  const faulty = faultyRedis(redis);
  worker = new BillingWorker(faulty, sql, ch, log, {
    stream: keys.usageStream(), deadLetterStream: keys.usageDeadLetterStream(), consumer: `readfail-${randomUUID().slice(0, 6)}`,
    batchSize: 100, blockMs: 20, claimIdleMs: CLAIM_IDLE_MS, minBatchIntervalMs: 0, sharded: { keys, leaseMs: 5000 },
    mirrors: { keys, quota: new QuotaStore(redis, keys, postgresBalanceSource(sql)) },
  });
  await worker.start();
  await waitFor(() => worker!.heldShards().length === SHARDS, 10_000, 'the worker holds every shard');
});

afterEach(() => {
  faults.clear();
});

afterAll(async () => {
  await worker?.stop();
  const left = await redis.keys(`${config.REDIS_PREFIX}:*`);
  if (left.length) await redis.del(...left);
  redis.disconnect();
  await sql.end();
  await ch.close();
});

describe('a shard read failing in a round of the sharded billing worker', () => {
  it('entries another shard\'s read delivered after the round failed are billed at once, not after the claim idle time', async () => {
    const [failing, slow] = [0, 1];
    // Shard 0's read fails in two rounds in a row (the first puts every shard on its list to re-read).
    // In the second, shard 1's read runs but its answer comes late (gate `late`); meanwhile the worker
    // may begin its next round (held open by shard 0's first read in it, gate `next`). 3 entries are
    // appended to shard 1 once that next round's read of new entries there is done, then the late
    // answer arrives: whatever shard 1's reads of that failed round go on to read must be billed.
    let failures = 0;
    const late = signal();
    const next = signal();
    const slowEntered = signal();
    const nextRoundRead = signal();
    const stragglerRead = signal();
    let newReadsOfSlow = 0;
    faults.set(failing, async () => {
      failures++;
      if (failures === 2) {
        // Shard 0's next read opens the next round: held there until the test opens `next`.
        faults.set(failing, async (_call, read) => {
          faults.delete(failing);
          await Promise.race([next.promise, sleep(5000)]);
          return read();
        });
      }
      throw injectedMoved();
    });
    faults.set(slow, async (_call, read) => {
      if (failures < 2) return read();
      // The round of shard 0's second failure (held shards are read in order: shard 0 was called first).
      faults.set(slow, async (call, readAgain) => {
        const r = await readAgain();
        if (call.mode === 'read' && call.arg === '>') (++newReadsOfSlow === 1 ? nextRoundRead : stragglerRead).resolve();
        return r;
      });
      const r = await read();
      slowEntered.resolve();
      await Promise.race([late.promise, sleep(5000)]);
      return r;
    });
    await Promise.race([slowEntered.promise, sleep(5000).then(() => { throw new Error('shard 0 did not fail twice'); })]);
    // A worker that waits for every read of the round gets here with no next round begun.
    const nextRoundBegun = await Promise.race([nextRoundRead.promise.then(() => true), sleep(1000).then(() => false)]);
    await append(slow, 3, 19);
    late.resolve();
    if (nextRoundBegun) await Promise.race([stragglerRead.promise, sleep(3000)]);
    next.resolve();
    await waitFor(async () => (await ledgerOf(slow)).rows === 3, 10_000, 'the 3 entries of shard 1 billed');
    expect(await ledgerOf(slow)).toEqual({ rows: 3, quota: 57 });
    await waitFor(async () => (await pendingOf(slow)) === 0 && (await redis.xlen(keys.usageStream(slow))) === 0, 5000, 'shard 1 acknowledged');
  });

  it('a shard whose reads keep failing holds up no other shard, and is billed once they succeed again', async () => {
    const broken = 2;
    const before = await Promise.all(Array.from({ length: SHARDS }, (_, s) => ledgerOf(s)));
    const failuresBefore = billingMetrics.failures.value;
    let failedReads = 0;
    faults.set(broken, async () => {
      failedReads++;
      throw new Error('CLUSTERDOWN The cluster is down (injected: the shard\'s node is down)');
    });
    for (let s = 0; s < SHARDS; s++) await append(s, 4, 5);
    // Every other shard is billed while the broken one's reads still fail.
    for (let s = 0; s < SHARDS; s++) {
      if (s === broken) continue;
      await waitFor(async () => (await ledgerOf(s)).rows === before[s]!.rows + 4, 10_000, `shard ${s} billed while shard ${broken} fails`);
    }
    expect(faults.has(broken)).toBe(true);
    expect(failedReads).toBeGreaterThan(0);
    expect((await ledgerOf(broken)).rows).toBe(before[broken]!.rows);
    expect(billingMetrics.failures.value).toBeGreaterThan(failuresBefore);
    expect(billingMetrics.health().status).toBe('failing');
    // The failing shard is tried again with backoff, not at every round.
    const readsSoFar = failedReads;
    await sleep(1000);
    expect(failedReads - readsSoFar).toBeLessThan(15);

    faults.delete(broken);
    await waitFor(async () => (await ledgerOf(broken)).rows === before[broken]!.rows + 4, 15_000, `shard ${broken} billed once its reads succeed`);
    for (let s = 0; s < SHARDS; s++) {
      expect(await ledgerOf(s)).toEqual({ rows: before[s]!.rows + 4, quota: before[s]!.quota + 20 });
      await waitFor(async () => (await redis.xlen(keys.usageStream(s))) === 0 && (await pendingOf(s)) === 0, 5000, `shard ${s} acknowledged`);
    }
    await waitFor(() => billingMetrics.health().status === 'ok', 5000, 'health ok again');
  });
  it('a shard whose consumer group is gone (its node restarted without the stream) gets it back and is billed', async () => {
    const lost = 3;
    const before = await Promise.all(Array.from({ length: SHARDS }, (_, s) => ledgerOf(s)));
    const recreatedBefore = billingMetrics.groupsRecreated.value;
    // The stream and its group gone; a relay's next settlement makes the stream again, without a group.
    await redis.del(keys.usageStream(lost));
    for (let s = 0; s < SHARDS; s++) await append(s, 2, 3);
    for (let s = 0; s < SHARDS; s++) {
      await waitFor(async () => (await ledgerOf(s)).rows === before[s]!.rows + 2, 10_000, `shard ${s} billed`);
      expect(await ledgerOf(s)).toEqual({ rows: before[s]!.rows + 2, quota: before[s]!.quota + 6 });
    }
    expect(billingMetrics.groupsRecreated.value).toBeGreaterThan(recreatedBefore);
    await waitFor(async () => (await redis.xlen(keys.usageStream(lost))) === 0 && (await pendingOf(lost)) === 0, 5000, 'the shard acknowledged');
    await waitFor(() => billingMetrics.health().status === 'ok', 5000, 'health ok again');
  });
});
