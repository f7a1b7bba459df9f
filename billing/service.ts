import type { Config } from '../infra/config.js';
import { createClickHouse } from '../infra/clickhouse/client.js';
import { createLogger, type Logger } from '../infra/logger.js';
import { createSql } from '../infra/postgres/client.js';
import { createRedis, redisKeysFor } from '../infra/redis/client.js';
import { checkRedisPersistence } from '../infra/redis/persistence.js';
import { databaseInstanceId, foreignRedisError, RedisBindingWatch, redisBoundTo } from '../core/quota/database-binding.js';
import { postgresBalanceSource } from '../core/quota/postgres-balance-source.js';
import { QuotaStore } from '../core/quota/quota-store.js';
import { RedisClock } from '../core/quota/redis-clock.js';
import { createWebhookSecretSealer } from '../core/notices/notice-setting.js';
import { createOptionSealer } from '../core/options/option-secrets.js';
import { BILLING_GROUP, BillingWorker } from './billing-worker.js';
import { startBillingMetricsServer, type MetricsServer } from './metrics/metrics-server.js';
import { billingMetrics } from './metrics/billing-metrics.js';
import { startConsoleFollowUp } from './console-follow-up.js';
import { startKeyQuotaEditPruning } from './key-quota-edit-pruning.js';
import { startReservationReaper } from './reservation-reaper.js';
import { startLowBalanceNotices } from './low-balance-notices.js';
import { startDeadLetterGauge } from './replay-dead-letters.js';
import { startConsoleRowPruning } from './console-row-pruning.js';

export interface RunningBilling {
  worker: BillingWorker;
  close(): Promise<void>;
}

export async function startBilling(config: Config, log: Logger = createLogger(config, 'billing')): Promise<RunningBilling> {
  // Notices are sent with secrets stored sealed (SMTPToken, the accounts' webhook secrets): a worker
  // without KEY_SECRET refuses to start rather than fail every notice later.
  const optionSecrets = createOptionSealer(config.KEY_SECRET);
  const webhookSecrets = createWebhookSecretSealer(config.KEY_SECRET);
  const keys = redisKeysFor(config);
  const sharded = keys.shards > 0;
  const sql = createSql(config);
  // Read before anything else is opened, as the relay does: a database its migrations have not
  // reached (026) fails the start with nothing to release but this connection.
  const databaseId = await databaseInstanceId(sql).catch(async (err: unknown) => {
    await sql.end({ timeout: 1 });
    throw err;
  });
  // Sharded, the worker polls many streams without blocking (a cluster client shares one connection per node).
  const redis = createRedis(config, 'billing', { blocking: !sharded });
  const ch = createClickHouse(config);
  const commands = createRedis(config, 'billing-reaper');
  // Whose money each connection's Redis holds, known afresh after each reconnect
  // (core/quota/database-binding.ts): another database's usage is never settled here, nor its mirrors
  // written. Said once each time a connection finds another database's; billing waits meanwhile
  // (GET /health says failing) and goes on by itself once the Redis is this database's again.
  let foreignSaid = false;
  const onForeign = (): void => {
    if (foreignSaid) return;
    foreignSaid = true;
    log.fatal(`${foreignRedisError(keys, config.REDIS_PREFIX).message.replace(/\n\s*/g, ' ')}; nothing is billed until it is fixed`);
  };
  const readsBinding = new RedisBindingWatch(redis, keys, databaseId, onForeign);
  const commandsBinding = new RedisBindingWatch(commands, keys, databaseId, onForeign);
  const ownRedis = async (): Promise<boolean> => {
    const owned = await readsBinding.ensureOwned() && await commandsBinding.ensureOwned();
    if (owned) foreignSaid = false;
    return owned;
  };
  // Redis's clock, the one the relays date reservation and slice deadlines with: the reaper compares
  // them with it, never with this host's clock (core/quota/redis-clock.ts).
  const clock = new RedisClock(commands, keys, { log });
  const quota = new QuotaStore(commands, keys, postgresBalanceSource(sql), { clock, reapedSliceHoldMs: config.RESERVATION_TTL_SEC * 1000 });
  const worker = new BillingWorker(redis, sql, ch, log, {
    stream: keys.usageStream(),
    deadLetterStream: keys.usageDeadLetterStream(),
    consumer: config.BILLING_CONSUMER,
    batchSize: config.BILLING_BATCH_SIZE,
    blockMs: config.BILLING_BLOCK_MS,
    minBatchIntervalMs: config.BILLING_MIN_BATCH_INTERVAL_MS,
    claimIdleMs: config.BILLING_CLAIM_IDLE_MS,
    logFlushIntervalMs: config.BILLING_LOG_FLUSH_INTERVAL_MS,
    logBatchSize: config.BILLING_LOG_BATCH_SIZE,
    ...(sharded ? { sharded: { keys, leaseMs: config.BILLING_SHARD_LEASE_MS, clock } } : {}),
    // Debits a Redis restart took out of the mirrors before their commit are put back after it.
    mirrors: { keys, quota },
    ownRedis,
  });
  // GET /metrics and /health, before the worker reads anything: a port already taken stops the start,
  // as the relay's does. A worker left running without them is invisible to its probe and its alerts.
  const shardList = Array.from({ length: keys.streamShards }, (_, i) => i);
  let metrics: MetricsServer;
  try {
    metrics = await startBillingMetricsServer({ host: config.BILLING_METRICS_HOST, port: config.BILLING_METRICS_PORT, redis: commands, stream: shardList.map((i) => keys.usageStream(i)), group: BILLING_GROUP });
  } catch (err) {
    redis.disconnect();
    commands.disconnect();
    await Promise.allSettled([sql.end({ timeout: 5 }), ch.close()]);
    throw new Error(`billing metrics could not listen on ${config.BILLING_METRICS_HOST}:${config.BILLING_METRICS_PORT} (BILLING_METRICS_HOST, BILLING_METRICS_PORT): ${(err as Error).message}`);
  }
  // Redis unreachable, the start waits for it without a word (its blocking connection retries for
  // ever): said once, and /health turns 'stalled' (billing-metrics.ts starting()).
  billingMetrics.starting();
  const waiting = setTimeout(() => log.warn('billing worker still starting after 5 s: waiting for Redis (REDIS_URL or REDIS_CLUSTER_NODES)'), 5_000);
  try {
    // Sampled before the worker takes shard leases or the reaper runs.
    await clock.start();
    // Another database's usage and mirrors are not this one's to settle (core/quota/database-binding.ts).
    if (!await redisBoundTo(commands, keys, databaseId)) throw foreignRedisError(keys, config.REDIS_PREFIX);
    await worker.start();
  } catch (err) {
    clock.stop();
    readsBinding.stop();
    commandsBinding.stop();
    await metrics.close();
    throw err;
  } finally {
    clearTimeout(waiting);
  }
  void checkRedisPersistence(commands, log, 'billing');
  // The jobs that write mirrors and reservations skip their turns while the Redis is not known to be ours.
  const ownsRedis = (): boolean => {
    if (commandsBinding.owned()) return true;
    // Asked here too: a quiet worker reads no entries, which is where the worker loop asks.
    void commandsBinding.check();
    return false;
  };
  const reaper = startReservationReaper(quota, log, config.RESERVATION_REAP_INTERVAL_MS, ownsRedis);
  // A console's own after-commit step normally finishes within milliseconds; a row pending for 30 s
  // belongs to a console that failed or died.
  // Dead letters moved money in Redis only: the gauge is how an operator learns to replay them.
  const deadLetters = startDeadLetterGauge(commands, shardList.map((i) => keys.usageDeadLetterStream(i)), config.RESERVATION_REAP_INTERVAL_MS, log);
  const followUp = startConsoleFollowUp({ sql, redis: commands, quota, log }, config.RESERVATION_REAP_INTERVAL_MS, 30, ownsRedis);
  const keyEditPruning = startKeyQuotaEditPruning({ sql, quota, log }, undefined, ownsRedis); // done key_quota_edits rows and their markers, after a day
  // Low-balance notices queued by settlements: sent apart from them, retried, never blocking billing.
  const notices = startLowBalanceNotices({ sql, log, optionSecrets, webhookSecrets }, config.RESERVATION_REAP_INTERVAL_MS);
  // Unpaid top-up orders expire after a day; spent console credentials and e-mail codes are deleted.
  const pruning = startConsoleRowPruning({ sql, log });
  log.info({ consumer: config.BILLING_CONSUMER, metricsPort: metrics.port }, 'billing worker started');
  return {
    worker,
    async close() {
      reaper.stop();
      clock.stop();
      followUp.stop();
      keyEditPruning.stop();
      notices.stop();
      pruning.stop();
      deadLetters.stop();
      await metrics.close();
      await worker.stop();
      readsBinding.stop();
      commandsBinding.stop();
      redis.disconnect();
      commands.disconnect();
      await sql.end({ timeout: 5 });
      await ch.close();
    },
  };
}
