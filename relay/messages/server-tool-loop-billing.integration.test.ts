// A request with server tools that loop (web search, web fetch, an MCP server) is answered after
// several sampling passes, each over the whole context, and Anthropic states and bills their sum: the
// usage's input tokens are cumulative (its SDK's BetaMessageDeltaUsage; `usage.iterations` lists the
// passes). The relay bounds and reserves such a prompt at one window per pass it may make
// (reservation-bound.ts promptPasses: one more than the tools' max_uses, at most Anthropic's 10).
//
// Before: bounded at one window, 480,000 tokens over four passes of at most 180,000 each were billed
// 200,000 (116,250 quota where Anthropic charges 256,250), logged as the provider's fault.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  accountQuota, billingSettled, createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack,
} from '../../tests/harness/gateway-stack.js';
import { startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

// claude-haiku-4-5: model ratio 0.5, completion ratio 5, window 200,000; a web search 5,000 quota.
// Written out, not taken from core/pricing, so that the test checks the formula.
const MODEL = 'claude-haiku-4-5';
const charge = (input: number, output: number, searches: number) => Math.round((input + output * 5) * 0.5) + searches * 5_000;
const PASSES = [60_000, 100_000, 140_000, 180_000];
const INPUT = PASSES.reduce((a, b) => a + b, 0);
const OUTPUT = 500;
const SEARCHES = 3;

let stack: GatewayStack;
let provider: ScriptedProvider;

beforeAll(async () => {
  stack = await startGatewayStack();
  provider = await startScriptedProvider((r, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({
      id: 'msg_loop', type: 'message', role: 'assistant', model: r.model, content: [{ type: 'text', text: 'found it' }],
      stop_reason: 'end_turn', stop_sequence: null,
      usage: {
        input_tokens: INPUT, output_tokens: OUTPUT, server_tool_use: { web_search_requests: SEARCHES },
        iterations: PASSES.map((p) => ({ type: 'message', input_tokens: p, output_tokens: OUTPUT / PASSES.length })),
      },
    }));
  });
  await mockChannel(stack, [MODEL], 'default', { base_url: provider.url });
}, 60_000);
afterAll(async () => {
  await provider?.close();
  await stack?.close();
});

async function send(funds: number, extra: Record<string, unknown>): Promise<{ status: number; requestId: string; accountId: number; text: string }> {
  const account = await fundedAccount(stack, funds);
  const { key } = await createApiKey(stack, account);
  const r = await fetch(`${stack.relayUrl}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key, 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: MODEL, max_tokens: 1000, messages: [{ role: 'user', content: 'Look it up' }], ...extra }),
  });
  const text = await r.text();
  return { status: r.status, requestId: r.headers.get('x-gateway-request-id') ?? '', accountId: account.id, text };
}

describe('a server tool loop over several passes', () => {
  // [what, body fields, searches billed: none without a web_search tool, whatever the provider says]
  const cases: Array<[string, Record<string, unknown>, number]> = [
    ['web search (max_uses 5)', { tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 5 }] }, SEARCHES],
    ['web search without max_uses', { tools: [{ type: 'web_search_20260318', name: 'web_search' }] }, SEARCHES],
    ['an MCP server', { mcp_servers: [{ type: 'url', url: 'https://mcp.example/sse', name: 'docs' }], tools: [{ type: 'mcp_toolset', mcp_server_name: 'docs' }] }, 0],
  ];
  for (const [what, extra, searches] of cases) {
    it(`${what}: billed the cumulative prompt it states, the same in the ledger and the balance`, async () => {
      const funds = 10_000_000;
      const r = await send(funds, extra);
      expect(r.status).toBe(200);
      const row = await ledgerRow(stack, r.requestId);
      expect(row.prompt_tokens).toBe(INPUT);
      expect(row.quota).toBe(charge(INPUT, OUTPUT, searches));
      await billingSettled(stack);
      expect(await accountQuota(stack, r.accountId)).toBe(funds - row.quota);
    });
  }

  it('reserves a window per pass: a balance short of it is refused 402, and a lower max_uses lowers it', async () => {
    // max_uses 5: 6 passes of 200,000 tokens (600,000 quota) and 5 searches; max_uses 1: 2 passes.
    const short = await send(300_000, { tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 5 }] });
    expect(short.status).toBe(402);
    expect(JSON.parse(short.text).error.message).toMatch(/up to 6 times.*a lower max_uses reserves less/);
    expect(await accountQuota(stack, short.accountId)).toBe(300_000);
    const one = await send(300_000, { tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 1 }] });
    expect(one.status).toBe(200);
  });
});
