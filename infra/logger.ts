import pino, { type Logger } from 'pino';
import type { Config } from './config.js';

// Secrets never reach the logs: any of these paths is replaced wherever it appears.
const REDACT = [
  'key', 'apiKey', 'password', 'token', 'authorization', 'headers.authorization', 'headers["x-api-key"]',
  'req.headers.authorization', 'req.headers["x-api-key"]', '*.password', '*.key', '*.apiKey', '*.token',
];

export function createLogger(config: Config, name: string): Logger {
  return pino({ name, level: config.LOG_LEVEL, redact: { paths: REDACT, censor: '[redacted]' } });
}
export type { Logger };
