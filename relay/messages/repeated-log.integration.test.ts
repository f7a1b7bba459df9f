// A provider whose every answer states more output than the request allowed (max_tokens) makes the
// same line for every request. It was written each time: at 2,000 requests a second, 7% of the relay's
// event loop went to pino (docs/performance.md), and the log held nothing else. Now one line per kind
// and channel goes out each RELAY_REPEATED_LOG_INTERVAL_MS, the next saying how many were held back;
// every request is still billed at its bound and counted in the metrics.
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/project-root.js';
import { freePort } from '../../infra/testing/free-port.js';
import { parsePromText } from '../../core/metrics/prom.js';
import { billingSettled, createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';
import { relayProcessEnv, spawnRelayProcess, withRelayProcess, type RelayProcess } from '../../tests/harness/relay-process.js';
import { LONG_PROMPT, normalMessage, startScriptedProvider, unnamedCost, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

const MODEL = 'states-too-much-output';
const LINE = 'provider reported more usage than the request could use';
const MAX_TOKENS = 8;

let stack: GatewayStack;
let provider: ScriptedProvider;
let key: string;

beforeAll(async () => {
  provider = await startScriptedProvider(({ model }, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(normalMessage(model, { input_tokens: 100, output_tokens: 500 }));
  });
  stack = await startGatewayStack();
  await mockChannel(stack, [MODEL], 'default', { base_url: provider.url });
  key = (await createApiKey(stack, await fundedAccount(stack, 100_000_000))).key;
}, 120_000);
afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

async function askTimes(relay: RelayProcess, n: number): Promise<string[]> {
  const client = new Anthropic({ apiKey: key, baseURL: relay.url, maxRetries: 0 });
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const { response } = await client.messages.create({ model: MODEL, max_tokens: MAX_TOKENS, messages: [{ role: 'user', content: LONG_PROMPT }] }).withResponse();
    ids.push(response.headers.get('x-gateway-request-id')!);
  }
  return ids;
}

const linesOf = (relay: RelayProcess) => relay.output().split('\n').filter((l) => l.includes(LINE)).map((l) => JSON.parse(l) as { heldBack: number; requestId: string });

describe('a line a provider\'s fault repeats for every request', () => {
  it('goes out once an interval, the next one saying how many were held back; every request is billed at its bound and counted', async () => {
    const metricsPort = await freePort();
    const relay = await spawnRelayProcess([join(projectRoot(), 'dist/relay/main.js')], relayProcessEnv(stack.config, { RELAY_REPEATED_LOG_INTERVAL_MS: '1500', RELAY_METRICS_PORT: String(metricsPort) }));
    await withRelayProcess(relay, async () => {
      const first = await askTimes(relay, 5);
      await expect.poll(() => linesOf(relay).length, { timeout: 5_000 }).toBe(1);
      expect(linesOf(relay)[0]).toMatchObject({ heldBack: 0, requestId: first[0] });
      await new Promise((r) => setTimeout(r, 1_600));
      const second = await askTimes(relay, 1);
      await expect.poll(() => linesOf(relay).length, { timeout: 5_000 }).toBe(2);
      expect(linesOf(relay)[1]).toMatchObject({ heldBack: 4, requestId: second[0] });
      const metrics = parsePromText(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text());
      expect(metrics.get('gateway_relay_usage_above_bound_total')).toBe(6);
      await billingSettled(stack);
      for (const id of [...first, ...second]) {
        const row = await ledgerRow(stack, id);
        expect(row.completion_tokens).toBe(MAX_TOKENS);
        expect(row.quota).toBe(unnamedCost(100, MAX_TOKENS));
      }
      // Each row keeps what the provider claimed, which the held-back lines no longer say.
      const rs = await stack.ch.query({ query: 'SELECT content FROM logs FINAL WHERE request_id = {r:String}', query_params: { r: second[0]! }, format: 'JSONEachRow' });
      const [logged] = await rs.json<{ content: string }>();
      expect(logged!.content).toContain('billed at its bound (stated: input 100, cache writes 0, cache reads 0, output 500)');
    });
  });

  it('goes out every time with an interval of 0', async () => {
    const relay = await spawnRelayProcess([join(projectRoot(), 'dist/relay/main.js')], relayProcessEnv(stack.config, { RELAY_REPEATED_LOG_INTERVAL_MS: '0' }));
    await withRelayProcess(relay, async () => {
      await askTimes(relay, 3);
      await expect.poll(() => linesOf(relay).length, { timeout: 5_000 }).toBe(3);
      expect(linesOf(relay).map((l) => l.heldBack)).toEqual([0, 0, 0]);
    });
  });
});
