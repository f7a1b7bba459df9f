// Entry point: the mock Anthropic provider as a process (for benchmarks and manual runs).
//
//   npx tsc -p tsconfig.json && node dist/bench/mock-upstream/main.js [flags]
//
// Every knob is a flag or an environment variable (the flag wins); only this file reads them.
//   --host                 MOCK_UPSTREAM_HOST           bind address (default 127.0.0.1)
//   --port                 MOCK_UPSTREAM_PORT           (infra/config.ts, default 3090; 0 = random)
//   --output-tokens        MOCK_OUTPUT_TOKENS           output tokens per response (default 64;
//                                                       max_tokens still caps it)
//   --token-delay-ms       MOCK_TOKEN_DELAY_MS          delay between streamed tokens (default 0)
//   --first-token-delay-ms MOCK_FIRST_TOKEN_DELAY_MS    delay before the first token (default: token delay)
//   --error-rate           MOCK_ERROR_RATE              0..1 fraction of /v1/messages answered 529 (default 0)
//   --fail-after-tokens    MOCK_FAIL_AFTER_TOKENS       streams are cut (socket closed) after N deltas
//   --stream-error-after-tokens MOCK_STREAM_ERROR_AFTER_TOKENS  streams end with an overloaded `event: error` after N deltas
//   --cache-read-tokens    MOCK_CACHE_READ_TOKENS       usage.cache_read_input_tokens (default 0)
//   --cache-creation-tokens MOCK_CACHE_CREATION_TOKENS  5-minute cache writes (default 0)
//   --cache-creation-1h-tokens MOCK_CACHE_CREATION_1H_TOKENS  1-hour cache writes (default 0)
//   --document-tokens      MOCK_DOCUMENT_TOKENS         input tokens each `document` block adds (default 0)
//   --image-tokens         MOCK_IMAGE_TOKENS            input tokens each `image` block adds (default 0)
//   --api-key              MOCK_API_KEY                 require this key (x-api-key or Authorization: Bearer)
//   --api-keys             MOCK_API_KEYS                more accepted keys, comma-separated
//   --key-failures         MOCK_KEY_FAILURES            keys that fail: key=revoked|forbidden|no_credit, comma-separated
//   --control              MOCK_CONTROL                 true: serve PUT /mock/key-failures (change the list at run time)
// LOG_LEVEL as everywhere (infra/config.ts). SIGTERM / SIGINT close the server and exit.
// Per-request overrides (x-mock-* headers, model names containing -error<status>) are described at
// the top of knobs.ts.
import { parseArgs } from 'node:util';
import { loadConfigOrExit } from '../../infra/config.js';
import { createLogger } from '../../infra/logger.js';
import { closeOnSignal } from '../lib/close-on-signal.js';
import { startMockUpstream, type MockUpstreamOptions } from './mock-upstream.js';
import { isKeyFailure, type KeyFailure } from './knobs.js';

const FLAGS = {
  host: 'MOCK_UPSTREAM_HOST',
  port: 'MOCK_UPSTREAM_PORT',
  'output-tokens': 'MOCK_OUTPUT_TOKENS',
  'token-delay-ms': 'MOCK_TOKEN_DELAY_MS',
  'first-token-delay-ms': 'MOCK_FIRST_TOKEN_DELAY_MS',
  'error-rate': 'MOCK_ERROR_RATE',
  'fail-after-tokens': 'MOCK_FAIL_AFTER_TOKENS',
  'stream-error-after-tokens': 'MOCK_STREAM_ERROR_AFTER_TOKENS',
  'cache-read-tokens': 'MOCK_CACHE_READ_TOKENS',
  'cache-creation-tokens': 'MOCK_CACHE_CREATION_TOKENS',
  'cache-creation-1h-tokens': 'MOCK_CACHE_CREATION_1H_TOKENS',
  'document-tokens': 'MOCK_DOCUMENT_TOKENS',
  'image-tokens': 'MOCK_IMAGE_TOKENS',
  'api-key': 'MOCK_API_KEY',
  'api-keys': 'MOCK_API_KEYS',
  'key-failures': 'MOCK_KEY_FAILURES',
  control: 'MOCK_CONTROL',
} as const;
type Flag = keyof typeof FLAGS;

function main(): void {
  const { values } = parseArgs({
    options: Object.fromEntries(Object.keys(FLAGS).map((f) => [f, { type: 'string' }])) as Record<Flag, { type: 'string' }>,
    strict: true,
  });
  const config = loadConfigOrExit('mock-upstream');
  const log = createLogger(config, 'mock-upstream');

  const raw = (flag: Flag): string | undefined => {
    const v = (values as Partial<Record<Flag, string>>)[flag] ?? process.env[FLAGS[flag]];
    return v === undefined || v === '' ? undefined : v;
  };
  const num = (flag: Flag, { max, integer = true }: { max?: number; integer?: boolean } = {}): number | undefined => {
    const v = raw(flag);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0 || (integer && !Number.isInteger(n)) || (max !== undefined && n > max)) {
      throw new Error(`invalid --${flag} / ${FLAGS[flag]}: ${v}`);
    }
    return n;
  };

  const options: MockUpstreamOptions = {
    host: raw('host') ?? '127.0.0.1',
    port: num('port', { max: 65535 }) ?? config.MOCK_UPSTREAM_PORT,
    outputTokens: num('output-tokens'),
    tokenDelayMs: num('token-delay-ms'),
    firstTokenDelayMs: num('first-token-delay-ms'),
    errorRate: num('error-rate', { max: 1, integer: false }),
    failMidStreamAfterTokens: num('fail-after-tokens'),
    streamErrorAfterTokens: num('stream-error-after-tokens'),
    cacheReadTokens: num('cache-read-tokens'),
    cacheCreationTokens: num('cache-creation-tokens'),
    cacheCreation1hTokens: num('cache-creation-1h-tokens'),
    documentInputTokens: num('document-tokens'),
    imageInputTokens: num('image-tokens'),
    apiKey: raw('api-key'),
    apiKeys: raw('api-keys')?.split(',').map((k) => k.trim()).filter(Boolean),
    keyFailures: keyFailures(raw('key-failures')),
    control: raw('control') === 'true' || raw('control') === '1',
  };

  startMockUpstream(options).then((mock) => {
    const { apiKey, apiKeys, keyFailures: failing, ...shown } = options;
    log.info({ url: mock.url, ...shown, apiKeyRequired: apiKey !== undefined, extraKeys: apiKeys?.length ?? 0, failingKeys: Object.keys(failing ?? {}).length }, 'mock upstream listening');
    closeOnSignal('mock upstream', log, mock);
  }, (err: unknown) => {
    log.fatal({ err }, 'mock upstream failed to start');
    process.exit(1);
  });
}

/** `key=revoked,key2=no_credit` → the keyFailures option. */
function keyFailures(spec: string | undefined): Record<string, KeyFailure> | undefined {
  if (!spec) return undefined;
  const out: Record<string, KeyFailure> = {};
  for (const entry of spec.split(',').map((e) => e.trim()).filter(Boolean)) {
    const at = entry.lastIndexOf('=');
    const failure = entry.slice(at + 1);
    if (at <= 0 || !isKeyFailure(failure)) throw new Error(`invalid --key-failures / MOCK_KEY_FAILURES entry (key=revoked|forbidden|no_credit): ${entry.slice(at + 1)}`);
    out[entry.slice(0, at)] = failure;
  }
  return out;
}

main();
