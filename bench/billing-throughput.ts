// Billing throughput, the figure docs/scaling.md sizes billing workers and ClickHouse from: N usage
// events already in the shard streams, W billing workers (BillingWorker, each with its own Redis
// connection and Postgres pool, sharing the shards by lease) settle them into Postgres; then the log
// outbox is drained into ClickHouse. Reports Postgres rows/s for the W workers together and ClickHouse
// insert rows/s. Runs on a database of its own (created and dropped) and a Redis prefix of its own.
//
//   node dist/bench/billing-throughput.js [--events 20000] [--workers 1] [--shards 16] [--accounts 256]
//       [--nodes 127.0.0.1:7100,...]        (a Redis Cluster; else REDIS_URL)
//       [--drain-rows 5000]                 (rows a ClickHouse insert of the drain: the billing worker's
//                                            BILLING_LOG_BATCH_SIZE, or what a flush interval gathers)
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { createClickHouse, createClickHouseAdmin } from '../infra/clickhouse/client.js';
import { migrateClickHouse } from '../infra/clickhouse/migrate.js';
import { loadConfig } from '../infra/config.js';
import { createLogger } from '../infra/logger.js';
import { createSql } from '../infra/postgres/client.js';
import { createRedis, deleteKeysWithPrefix, redisKeysFor } from '../infra/redis/client.js';
import { createTestDatabase } from '../infra/testing/test-database.js';
import { BillingWorker } from '../billing/billing-worker.js';
import { drainLogOutbox } from '../billing/log-outbox.js';
import { encodeUsageEvent, usageEvent, LOG_TYPE } from '../core/usage/usage-event.js';
import { ProcSampler, pidsListeningOn, type ProcUsage, type Watched } from './lib/proc.js';

const { values: args } = parseArgs({
  options: { events: { type: 'string' }, workers: { type: 'string' }, shards: { type: 'string' }, accounts: { type: 'string' }, nodes: { type: 'string' }, 'drain-rows': { type: 'string' } },
  strict: true,
});
const events = Number(args.events ?? 20_000);
const workers = Number(args.workers ?? 1);
const accounts = Number(args.accounts ?? 256);
const drainRows = Number(args['drain-rows'] ?? 5_000);
const db = await createTestDatabase('billingbench');
const config = loadConfig({
  ...process.env, LOG_LEVEL: 'warn', DATABASE_URL: db.url, CLICKHOUSE_DATABASE: db.name,
  REDIS_PREFIX: `bench-billing-${Date.now().toString(36)}`, REDIS_SHARDS: args.shards ?? '16', REDIS_CLUSTER_NODES: args.nodes,
});
const keys = redisKeysFor(config);
const redis = createRedis(config, 'bench-billing');
const sql = createSql(config);
const ch = createClickHouse(config);
// The workers' log rows wait in the outbox (their ClickHouse is an address nothing answers), so the
// two phases are measured apart: Postgres first, then the outbox drained into the real ClickHouse.
const log = createLogger({ ...config, LOG_LEVEL: 'silent' }, 'bench-billing');
const unreachableClickHouse = createClickHouse({ ...config, CLICKHOUSE_URL: 'http://127.0.0.1:9' });
const running: { worker: BillingWorker; close(): void }[] = [];
// The servers' CPU in each phase, from /proc (ProcSampler): Postgres is every `postgres` process (the
// backends serving these workers, and the WAL writer and checkpointer they wake; one started within
// the phase counts whole), so the harness is run on a quiet machine; ClickHouse is the process
// listening at its address, when it runs on this host as this user (the embedded server does).
const postgres = (): Watched => ({ name: 'postgres', pids: [], comm: 'postgres' });
const cpuOf = (usages: ProcUsage[], name: string): number | undefined => usages.find((u) => u.name === name)?.cpuSec;

try {
  await migrateClickHouse(config);
  const ids: { userId: number; tokenId: number }[] = [];
  for (let i = 0; i < accounts; i++) {
    const name = `bb-${randomUUID().slice(0, 12)}`;
    const [u] = await sql`INSERT INTO users (username, password_hash, quota, aff_code) VALUES (${name}, 'x', ${1e12}, ${name}) RETURNING id`;
    const [t] = await sql`INSERT INTO tokens (user_id, name, key_hash, key_ciphertext, key_mask, remain_quota)
                          VALUES (${u!.id}, 'k', ${Buffer.from(name)}, ${Buffer.from('x')}, 'sk-…', 0) RETURNING id`;
    ids.push({ userId: u!.id as number, tokenId: t!.id as number });
  }
  for (let w = 0; w < workers; w++) {
    const conn = createRedis(config, `bench-billing-${w}`, { blocking: keys.shards === 0 });
    const wsql = createSql(config);
    const worker = new BillingWorker(conn, wsql, unreachableClickHouse, log, {
      stream: keys.usageStream(), deadLetterStream: keys.usageDeadLetterStream(), consumer: `bench-${w}`,
      batchSize: config.BILLING_BATCH_SIZE, blockMs: 20, claimIdleMs: 30_000, minBatchIntervalMs: 0,
      ...(keys.shards > 0 ? { sharded: { keys, leaseMs: 10_000 } } : {}),
    });
    await worker.start();
    running.push({ worker, close: () => { conn.disconnect(); void wsql.end({ timeout: 5 }); } });
  }
  // The workers share the shards first (leases settle within a few refreshes), then the events come.
  for (const deadline = Date.now() + 30_000; keys.shards > 0;) {
    const held = running.map((r) => r.worker.heldShards().length);
    if (held.reduce((a, b) => a + b, 0) === keys.shards && Math.max(...held) - Math.min(...held) <= 1) break;
    if (Date.now() > deadline) throw new Error(`shards not shared: ${held.join(', ')}`);
    await new Promise((res) => setTimeout(res, 50));
  }
  const t0 = Date.now();
  const cpu0 = process.cpuUsage();
  const postgresPhase = new ProcSampler([postgres()]);
  postgresPhase.start();
  const created = Math.floor(Date.now() / 1000);
  for (let i = 0; i < events; i += 500) {
    const pipe = redis.pipeline();
    for (let j = i; j < Math.min(events, i + 500); j++) {
      const a = ids[j % accounts]!;
      pipe.xadd(keys.usageStream(keys.shardOf(a.userId)), '*', 'e', encodeUsageEvent(usageEvent({
        type: LOG_TYPE.consume, request_id: randomUUID(), upstream_request_id: 'msg_bench', user_id: a.userId, username: 'bench',
        token_id: a.tokenId, token_name: 'k', token_limited: false, channel: 1, model_name: 'claude-sonnet-4-5', group: 'default',
        quota: 600, prompt_tokens: 250, completion_tokens: 64, is_stream: true, use_time_ms: 850, created_at: created,
        content: 'model ratio 1.5, completion ratio 5, group ratio 1',
      })));
    }
    await pipe.exec();
  }
  for (;;) {
    const [r] = await sql`SELECT COUNT(*)::int AS n FROM ledger`;
    if ((r!.n as number) >= events) break;
    await new Promise((res) => setTimeout(res, 20));
  }
  const pgSec = (Date.now() - t0) / 1000;
  const cpuPg = process.cpuUsage(cpu0);
  const pgServerPg = cpuOf(postgresPhase.stop(), 'postgres')!;
  await Promise.all(running.map((r) => r.worker.stop()));
  const outboxLeft = async () => Number((await sql`SELECT COUNT(*)::int AS n FROM log_outbox`)[0]!.n);
  const queued = await outboxLeft();
  const t1 = Date.now();
  const cpu1 = process.cpuUsage();
  const drainPhase = new ProcSampler([postgres(), { name: 'clickhouse', pids: pidsListeningOn(Number(new URL(config.CLICKHOUSE_URL).port || 8123)) }]);
  drainPhase.start();
  let sent = 0;
  for (let n; (n = await drainLogOutbox(sql, ch, drainRows)) > 0;) sent += n;
  const chSec = (Date.now() - t1) / 1000;
  const cpuCh = process.cpuUsage(cpu1);
  const drainUsage = drainPhase.stop();
  const pgServerCh = cpuOf(drainUsage, 'postgres')!;
  const chServer = cpuOf(drainUsage, 'clickhouse');
  process.stdout.write(`${JSON.stringify({
    events, workers, shards: keys.shards, cluster: args.nodes !== undefined,
    postgresSeconds: pgSec, postgresRowsPerSec: Math.round(events / pgSec),
    // This process's CPU (the workers', and in the first phase also the events' encoding and XADD).
    postgresPhaseCpuUsPerEvent: Math.round((cpuPg.user + cpuPg.system) / events * 10) / 10,
    // The Postgres server's CPU in that phase: ledger, balances and the outbox's rows written.
    postgresServerCpuUsPerEvent: Math.round(pgServerPg * 1e6 / events * 10) / 10,
    clickhouse: {
      queuedAfterStop: queued, sent, rowsPerInsert: drainRows, seconds: chSec, rowsPerSec: chSec > 0 ? Math.round(sent / chSec) : null,
      // The drain's CPU in this process (the ClickHouse server's is its own).
      cpuUsPerRow: sent > 0 ? Math.round((cpuCh.user + cpuCh.system) / sent * 10) / 10 : null,
      // The Postgres server's CPU in the drain: the outbox's rows read, joined and deleted.
      postgresServerCpuUsPerRow: sent > 0 ? Math.round(pgServerCh * 1e6 / sent * 10) / 10 : null,
      // The ClickHouse server's CPU per row inserted (null when its process is not visible here).
      serverCpuUsPerRow: sent > 0 && chServer !== undefined ? Math.round(chServer * 1e6 / sent * 10) / 10 : null,
    },
  })}\n`);
} finally {
  for (const r of running) r.close();
  await deleteKeysWithPrefix(redis, config.REDIS_PREFIX).catch(() => undefined);
  redis.disconnect();
  await sql.end({ timeout: 5 });
  await ch.close();
  await unreachableClickHouse.close();
  const admin = createClickHouseAdmin(config);
  await admin.command({ query: `DROP DATABASE IF EXISTS ${config.CLICKHOUSE_DATABASE}` }).catch(() => undefined);
  await admin.close();
  await db.drop();
}
