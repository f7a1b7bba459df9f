// Entry point: the mock OpenAI-format provider (Chat Completions) as a process, for `make run` (the
// seeded channel of type 1, console-api/seed/demo-seed.ts) and manual runs.
//
//   npx tsc -p tsconfig.json && node dist/bench/mock-upstream-openai/main.js [flags]
//
// Every knob is a flag or an environment variable (the flag wins); only this file reads them.
//   --host                 MOCK_OPENAI_HOST             bind address (default 127.0.0.1)
//   --port                 MOCK_OPENAI_PORT             (infra/config.ts, default 3093; 0 = random)
//   --api-key              MOCK_OPENAI_KEY              require this Bearer key (infra/config.ts,
//                                                       default sk-proj-mock-local)
//   --output-tokens        MOCK_OPENAI_OUTPUT_TOKENS    output tokens per choice (default 64;
//                                                       max_tokens / max_completion_tokens cap it)
//   --token-delay-ms       MOCK_OPENAI_TOKEN_DELAY_MS   delay between streamed tokens (default 0)
//   --cached-tokens        MOCK_OPENAI_CACHED_TOKENS    usage.prompt_tokens_details.cached_tokens (default 0)
//   --image-tokens         MOCK_OPENAI_IMAGE_TOKENS     prompt tokens each image_url part adds (default 0)
// LOG_LEVEL as everywhere (infra/config.ts). SIGTERM / SIGINT close the server and exit. The wire
// format and the per-request knobs are described at the top of mock-openai.ts.
import { parseArgs } from 'node:util';
import { loadConfigOrExit } from '../../infra/config.js';
import { createLogger } from '../../infra/logger.js';
import { closeOnSignal } from '../lib/close-on-signal.js';
import { startMockOpenAI } from './mock-openai.js';

const FLAGS = {
  host: 'MOCK_OPENAI_HOST',
  port: 'MOCK_OPENAI_PORT',
  'api-key': 'MOCK_OPENAI_KEY',
  'output-tokens': 'MOCK_OPENAI_OUTPUT_TOKENS',
  'token-delay-ms': 'MOCK_OPENAI_TOKEN_DELAY_MS',
  'cached-tokens': 'MOCK_OPENAI_CACHED_TOKENS',
  'image-tokens': 'MOCK_OPENAI_IMAGE_TOKENS',
} as const;
type Flag = keyof typeof FLAGS;

function main(): void {
  const { values } = parseArgs({
    options: Object.fromEntries(Object.keys(FLAGS).map((f) => [f, { type: 'string' }])) as Record<Flag, { type: 'string' }>,
    strict: true,
  });
  const config = loadConfigOrExit('mock-openai');
  const log = createLogger(config, 'mock-openai');
  const raw = (flag: Flag): string | undefined => {
    const v = (values as Partial<Record<Flag, string>>)[flag] ?? process.env[FLAGS[flag]];
    return v === undefined || v === '' ? undefined : v;
  };
  const num = (flag: Flag, max?: number): number | undefined => {
    const v = raw(flag);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0 || (max !== undefined && n > max)) throw new Error(`invalid --${flag} / ${FLAGS[flag]}: ${v}`);
    return n;
  };
  const options = {
    host: raw('host') ?? '127.0.0.1',
    port: num('port', 65535) ?? config.MOCK_OPENAI_PORT,
    apiKey: raw('api-key') ?? config.MOCK_OPENAI_KEY,
    outputTokens: num('output-tokens'),
    tokenDelayMs: num('token-delay-ms'),
    cachedTokens: num('cached-tokens'),
    imageInputTokens: num('image-tokens'),
  };
  startMockOpenAI(options).then((mock) => {
    const { apiKey: _key, ...shown } = options;
    log.info({ url: mock.url, ...shown }, 'mock openai listening');
    closeOnSignal('mock openai', log, mock);
  }, (err: unknown) => {
    log.fatal({ err }, 'mock openai failed to start');
    process.exit(1);
  });
}

main();
