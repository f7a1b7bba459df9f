// The bench suite attached to a stack that is already running (--relay-url and friends): here the
// whole gateway runs in this test process on random ports, the bench as a child process. Nothing of
// the stack is started or stopped by the bench, and every money audit passes.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../infra/project-root.js';
import { MOCK_CHANNEL_KEY, startGatewayStack, type GatewayStack } from '../tests/harness/gateway-stack.js';

const root = projectRoot();
const out = mkdtempSync(join(tmpdir(), 'bench-attached-'));
let stack: GatewayStack;

beforeAll(async () => {
  // The running stack's mock charges image and document blocks; the bench learns how much from its answers.
  stack = await startGatewayStack({ mock: { imageInputTokens: 1200, documentInputTokens: 2500 } });
});
afterAll(async () => {
  await stack?.close();
  rmSync(out, { recursive: true, force: true });
});

/** Runs the bench without blocking this process: the relay and billing worker it measures live here. */
function runBench(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['dist/bench/run-bench.js', ...args], { cwd: root, env: { ...process.env, KEY_SECRET: '' } });
    let output = '';
    child.stdout.on('data', (d: Buffer) => { output += d.toString(); });
    child.stderr.on('data', (d: Buffer) => { output += d.toString(); });
    child.on('close', (code) => resolve({ code, output }));
  });
}

describe('make bench against a running stack', () => {
  it('measures the given relay and audits the given databases, starting none of the stack', async () => {
    expect(existsSync(join(root, 'dist/bench/run-bench.js')), 'dist/ is missing: run `make build`').toBe(true);
    const c = stack.config;
    const run = await runBench([
      // What attaching changes is where the targets and the books are, not the scenarios: one plain,
      // one streamed and the mix (media priced by the running mock); every scenario, the curve and the
      // log queries are bench.integration.test.ts's, on a stack the bench starts.
      '--quick', '--duration', '1', '--warmup', '0.3', '--scenarios', 'small,stream64,mix', '--skip-curve', '--skip-scale', '--skip-saturation', '--out', out,
      '--relay-url', stack.relayUrl, '--mock-url', stack.mock.url, '--mock-key', MOCK_CHANNEL_KEY,
      '--console-url', stack.consoleUrl, '--key-secret', c.KEY_SECRET,
      '--relay-metrics-url', `http://127.0.0.1:${stack.relay.metricsPort}/metrics`,
      '--database-url', c.DATABASE_URL, '--redis-url', c.REDIS_URL, '--redis-prefix', c.REDIS_PREFIX,
      '--clickhouse-url', c.CLICKHOUSE_URL, '--clickhouse-database', c.CLICKHOUSE_DATABASE,
    ]);
    if (run.code !== 0) throw new Error(`bench exited ${run.code}:\n${run.output}`);
    const report = JSON.parse(readFileSync(join(out, 'latest', 'report.json'), 'utf8')) as {
      scenarios: Array<{ id: string; runs: Array<{ target: string }>; audit: { pass: boolean; problems: string[]; rows: { media: number } } | null; auditPaused: unknown }>;
      target: { mockMediaTokens: { image: number; document: number } };
    };
    const ran = report.scenarios.filter((s) => s.runs.length);
    expect(ran.map((s) => s.id)).toEqual(['small', 'stream64', 'mix']);
    for (const s of ran) {
      expect(s.runs.map((r) => r.target).slice(0, 3)).toEqual(['mock', 'bare', 'relay']);
      expect(s.audit?.problems).toEqual([]);
      expect(s.audit?.pass).toBe(true);
      // Pausing a billing worker the bench does not own is not its business.
      expect(s.auditPaused ?? null).toBeNull();
    }
    expect(report.target.mockMediaTokens).toEqual({ image: 1200, document: 2500 });
    expect(ran.find((s) => s.id === 'mix')!.audit!.rows.media).toBeGreaterThan(0);
    expect(readFileSync(join(out, 'latest', 'report.md'), 'utf8')).toContain('**Audit: PASS**');
    // The relay's metrics come from RELAY_METRICS_PORT (the relay's own port does not serve them).
    const relayMetricsText = readFileSync(join(out, 'latest', 'relay-metrics.txt'), 'utf8');
    expect(relayMetricsText).toContain('gateway_relay_requests_total');
    // No request of the mock's traffic cost more than its reservation (docs/billing.md, "Reserve").
    expect(relayMetricsText).toMatch(/^gateway_relay_over_reservation_total 0$/m);
    // The stack is still serving after the bench is done with it.
    const health = await fetch(`${stack.relayUrl}/health`);
    expect(health.status).toBe(200);
  }, 180_000);
});
