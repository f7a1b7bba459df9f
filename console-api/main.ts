// Entry point of the console API: config, connections, migrations, the root account, listen, and a
// clean shutdown on SIGTERM/SIGINT. The only console module that reads process.env (via loadConfig).
import { createClickHouseReader } from '../infra/clickhouse/read-client.js';
import { CONFIG_ERROR_EXIT_CODE, loadConfigOrExit, type Config } from '../infra/config.js';
import { createLogger } from '../infra/logger.js';
import { installProcessGuards } from '../infra/process-guards.js';
import { migratePostgres } from '../infra/postgres/migrate.js';
import { createRedis, redisKeysFor } from '../infra/redis/client.js';
import { assertRedisOfDatabase, foreignRedisError, RedisBindingWatch } from '../core/quota/database-binding.js';
import { describeStartFailure, startFailureExitCode } from '../infra/start-failure.js';
import { createApiKeyCrypto } from '../infra/secrets/api-key-crypto.js';
import { createWebhookSecretSealer } from '../core/notices/notice-setting.js';
import { createOptionSealer } from '../core/options/option-secrets.js';
import { QuotaStore } from '../core/quota/quota-store.js';
import { RedisClock } from '../core/quota/redis-clock.js';
import { postgresBalanceSource } from '../core/quota/postgres-balance-source.js';
import { ensureRootAccount, rootPasswordReveal } from './accounts/root-account.js';
import { createConsoleSql } from './db.js';
import { buildConsoleApp } from './app.js';
import { sealLegacySecrets } from './secrets/seal-legacy-secrets.js';

/** The configuration, once read: a start failure names the service it could not reach by it. */
let configured: Config | undefined;

async function main(): Promise<void> {
  const config = loadConfigOrExit('console-api', process.env, ['KEY_SECRET']);
  configured = config;
  const logger = createLogger(config, 'console-api');
  // Before anything connects: a promise nothing awaits (postgres.js's own, on a connection terminated as
  // it opened) failing must not end the console for everyone; it is logged with the count so far and
  // the console goes on. An uncaught exception still ends it: it stops taking requests, lets those in
  // progress finish (at most 5 s) and exits 1 for its supervisor to start a clean one.
  let release: () => Promise<void> = async () => {};
  installProcessGuards({
    log: logger,
    // No metrics endpoint here: the count so far is in each such log line (unhandledRejections).
    countUnhandledRejection: () => {},
    stopAccepting: () => {},
    close: () => release(),
    exit: (code) => process.exit(code),
    drainMs: 0,
    closeMs: 5_000,
    messages: {
      unhandledRejection: 'unhandled promise rejection; the console-api keeps serving',
      uncaughtException: 'uncaught exception; the console-api stops taking requests and exits',
    },
  });
  // Refuse a missing KEY_SECRET before touching the database: nothing may be sealed without it.
  createApiKeyCrypto(config.KEY_SECRET);
  await migratePostgres(config);
  const sql = createConsoleSql(config);
  const redis = createRedis(config, 'console-api');
  const logReader = createClickHouseReader(config);
  const keys = redisKeysFor(config);
  // An administrator's debit holds are dated with Redis's clock, the one the billing worker's reaper
  // reads (core/quota/redis-clock.ts): on this host's clock, one running 5 minutes behind had a hold
  // reaped while its transaction was still open.
  const clock = new RedisClock(redis, keys, { log: logger });
  await clock.start();
  // A Redis holding another database's accounts is refused (core/quota/database-binding.ts): the
  // console's credits would move mirrors of accounts that are not this database's.
  const databaseId = await assertRedisOfDatabase(sql, redis, keys, config.REDIS_PREFIX);
  // And each time the connection comes back: a Redis swapped under the console (another gateway's
  // backup restored, an address now naming another server) stops it, as it would have refused to
  // start on it, and its supervisor leaves it down (exit 78). A credit or key edit made in the round
  // trip before the check answers may reach that Redis instead of this database's: the Postgres
  // balance has it, this database's mirror of that account not (docs/billing.md, "Whose money a Redis
  // holds").
  const binding = new RedisBindingWatch(redis, keys, databaseId, () => {
    logger.fatal(`${foreignRedisError(keys, config.REDIS_PREFIX).message.replace(/\n\s*/g, ' ')}; the console-api stops`);
    void release().finally(() => process.exit(CONFIG_ERROR_EXIT_CODE));
  });
  const quotaStore = new QuotaStore(redis, keys, postgresBalanceSource(sql), { clock });
  const sealed = await sealLegacySecrets(sql, { options: createOptionSealer(config.KEY_SECRET), webhooks: createWebhookSecretSealer(config.KEY_SECRET) });
  if (sealed.options.length > 0 || sealed.accounts > 0) logger.info(sealed, 'secrets stored in clear by an earlier version sealed');

  // A generated root password goes to ROOT_PASSWORD_FILE (readable by its owner only) or else to
  // stdout once, deliberately not through the logger.
  await ensureRootAccount(sql, config, rootPasswordReveal(config.ROOT_PASSWORD_FILE, (text) => process.stdout.write(text)));

  const app = buildConsoleApp({ config, sql, redis, logReader, quotaStore, logger });
  release = async () => {
    binding.stop();
    await app.close();
    clock.stop();
    await Promise.allSettled([sql.end({ timeout: 5 }), redis.quit(), logReader.close()]);
  };
  await app.listen({ host: config.CONSOLE_HOST, port: config.CONSOLE_PORT });

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info({ signal }, 'console-api shutting down');
    try {
      await app.close();
      clock.stop();
      await Promise.allSettled([sql.end({ timeout: 5 }), redis.quit(), logReader.close()]);
      process.exit(0);
    } catch (err) {
      logger.error({ err }, 'console-api shutdown failed');
      process.exit(1);
    }
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
}

// A service it needs not answering at start is said in one line naming the variable (the supervisor
// starts it again: it may answer soon); anything else with its stack, a fault to look into.
main().catch((err: unknown) => {
  process.stderr.write(`console-api failed to start: ${describeStartFailure(err, configured).line}\n`);
  process.exit(startFailureExitCode(err));
});
