// The settings of infra/config.ts that only the console reads; tests may override them per app.
import type { Config } from '../infra/config.js';

export type ConsoleSettings = Readonly<Pick<Config,
  | 'LOGIN_RATE_LIMIT' | 'LOGIN_RATE_WINDOW_SEC' | 'LOGIN_IP_RATE_LIMIT' | 'REGISTER_RATE_LIMIT' | 'REGISTER_RATE_WINDOW_SEC'
  | 'PASSWORD_HASH_CONCURRENCY' | 'PASSWORD_HASH_MAX_WAITING' | 'PASSWORD_SCRYPT_LOG2N'
  | 'CHANNEL_TEST_TIMEOUT_MS' | 'PAYMENT_PROVIDER_TIMEOUT_MS' | 'CARDPAY_WEBHOOK_TOLERANCE_SEC'>>;
