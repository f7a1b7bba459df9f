// The bench's scenarios (the request bodies, offered rates and targets of each) and their runs:
// every scenario against each of its targets with a warm-up, the money audit after each relay run,
// the closed-loop saturation runs and the load curve.
import type { ClickHouseClient } from '@clickhouse/client';
import { countInputTokens } from './mock-upstream/mock-upstream.js';
import { countPromptTokens } from './mock-upstream-openai/mock-openai.js';
import { LagProbe, type Auditor, type AuditResult, type ModelExpectation } from './lib/audit.js';
import { cannon } from './lib/cannon.js';
import { drive } from './lib/driver.js';
import { ProcSampler, type Watched } from './lib/proc.js';
import { fmt, saturated, type CurvePoint, type RunFigures, type SaturationRun, type ScenarioReport } from './lib/report.js';
import { servicePids, type Stack } from './lib/stack.js';
import { histogramQuantile, scrapeHistogram } from './lib/prom-scrape.js';
import { PEER_NAME } from './lib/peer-gateway.js';
import { endWaitSnapshot, endWaits, redisDelta, redisSnapshot, runtimeDelta, runtimeSnapshot } from './lib/runtime-figures.js';
import type { Redis } from 'ioredis';
import type { BenchOptions } from './options.js';
import { FAILING_CHANNEL_NAME, type ChannelFailure } from './lib/channel-failure.js';

/** relay-billing-paused: the relay with the billing worker stopped (SIGSTOP) for the run, to tell the
 * relay's own cost from the CPU its billing pipeline (worker, ClickHouse) takes on the same cores. */
/** peer: the same request through Portkey's gateway (lib/peer-gateway.ts), when it started. */
export type Target = 'mock' | 'bare' | 'relay' | 'relay-billing-paused' | 'peer';
/** The provider format a request is served in: the Anthropic mock's, or the OpenAI-format channel's (type 1). */
export type Upstream = 'anthropic' | 'openai';
/**
 * media: image / document blocks (by URL) the request carries before its text. protocol 'openai': the
 * relay is sent the request as Chat Completions (POST /v1/chat/completions, converted to the
 * Anthropic mock's Messages), the mock and the bare proxy its Anthropic equivalent (bodyJson): the
 * same mock direct, so "added" is the conversion's cost too. upstream 'openai': the model is served
 * by the OpenAI-format channel (bench/lib/fixtures.ts, OPENAI_CHANNEL_MODELS), and the mock and bare
 * targets are the OpenAI-format mock and the bare proxy in front of it, sent the Chat Completions
 * form (chatBodyJson); with protocol 'openai' too the relay passes the request through, without it the
 * relay converts an Anthropic Messages request to Chat Completions and the stream back, which
 * "added" then includes.
 */
export interface BodySpec {
  model: string; maxTokens: number; stream: boolean; media?: { images?: number; documents?: number }; protocol?: 'openai'; upstream?: Upstream;
  /** A conversation of this many turns (an agent's: text, tool calls and their results) instead of one prompt. */
  turns?: number;
}
export interface Scenario {
  id: string;
  title: string;
  bodies: BodySpec[];
  /** Offered requests per second; 0 = closed loop. */
  rate: number;
  connections: number;
  targets: Target[];
  abortAfterBodyBytes?: number;
  /** Which of its requests carry images or documents (the report says so). */
  media?: string;
}

const PROMPT = 'Benchmark request: please answer briefly.';
const IMAGE_BLOCK = { type: 'image', source: { type: 'url', url: 'https://bench.invalid/photo.png' } };
const DOCUMENT_BLOCK = { type: 'document', source: { type: 'url', url: 'https://bench.invalid/paper.pdf' } };
/**
 * An agent's conversation of `turns` messages, user first and last: each user turn a text and a tool
 * result, each assistant turn a text and a tool call (~280 bytes a turn; an even count gets one more user turn, so that the user speaks last).
 */
function conversation(turns: number): unknown[] {
  const n = turns % 2 === 0 ? turns + 1 : turns;
  return Array.from({ length: n }, (_, i) => (i % 2 === 0
    ? { role: 'user', content: [...(i > 0 ? [{ type: 'tool_result', tool_use_id: `toolu_${i - 1}`, content: `contents of src/module-${i - 1}.ts: ${'export const x = 1; '.repeat(6)}` }] : []), { type: 'text', text: `${PROMPT} Step ${i / 2 + 1}: look at the next module and say what is wrong with it.` }] }
    : { role: 'assistant', content: [{ type: 'text', text: 'I will read the next file to check it.' }, { type: 'tool_use', id: `toolu_${i}`, name: 'read_file', input: { path: `src/module-${i}.ts` } }] }));
}

export const bodyJson = (b: BodySpec): string => {
  if (b.turns) return JSON.stringify({ model: b.model, max_tokens: b.maxTokens, stream: b.stream, messages: conversation(b.turns) });
  const content = b.media
    ? [...Array<unknown>(b.media.images ?? 0).fill(IMAGE_BLOCK), ...Array<unknown>(b.media.documents ?? 0).fill(DOCUMENT_BLOCK), { type: 'text', text: PROMPT }]
    : PROMPT;
  return JSON.stringify({ model: b.model, max_tokens: b.maxTokens, stream: b.stream, messages: [{ role: 'user', content }] });
};

/** The Chat Completions form of a (text-only) body, as OpenAI's SDK sends it; streams ask for their usage. */
export const chatBodyJson = (b: BodySpec): string => JSON.stringify({
  model: b.model, max_tokens: b.maxTokens, stream: b.stream, ...(b.stream ? { stream_options: { include_usage: true } } : {}),
  messages: [{ role: 'user', content: PROMPT }],
});

/** The provider that serves a body's requests (the mock and bare targets of its scenario). */
export const upstreamOf = (b: BodySpec): Upstream => b.upstream ?? 'anthropic';
/** A scenario's provider: its bodies share one (the mock and bare runs go to one process each). */
export const scenarioUpstream = (sc: Scenario): Upstream => upstreamOf(sc.bodies[0]!);

/**
 * Path and body of a request of `b` to a target: to the relay in the client's protocol, to the mock
 * and the bare proxy in the provider's (Chat Completions for the OpenAI-format channel's).
 */
export function requestOf(b: BodySpec, relay: boolean): { path: string; body: string } {
  const chat = relay ? b.protocol === 'openai' : upstreamOf(b) === 'openai';
  return chat ? { path: '/v1/chat/completions', body: chatBodyJson(b) } : { path: '/v1/messages', body: bodyJson(b) };
}

// Each media request has its own model name, so the audit knows how many blocks the mock charged.
const MIX_MEDIA: Readonly<Record<number, BodySpec>> = {
  3: { model: 'bench-mix-image', maxTokens: 16, stream: false, media: { images: 1 } },
  13: { model: 'bench-mix-document', maxTokens: 16, stream: false, media: { documents: 1 } },
  17: { model: 'bench-mix-media', maxTokens: 16, stream: false, media: { images: 2, documents: 1 } },
};
const mixBodies: BodySpec[] = Array.from({ length: 20 }, (_, i) => MIX_MEDIA[i] ?? ({ model: i === 7 ? 'bench-mix-error529' : 'bench-mix', maxTokens: 16, stream: false }));
export const SCENARIOS: Scenario[] = [
  { id: 'small', title: 'non-streaming, 16 tokens', bodies: [{ model: 'bench-small', maxTokens: 16, stream: false }], rate: 2000, connections: 32, targets: ['mock', 'bare', 'relay', 'relay-billing-paused', 'peer'] },
  { id: 'stream64', title: 'streaming, 64 tokens', bodies: [{ model: 'bench-stream-64', maxTokens: 64, stream: true }], rate: 2000, connections: 32, targets: ['mock', 'bare', 'relay', 'relay-billing-paused', 'peer'] },
  { id: 'long', title: 'long stream, 4,000 tokens (closed loop)', bodies: [{ model: 'bench-long', maxTokens: 4000, stream: true }], rate: 0, connections: 8, targets: ['mock', 'bare', 'relay', 'peer'] },
  {
    id: 'mix', title: '5% upstream 529 errors, 15% media', bodies: mixBodies, rate: 2000, connections: 32, targets: ['mock', 'bare', 'relay', 'peer'],
    media: '15% of requests carry media by URL: 5% one image, 5% one PDF document, 5% two images and a document',
  },
  { id: 'agent', title: 'non-streaming, 16 tokens, a 101-message agent conversation (tool calls and their results, 28 KB)', bodies: [{ model: 'bench-agent', maxTokens: 16, stream: false, turns: 100 }], rate: 1000, connections: 32, targets: ['mock', 'bare', 'relay'] },
  { id: 'chat', title: 'chat completions in (OpenAI SDK\'s wire format), Anthropic channel: non-streaming, 16 tokens', bodies: [{ model: 'bench-chat', maxTokens: 16, stream: false, protocol: 'openai' }], rate: 2000, connections: 32, targets: ['mock', 'bare', 'relay'] },
  { id: 'chat-stream64', title: 'chat completions in, Anthropic channel: streaming, 64 tokens', bodies: [{ model: 'bench-chat-stream-64', maxTokens: 64, stream: true, protocol: 'openai' }], rate: 2000, connections: 32, targets: ['mock', 'bare', 'relay'] },
  // The OpenAI-format channel (type 1): the OpenAI-format mock direct, and the bare hop in front of it, are sent Chat Completions.
  { id: 'oai-stream64', title: 'Anthropic messages in, OpenAI-format channel (converted both ways): streaming, 64 tokens', bodies: [{ model: 'bench-oai-stream-64', maxTokens: 64, stream: true, upstream: 'openai' }], rate: 2000, connections: 32, targets: ['mock', 'bare', 'relay'] },
  { id: 'oai-chat', title: 'chat completions in, OpenAI-format channel (passed through): non-streaming, 16 tokens', bodies: [{ model: 'bench-oai-chat', maxTokens: 16, stream: false, protocol: 'openai', upstream: 'openai' }], rate: 2000, connections: 32, targets: ['mock', 'bare', 'relay'] },
  { id: 'oai-chat-stream64', title: 'chat completions in, OpenAI-format channel (passed through): streaming with include_usage, 64 tokens', bodies: [{ model: 'bench-oai-chat-stream-64', maxTokens: 64, stream: true, protocol: 'openai', upstream: 'openai' }], rate: 2000, connections: 32, targets: ['mock', 'bare', 'relay'] },
  { id: 'abort', title: 'client aborts mid-stream (4,000-token streams cut after 2 KB)', bodies: [{ model: 'bench-abort', maxTokens: 4000, stream: true }], rate: 500, connections: 32, targets: ['mock', 'bare', 'relay'], abortAfterBodyBytes: 2048 },
];
/** The request that tells the relay serves the bench key, and warms its caches. */
export const PROBE_BODY: BodySpec = { model: 'bench-probe', maxTokens: 16, stream: false };

/** The cache usage the mock reports on every answer (its cache knobs). */
export interface MockCacheUsage {
  cacheReadTokens: number;
  cacheCreationTokens: number;
  cacheCreation1hTokens: number;
}

/** Input tokens the mock charges for each image and each document block (its media knobs). */
export interface MockMediaTokens { image: number; document: number }

/** What the OpenAI-format mock answers with (its knobs): its output cap and the cached_tokens it reports inside prompt_tokens. */
export interface MockOpenAIUsage { outputCap: number; cachedTokens: number }

/**
 * What the OpenAI-format mock bills for a body served by the OpenAI-format channel, as the relay must
 * read it (relay/providers/openai/chat-usage.ts, usageOfChatUsage): prompt_tokens (the mock's formula,
 * countPromptTokens: ceil(bytes / 4) of each message's text) includes the cached tokens, so input =
 * prompt_tokens − cached_tokens and the cached ones are cache reads; no cache writes. The relay sends
 * the provider the Chat Completions form of the body: the client's own (chatBodyJson) passed through,
 * or an Anthropic request converted (relay/providers/openai/from-messages.ts), whose one text-only
 * user message becomes the same one string: the same count.
 */
function openaiExpectation(b: BodySpec, u: MockOpenAIUsage): ModelExpectation {
  const prompt = countPromptTokens(JSON.parse(chatBodyJson(b)));
  const cached = Math.min(u.cachedTokens, prompt);
  return {
    inputTokens: prompt - cached, outputTokens: Math.min(b.maxTokens, u.outputCap),
    cacheReadTokens: cached, cacheCreationTokens: 0, cacheCreation1hTokens: 0, mediaTokens: 0,
    protocol: b.protocol ?? 'anthropic',
  };
}

/**
 * What the audit expects the mocks to bill for each bench model, given the mock's output cap, cache
 * usage and media charges, and the OpenAI-format mock's (absent: the models of the OpenAI-format
 * channel are not expected, and a row of one is a problem).
 */
export function expectationsFor(outputCap: number, cache: MockCacheUsage, media: MockMediaTokens, openai?: MockOpenAIUsage): Record<string, ModelExpectation> {
  const expectations: Record<string, ModelExpectation> = {};
  for (const b of [...SCENARIOS.flatMap((s) => s.bodies), PROBE_BODY]) {
    if (upstreamOf(b) === 'openai') {
      if (openai) expectations[b.model] = openaiExpectation(b, openai);
      continue;
    }
    const mediaTokens = (b.media?.images ?? 0) * media.image + (b.media?.documents ?? 0) * media.document;
    const json = bodyJson(b);
    // Anthropic writes the cache only at a cache_control breakpoint, and the gateway bills writes
    // reported for a request without one as input (README, "usage above what the request could use"):
    // the mock reports its writes on every answer, so for a body without a breakpoint (every bench
    // body today) they are expected as input tokens.
    const cacheable = json.includes('"cache_control"');
    const billedCache = cacheable ? cache : { cacheReadTokens: cache.cacheReadTokens, cacheCreationTokens: 0, cacheCreation1hTokens: 0 };
    // A Chat Completions body reaches the mock as bodyJson's text in one text block: the same count.
    expectations[b.model] = {
      inputTokens: countInputTokens(JSON.parse(json)) + mediaTokens + (cacheable ? 0 : cache.cacheCreationTokens),
      outputTokens: Math.min(b.maxTokens, outputCap), ...billedCache, mediaTokens,
      protocol: b.protocol ?? 'anthropic',
    };
  }
  return expectations;
}

export const isRelay = (t: Target): boolean => t === 'relay' || t === 'relay-billing-paused';
/** The relay's process id, started by the bench or found on its port (for its main thread's schedstat). */
const relayPid = (stack: Stack): number | undefined => servicePids(stack, 'relay')?.[0];

/** The watched processes (bench/setup.ts) of the OpenAI-format mock and of the bare proxy in front of it. */
export const OPENAI_MOCK_NAME = 'mock (openai)';
export const OPENAI_BARE_NAME = 'bare proxy (openai)';

/** The watched process (bench/setup.ts) that serves a target in a scenario served by `upstream`. */
export const procName = (t: Target, upstream: Upstream = 'anthropic'): string => {
  if (isRelay(t)) return 'relay';
  if (t === 'peer') return PEER_NAME;
  const openai = upstream === 'openai';
  return t === 'bare' ? (openai ? OPENAI_BARE_NAME : 'bare proxy') : (openai ? OPENAI_MOCK_NAME : 'mock');
};

/** The stack under test as the runs see it (bench/setup.ts prepares it). */
export interface RunContext {
  opts: BenchOptions;
  log: (line: string) => void;
  stack: Stack;
  ch: ClickHouseClient;
  /** The stack's Redis: INFO commandstats and INFO cpu around each relay run. */
  redis: Redis;
  /** The bench account: LagProbe watches its log rows. */
  userId: number;
  /** A target's URL for a scenario served by `upstream` (default anthropic): the mock and the bare proxy differ by provider, the relay does not. */
  urlOf: (target: Target, upstream?: Upstream) => string;
  headersOf: (target: Target, upstream?: Upstream) => Record<string, string>;
  /** Each body as a request to the target (bodies of one upstream, for the mock and the bare proxy). */
  requestsFor: (target: Target, bodies: BodySpec[]) => Buffer[];
  auditor: Auditor;
  /** The money audit since `before`, against the expectations and the relay's group ratio. */
  audit: (before: Parameters<Auditor['audit']>[0], clientComplete: number) => Promise<AuditResult>;
  watched: Watched[];
  /** Fails the errors scenario's second channel `afterMs` into `run` (own stack only: lib/channel-failure.ts). */
  failChannelDuring?: <T>(afterMs: number, run: () => Promise<T>) => Promise<{ result: T; failure: ChannelFailure }>;
}

/** The offered rate of the JIT warm-up (the scenarios' own). */
const JIT_WARMUP_RATE = 2000;

/**
 * Before the first measured run, each target (mock, bare hop, relay, peer) serves the selected
 * scenarios' paced requests (not the closed-loop long streams nor the abort storm) for
 * opts.jitWarmupMs. V8 compiles a process's hot path over its first seconds under load: the relay's
 * and the bare hop's CPU a request was 20-40% above their steady state for 3-5 s (docs/performance.md,
 * "Warm-up, a core of the relay's own, …"), so the first scenario's runs, the relay's with billing
 * running first among them, measured that compilation as well as the request. The relay's requests
 * are billed like any other; the first audit starts from books settled after them.
 */
export async function warmUpTargets(ctx: RunContext): Promise<void> {
  const { opts, log, stack, urlOf, requestsFor } = ctx;
  if (opts.jitWarmupMs <= 0) return;
  const paced = SCENARIOS.filter((sc) => opts.scenarios.includes(sc.id) && sc.rate > 0 && !sc.abortAfterBodyBytes);
  for (const target of ['mock', 'bare', 'relay', 'peer'] as const) {
    if (target === 'peer' && stack.peerUrl === undefined) continue;
    const bodies = paced.filter((sc) => sc.targets.includes(target)).flatMap((sc) => sc.bodies);
    // The relay serves every scenario; the mock and the bare proxy of each provider are processes of their own, each warmed.
    const groups: Array<[Upstream, BodySpec[]]> = isRelay(target) || target === 'peer'
      ? [['anthropic', bodies]]
      : (['anthropic', 'openai'] as const).map((u) => [u, bodies.filter((b) => upstreamOf(b) === u)]);
    for (const [upstream, group] of groups) {
      if (group.length === 0) continue;
      log(`JIT warm-up: ${target}${upstream === 'openai' && !isRelay(target) ? ' (openai)' : ''}, ${opts.jitWarmupMs / 1000} s of the scenarios' requests at ${JIT_WARMUP_RATE} req/s`);
      await drive({ url: urlOf(target, upstream), requests: requestsFor(target, group), connections: 32, rate: JIT_WARMUP_RATE, durationMs: opts.jitWarmupMs });
    }
  }
}

/** `failed`: a money audit did not pass (the bench still writes its report, then exits 1). */
export async function runScenarios(ctx: RunContext): Promise<{ scenarios: ScenarioReport[]; failed: boolean }> {
  const { opts, log, stack, ch, urlOf, requestsFor, auditor, audit, watched: w } = ctx;
  const billingPid = stack.services.billing?.pid;
  let failed = false;
  const scenarios: ScenarioReport[] = [];
  for (const sc of SCENARIOS.filter((s) => opts.scenarios.includes(s.id))) {
    const upstream = scenarioUpstream(sc);
    if (upstream === 'openai' && !stack.openai) {
      // run-bench.ts leaves these out of an attached run; here only if called otherwise.
      log(`${sc.id}: skipped, no OpenAI-format mock (the bench's own stack only)`);
      continue;
    }
    const url = (target: Target): string => urlOf(target, upstream);
    const mockPid = (): number | undefined => servicePids(stack, upstream === 'openai' ? 'mockOpenai' : 'mock')?.[0];
    const report: ScenarioReport = { id: sc.id, title: sc.title, media: sc.media ?? null, stream: sc.bodies[0]!.stream, rate: sc.rate, connections: sc.connections, runs: [], audit: null, auditPaused: null, lag: null, lagMetric: null };
    // Billing-paused runs need the billing worker to be the bench's own (SIGSTOP).
    for (const target of sc.targets.filter((t) => (t !== 'relay-billing-paused' || billingPid !== undefined) && (t !== 'peer' || stack.peerUrl !== undefined))) {
      const requests = requestsFor(target, sc.bodies);
      const before = isRelay(target) ? await auditor.settledBooks() : null;
      const paused = target === 'relay-billing-paused' && billingPid !== undefined;
      if (paused) process.kill(billingPid, 'SIGSTOP');
      log(`${sc.id} → ${target}: warm-up ${opts.warmupMs / 1000} s`);
      await drive({ url: url(target), requests, connections: sc.connections, rate: sc.rate, durationMs: opts.warmupMs, abortAfterBodyBytes: sc.abortAfterBodyBytes });
      const probe = target === 'relay' ? new LagProbe(ch, auditor.sql, ctx.userId) : null;
      const lagBefore = target === 'relay' && stack.billingMetricsUrl ? await scrapeHistogram(stack.billingMetricsUrl, 'gateway_billing_lag_seconds') : null;
      probe?.start();
      const [rt0, rd0] = isRelay(target) ? await Promise.all([runtimeSnapshot(stack.relayMetricsUrl, relayPid(stack)), redisSnapshot(ctx.redis)]) : [null, null];
      const ends0 = endWaitSnapshot(mockPid());
      const sampler = new ProcSampler(w);
      sampler.start();
      const expectedRps = sc.rate || 1000;
      const driveRun = () => drive({
        url: url(target), requests, connections: sc.connections, rate: sc.rate, durationMs: opts.durationMs,
        abortAfterBodyBytes: sc.abortAfterBodyBytes,
        captureHeader: target === 'relay' && !sc.abortAfterBodyBytes ? 'x-gateway-request-id' : undefined,
        captureEvery: Math.max(1, Math.round(expectedRps / 50)),
        onCapture: probe ? (value, endMs, startMs) => probe.add(value, endMs, startMs) : undefined,
      });
      // The errors scenario: a channel's provider key is revoked a third of the way into the relay run.
      const failing = sc.id === 'mix' && target === 'relay' && ctx.failChannelDuring
        ? await ctx.failChannelDuring(opts.durationMs / 3, driveRun)
        : null;
      const r = failing ? failing.result : await driveRun();
      if (failing) {
        report.channelFailure = failing.failure;
        const f = failing.failure;
        log(`${sc.id} → relay: channel ${f.channelId} (${FAILING_CHANNEL_NAME}) key revoked at ${f.revokedAtSec.toFixed(1)} s: ${f.disabled ? `disabled automatically (${f.statusReason})` : 'NOT disabled'}`);
        if (!f.disabled) failed = true;
      }
      const procs = sampler.stop();
      const ends = endWaits(ends0, endWaitSnapshot(mockPid()));
      const [rt1, rd1] = isRelay(target) ? await Promise.all([runtimeSnapshot(stack.relayMetricsUrl, relayPid(stack)), redisSnapshot(ctx.redis)]) : [null, null];
      if (paused) process.kill(billingPid, 'SIGCONT');
      const mine = procs.find((p) => p.name === procName(target, upstream));
      const handled = r.completed + r.aborted;
      const run: RunFigures = {
        target, offered: sc.rate, driver: r, procs, cpuUsPerReq: mine && handled ? (mine.cpuSec * 1e6) / handled : null,
        runtime: runtimeDelta(rt0, rt1, handled), redis: redisDelta(rd0, rd1, handled), endWaits: ends,
      };
      report.runs.push(run);
      log(`${sc.id} → ${target}: ${r.rps.toFixed(0)} req/s, p50 ${fmt(r.latency.p50)} ms, p99 ${fmt(r.latency.p99)} ms, ttfb p50 ${fmt(r.ttfb.p50)} ms` +
        `${r.aborted ? `, ${r.aborted} aborted` : ''}, status ${JSON.stringify(r.status)}, saturated: ${saturated(procs)}`);
      if (target === 'relay-billing-paused' && before) {
        report.auditPaused = await audit(before, r.status['200'] ?? 0);
        const a = report.auditPaused;
        log(`${sc.id} (billing paused) audit after the backlog drained: ${a.pass ? 'PASS' : 'FAIL'}${a.problems.length ? ` ${a.problems.join('; ')}` : ''}`);
        if (!a.pass) failed = true;
      }
      if (target === 'relay' && before) {
        report.lag = await probe!.finish();
        const clientComplete = sc.abortAfterBodyBytes ? 0 : (r.status['200'] ?? 0);
        report.audit = await audit(before, clientComplete);
        const lagAfter = stack.billingMetricsUrl ? await scrapeHistogram(stack.billingMetricsUrl, 'gateway_billing_lag_seconds') : null;
        if (lagAfter) {
          const p50 = histogramQuantile(lagBefore, lagAfter, 0.5), p99 = histogramQuantile(lagBefore, lagAfter, 0.99);
          report.lagMetric = { p50Ms: p50.value * 1000, p99Ms: p99.value * 1000, count: p50.count };
        }
        const a = report.audit;
        log(`${sc.id} audit: ${a.pass ? 'PASS' : 'FAIL'} — debit ${a.pgDebit}, ledger ${a.ledgerSum}, ClickHouse ${a.chSum}, stats ${a.statsSum}, Redis ${a.redisMovement}, formula ${a.formula}` +
          ` (${a.rows.complete} complete, ${a.rows.partial} partial, ${a.rows.error} error rows); billing lag p50 ${fmt(report.lag.lagMs.p50, 0)} ms p99 ${fmt(report.lag.lagMs.p99, 0)} ms` +
          `${a.problems.length ? `\n    ${a.problems.join('\n    ')}` : ''}`);
        if (!a.pass) failed = true;
      }
    }
    scenarios.push(report);
  }
  return { scenarios, failed };
}

/** Closed loop (autocannon) against mock, bare proxy and relay; the relay run is audited too. */
export async function runSaturation(ctx: RunContext): Promise<{ saturation: SaturationRun[]; audits: ScenarioReport[]; failed: boolean }> {
  const { opts, log, urlOf, headersOf, auditor, audit, watched: w } = ctx;
  const audits: ScenarioReport[] = [];
  let failed = false;
  const saturation: SaturationRun[] = [];
  for (const target of (['mock', 'bare', 'relay', 'peer'] as const).filter((t) => t !== 'peer' || ctx.stack.peerUrl !== undefined)) {
    log(`saturation (autocannon, 64 connections, closed loop) → ${target}`);
    const spec = { url: urlOf(target), connections: 64, durationSec: Math.max(1, opts.durationMs / 1000), headers: headersOf(target), requests: [{ path: '/v1/messages', body: bodyJson({ model: 'bench-small', maxTokens: 16, stream: false }) }] };
    await cannon({ ...spec, durationSec: Math.max(1, opts.warmupMs / 1000) });
    const before = target === 'relay' ? await auditor.settledBooks() : null;
    const [rt0, rd0] = target === 'relay' ? await Promise.all([runtimeSnapshot(ctx.stack.relayMetricsUrl, relayPid(ctx.stack)), redisSnapshot(ctx.redis)]) : [null, null];
    const sampler = new ProcSampler(w);
    sampler.start();
    const result = await cannon(spec);
    const procs = sampler.stop();
    const [rt1, rd1] = target === 'relay' ? await Promise.all([runtimeSnapshot(ctx.stack.relayMetricsUrl, relayPid(ctx.stack)), redisSnapshot(ctx.redis)]) : [null, null];
    const mine = procs.find((p) => p.name === procName(target));
    saturation.push({
      target, result, procs, cpuUsPerReq: mine && result.completed ? (mine.cpuSec * 1e6) / result.completed : null,
      runtime: runtimeDelta(rt0, rt1, result.completed), redis: redisDelta(rd0, rd1, result.completed),
    });
    log(`saturation → ${target}: ${result.rps.toFixed(0)} req/s, p50 ${fmt(result.latency.p50)} ms, p99 ${fmt(result.latency.p99)} ms, saturated: ${saturated(procs)}`);
    if (before) {
      const a = await audit(before, 0);
      log(`saturation audit: ${a.pass ? 'PASS' : 'FAIL'} (debit ${a.pgDebit}, formula ${a.formula}; ${a.rows.complete} complete, ${a.rows.partial} partial, ${a.rows.error} error rows — autocannon cuts in-flight requests at the end)${a.problems.length ? ` ${a.problems.join('; ')}` : ''}`);
      if (!a.pass) failed = true;
      audits.push({ id: 'saturation', title: 'closed loop (autocannon) audit', stream: false, rate: 0, connections: 64, runs: [], audit: a, auditPaused: null, lag: null, lagMetric: null });
    }
  }
  return { saturation, audits, failed };
}

/** Paced non-streaming load in rising steps until the relay no longer holds the rate. */
export async function runLoadCurve(ctx: RunContext): Promise<CurvePoint[]> {
  const { opts, log, urlOf, requestsFor, watched: w } = ctx;
  const curve: CurvePoint[] = [];
  const body = [{ model: 'bench-small', maxTokens: 16, stream: false }];
  for (const rate of opts.rates) {
    const connections = Math.max(16, Math.ceil(rate / 100));
    const point: Partial<CurvePoint> = { rate };
    // The bare hop at each rate too: what a hop doing none of the relay's work adds on these cores.
    for (const target of ['mock', 'bare', 'relay'] as const) {
      const requests = requestsFor(target, body);
      await drive({ url: urlOf(target), requests, connections, rate, durationMs: Math.min(1000, opts.warmupMs) });
      const sampler = new ProcSampler(w);
      sampler.start();
      const r = await drive({ url: urlOf(target), requests, connections, rate, durationMs: opts.curveMs });
      const procs = sampler.stop();
      point[target] = { rps: r.rps, p50: r.latency.p50, p99: r.latency.p99 };
      if (target === 'relay') {
        point.relayCpuPct = procs.find((p) => p.name === 'relay')?.cpuPct ?? NaN;
        point.loadgenCpuPct = procs.find((p) => p.name === 'load generator')?.cpuPct ?? NaN;
      }
    }
    const p = point as CurvePoint;
    p.addedP50 = p.relay.p50 - p.mock.p50;
    p.addedP99 = p.relay.p99 - p.mock.p99;
    if (p.bare) p.bareAddedP99 = p.bare.p99 - p.mock.p99;
    p.held = p.relay.rps >= rate * 0.95;
    curve.push(p);
    log(`curve ${rate} req/s: relay ${p.relay.rps.toFixed(0)} req/s p99 ${fmt(p.relay.p99)} ms, mock p99 ${fmt(p.mock.p99)} ms, added p99 ${fmt(p.addedP99)} ms, bare added p99 ${fmt(p.bareAddedP99)} ms, relay CPU ${fmt(p.relayCpuPct, 0)}%, load generator CPU ${fmt(p.loadgenCpuPct, 0)}%`);
    if (!p.held || p.relay.p99 > 100) break;
  }
  return curve;
}
