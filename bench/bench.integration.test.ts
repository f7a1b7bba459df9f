// The bench suite end to end, tiny: builds dist/, runs `node dist/bench/run-bench.js` with 1-second
// scenarios against a stack it starts (its own Postgres database, Redis prefix and ClickHouse
// database), and checks that every scenario ran against all three targets and that every money audit
// passed. No wall-clock bound is asserted: timing figures are the report's business.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../infra/project-root.js';

const root = projectRoot();
const out = mkdtempSync(join(tmpdir(), 'bench-it-'));

afterAll(() => rmSync(out, { recursive: true, force: true }));

interface Report {
  scenarios: Array<{
    id: string;
    runs: Array<{
      target: string; driver: { completed: number; aborted: number; status: Record<string, number> }; cpuUsPerReq: number | null;
      procs: Array<{ name: string; cpuSec: number }>;
      runtime?: { loopSamples: number; gcCount: number } | null; redis?: { callsPerReq: number; top: Array<{ command: string }> } | null;
    }>;
    media?: string | null;
    audit: { pass: boolean; problems: string[]; pgDebit: number; formula: number; rows: { media: number; openai: number; complete: number } } | null;
    auditPaused: { pass: boolean; problems: string[] } | null;
    channelFailure?: { disabled: boolean; revokedAtSec: number; statusReason: string } | null;
  }>;
  curve: Array<{ rate: number; relay: { rps: number }; bare?: { rps: number }; bareAddedP99?: number }>;
  scale: { queries: Array<{ name: string; probe: { status: number; success: boolean; message: string }; result: { completed: number; status: Record<string, number>; errors: number; timeouts: number } }> } | null;
  target: { mockMediaTokens: { image: number; document: number }; mockOpenAIUsage: { outputCap: number; cachedTokens: number } | null };
}

describe('make bench (tiny)', () => {
  it('runs every scenario against mock, bare proxy and relay, and the money audit passes', () => {
    // The suite spawns the compiled services: compile first (tsc emits even when another module of
    // the checkout has a type error; the type check is `make typecheck`'s job).
    spawnSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: root, stdio: 'ignore' });
    expect(existsSync(join(root, 'dist/bench/run-bench.js'))).toBe(true);

    const run = spawnSync(process.execPath, [
      'dist/bench/run-bench.js', '--quick', '--duration', '1', '--warmup', '0.3', '--jit-warmup', '0.5', '--rates', '500',
      '--scale-rows', '20000', '--skip-saturation', '--out', out,
      '--database-url', process.env.BENCH_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/gateway_bench_test',
      '--clickhouse-database', 'gateway_bench_test',
      ...(process.env.CLICKHOUSE_URL ? ['--clickhouse-url', process.env.CLICKHOUSE_URL] : []),
    ], { cwd: root, encoding: 'utf8', timeout: 210_000 });
    if (run.status !== 0) throw new Error(`bench exited ${run.status}:\n${run.stdout}\n${run.stderr}`);

    const latest = join(out, 'latest');
    for (const f of ['report.md', 'report.json', 'latency-vs-load.svg']) expect(existsSync(join(latest, f))).toBe(true);
    const report = JSON.parse(readFileSync(join(latest, 'report.json'), 'utf8')) as Report;

    const ids = report.scenarios.filter((s) => s.runs.length).map((s) => s.id);
    expect(ids).toEqual(['small', 'stream64', 'long', 'mix', 'agent', 'chat', 'chat-stream64', 'oai-stream64', 'oai-chat', 'oai-chat-stream64', 'abort']);
    for (const s of report.scenarios.filter((x) => x.runs.length)) {
      expect(s.runs.map((r) => r.target).slice(0, 3)).toEqual(['mock', 'bare', 'relay']);
      for (const r of s.runs) expect(r.driver.completed + r.driver.aborted).toBeGreaterThan(0);
      expect(s.audit?.problems).toEqual([]);
      expect(s.audit?.pass).toBe(true);
      expect(s.audit!.pgDebit).toBe(s.audit!.formula);
      if (s.auditPaused) expect(s.auditPaused.pass).toBe(true);
    }
    // 5% of the mix is the mock's 529, passed through (one channel, nothing to retry on).
    const mixRelay = report.scenarios.find((s) => s.id === 'mix')!.runs.find((r) => r.target === 'relay')!;
    expect(mixRelay.driver.status['529']).toBeGreaterThan(0);
    // The mix carries images and documents by URL, which the mock charges (bench/lib/stack.ts), and
    // its audit priced those rows with the charged tokens.
    expect(report.target.mockMediaTokens).toEqual({ image: 1600, document: 3000 });
    const mix = report.scenarios.find((s) => s.id === 'mix')!;
    expect(mix.media).toBeTruthy();
    expect(mix.audit!.rows.media).toBeGreaterThan(0);
    // A channel's key was revoked mid-run: the relay disabled it by itself, and the audit above passed
    // (its refused attempts billed nothing, the other channel's answers once).
    expect(mix.channelFailure?.revokedAtSec).toBeGreaterThan(0);
    expect(mix.channelFailure?.disabled).toBe(true);
    expect(mix.channelFailure?.statusReason).toContain('consecutive channel faults');
    // The OpenAI-format channel's scenarios: the OpenAI-format mock and its own bare proxy served the
    // direct and bare runs (their CPU is the figure per request), the relay's rows were billed from the
    // mock's OpenAI usage (its cached tokens as cache reads), in the client's protocol.
    // Its probe asks for 4,000 tokens: a mock capped above that answers them all.
    expect(report.target.mockOpenAIUsage).toEqual({ outputCap: 4000, cachedTokens: 4 });
    for (const id of ['oai-stream64', 'oai-chat', 'oai-chat-stream64']) {
      const s = report.scenarios.find((x) => x.id === id)!;
      const cpu = (target: string, name: string) => s.runs.find((r) => r.target === target)!.procs.find((p) => p.name === name)!.cpuSec;
      expect(cpu('bare', 'bare proxy (openai)')).toBeGreaterThan(0);
      expect(cpu('mock', 'mock (openai)')).toBeGreaterThan(0);
      expect(s.runs.find((r) => r.target === 'bare')!.cpuUsPerReq).toBeGreaterThan(0);
      expect(s.audit!.rows.complete).toBeGreaterThan(0);
      expect(s.audit!.rows.openai).toBe(id === 'oai-stream64' ? 0 : s.audit!.rows.complete);
    }
    // The abort storm aborted.
    expect(report.scenarios.find((s) => s.id === 'abort')!.runs.find((r) => r.target === 'relay')!.driver.aborted).toBeGreaterThan(0);
    // CPU accounting was read for the relay.
    expect(report.scenarios[0]!.runs.find((r) => r.target === 'relay')!.cpuUsPerReq).toBeGreaterThan(0);
    expect(report.curve.length).toBe(1);
    // The curve runs the bare hop at each rate too: the machine's own share of an added latency.
    expect(report.curve[0]!.bare!.rps).toBeGreaterThan(0);
    expect(Number.isFinite(report.curve[0]!.bareAddedP99)).toBe(true);
    expect(report.scale!.queries.length).toBeGreaterThan(0);
    // Each query works: its first request, waited for however long it takes, answered 200 and
    // success, and its run answered nothing else (a run of 1 s on a loaded machine may finish none:
    // the count of answers is the bench's figure, not this test's).
    for (const q of report.scale!.queries) {
      expect({ query: q.name, ...q.probe }).toEqual({ query: q.name, status: 200, success: true, message: '' });
      expect({ query: q.name, other: Object.keys(q.result.status).filter((s) => s !== '200'), errors: q.result.errors })
        .toEqual({ query: q.name, other: [], errors: 0 });
    }
    const md = readFileSync(join(latest, 'report.md'), 'utf8');
    expect(md).toContain('**Audit: PASS**');
    // Every target was warmed once before the first run, and the report says so.
    expect(md).toContain('paced requests for 0.5 s (--jit-warmup)');
    expect(run.stdout).toMatch(/JIT warm-up: relay, 0\.5 s/);
    expect(run.stdout).toMatch(/JIT warm-up: bare, 0\.5 s/);
    expect(md).toContain('mix carries media');
    // No request of the bench's traffic, media included, cost more than its reservation (docs/billing.md, "Reserve").
    expect(readFileSync(join(latest, 'relay-metrics.txt'), 'utf8')).toMatch(/^gateway_relay_over_reservation_total 0$/m);
    // What the relay waited on (issue 17): its loop delay histogram was scraped around the run, and
    // Redis ran the reservation and settlement scripts for it.
    const smallRelay = report.scenarios[0]!.runs.find((r) => r.target === 'relay')!;
    expect(smallRelay.runtime!.loopSamples).toBeGreaterThan(0);
    expect(smallRelay.redis!.callsPerReq).toBeGreaterThan(0);
    expect(smallRelay.redis!.top.map((t) => t.command)).toContain('evalsha');
    expect(md).toContain('## What the relay waited on');
    expect(md).toContain('## Targets (issue 17)');
    // The peer (Portkey) answered the small scenario through the same mock, in the same run.
    const peer = report.scenarios[0]!.runs.find((r) => r.target === 'peer');
    expect(peer?.driver.status['200'] ?? 0).toBeGreaterThan(0);
    expect(md).toContain("## Peer: the same scenarios through Portkey's gateway");
  }, 240_000);
});

describe('run-bench flags', () => {
  const bench = (...args: string[]) => spawnSync(process.execPath, ['dist/bench/run-bench.js', ...args], { cwd: root, encoding: 'utf8', timeout: 20_000 });

  it('prints its usage on --help and starts nothing', () => {
    const r = bench('--help');
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('usage: node dist/bench/run-bench.js');
    expect(r.stdout).toContain('--relay-url URL --mock-url URL');
  });

  it('refuses an unknown flag or a bad number with the usage, exit 2, no stack trace', () => {
    const unknown = bench('--bogus');
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain("Unknown option '--bogus'");
    expect(unknown.stderr).toContain('usage:');
    expect(unknown.stderr).not.toContain('    at ');
    const bad = bench('--duration', 'abc');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('--duration takes positive numbers, not "abc"');
    expect(bench('--rates', '500,-1').stderr).toContain('--rates takes positive numbers');
    const jit = bench('--jit-warmup=-1');
    expect(jit.status).toBe(2);
    expect(jit.stderr).toContain('--jit-warmup takes a number of seconds, 0 or more, not "-1"');
    const typo = bench('--scenarios', 'small,stream');
    expect(typo.status).toBe(2);
    expect(typo.stderr).toContain('--scenarios: no scenario "stream"; there are small, stream64,');
  });

  it('refuses the OpenAI-format channel\'s scenarios attached to a running stack (it has no OpenAI-format mock), before starting anything', () => {
    const r = bench('--relay-url', 'http://127.0.0.1:9', '--mock-url', 'http://127.0.0.1:9', '--scenarios', 'small,oai-chat');
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--scenarios: oai-chat need the bench\'s own stack');
    expect(r.stderr).not.toContain('    at ');
  });
});
