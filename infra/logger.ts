import pino, { type Logger } from 'pino';
import type { Config } from './config.js';
import { CENSOR, scrubCredentials } from './secrets/credential-text.js';

// Secrets never reach the logs. Three nets, because a secret can hide anywhere in what is logged:
// 1. pino's own redaction of the usual top-level paths (fast, compiled once);
// 2. a walk of every logged object, at any depth, replacing the value of any property whose name
//    says it holds a credential (a channel's `key` inside an error's `cause`, a header map three
//    levels down) — copy-on-write, so the caller's object is never changed;
// 3. a last pass over the finished line for anything shaped like an `sk-` key (ours or a provider's)
//    or a bearer credential, wherever it sits (an exception message quoting a header, a provider's
//    error quoting the channel's key: secrets/credential-text.ts).
const REDACT_PATHS = [
  'key', 'apiKey', 'password', 'token', 'authorization', 'headers.authorization', 'headers["x-api-key"]',
  'req.headers.authorization', 'req.headers["x-api-key"]', '*.password', '*.key', '*.apiKey', '*.token',
];

export { CENSOR };

/** Property names whose values are credentials, compared lower-case with `-` and `_` removed. */
const SECRET_NAMES = new Set([
  'key', 'apikey', 'xapikey', 'password', 'passwordhash', 'newpassword', 'oldpassword', 'token', 'accesstoken',
  'refreshtoken', 'sessiontoken', 'authorization', 'proxyauthorization', 'cookie', 'setcookie', 'secret',
  'keysecret', 'clientsecret', 'webhooksecret', 'apisecret', 'epaykey', 'cardpayapisecret',
  'cardpaywebhooksecret', 'keyciphertext', 'keyhash', 'sign', 'signature',
]);

/** Deeper than this, a logged value is cut: nobody reads it and a cycle cannot loop. */
const MAX_DEPTH = 8;

function isSecretName(name: string): boolean {
  return SECRET_NAMES.has(name.replace(/[-_]/g, '').toLowerCase());
}

/** `value` with every credential-named property censored, at any depth; the same object when clean. */
export function redactDeep(value: unknown, depth = 0): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) return '[truncated]';
  if (Array.isArray(value)) {
    let out: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const v = redactDeep(value[i], depth + 1);
      if (v !== value[i]) (out ??= value.slice())[i] = v;
    }
    return out ?? value;
  }
  if (value instanceof Error) {
    // pino's err serializer would copy an error's enumerable properties (a `cause`, a request's
    // options) without looking at their names: serialize it here, censored, in the same shape.
    const e = value as Error & Record<string, unknown>;
    const out: Record<string, unknown> = { type: e.constructor?.name ?? 'Error', message: e.message, stack: e.stack };
    for (const k of Object.keys(e)) out[k] = isSecretName(k) ? CENSOR : redactDeep(e[k], depth + 1);
    if (e.cause !== undefined && !('cause' in out)) out.cause = redactDeep(e.cause, depth + 1);
    return out;
  }
  if (Buffer.isBuffer(value) || ArrayBuffer.isView(value)) return value;
  const obj = value as Record<string, unknown>;
  let out: Record<string, unknown> | undefined;
  for (const k of Object.keys(obj)) {
    const v = obj[k];
    const r = isSecretName(k) && v !== undefined && v !== null && v !== '' ? CENSOR : redactDeep(v, depth + 1);
    if (r !== v) (out ??= { ...obj })[k] = r;
  }
  return out ?? value;
}

/** API keys (ours and the providers' shapes) and bearer credentials, wherever they appear in a line. */
export function scrubText(line: string): string {
  return scrubCredentials(line);
}

export function createLogger(config: Pick<Config, 'LOG_LEVEL'>, name: string, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    name,
    level: config.LOG_LEVEL,
    redact: { paths: REDACT_PATHS, censor: CENSOR },
    formatters: { log: (obj) => redactDeep(obj) as Record<string, unknown> },
    hooks: { streamWrite: scrubText },
  };
  return destination ? pino(options, destination) : pino(options);
}
export type { Logger };
