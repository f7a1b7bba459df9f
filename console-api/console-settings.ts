// The settings of infra/config.ts that only the console reads; tests may override them per app.
import type { Config } from '../infra/config.js';

export type ConsoleSettings = Readonly<Pick<Config,
  'LOGIN_RATE_LIMIT' | 'LOGIN_RATE_WINDOW_SEC' | 'CHANNEL_TEST_TIMEOUT_MS' | 'PAYMENT_PROVIDER_TIMEOUT_MS' | 'CARDPAY_WEBHOOK_TOLERANCE_SEC'>>;
