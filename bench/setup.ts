// Getting the stack under test ready for the runs: the stack itself (started, or attached to by
// URL), then the bench's account, key, channels and prices on it, a relay that serves them, the
// mocks' output caps and cache usage and the relay's ratios the money audit must use.
import { join } from 'node:path';
import type { ClickHouseClient } from '@clickhouse/client';
import type { Redis } from 'ioredis';
import type { Sql } from '../infra/postgres/client.js';
import type { RedisKeys } from '../infra/redis/keys.js';
import { loadOptions } from '../core/options/options-source.js';
import {
  FALLBACK_CACHE_READ_RATIO, FALLBACK_CACHE_WRITE_1H_RATIO, FALLBACK_CACHE_WRITE_RATIO, FALLBACK_COMPLETION_RATIO, ratiosFromOptions,
} from '../core/pricing/ratios.js';
import { postgresBalanceSource } from '../core/quota/postgres-balance-source.js';
import { QuotaStore } from '../core/quota/quota-store.js';
import { Auditor, type AuditResult } from './lib/audit.js';
import { buildRequest, drive } from './lib/driver.js';
import { BENCH_MODELS, ensureBenchFixtures } from './lib/fixtures.js';
import { pidsByComm, type Watched } from './lib/proc.js';
import { attachStack, servicePids, startStack, type ServiceName, type Stack } from './lib/stack.js';
import type { BareUpstreamApi } from './bare-proxy.js';
import { pidList, type BenchArgs, type BenchOptions } from './options.js';
import type { MessageUsage } from './mock-upstream/wire-format.js';
import {
  bodyJson, chatBodyJson, expectationsFor, isRelay, OPENAI_BARE_NAME, OPENAI_MOCK_NAME, PROBE_BODY, requestOf, upstreamOf,
  type BodySpec, type MockCacheUsage, type MockMediaTokens, type MockOpenAIUsage, type RunContext, type Target, type Upstream,
} from './scenarios.js';
import { countPromptTokens } from './mock-upstream-openai/mock-openai.js';
import { ensureFailingChannel, failChannelDuring } from './lib/channel-failure.js';
import { PEER_NAME, peerHeaders } from './lib/peer-gateway.js';

export function openStack(
  { args, opts, keySecret }: { args: BenchArgs; opts: BenchOptions; keySecret: string | undefined },
  outDir: string,
  profileDir: string,
  log: (line: string) => void,
): Promise<Stack> {
  return opts.attached ? attachStack({
    outDir,
    ...opts.attached,
    mockKey: args['mock-key'] ?? process.env.MOCK_UPSTREAM_KEY ?? 'sk-ant-mock-local',
    databaseUrl: opts.databaseUrl,
    redisUrl: opts.redisUrl,
    redisPrefix: opts.redisPrefix,
    clickhouseUrl: opts.clickhouseUrl ?? 'http://127.0.0.1:8123',
    clickhouseDatabase: opts.clickhouseDatabase,
    keySecret,
    pids: { relay: pidList(args['relay-pid']), billing: pidList(args['billing-pid']), mock: pidList(args['mock-pid']), console: pidList(args['console-pid']) },
    bareUpstreamApi: bareUpstreamApi(process.env.BENCH_BARE_UPSTREAM_API),
    log,
  }) : startStack({
    outDir,
    databaseUrl: opts.databaseUrl,
    redisUrl: opts.redisUrl,
    redisPrefix: opts.redisPrefix,
    clickhouseUrl: opts.clickhouseUrl,
    clickhouseDatabase: opts.clickhouseDatabase,
    ownClickHouse: args['own-clickhouse'] === true,
    relayEntry: args['relay-entry'],
    billingEntry: args['billing-entry'],
    consoleEntry: args['console-entry'],
    // BENCH_RELAY_NODE_ARGS: extra Node flags for the relay, for experiments (e.g. GC settings).
    relayNodeArgs: [
      ...(opts.cpuProf ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []),
      ...(process.env.BENCH_RELAY_NODE_ARGS ?? '').split(' ').filter(Boolean),
    ],
    bareNodeArgs: opts.cpuProf ? ['--cpu-prof', '--cpu-prof-dir', join(profileDir, 'bare')] : [],
    billingNodeArgs: (process.env.BENCH_BILLING_NODE_ARGS ?? '').split(' ').filter(Boolean),
    consoleNodeArgs: (process.env.BENCH_CONSOLE_NODE_ARGS ?? '').split(' ').filter(Boolean),
    clickhouseNodeArgs: (process.env.BENCH_CLICKHOUSE_NODE_ARGS ?? '').split(' ').filter(Boolean),
    bareUpstreamApi: bareUpstreamApi(process.env.BENCH_BARE_UPSTREAM_API),
    log,
  });
}

/** BENCH_BARE_UPSTREAM_API: `request` gives the bare hop's baseline of the runs before 2026-11-24 (bare-proxy.ts). */
function bareUpstreamApi(value: string | undefined): BareUpstreamApi | undefined {
  if (value === undefined || value === '') return undefined;
  if (value === 'request' || value === 'dispatch') return value;
  throw new Error(`BENCH_BARE_UPSTREAM_API: request or dispatch, not "${value}"`);
}

function watched(stack: Stack): Watched[] {
  const w: Watched[] = [{ name: 'load generator', pids: [process.pid] }];
  const rows: Array<[string, ServiceName]> = [
    ['relay', 'relay'], ['bare proxy', 'bare'], ['mock', 'mock'], [OPENAI_BARE_NAME, 'bareOpenai'], [OPENAI_MOCK_NAME, 'mockOpenai'],
    ['billing', 'billing'], ['console-api', 'console'], ['clickhouse', 'clickhouse'], [PEER_NAME, 'peer'],
  ];
  for (const [name, key] of rows) {
    const pids = servicePids(stack, key);
    if (pids?.length) w.push({ name, pids });
  }
  w.push({ name: 'redis-server', pids: pidsByComm('redis-server') });
  // Every backend, those the pools open during a run included (billing's batches run in them).
  w.push({ name: 'postgres', pids: pidsByComm('postgres'), comm: 'postgres' });
  return w;
}

/**
 * Until the relay answers the bench key with 200 (a running relay picks the new key, channel and
 * prices up from the invalidations, or within its periodic reload). A 401 means the key was sealed
 * with another KEY_SECRET than the relay's.
 */
async function relayReady(relayUrl: string, headers: Record<string, string>, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const res = await fetch(`${relayUrl}/v1/messages`, { method: 'POST', headers, body: bodyJson(PROBE_BODY), signal: AbortSignal.timeout(5000) });
      const text = await res.text();
      if (res.ok) return;
      last = `HTTP ${res.status} ${text.slice(0, 300)}`;
      if (res.status === 401) throw new Error(`the relay rejected the bench's API key (${last}): the key is sealed with --key-secret / KEY_SECRET, which must be the relay's own`);
    } catch (err) {
      if (err instanceof Error && err.message.startsWith('the relay rejected')) throw err;
      last = String(err);
    }
    if (Date.now() > end) throw new Error(`the relay did not serve the bench's model within ${timeoutMs / 1000} s: ${last}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Output tokens the mock gives a request asking for 4,000 (its --output-tokens cap), and the cache usage it reports. */
async function mockUsage(mockUrl: string, headers: Record<string, string>): Promise<{ cap: number; cache: MockCacheUsage }> {
  const res = await fetch(`${mockUrl}/v1/messages`, { method: 'POST', headers, body: bodyJson({ model: 'bench-probe', maxTokens: 4000, stream: false }), signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  if (!res.ok) throw new Error(`the mock provider answered HTTP ${res.status} (${text.slice(0, 200)})${res.status === 401 ? ': --mock-key must be the key it requires (MOCK_UPSTREAM_KEY of the stack)' : ''}`);
  const u = (JSON.parse(text) as { usage?: MessageUsage }).usage;
  if (typeof u?.output_tokens !== 'number') throw new Error('the mock provider\'s answer has no usage.output_tokens');
  const cache = {
    cacheReadTokens: u.cache_read_input_tokens ?? 0,
    cacheCreationTokens: u.cache_creation_input_tokens ?? 0,
    cacheCreation1hTokens: u.cache_creation?.ephemeral_1h_input_tokens ?? 0,
  };
  return { cap: u.output_tokens, cache };
}

/**
 * What the OpenAI-format mock answers a request asking for 4,000 tokens with: its output cap and the
 * cached_tokens it reports (its knobs). Its prompt_tokens must be what countPromptTokens counts, the
 * formula the audit's expectations apply to every body.
 */
async function mockOpenAIUsage(mockUrl: string, headers: Record<string, string>): Promise<MockOpenAIUsage> {
  const body = chatBodyJson({ model: 'bench-oai-probe', maxTokens: 4000, stream: false });
  const res = await fetch(`${mockUrl}/v1/chat/completions`, { method: 'POST', headers, body, signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  if (!res.ok) throw new Error(`the OpenAI-format mock answered HTTP ${res.status} (${text.slice(0, 200)})`);
  const u = (JSON.parse(text) as { usage?: { prompt_tokens?: number; completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } } }).usage;
  if (typeof u?.completion_tokens !== 'number' || typeof u.prompt_tokens !== 'number') throw new Error('the OpenAI-format mock\'s answer has no usage.prompt_tokens / completion_tokens');
  const counted = countPromptTokens(JSON.parse(body));
  if (u.prompt_tokens !== counted) throw new Error(`the OpenAI-format mock counted ${u.prompt_tokens} prompt tokens where its formula (countPromptTokens) gives ${counted}: the audit could not compute its bills`);
  return { outputCap: u.completion_tokens, cachedTokens: u.prompt_tokens_details?.cached_tokens ?? 0 };
}

/**
 * Until the relay answers a request for a model of the OpenAI-format channel with 200: the channel
 * is loaded and routes to the OpenAI-format mock (a model of no enabled channel would answer 503).
 */
async function relayServesOpenAIChannel(relayUrl: string, headers: Record<string, string>, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const res = await fetch(`${relayUrl}/v1/chat/completions`, { method: 'POST', headers, body: chatBodyJson({ model: 'bench-oai-chat', maxTokens: 16, stream: false, protocol: 'openai', upstream: 'openai' }), signal: AbortSignal.timeout(5000) });
      const text = await res.text();
      if (res.ok) return;
      last = `HTTP ${res.status} ${text.slice(0, 300)}`;
    } catch (err) {
      last = String(err);
    }
    if (Date.now() > end) throw new Error(`the relay did not serve the OpenAI-format channel's model within ${timeoutMs / 1000} s: ${last}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Input tokens the mock charges per image and per document block: the input_tokens of a request with
 * one such block less that of the same text alone (its knobs, as a running mock was started with them).
 */
async function mockMediaTokens(mockUrl: string, headers: Record<string, string>): Promise<MockMediaTokens> {
  const input = async (media: BodySpec['media']): Promise<number> => {
    const res = await fetch(`${mockUrl}/v1/messages`, { method: 'POST', headers, body: bodyJson({ ...PROBE_BODY, media }), signal: AbortSignal.timeout(10_000) });
    const text = await res.text();
    if (!res.ok) throw new Error(`the mock provider answered a media request HTTP ${res.status} (${text.slice(0, 200)})`);
    const n = (JSON.parse(text) as { usage?: MessageUsage }).usage?.input_tokens;
    if (typeof n !== 'number') throw new Error('the mock provider\'s answer has no usage.input_tokens');
    return n;
  };
  const [text, image, document] = await Promise.all([input({}), input({ images: 1 }), input({ documents: 1 })]);
  return { image: image - text, document: document - text };
}

export interface BenchTarget extends RunContext {
  /** Output tokens the mock gives at most. */
  mockOutputCap: number;
  /** The relay's group ratio of "default", which the audit's formula applies. */
  groupRatio: number;
  /** Input tokens the mock charges per image / document block. */
  mockMediaTokens: MockMediaTokens;
  /** The OpenAI-format mock's output cap and cached tokens; null without one (attached). */
  mockOpenAIUsage: MockOpenAIUsage | null;
}

/** `notes` gets what the report must say about the target (output cap, group ratio). */
export async function prepareTarget(
  { opts, log, stack, sql, redis, ch, keys, notes }: {
    opts: BenchOptions; log: (line: string) => void; stack: Stack; sql: Sql; redis: Redis; ch: ClickHouseClient; keys: RedisKeys; notes: string[];
  },
): Promise<BenchTarget> {
  const fx = await ensureBenchFixtures(sql, stack.config, stack.mockUrl, stack.mockKey, {
    exclusive: stack.mode === 'own', openai: stack.openai ? { url: stack.openai.mockUrl, key: stack.openai.mockKey } : undefined,
  });
  // After the fixtures, which disable every other channel of the bench's own database.
  const failingChannelId = stack.mode === 'own' ? await ensureFailingChannel(sql, stack.config, stack.mockUrl) : undefined;
  // The balance was reset in Postgres: move a loaded Redis mirror by as much (as the console does
  // for a top-up), then tell a running relay to reload the account, key, channels and prices.
  await new QuotaStore(redis, keys, postgresBalanceSource(sql)).adjustAccount(fx.userId, fx.quotaDelta);
  const channels = [fx.channelId, ...(fx.openaiChannelId === undefined ? [] : [fx.openaiChannelId])].map((id) => ({ kind: 'channel', id }));
  for (const m of [{ kind: 'user', id: fx.userId }, { kind: 'token', id: fx.tokenId, user_id: fx.userId }, ...channels, { kind: 'options', keys: ['ModelRatio'] }]) {
    await redis.publish(keys.invalidationChannel(), JSON.stringify(m));
  }
  if (stack.mode === 'attached') log(`bench account ${fx.userId}, key ${fx.tokenId}, channel ${fx.channelId} → ${stack.mockUrl}; invalidations published on ${keys.invalidationChannel()}`);
  await stack.startGateway();
  log(`stack up: relay ${stack.relayUrl}, mock ${stack.mockUrl}, bare proxy ${stack.bareUrl}, console ${stack.consoleUrl || '–'}` +
    (stack.openai ? `; OpenAI-format mock ${stack.openai.mockUrl} (channel ${fx.openaiChannelId}), its bare proxy ${stack.openai.bareUrl}` : ''));
  const anthropicUrls: Record<Target, string> = { mock: stack.mockUrl, bare: stack.bareUrl, relay: stack.relayUrl, 'relay-billing-paused': stack.relayUrl, peer: stack.peerUrl ?? '' };
  const openai = stack.openai;
  const urlOf = (target: Target, upstream: Upstream = 'anthropic'): string => {
    if (upstream === 'anthropic' || isRelay(target)) return anthropicUrls[target];
    if (!openai || (target !== 'mock' && target !== 'bare')) throw new Error(`no ${target} target for the OpenAI-format channel's scenarios${openai ? '' : ' (no OpenAI-format mock: the bench\'s own stack only)'}`);
    return target === 'mock' ? openai.mockUrl : openai.bareUrl;
  };
  // The relay takes either protocol's credential header; the OpenAI-format mock and its bare proxy a Bearer key.
  const headersOf = (target: Target, upstream: Upstream = 'anthropic'): Record<string, string> => (upstream === 'openai' && !isRelay(target)
    ? { 'content-type': 'application/json', authorization: `Bearer ${openai?.mockKey ?? ''}` }
    : {
      'content-type': 'application/json',
      'anthropic-version': '2023-06-01',
      'x-api-key': isRelay(target) ? fx.apiKey : stack.mockKey,
      ...(target === 'peer' ? peerHeaders(stack.mockUrl) : {}),
    });
  await relayReady(stack.relayUrl, headersOf('relay'));
  if (openai) await relayServesOpenAIChannel(stack.relayUrl, headersOf('relay'));
  // What the mock answers with: a mock started without MOCK_OUTPUT_TOKENS (make run) caps output at
  // 64 tokens, so a 4,000-token stream is 64 tokens long. The expectations follow the mock; the
  // report says so.
  const { cap, cache } = await mockUsage(stack.mockUrl, headersOf('mock'));
  const media = await mockMediaTokens(stack.mockUrl, headersOf('mock'));
  const oaiUsage = openai ? await mockOpenAIUsage(openai.mockUrl, headersOf('mock', 'openai')) : null;
  const expectations = expectationsFor(cap, cache, media, oaiUsage ?? undefined);
  if (oaiUsage) {
    notes.push(`The OpenAI-format mock (the oai-* scenarios' channel of type 1) reports ${oaiUsage.cachedTokens} cached tokens inside every prompt_tokens (prompt_tokens_details.cached_tokens); the audit expects them billed as cache reads and the rest of the prompt as input, as the relay reads an OpenAI usage.`);
  }
  notes.push(`The mock charges ${media.image} input tokens per image and ${media.document} per document block (the mix scenario's media requests); the audit's formula counts them.`);
  if (cache.cacheReadTokens + cache.cacheCreationTokens > 0) {
    notes.push(`The mock reports ${cache.cacheReadTokens} cache reads, ${cache.cacheCreationTokens - cache.cacheCreation1hTokens} 5-minute and ${cache.cacheCreation1hTokens} 1-hour cache writes per request; the audit prices them at the default cache ratios, the writes of a request without a cache_control breakpoint (every bench body) as input, as the gateway bills them.`);
  }
  if (cap < 4000) notes.push(`The mock caps output at ${cap} tokens: the long-stream and abort scenarios carry ${cap} tokens, not 4,000 (start the mock with MOCK_OUTPUT_TOKENS=1000000 for the full length).`);
  // Prices the relay applies: the audit's formula uses the same group and completion ratios.
  const ratios = ratiosFromOptions(await loadOptions(sql));
  const groupRatio = ratios.group('default') ?? 1;
  if (groupRatio !== 1) notes.push(`Group ratio of "default" is ${groupRatio}; the audit's formula applies it.`);
  const oddCompletion = Object.keys(BENCH_MODELS).filter((m) => ratios.completion(m) !== FALLBACK_COMPLETION_RATIO);
  if (oddCompletion.length) throw new Error(`CompletionRatio overrides the bench's models (${oddCompletion.join(', ')}): the audit's formula assumes ${FALLBACK_COMPLETION_RATIO}`);
  const oddCache = Object.keys(BENCH_MODELS).filter((m) =>
    ratios.cacheRead(m) !== FALLBACK_CACHE_READ_RATIO || ratios.cacheWrite(m) !== FALLBACK_CACHE_WRITE_RATIO || ratios.cacheWrite1h(m) !== FALLBACK_CACHE_WRITE_1H_RATIO);
  if (oddCache.length) throw new Error(`CacheRatio, CreateCacheRatio or CreateCacheRatio1h override the bench's models (${oddCache.join(', ')}): the audit's formula assumes the defaults`);
  const auditor = new Auditor(sql, ch, redis, keys, fx.userId);
  const audit = (before: Parameters<Auditor['audit']>[0], clientComplete: number): Promise<AuditResult> =>
    auditor.audit(before, expectations, clientComplete, groupRatio);
  for (const n of notes) log(`note: ${n}`);
  const requestsFor = (target: Target, bodies: BodySpec[]): Buffer[] =>
    bodies.map((b) => {
      const r = requestOf(b, isRelay(target));
      return buildRequest(urlOf(target, upstreamOf(b)), r.path, headersOf(target, upstreamOf(b)), r.body);
    });
  const w = watched(stack);

  // One relay request first: loads the key cache and the balance mirror.
  await drive({ url: stack.relayUrl, requests: requestsFor('relay', [PROBE_BODY]), connections: 1, rate: 0, durationMs: 200 });
  return { opts, log, stack, ch, redis, userId: fx.userId, urlOf, headersOf, requestsFor, auditor, audit, watched: w, mockOutputCap: cap, groupRatio, mockMediaTokens: media, mockOpenAIUsage: oaiUsage,
    failChannelDuring: failingChannelId === undefined ? undefined : (afterMs, run) => failChannelDuring(sql, stack.mockUrl, failingChannelId, afterMs, run) };
}
