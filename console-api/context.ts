// What buildConsoleApp needs from its caller (ConsoleDeps) and what the routes share (ConsoleContext).
import type { ClickHouseReader } from '../infra/clickhouse/read-client.js';
import type { Config } from '../infra/config.js';
import type { Logger } from '../infra/logger.js';
import type { Sql } from '../infra/postgres/client.js';
import { redisKeysFor, type Redis } from '../infra/redis/client.js';
import type { RedisKeys } from '../infra/redis/keys.js';
import { type ApiKeyCrypto, createApiKeyCrypto } from '../infra/secrets/api-key-crypto.js';
import { createWebhookSecretSealer, type WebhookSecretSealer } from '../core/notices/notice-setting.js';
import type { OptionSealer } from '../core/options/option-secrets.js';
import type { QuotaStore } from '../core/quota/quota-store.js';
import { createPasswordGate, type PasswordGate } from './auth/password-gate.js';
import { scryptParams } from './auth/password.js';
import type { ConsoleSettings } from './console-settings.js';
import { installOptionSealer } from './options/option-secrets.js';
import { type Invalidation, publishInvalidation } from '../core/invalidation/invalidation.js';

export interface ConsoleDeps {
  config: Config;
  /** Postgres pool (infra/postgres/client.ts createSql). */
  sql: Sql;
  /** A normal (non-subscriber) connection: used to PUBLISH invalidations. */
  redis: Redis;
  /** Reads of the request log, bound to CLICKHOUSE_DATABASE (infra/clickhouse/read-client.ts createClickHouseReader). */
  logReader: ClickHouseReader;
  /** Moves the relay's Redis balance mirrors after a committed quota change. */
  quotaStore: QuotaStore;
  /** Defaults to a pino logger at config.LOG_LEVEL with the project's redaction. */
  logger?: Logger;
  /** Unix seconds; tests may pin the clock. */
  now?: () => number;
  /** Overrides of the console settings (console-settings.ts); default: read from `config`. */
  settings?: Partial<ConsoleSettings>;
}

export interface ConsoleContext {
  config: Config;
  sql: Sql;
  redis: Redis;
  logReader: ClickHouseReader;
  quotaStore: QuotaStore;
  logger: Logger;
  keys: RedisKeys;
  settings: ConsoleSettings;
  apiKeyCrypto: ApiKeyCrypto;
  /** Seals and opens secret options; also what loadOptionView opens them with (options/option-secrets.ts). */
  optionSealer: OptionSealer;
  /** Seals the accounts' webhook secrets (only the billing worker opens them). */
  webhookSecrets: WebhookSecretSealer;
  /** Every password hash or verification of this process goes through it (auth/password-gate.ts). */
  passwords: PasswordGate;
  now(): number;
  /** Announces a change the relay caches; never throws (a failure is logged, caches expire anyway). */
  invalidate(message: Invalidation): Promise<void>;
}

export function createContext(deps: ConsoleDeps, logger: Logger): ConsoleContext {
  const keys = redisKeysFor(deps.config);
  const settings: ConsoleSettings = { ...deps.config, ...deps.settings };
  return {
    config: deps.config,
    sql: deps.sql,
    redis: deps.redis,
    logReader: deps.logReader,
    quotaStore: deps.quotaStore,
    logger,
    keys,
    settings,
    apiKeyCrypto: createApiKeyCrypto(deps.config.KEY_SECRET),
    optionSealer: installOptionSealer(deps.config.KEY_SECRET),
    webhookSecrets: createWebhookSecretSealer(deps.config.KEY_SECRET),
    passwords: createPasswordGate(settings.PASSWORD_HASH_CONCURRENCY, settings.PASSWORD_HASH_MAX_WAITING, scryptParams(settings.PASSWORD_SCRYPT_LOG2N)),
    now: deps.now ?? (() => Math.floor(Date.now() / 1000)),
    invalidate: async (message) => {
      try {
        await publishInvalidation(deps.redis, keys, message);
      } catch (err) {
        logger.error({ err, invalidation: message }, 'publishing a cache invalidation failed');
      }
    },
  };
}
