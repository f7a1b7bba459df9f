// Edge fuzz (issue 8): every relay route and every console route of a whole test stack, driven with
// hostile input by fast-check: malformed percent-escapes and raw bytes in paths, random and oversized
// headers (control characters included, sent on a raw socket since fetch refuses them), random keys and
// tokens next to a real API key and real administrator and user sessions, random, deep (10,000 levels),
// oversized and non-UTF-8 bodies, NUL, numbers at and past the INT/BIGINT/double limits, wrong types.
//
// Each answer must be: no 5xx (the only upstream is the mock, which does not fail; the console's
// declared 502 UPSTREAM_FAILED is accepted only where its OpenAPI document declares it), Anthropic's
// error JSON on every relay non-2xx, the {success, message} envelope on every console JSON answer.
// A request that breaks HTTP/1.1 itself (a control character in a header value, raw bytes in the
// target, headers past Node's 16 KiB) may instead be refused by the HTTP parser (connection closed,
// or a bodyless 4xx): that is the protocol layer's answer, not the application's. Afterwards both
// processes still answer, and the relay's heap stays bounded over 20,000 random-key requests.
//
// The console's routes come from its own OpenAPI document (GET /api/openapi.json), so a new route is
// fuzzed without touching this file. The relay under fuzz runs in a child process (relay-child.mjs,
// from dist/): a throw inside a uWebSockets.js handler aborts the process, which in-process would
// kill this runner and lose the failing input. A dead child is a failure with its last output, and is
// restarted so fast-check can shrink. The heap test measures the relay of this process.
//
// Reproduce: FUZZ_SEED (default below, in the describe name) seeds every property; each route's
// property derives its own seed from it, so `FUZZ_SEED=<n> npx vitest run tests/edges -t '<test name>'`
// replays one route's failure (fast-check prints its counterexample, seed and path). FUZZ_RUNS (default
// 3000) is the number of cases across all properties; raise it for a longer hunt. FUZZ_SURVEY=1 runs
// every case and lists each distinct failure instead of stopping at the first and shrinking it.
import { fork, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { Pool } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { issueSession } from '../../console-api/auth/sessions.js';
import { hashPassword } from '../../console-api/auth/password.js';
import {
  consoleCall, createApiKey, mockChannel, startGatewayStack, uniqueName, type GatewayStack, type TestAccount,
} from '../harness/gateway-stack.js';
import {
  bigString, breaksHttp, deepArray, deepObject, describeValue, encodeBody, fromSchema, hostileBytes, hostileHeaders,
  hostileHeaderValue, hostileNumber, hostileQuery, hostileSegment, hostileString, hostileValue, type BodySpec,
  type JsonSchema, type JValue, randomWellFormedKey, RawJson, wellFormedKey,
} from './hostile.js';
import { sendRaw, type RawAnswer, type RawRequest } from './raw-http.js';

const DEFAULT_SEED = 20261123;
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : DEFAULT_SEED;
const RUNS = process.env.FUZZ_RUNS ? Number(process.env.FUZZ_RUNS) : 3000;
/** Share of the runs the relay gets; the rest is split across the console's operations. */
const RELAY_SHARE = 0.35;
const MODEL = 'claude-haiku-4-5';
const MAPPED_MODEL = 'fuzz-mapped';
const VICTIM_MODEL = 'fuzz-victim';
/** Rows the fuzz may destroy get ids from here up; hostile ids never fall below it. */
const VICTIM_ID_BASE = 500_000;

function seedFor(name: string): number {
  return createHash('sha256').update(`${SEED}:${name}`).digest().readInt32LE(0);
}

// ---------------------------------------------------------------------------- the stack

const stack: GatewayStack = await startGatewayStack({ env: { CHANNEL_TEST_TIMEOUT_MS: '2000', LOG_LEVEL: 'silent' } });
afterAll(async () => {
  await relayChild?.stop();
  await stack.close();
});

interface Account extends TestAccount { password: string }

async function rootAccount(): Promise<Account> {
  const username = uniqueName('fzroot');
  const password = randomBytes(12).toString('hex');
  const [row] = await stack.sql`INSERT INTO users (username, display_name, password_hash, role, aff_code)
    VALUES (${username}, 'Fuzz Root', ${await hashPassword(password)}, 100, ${randomBytes(6).toString('hex')}) RETURNING id`;
  const id = Number(row!.id);
  return { id, username, password, token: (await issueSession(stack.sql, id, 86_400, Math.floor(Date.now() / 1000)))! };
}

async function userAccount(adminToken: string, quota: number): Promise<Account> {
  const username = uniqueName('fzu');
  const password = 'password-' + randomBytes(6).toString('hex');
  const reg = await consoleCall(stack, 'POST', '/api/user/register', null, { username, password });
  if (!reg.json.success) throw new Error(`register failed: ${reg.json.message}`);
  const [row] = await stack.sql`SELECT id FROM users WHERE username = ${username}`;
  const id = Number(row!.id);
  const token = (await issueSession(stack.sql, id, 86_400, Math.floor(Date.now() / 1000)))!;
  const put = await consoleCall(stack, 'PUT', '/api/user/', adminToken, { id, quota });
  if (!put.json.success) throw new Error(`funding failed: ${put.json.message}`);
  return { id, username, password, token };
}

// Protected rows first (small ids): the accounts whose sessions the fuzz uses, the real key, the
// channels the relay routes to. Then every sequence jumps to VICTIM_ID_BASE, and the rows made after
// it are the ones the fuzz may legitimately delete, ban or rewrite.
const root = await rootAccount();
const user = await userAccount(root.token, 1_000_000_000_000);
const mockChannelId = await mockChannel(stack, [MODEL]);
const mappedChannelId = await mockChannel(stack, [MAPPED_MODEL], 'default', { model_mapping: { [MAPPED_MODEL]: MODEL } });
const realKey = await createApiKey(stack, user);
for (const table of ['users', 'tokens', 'channels', 'redemptions', 'topups', 'access_tokens']) {
  const [seq] = await stack.sql`SELECT pg_get_serial_sequence(${table}, 'id') AS name`;
  if (seq?.name) await stack.sql`SELECT setval(${seq.name as string}, ${VICTIM_ID_BASE})`;
}
const victimUser = await userAccount(root.token, 1000);
const victimChannelId = await mockChannel(stack, [VICTIM_MODEL]);
const victimKey = await createApiKey(stack, user);
const redemption = await consoleCall<string[]>(stack, 'POST', '/api/redemption/', root.token, { name: 'fuzz', quota: 10, count: 1 });
const [victimRedemption] = await stack.sql`SELECT id FROM redemptions ORDER BY id DESC LIMIT 1`;
const victimIds = [victimUser.id, victimChannelId, victimKey.id, ...(victimRedemption ? [Number(victimRedemption.id)] : [])];
const protectedIds = [root.id, user.id, mockChannelId, mappedChannelId, realKey.id];
if (victimIds.some((v) => v < VICTIM_ID_BASE) || protectedIds.some((p) => p >= VICTIM_ID_BASE)) {
  throw new Error(`id ranges overlap: victims ${victimIds}, protected ${protectedIds}; redemption: ${JSON.stringify(redemption.json)}`);
}

const idArb: fc.Arbitrary<JValue> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...victimIds) },
  { weight: 2, arbitrary: fc.constantFrom<JValue>(0, -1, -(2 ** 31), 2 ** 31 - 1, 2 ** 31, 2 ** 53 - 1, 2 ** 53, 2 ** 63, 1e308, 1.5, -0.5,
    new RawJson('9223372036854775808'), new RawJson('1e999'), '1', `${victimIds[0]}`, '', '\u0000') },
  { weight: 1, arbitrary: fc.integer({ min: VICTIM_ID_BASE + 1000, max: 2 ** 31 - 1 }) },
);

const openapi = (await (await fetch(`${stack.consoleUrl}/api/openapi.json`)).json()) as {
  paths: Record<string, Record<string, {
    operationId: string;
    parameters?: { name: string; in: string; schema?: JsonSchema }[];
    requestBody?: { content: Record<string, { schema: JsonSchema }> };
    responses: Record<string, { content?: Record<string, unknown> }>;
    'x-min-role'?: number;
  }>>;
};
const options = await consoleCall<{ key: string; value: string }[]>(stack, 'GET', '/api/option/', root.token);
const optionSnapshot = new Map((options.json.data ?? []).map((o) => [o.key, o.value]));
const groups = await consoleCall<Record<string, unknown>>(stack, 'GET', '/api/user/self/groups', user.token);

/** Words of this stack: fuzzed strings drawn from them get past lookups into the code behind. */
const dictionary = [...new Set([
  MODEL, MAPPED_MODEL, VICTIM_MODEL, 'claude-sonnet-4-5', 'claude-opus-4-1', ...Object.keys(groups.json.data ?? { default: 1 }), ...optionSnapshot.keys(),
  victimUser.username, user.username, 'fuzz', stack.mock.url, 'alipay', 'wxpay', 'stripe', String(redemption.json.data?.[0] ?? ''),
])].filter(Boolean);

// ---------------------------------------------------------------------------- the relay child

class RelayChild {
  proc: ChildProcess | null = null;
  port = 0;
  output = '';
  deaths: string[] = [];
  readonly script = fileURLToPath(new URL('./relay-child.mjs', import.meta.url));

  async start(): Promise<void> {
    const env = {
      DATABASE_URL: stack.config.DATABASE_URL, CLICKHOUSE_DATABASE: stack.config.CLICKHOUSE_DATABASE,
      REDIS_PREFIX: stack.config.REDIS_PREFIX, KEY_SECRET: stack.config.KEY_SECRET, LOG_LEVEL: 'error',
    };
    const proc = fork(this.script, [], { execArgv: [], stdio: ['ignore', 'pipe', 'pipe', 'ipc'], env: { ...process.env, FUZZ_RELAY_ENV: JSON.stringify(env) } });
    this.proc = proc;
    const keep = (d: Buffer) => { this.output = (this.output + d.toString()).slice(-6000); };
    proc.stdout!.on('data', keep);
    proc.stderr!.on('data', keep);
    this.port = await new Promise<number>((resolve, reject) => {
      proc.once('message', (m: { port: number }) => resolve(m.port));
      proc.once('exit', (code, signal) => reject(new Error(`relay child exited at start (${code ?? signal}): ${this.output}`)));
    });
    // The child learns channels from Postgres at start; wait until it routes the mock's model.
    const deadline = Date.now() + 10_000;
    for (;;) {
      const a = await sendRaw(this.port, { method: 'GET', target: `/v1/models/${MODEL}`, headers: [['x-api-key', realKey.key]] });
      if (a.status === 200) break;
      if (Date.now() > deadline) throw new Error(`relay child does not serve ${MODEL}: ${a.status} ${a.body.toString()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  alive(): boolean {
    return !!this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** After a suspicious answer: null when the child lives, else its death (and it is restarted). */
  async checkDeath(): Promise<string | null> {
    if (!this.proc) return null;
    if (this.alive()) {
      // A crash and the socket close race: give the exit a moment to be observed.
      await new Promise((r) => setTimeout(r, 30));
      if (this.alive()) return null;
    }
    const death = `relay process died (${this.proc.exitCode ?? this.proc.signalCode}); its last output:\n${this.output.slice(-2500)}`;
    this.deaths.push(death);
    this.output = '';
    await this.start();
    return death;
  }

  async stop(): Promise<void> {
    if (!this.proc || !this.alive()) return;
    const p = this.proc;
    await new Promise<void>((resolve) => {
      p.once('exit', () => resolve());
      p.kill('SIGTERM');
    });
  }
}

let relayChild: RelayChild | undefined;

/** dist/ is what the child runs: a stale build would test yesterday's relay. */
function assertDistFresh(): void {
  const root = fileURLToPath(new URL('../../', import.meta.url));
  const stale: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(root + dir, { withFileTypes: true })) {
      const rel = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(rel);
      else if (rel.endsWith('.ts') && !rel.endsWith('.test.ts') && !rel.endsWith('.d.ts')) {
        const js = `${root}dist/${rel.replace(/\.ts$/, '.js')}`;
        if (!existsSync(js) || statSync(js).mtimeMs < statSync(root + rel).mtimeMs) stale.push(rel);
      }
    }
  };
  for (const dir of ['relay', 'infra', 'billing']) walk(dir);
  if (stale.length) throw new Error(`dist/ is older than ${stale.slice(0, 5).join(', ')}: run \`npx tsc -p tsconfig.json\` (make test builds first)`);
}

// ---------------------------------------------------------------------------- checks

function contentType(a: RawAnswer): string {
  return (a.headers['content-type'] ?? '').toLowerCase();
}

function show(a: RawAnswer): string {
  if (a.error) return `no answer (${a.error})`;
  if (a.timedOut) return `no answer within the time limit (status ${a.status})`;
  if (a.closedWithoutAnswer) return 'connection closed without an answer';
  const body = a.body.toString('utf8');
  return `${a.status} ${contentType(a) || '(no content-type)'} ${body.length > 400 ? body.slice(0, 400) + '…' : body}`;
}

/** The protocol layer's own refusals: allowed only for requests that break HTTP/1.1. */
function httpLayerRefusal(a: RawAnswer): boolean {
  return a.closedWithoutAnswer && !a.error?.startsWith('ECONNREFUSED') ? true : a.status >= 400 && a.status < 500 && !contentType(a) && a.body.length === 0;
}

function parseJson(a: RawAnswer): unknown {
  try {
    return JSON.parse(a.body.toString('utf8'));
  } catch {
    return undefined;
  }
}

function anthropicError(a: RawAnswer): string | null {
  const j = parseJson(a) as { type?: unknown; error?: { type?: unknown; message?: unknown } } | undefined;
  if (!contentType(a).includes('application/json')) return 'not application/json';
  if (!j || j.type !== 'error' || typeof j.error?.type !== 'string' || typeof j.error?.message !== 'string') return 'not Anthropic error JSON';
  return null;
}

/**
 * A server may answer an upload early and close: an oversized one (413), and on the relay any request
 * whose key it refuses from the headers alone (the body is never read). A client still writing the
 * body then sees EPIPE/ECONNRESET, and Node drops the answer already received. (fetch and the SDKs
 * read the early answer: relay/edges.integration.test.ts.)
 */
function refusedUpload(req: RawRequest, a: RawAnswer, refusedFromHeaders = false): boolean {
  return ((req.body?.length ?? 0) > 1024 * 1024 || refusedFromHeaders) && a.closedWithoutAnswer && (a.error === 'EPIPE' || a.error === 'ECONNRESET');
}

/**
 * Whether the relay may answer this request from its headers alone, before its body: every request
 * but a POST to one of the two body-reading routes with the real key (a key refused from the headers,
 * an unknown path or method, a GET with a body are all answered at once).
 */
function answeredBeforeBody(c: Case): boolean {
  const path = c.req.target.split('?')[0];
  return !(presentedKey(c.req) === realKey.key && c.req.method === 'POST' && (path === '/v1/messages' || path === '/v1/messages/count_tokens'));
}

/** A header's first value as the relay reads it ('' when absent). */
function headerOf(req: RawRequest, name: string): string {
  const h = req.headers.find(([n]) => n.toLowerCase() === name);
  return h ? (typeof h[1] === 'string' ? h[1] : h[1].toString('latin1')) : '';
}

/** The key the relay reads, as it reads it: the first x-api-key or a Bearer authorization; '' (none) when both are there and differ. */
function presentedKey(req: RawRequest): string {
  const value = (name: string) => headerOf(req, name);
  const direct = value('x-api-key');
  const auth = value('authorization');
  const bearer = auth.slice(0, 7).toLowerCase() === 'bearer ' ? auth.slice(7).trim() : '';
  if (!direct) return bearer;
  return bearer === '' || bearer === direct ? direct : '';
}

/**
 * uWebSockets.js (20.30, the build this project must use) neither answers nor closes a connection
 * whose request its parser rejects (a control character in a header, `_` in a header name): it waits
 * for its idle timeout, about 10 s. Nothing in JavaScript sees such a request, so for those the test
 * waits this long, takes silence for the parser's refusal, and checks the relay still answers.
 */
const RELAY_PARSER_SILENCE_MS = 600;

function checkRelayAnswer(c: Case, a: RawAnswer): string | null {
  const req = c.req;
  const broken = breaksHttp(req.method, req.headers, req.target);
  if (a.timedOut) return broken && a.status === 0 ? null : 'no answer within 20 s';
  if (a.closedWithoutAnswer || (a.status >= 400 && a.status < 500 && !contentType(a) && a.body.length === 0)) {
    return (broken && httpLayerRefusal(a)) || refusedUpload(req, a, answeredBeforeBody(c)) ? null : `no answer from the relay (${show(a)})`;
  }
  if (a.status >= 500) return `5xx from the relay`;
  if (a.status >= 300 && req.method !== 'HEAD') {
    const e = anthropicError(a);
    // GET /v1/models answers a client without anthropic-version (OpenAI's SDK) in OpenAI's shape,
    // errors included (uWS reads a value of spaces, or one that is no UTF-8, 0xff 0xfe, as none); a path under it that
    // no route takes is the 404 of any unknown path. Either shape is an envelope its client reads
    // (relay/models/models.integration.test.ts checks which one each client gets).
    if (e && !(req.target.startsWith('/v1/models') && !/^[\x21-\x7e][\x20-\x7e]*$/.test(headerOf(req, 'anthropic-version').trim()) && openaiError(a) === null)) {
      return `relay answered ${a.status} outside Anthropic's error envelope (${e})`;
    }
  }
  return null;
}

function openaiError(a: RawAnswer): string | null {
  const j = parseJson(a) as { error?: { type?: unknown; message?: unknown } } | undefined;
  if (!contentType(a).includes('application/json')) return 'not application/json';
  if (!j || typeof j.error?.type !== 'string' || typeof j.error?.message !== 'string') return 'not OpenAI error JSON';
  return null;
}

interface ConsoleOp {
  name: string;
  method: string;
  path: string;
  params: string[];
  queries: string[];
  body?: JsonSchema;
  minRole?: number;
  produces: string;
  mayFailUpstream: boolean;
}

function checkConsoleAnswer(op: ConsoleOp | null, req: RawRequest, a: RawAnswer): string | null {
  const broken = breaksHttp(req.method, req.headers, req.target);
  if (a.timedOut) return 'no answer within 20 s';
  if (a.closedWithoutAnswer || (a.status >= 400 && a.status < 500 && !contentType(a) && a.body.length === 0)) {
    return (broken && httpLayerRefusal(a)) || refusedUpload(req, a) ? null : `no answer from the console (${show(a)})`;
  }
  const j = parseJson(a) as { success?: unknown; message?: unknown } | undefined;
  const isJson = contentType(a).includes('application/json');
  const envelope = isJson && j !== null && typeof j === 'object' && typeof j.success === 'boolean' && typeof j.message === 'string';
  if (a.status >= 500) {
    // A route whose document declares 502 UPSTREAM_FAILED may fail when its provider truly did.
    if (a.status === 502 && op?.mayFailUpstream && envelope && j!.success === false) return null;
    return '5xx from the console';
  }
  if (req.method === 'HEAD') return null;
  if (op && a.status < 300 && op.produces !== 'envelope') {
    return op.produces === 'text/plain' || isJson ? null : `answered ${a.status} as ${contentType(a)}, not ${op.produces}`;
  }
  if (op?.produces === 'text/plain' && contentType(a).startsWith('text/plain')) return null;
  if (!envelope) return `console answered ${a.status} outside the {success, message} envelope`;
  if ((a.status >= 400) !== (j!.success === false)) return `status ${a.status} with success ${String(j!.success)}`;
  return null;
}

/** A GET or HEAD outside /api/ is the web console's: its page (index.html) for a client-side route. */
function webConsolePage(req: RawRequest, a: RawAnswer): boolean {
  const path = req.target.split('?')[0]!;
  const outsideApi = path.startsWith('/') && !path.startsWith('//') && path !== '/api' && !path.startsWith('/api/');
  return (req.method === 'GET' || req.method === 'HEAD') && outsideApi && a.status === 200 && contentType(a).startsWith('text/html');
}

// ---------------------------------------------------------------------------- cases

/** A request with a printable form for fast-check's reports (bodies can be megabytes). */
interface Case {
  req: RawRequest;
  label: string;
  credential: string;
}

function makeCase(req: RawRequest, credential: string, bodyLabel: string): Case {
  const c: Case = { req, credential, label: '' };
  c.label = `${req.method} ${describeValue(req.target, 300).slice(1, -1)} credential=${credential} headers=${describeValue(req.headers.map(([n, v]) => [n, typeof v === 'string' ? Buffer.from(v, 'latin1') : v]), 400)} body=${bodyLabel}`;
  Object.defineProperty(c, fc.toStringMethod, { value: () => c.label });
  return c;
}

function bodyLabel(b: BodySpec | undefined): string {
  if (!b) return '(none)';
  return b.kind === 'bytes' ? `<${b.label}>` : describeValue(b.value);
}

const relayAuth: fc.Arbitrary<{ label: string; headers: [string, string | Buffer][] }> = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom('x-api-key', 'authorization').map((h) => ({ label: 'real key', headers: [[h, h === 'x-api-key' ? realKey.key : `Bearer ${realKey.key}`]] as [string, string][] })) },
  { weight: 2, arbitrary: wellFormedKey.map((k) => ({ label: 'random sk- key', headers: [['x-api-key', k]] as [string, string][] })) },
  { weight: 2, arbitrary: hostileHeaderValue(dictionary, true).map((v) => ({ label: 'garbage x-api-key', headers: [['x-api-key', v]] as [string, string | Buffer][] })) },
  { weight: 1, arbitrary: hostileHeaderValue(dictionary, true).map((v) => ({ label: 'garbage bearer', headers: [['authorization', Buffer.concat([Buffer.from('Bearer '), typeof v === 'string' ? Buffer.from(v, 'latin1') : v])]] as [string, Buffer][] })) },
  { weight: 1, arbitrary: fc.constantFrom(
    { label: 'none', headers: [] },
    { label: 'real key minus its last character', headers: [['x-api-key', realKey.key.slice(0, -1)]] },
    { label: 'real key and a NUL', headers: [['authorization', `Bearer ${realKey.key}\u0000`]] },
    { label: 'real key and %00', headers: [['authorization', `Bearer ${realKey.key}%00`]] },
    { label: 'console session as key', headers: [['authorization', `Bearer ${root.token}`]] },
    { label: 'two keys', headers: [['x-api-key', realKey.key], ['x-api-key', randomWellFormedKey()]] },
  ) as fc.Arbitrary<{ label: string; headers: [string, string | Buffer][] }> },
);

/** A Messages body near the real thing, with one or more fields made hostile. */
function messagesBody(countTokens: boolean): fc.Arbitrary<BodySpec> {
  const str = hostileString(dictionary);
  const value = hostileValue(dictionary);
  const model = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(MODEL, MAPPED_MODEL) }, { weight: 1, arbitrary: fc.constantFrom(VICTIM_MODEL) }, { weight: 2, arbitrary: str }, { weight: 1, arbitrary: value });
  const content: fc.Arbitrary<JValue> = fc.oneof(
    { weight: 3, arbitrary: str },
    { weight: 2, arbitrary: fc.array(fc.record({ type: fc.oneof(fc.constant('text'), str), text: fc.oneof(str, value) }), { maxLength: 3 }) as fc.Arbitrary<JValue> },
    { weight: 1, arbitrary: fc.constantFrom<JValue>(bigString, [{ type: 'text', text: 'x', extra: deepObject }], [{ type: 'image', source: deepArray }]) },
    { weight: 1, arbitrary: value },
  );
  const message = fc.record({ role: fc.oneof({ weight: 4, arbitrary: fc.constantFrom('user', 'assistant') }, { weight: 1, arbitrary: value }), content });
  const maxTokens = fc.oneof({ weight: 2, arbitrary: fc.constantFrom(1, 16) }, { weight: 2, arbitrary: hostileNumber }, { weight: 1, arbitrary: value });
  const extraKey = fc.constantFrom('metadata', 'tools', 'system', 'stop_sequences', 'temperature', 'stream', 'thinking', 'tool_choice', '__proto__', 'constructor');
  const json = fc.record({
    model: fc.option(model, { freq: 10 }),
    messages: fc.option(fc.oneof({ weight: 4, arbitrary: fc.array(message, { minLength: 1, maxLength: 3 }) as fc.Arbitrary<JValue> }, { weight: 1, arbitrary: value }), { freq: 10 }),
    max_tokens: fc.option(maxTokens, { freq: 10 }),
    stream: fc.option(fc.oneof(fc.boolean(), value), { freq: 2 }),
    extras: fc.array(fc.tuple(extraKey, fc.oneof(value, fc.constantFrom<JValue>(deepObject, deepArray))), { maxLength: 2 }),
  }).map(({ model: m, messages, max_tokens, stream, extras }) => {
    const out: Record<string, JValue> = {};
    const set = (k: string, v: JValue) => Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
    if (m !== null) set('model', m);
    if (messages !== null) set('messages', messages);
    if (max_tokens !== null && !countTokens) set('max_tokens', max_tokens);
    // Streams are answered 200 and billed like any other; keep them rare to spare the time.
    if (stream !== null && !countTokens) set('stream', stream);
    for (const [k, v] of extras) set(k, v);
    return { kind: 'json' as const, value: out };
  });
  return fc.oneof(
    { weight: 6, arbitrary: json },
    { weight: 1, arbitrary: hostileValue(dictionary).map((value) => ({ kind: 'json' as const, value })) },
    { weight: 1, arbitrary: hostileBytes() },
  );
}

/**
 * Values the relay's own code sees: what HTTP allows, plus DEL, which uWebSockets.js passes through
 * while undici refuses to send it on. Other control characters never reach JavaScript (see
 * RELAY_PARSER_SILENCE_MS); they have their own property below.
 */
const relayHeaderValue: fc.Arbitrary<string | Buffer> = fc.oneof(
  { weight: 4, arbitrary: hostileHeaderValue(dictionary, true) },
  { weight: 1, arbitrary: fc.constantFrom('\x7f', 'a\x7fb', '2023-06-01\x7f', 'tools-2024-04-04,\x7f') },
);

const anthropicHeaders: fc.Arbitrary<[string, string | Buffer][]> = fc.array(
  fc.tuple(fc.constantFrom('anthropic-version', 'anthropic-beta'), fc.oneof(fc.constantFrom('2023-06-01', 'prompt-caching-2024-07-31'), relayHeaderValue)),
  { maxLength: 2 },
);

const relayContentType: fc.Arbitrary<[string, string][]> = fc.oneof(
  { weight: 6, arbitrary: fc.constant([['content-type', 'application/json']] as [string, string][]) },
  { weight: 1, arbitrary: fc.constantFrom<[string, string][]>([], [['content-type', 'text/plain']], [['content-type', 'application/json; charset=utf-16']], [['content-type', 'multipart/form-data; boundary=x']]) },
);

interface RelayOp {
  name: string;
  weight: number;
  /** Cases regardless of FUZZ_RUNS: for requests the parser refuses in silence, each costs the silence. */
  fixedRuns?: number;
  cases: fc.Arbitrary<Case>;
}

const anyMethod = fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD', 'TRACE', 'PROPFIND', 'get');
const standardMethod = fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD');
const rarelyOther = (m: string, methods = standardMethod) => fc.oneof({ weight: 9, arbitrary: fc.constant(m) }, { weight: 1, arbitrary: methods });

function relayCase(method: fc.Arbitrary<string>, target: fc.Arbitrary<string>, body: fc.Arbitrary<BodySpec | undefined>,
  auth = relayAuth, anthropic = anthropicHeaders, extras = hostileHeaders(dictionary, true)): fc.Arbitrary<Case> {
  return fc.tuple(method, target, auth, anthropic, relayContentType, extras, body).map(
    ([m, t, auth, anth, ct, extra, b]) => makeCase({
      method: m, target: t, headers: [...auth.headers, ...anth, ...(b ? ct : []), ...extra], ...(b ? { body: encodeBody(b) } : {}),
    }, auth.label, bodyLabel(b)));
}

const realKeyAuth = fc.constantFrom('x-api-key', 'authorization').map((h) => ({ label: 'real key', headers: [[h, h === 'x-api-key' ? realKey.key : `Bearer ${realKey.key}`]] as [string, string][] }));
const validMessages = fc.record({ model: fc.constantFrom(MODEL, MAPPED_MODEL), max_tokens: fc.constantFrom(1, 8), stream: fc.boolean() })
  .map((v): BodySpec => ({ kind: 'json', value: { ...v, messages: [{ role: 'user', content: 'hello' }] } }));
/** Headers that break HTTP/1.1 (control characters), on any route: the parser may refuse, the app must not 5xx. */
const protocolHeaders = hostileHeaders(dictionary, false).filter((h) => h.length > 0);

const relayOps: RelayOp[] = [
  { name: 'POST /v1/messages, hostile bodies', weight: 4, cases: relayCase(rarelyOther('POST'), fc.constantFrom('/v1/messages', '/v1/messages?beta=true', '/v1/messages/', '/v1//messages'), messagesBody(false), relayAuth, fc.constant([])) },
  { name: 'POST /v1/messages, hostile anthropic-version/anthropic-beta and headers with a valid body and the real key', weight: 2, cases: relayCase(fc.constant('POST'), fc.constant('/v1/messages'), validMessages, realKeyAuth, anthropicHeaders.filter((h) => h.length > 0)) },
  { name: 'POST /v1/messages/count_tokens', weight: 3, cases: relayCase(rarelyOther('POST'), fc.constantFrom('/v1/messages/count_tokens', '/v1/messages/count_tokens?x=%FF'), messagesBody(true), relayAuth, fc.constant([])) },
  { name: 'GET /v1/models', weight: 2, cases: relayCase(rarelyOther('GET'), hostileQuery(['limit', 'after_id', 'before_id'], dictionary).map((q) => '/v1/models' + q), fc.constant(undefined)) },
  { name: 'GET /v1/models/:model_id', weight: 3, cases: relayCase(rarelyOther('GET'), fc.tuple(fc.oneof(hostileSegment(dictionary, []), fc.constantFrom(MODEL, MAPPED_MODEL)), hostileQuery(['limit'], dictionary)).map(([s, q]) => `/v1/models/${s}${q}`), fc.constant(undefined)) },
  { name: 'GET /health and /metrics', weight: 1, cases: relayCase(rarelyOther('GET'), fc.tuple(fc.constantFrom('/health', '/metrics', '/health/', '/metrics/x'), hostileQuery(['x'], dictionary)).map(([p, q]) => p + q), fc.option(hostileBytes(), { freq: 4, nil: undefined })) },
  { name: 'any other path', weight: 1, cases: relayCase(anyMethod, fc.tuple(fc.constantFrom('/', '/v1/', '/v1/x/', '/v2/', '/api/', '', '*', '/%2e%2e/', '//'), hostileSegment(dictionary, [])).map(([p, s]) => (p === '' || p === '*' ? p || '/' : p + s)), fc.option(hostileBytes(), { freq: 3, nil: undefined })) },
  { name: 'any route, headers with control characters', weight: 1, fixedRuns: 20, cases: relayCase(fc.constantFrom('GET', 'POST'), fc.constantFrom('/v1/messages', '/v1/messages/count_tokens', '/v1/models', `/v1/models/${MODEL}`, '/health'), fc.option(validMessages, { nil: undefined }), relayAuth, anthropicHeaders, protocolHeaders) },
];

// ---------------------------------------------------------------------------- console cases

/** What a 200 carries: the envelope, a bare JSON document (the OpenAPI one) or text (provider callbacks). */
function producesOf(content: Record<string, unknown> | undefined): string {
  if (content?.['text/plain']) return 'text/plain';
  const schema = (content?.['application/json'] as { schema?: { properties?: Record<string, unknown> } } | undefined)?.schema;
  return schema?.properties?.success ? 'envelope' : 'application/json';
}

const consoleOps: ConsoleOp[] = Object.entries(openapi.paths).flatMap(([path, methods]) =>
  Object.entries(methods).map(([method, op]) => ({
    name: `${method.toUpperCase()} ${path}`,
    method: method.toUpperCase(),
    path,
    params: (op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name),
    queries: (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
    body: op.requestBody?.content['application/json']?.schema,
    ...(op['x-min-role'] !== undefined ? { minRole: op['x-min-role'] } : {}),
    produces: producesOf(op.responses['200']?.content),
    mayFailUpstream: '502' in op.responses,
  })));

/** Which session a console case presents; 'root' and 'user' are real and refreshed if revoked. */
const tokens = { root: root.token, user: user.token };
type ConsoleCred = 'none' | 'root' | 'user' | { label: string; header: [string, string | Buffer] };

const consoleCred: fc.Arbitrary<ConsoleCred> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<ConsoleCred>('root') },
  { weight: 2, arbitrary: fc.constant<ConsoleCred>('user') },
  { weight: 1, arbitrary: fc.constant<ConsoleCred>('none') },
  { weight: 2, arbitrary: fc.oneof(
    hostileHeaderValue(dictionary, true).map((v) => ({ label: 'random bearer', header: ['authorization', Buffer.concat([Buffer.from('Bearer '), typeof v === 'string' ? Buffer.from(v, 'latin1') : v])] as [string, Buffer] })),
    fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 32, maxLength: 64 }).map((t) => ({ label: 'random token', header: ['authorization', `Bearer ${t}`] as [string, string] })),
    fc.constantFrom(
      { label: 'API key as session', header: ['authorization', `Bearer ${realKey.key}`] as [string, string] },
      { label: 'session and %00', header: ['authorization', `Bearer ${root.token}%00`] as [string, string] },
      { label: 'session in upper case', header: ['authorization', `Bearer ${root.token.toUpperCase()}`] as [string, string] },
      { label: 'Basic credentials', header: ['authorization', `Basic ${Buffer.from(`${root.username}:${root.password}`).toString('base64')}`] as [string, string] },
      { label: 'bare session', header: ['authorization', root.token] as [string, string] },
      { label: 'session in x-api-key', header: ['x-api-key', root.token] as [string, string] },
    ),
  ) },
);

function credHeader(c: ConsoleCred): [string, string | Buffer][] {
  if (c === 'none') return [];
  if (c === 'root' || c === 'user') return [['authorization', `Bearer ${tokens[c]}`]];
  return [c.header];
}

const consoleContentType: fc.Arbitrary<[string, string][]> = fc.oneof(
  { weight: 8, arbitrary: fc.constant([['content-type', 'application/json']] as [string, string][]) },
  { weight: 1, arbitrary: fc.constantFrom<[string, string][]>([], [['content-type', 'text/plain']], [['content-type', 'application/x-www-form-urlencoded']],
    [['content-type', 'application/json; charset=utf-16']], [['content-type', 'application/json; charset=latin1']], [['content-type', 'multipart/form-data; boundary=x']], [['content-type', 'application/json\xff']]) },
);

/** A console case: its credential is resolved when it runs (sessions are replaced if a case revokes one). */
interface ConsoleCase {
  cred: ConsoleCred;
  build(): RawRequest;
  label: string;
}

function consoleCases(op: ConsoleOp): fc.Arbitrary<ConsoleCase> {
  const segment = hostileSegment(dictionary, victimIds, true);
  const pathArb = fc.tuple(...op.params.map(() => segment)).map((values) => {
    let p = op.path;
    op.params.forEach((name, i) => { p = p.replace(`{${name}}`, values[i]!); });
    return p;
  });
  const pathWithSlash = fc.tuple(pathArb, fc.constantFrom('', '', '', '/', '//', '?', '#x')).map(([p, s]) => (s === '/' && p.endsWith('/') ? p : p + s));
  const ctx = { dictionary, id: idArb };
  const bodyArb: fc.Arbitrary<BodySpec | undefined> = op.body
    ? fc.oneof(
      { weight: 8, arbitrary: fromSchema(op.body, ctx).map((value) => ({ kind: 'json' as const, value })) },
      { weight: 1, arbitrary: hostileValue(dictionary).map((value) => ({ kind: 'json' as const, value })) },
      { weight: 1, arbitrary: hostileBytes() },
    )
    : op.method === 'GET' ? fc.constant(undefined) : fc.option(fc.oneof(hostileBytes(), hostileValue(dictionary).map((value) => ({ kind: 'json' as const, value }))), { freq: 3, nil: undefined });
  return fc.tuple(rarelyOther(op.method), pathWithSlash, hostileQuery(op.queries, dictionary, true), consoleCred, consoleContentType, hostileHeaders(dictionary, true), bodyArb)
    .map(([method, path, query, cred, ct, extra, body]) => {
      const target = path.includes('?') ? path + query.replace('?', '&') : path + query;
      const bytes = body ? encodeBody(body) : undefined;
      const build = (): RawRequest => ({ method, target, headers: [...credHeader(cred), ...(body ? ct : []), ...extra], ...(bytes ? { body: bytes } : {}) });
      const shown = makeCase({ method, target, headers: [...(body ? ct : []), ...extra] }, typeof cred === 'string' ? cred : cred.label, bodyLabel(body));
      const c: ConsoleCase = { cred, build, label: shown.label };
      Object.defineProperty(c, fc.toStringMethod, { value: () => c.label });
      return c;
    });
}

/**
 * Legitimate consequences of a case, undone so later cases keep their footing: a session revoked by
 * logout is replaced, an option a case managed to set is put back.
 */
async function restoreAfter(op: ConsoleOp, cred: ConsoleCred, a: RawAnswer): Promise<void> {
  if (a.status < 200 || a.status >= 300) return;
  if (cred === 'root' || cred === 'user') {
    const self = await consoleCall(stack, 'GET', '/api/user/self', tokens[cred]);
    if (self.status === 401) tokens[cred] = (await issueSession(stack.sql, cred === 'root' ? root.id : user.id, 86_400, Math.floor(Date.now() / 1000)))!;
  }
  if (op.path === '/api/option/' && op.method === 'PUT') {
    for (const [key, value] of optionSnapshot) {
      const [row] = await stack.sql`SELECT value FROM options WHERE key = ${key}`;
      if (row && row.value !== value) {
        const put = await consoleCall(stack, 'PUT', '/api/option/', tokens.root, { key, value });
        if (!put.json.success) throw new Error(`could not restore option ${key}: ${put.json.message}`);
      }
    }
  }
}

// ---------------------------------------------------------------------------- properties

const consolePort = Number(new URL(stack.consoleUrl).port);
/**
 * FUZZ_SURVEY=1: run every case and list each distinct failure (by problem, status and the start of
 * the body) instead of stopping at the first and shrinking it: a map of what is still broken.
 */
const SURVEY = !!process.env.FUZZ_SURVEY;
const surveyed = new Map<string, Map<string, string>>();

function verdict(test: string, problem: string | null, label: string, a: RawAnswer, started: number): void {
  if (process.env.FUZZ_DEBUG && Date.now() - started > 2000) console.log(`slow (${Date.now() - started} ms): ${label} -> ${show(a)}`);
  if (!problem) return;
  const message = `${problem}\n  request: ${label}\n  answer: ${show(a)}`;
  if (!SURVEY) throw new Error(message);
  const m = surveyed.get(test) ?? new Map<string, string>();
  surveyed.set(test, m);
  const key = `${problem.split('\n')[0]!.replace(/\d+/g, 'N')} | ${a.status} ${a.body.toString('utf8').slice(0, 100).replace(/\d+/g, 'N')}`;
  if (!m.has(key)) m.set(key, message);
}

function surveyVerdict(test: string): void {
  const m = surveyed.get(test);
  if (m?.size) throw new Error(`${m.size} distinct failure(s):\n\n${[...m.values()].join('\n\n')}`);
}

const relayWeight = relayOps.reduce((s, o) => s + o.weight, 0);
const perConsoleOp = Math.max(10, Math.round((RUNS * (1 - RELAY_SHARE)) / consoleOps.length));
// A property that runs out of time fails: answers that take seconds are a finding, not noise.
const fcParams = (name: string, numRuns: number) => ({ seed: seedFor(name), numRuns, interruptAfterTimeLimit: 120_000, markInterruptAsFailure: true });

describe(`edge fuzz (FUZZ_SEED=${SEED}, FUZZ_RUNS=${RUNS})`, () => {
  describe('relay routes (relay in a child process)', () => {
    it('starts the relay under fuzz from a fresh dist/', async () => {
      assertDistFresh();
      relayChild = new RelayChild();
      await relayChild.start();
    }, 60_000);

    for (const op of relayOps) {
      const numRuns = op.fixedRuns ?? Math.max(10, Math.round((RUNS * RELAY_SHARE * op.weight) / relayWeight));
      it(`${op.name}: ${numRuns} hostile requests, each answered without 5xx in Anthropic's envelope`, async () => {
        if (!relayChild?.alive()) throw new Error('the relay under fuzz is not running (see the first relay test)');
        await fc.assert(fc.asyncProperty(op.cases, async (c) => {
          const started = Date.now();
          const broken = breaksHttp(c.req.method, c.req.headers, c.req.target);
          const a = await sendRaw(relayChild!.port, c.req, broken ? RELAY_PARSER_SILENCE_MS : undefined);
          let problem = checkRelayAnswer(c, a);
          if (a.closedWithoutAnswer || a.status >= 500 || a.timedOut) {
            const death = await relayChild!.checkDeath();
            if (death) problem = death;
          }
          verdict(op.name, problem, c.label, a, started);
        }), fcParams(op.name, numRuns));
        surveyVerdict(op.name);
      }, 600_000);
    }
  });

  describe(`console routes (${consoleOps.length} operations from /api/openapi.json)`, () => {
    it('lists every operation of the OpenAPI document', () => {
      expect(consoleOps.length).toBeGreaterThan(10);
      expect(consoleOps.map((o) => o.name)).toContain('POST /api/user/login');
    });

    for (const op of consoleOps) {
      it(`${op.name}: ${perConsoleOp} hostile requests, each answered without 5xx in the {success, message} envelope`, async () => {
        await fc.assert(fc.asyncProperty(consoleCases(op), async (c) => {
          const started = Date.now();
          const req = c.build();
          const a = await sendRaw(consolePort, req);
          const problem = checkConsoleAnswer(op, req, a);
          await restoreAfter(op, c.cred, a);
          verdict(op.name, problem, c.label, a, started);
        }), fcParams(op.name, perConsoleOp));
        surveyVerdict(op.name);
      }, 600_000);
    }

    const otherPaths = 'hostile paths outside the document';
    it(`${otherPaths}: answered in the envelope`, async () => {
      const target = fc.tuple(fc.constantFrom('/api/', '/api/user/', '/api/token/', '/', '/x/', '/api/channel/test/'), hostileSegment(dictionary, victimIds, true), hostileQuery(['p', 'id'], dictionary, true)).map(([p, s, q]) => p + s + q);
      await fc.assert(fc.asyncProperty(fc.tuple(standardMethod, target, consoleCred, hostileHeaders(dictionary, true)), async ([method, t, cred, extra]) => {
        const started = Date.now();
        const req: RawRequest = { method, target: t, headers: [...credHeader(cred), ...extra] };
        const a = await sendRaw(consolePort, req);
        verdict(otherPaths, webConsolePage(req, a) ? null : checkConsoleAnswer(null, req, a), makeCase(req, typeof cred === 'string' ? cred : cred.label, '(none)').label, a, started);
      }), fcParams(otherPaths, perConsoleOp * 2));
      surveyVerdict(otherPaths);
    }, 600_000);

    const protocol = 'any operation, requests that break HTTP/1.1 (control characters, raw bytes, odd methods, 64 KiB headers)';
    it(`${protocol}: refused by the HTTP parser or answered in the envelope`, async () => {
      const cases = fc.tuple(fc.constantFrom(...consoleOps), fc.option(anyMethod, { freq: 3 }), hostileSegment(dictionary, victimIds), consoleCred, protocolHeaders).map(([op, method, seg, cred, extra]) => {
        const req: RawRequest = { method: method ?? op.method, target: op.path.replace(/\{[^}]+\}/g, seg), headers: [...credHeader(cred), ...extra] };
        const label = makeCase(req, typeof cred === 'string' ? cred : cred.label, '(none)').label;
        return { op, req, cred, label, [fc.toStringMethod]: () => label };
      });
      await fc.assert(fc.asyncProperty(cases, async ({ op, req, cred, label }) => {
        const started = Date.now();
        const a = await sendRaw(consolePort, req);
        await restoreAfter(op, cred, a);
        verdict(protocol, checkConsoleAnswer(op, req, a), label, a, started);
      }), fcParams(protocol, perConsoleOp * 2));
      surveyVerdict(protocol);
    }, 600_000);
  });

  describe('afterwards', () => {
    it('the relay heap stays bounded over 20,000 requests with random keys on GET /v1/models', async () => {
      v8.setFlagsFromString('--expose-gc');
      const gc = runInNewContext('gc') as () => void;
      const pool = new Pool(stack.relayUrl, { connections: 16, pipelining: 1 });
      const rng = fc.sample(fc.oneof(
        wellFormedKey,
        // Garbage of a few kilobytes each: a cache that keeps every miss keeps these too.
        fc.tuple(fc.string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789-_.'), minLength: 8, maxLength: 16 }), fc.integer({ min: 2000, max: 4000 })).map(([s, n]) => s.repeat(Math.ceil(n / s.length)).slice(0, n)),
      ), { seed: seedFor('heap'), numRuns: 1000 });
      let n = 0;
      const statuses = new Map<number, number>();
      const burst = async (count: number) => {
        const workers = Array.from({ length: 16 }, async () => {
          while (n < count) {
            const i = n++;
            // Unique per request: a fresh key each time, as an attacker enumerating keys would send.
            const key = i % 2 === 0 ? randomWellFormedKey() : `${rng[i % rng.length]}${i}`;
            const r = await pool.request({ path: '/v1/models', method: 'GET', headers: { 'x-api-key': key } });
            await r.body.dump();
            statuses.set(r.statusCode, (statuses.get(r.statusCode) ?? 0) + 1);
          }
        });
        await Promise.all(workers);
      };
      await burst(1000);
      await new Promise((r) => setTimeout(r, 200));
      gc(); gc();
      const before = process.memoryUsage().heapUsed;
      n = 0;
      statuses.clear();
      await burst(20_000);
      await new Promise((r) => setTimeout(r, 200));
      gc(); gc();
      const growthMb = (process.memoryUsage().heapUsed - before) / 1024 / 1024;
      await pool.close();
      expect([...statuses.keys()], 'every random key is refused as unknown').toEqual([401]);
      expect(growthMb, `heap grew ${growthMb.toFixed(1)} MB over 20,000 random-key requests`).toBeLessThan(30);
    }, 180_000);

    it('both processes still answer: the relays (this process and the fuzzed child) and the console', async () => {
      const health = await fetch(`${stack.relayUrl}/health`);
      expect(health.status).toBe(200);
      if (relayChild) {
        expect(relayChild.alive(), `the fuzzed relay died ${relayChild.deaths.length} time(s); first:\n${relayChild.deaths[0] ?? ''}`).toBe(true);
        expect(relayChild.deaths, 'the fuzzed relay never died').toEqual([]);
        const h = await sendRaw(relayChild.port, { method: 'GET', target: '/health', headers: [] });
        expect(h.status).toBe(200);
      }
      const status = await fetch(`${stack.consoleUrl}/api/status`);
      expect(status.status).toBe(200);
      expect(((await status.json()) as { success: boolean }).success).toBe(true);
      const models = await fetch(`${stack.relayUrl}/v1/models`, { headers: { 'x-api-key': realKey.key } });
      expect(models.status, 'the real key still lists models').toBe(200);
      const self = await consoleCall(stack, 'GET', '/api/user/self', tokens.root);
      expect(self.status).toBe(200);
    }, 30_000);
  });
});
