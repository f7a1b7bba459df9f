// A Redis restart without persistence comes back with neither the usage stream nor the billing
// consumer group; the relay's next settlement recreates the stream (XADD) but not the group, so every
// XREADGROUP fails with NOGROUP. The worker must recreate the group and bill what arrives, and its
// /metrics and /health must say that it did.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClickHouse } from '../infra/clickhouse/client.js';
import { createLogger } from '../infra/logger.js';
import { createSql } from '../infra/postgres/client.js';
import { createRedis } from '../infra/redis/client.js';
import { redisKeys } from '../infra/redis/keys.js';
import { testConfig } from '../infra/testing/test-config.js';
import { parsePromText } from '../core/metrics/prom.js';
import { appendUsageEvent, encodeUsageEvent, type UsageEvent } from '../core/usage/usage-event.js';
import { BILLING_GROUP, BillingWorker } from './billing-worker.js';
import { startBillingMetricsServer, type MetricsServer } from './metrics/metrics-server.js';

const config = testConfig();
const sql = createSql(config);
const blocking = createRedis(config, 'billing-recovery-test', { blocking: true });
const redis = createRedis(config, 'billing-recovery-admin');
const ch = createClickHouse(config);
const keys = redisKeys(config.REDIS_PREFIX);
const log = createLogger(config, 'billing-recovery-test');
const stream = keys.usageStream();
let userId = 0;
let tokenId = 0;
let metrics: MetricsServer;

function usage(quota: number): UsageEvent {
  return {
    v: 1, type: 2, request_id: randomUUID(), upstream_request_id: 'req_x', user_id: userId, username: 'billing-recovery',
    token_id: tokenId, token_name: 'k', token_limited: true, channel: 0, model_name: 'claude-haiku-4-5', group: 'default',
    quota, prompt_tokens: 10, completion_tokens: 20, is_stream: false, use_time_ms: 100,
    created_at: Math.floor(Date.now() / 1000), content: 'test',
  };
}

async function billed(): Promise<{ quota: number; ledgerRows: number; ledgerQuota: number }> {
  const [u] = await sql`SELECT quota FROM users WHERE id = ${userId}`;
  const [l] = await sql`SELECT COUNT(*)::int AS n, COALESCE(SUM(quota), 0)::bigint AS q FROM ledger WHERE user_id = ${userId}`;
  return { quota: Number(u!.quota), ledgerRows: l!.n as number, ledgerQuota: Number(l!.q) };
}

async function waitFor(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
}

async function scrape(): Promise<Map<string, number>> {
  const res = await fetch(`http://127.0.0.1:${metrics.port}/metrics`);
  return parsePromText(await res.text());
}

beforeAll(async () => {
  const name = `recovery-${randomUUID().slice(0, 8)}`;
  const [u] = await sql`INSERT INTO users (username, password_hash, quota, aff_code) VALUES (${name}, 'x', 10000, ${name}) RETURNING id`;
  userId = u!.id as number;
  const [t] = await sql`INSERT INTO tokens (user_id, name, key_hash, key_ciphertext, key_mask, remain_quota)
                        VALUES (${userId}, 'k', ${Buffer.from(name)}, ${Buffer.from('x')}, 'sk-…', 5000) RETURNING id`;
  tokenId = t!.id as number;
  metrics = await startBillingMetricsServer({ host: '127.0.0.1', port: 0, redis, stream, group: BILLING_GROUP });
});

afterAll(async () => {
  await metrics.close();
  const left = await redis.keys(`${config.REDIS_PREFIX}:*`);
  if (left.length) await redis.del(...left);
  blocking.disconnect();
  redis.disconnect();
  await sql.end();
  await ch.close();
});

describe('billing after Redis lost the stream and its consumer group', () => {
  it('recreates the group, bills the next event, and reports it on /metrics and /health', async () => {
    const w = new BillingWorker(blocking, sql, ch, log, {
      stream, deadLetterStream: stream + ':dead', consumer: 'recovery', batchSize: 100, blockMs: 50, claimIdleMs: 60_000, minBatchIntervalMs: 0,
    });
    await w.start();
    try {
      await appendUsageEvent(redis, stream, encodeUsageEvent(usage(70)));
      expect(await waitFor(async () => (await billed()).ledgerRows === 1, 5000)).toBe(true);
      const recreatedBefore = (await scrape()).get('gateway_billing_group_recreated_total') ?? 0;

      // What a restart without persistence leaves: no stream, no group. The worker may be blocked in
      // XREADGROUP right now (Redis answers UNBLOCKED) or between reads (NOGROUP on the next one).
      await redis.del(stream);
      await new Promise((r) => setTimeout(r, 150));
      // The relay's next settlement: XADD recreates the stream, without the group.
      await appendUsageEvent(redis, stream, encodeUsageEvent(usage(30)));

      const ok = await waitFor(async () => (await billed()).ledgerRows === 2, 5000);
      expect(ok, 'the event appended after the stream was lost is billed within 5 s').toBe(true);
      expect(await billed()).toEqual({ quota: 10000 - 100, ledgerRows: 2, ledgerQuota: 100 });
      expect(await waitFor(async () => (await redis.xlen(stream)) === 0, 2000)).toBe(true);

      const after = await scrape();
      expect((after.get('gateway_billing_group_recreated_total') ?? 0) - recreatedBefore).toBeGreaterThanOrEqual(1);
      expect(after.get('gateway_billing_consuming')).toBe(1);
      expect(after.get('gateway_billing_last_error_timestamp_seconds')).toBeGreaterThan(0);
      const health = await fetch(`http://127.0.0.1:${metrics.port}/health`);
      expect(health.status).toBe(200);
      const body = await health.json() as { status: string; groupRecreated: number; lastError: string | null };
      expect(body.status).toBe('ok');
      expect(body.groupRecreated).toBeGreaterThanOrEqual(1);
      expect(body.lastError).toMatch(/NOGROUP|UNBLOCKED/);
    } finally {
      await w.stop();
    }
  });
});
