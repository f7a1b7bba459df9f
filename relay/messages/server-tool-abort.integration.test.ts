// A stream whose cost only its final usage states is read on to it when the client leaves
// (stream-relay.ts billedByFinalUsage): extended thinking, and server tool loops, whose later
// sampling passes' input Anthropic reports only in message_delta. Only web_search was taken for one:
// a web_fetch, tool_search or MCP stream aborted mid-way was billed its first pass's input (1,025 of
// 7,500 here), its later passes unbilled (review sdk).
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { billingSettled, createApiKey, fundedAccount, ledgerRow, mockChannel, settledAccountQuota, startGatewayStack, type GatewayStack, type TestAccount } from '../../tests/harness/gateway-stack.js';
import { BLOCK_START, BLOCK_STOP, LONG_PROMPT, messageStart, MESSAGE_STOP, sse, startScriptedProvider, TOK, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

let stack: GatewayStack;
let provider: ScriptedProvider;
let account: TestAccount;
let client: Anthropic;
const holds: (() => void)[] = [];
const THINK = sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'hmm ' } });

beforeAll(async () => {
  provider = await startScriptedProvider((r, res) => {
    const m = r.model;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const start = messageStart(m, { input_tokens: 1000, output_tokens: 1 });
    const loop = m === 'scr-fetch' || m === 'scr-mcp' || m === 'scr-toolsearch';
    const final = sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { input_tokens: loop ? 5000 : 1000, output_tokens: 500, server_tool_use: loop ? { web_fetch_requests: 2 } : { web_search_requests: m === 'scr-search' ? 2 : 0 } } }) + MESSAGE_STOP;
    if (m === 'scr-think') {
      res.write(start + sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } }) + THINK.repeat(5));
      holds.push(() => res.end(THINK.repeat(5) + sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'sig' } }) + sse('content_block_stop', { type: 'content_block_stop', index: 0 })
        + sse('content_block_start', { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } }) + sse('content_block_delta', { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: 'hi' } }) + sse('content_block_stop', { type: 'content_block_stop', index: 1 }) + final));
    } else {
      res.write(start + BLOCK_START + TOK.repeat(5));
      holds.push(() => res.end(TOK.repeat(5) + BLOCK_STOP + final));
    }
  });
  stack = await startGatewayStack();
  await mockChannel(stack, ['scr-think', 'scr-search', 'scr-fetch', 'scr-mcp', 'scr-toolsearch'], 'default', { base_url: provider.url });
  account = await fundedAccount(stack, 100_000_000);
  client = new Anthropic({ apiKey: (await createApiKey(stack, account)).key, baseURL: stack.relayUrl, maxRetries: 0 });
}, 120_000);
afterAll(async () => { for (const h of holds) h(); await stack?.close(); await provider?.close(); });

const cases: [string, Partial<Anthropic.MessageCreateParamsStreaming>, number][] = [
  ['scr-think', { thinking: { type: 'enabled', budget_tokens: 1024 } }, 1000 + 500 * 5],
  ['scr-think', { thinking: { type: 'adaptive' } as any }, 1000 + 500 * 5],
  ['scr-search', { tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 2 }] }, 1000 + 500 * 5 + 2 * 5000],
  ['scr-search', { tools: [{ type: 'web_search_20260209', name: 'web_search' } as any] }, 1000 + 500 * 5 + 2 * 5000],
  ['scr-fetch', { tools: [{ type: 'web_fetch_20250910', name: 'web_fetch', max_uses: 2 } as any] }, 5000 + 500 * 5],
  ['scr-toolsearch', { tools: [{ type: 'tool_search_tool_regex_20251119', name: 'tool_search_tool_regex' }, { name: 'get_weather', description: 'w', input_schema: { type: 'object' }, defer_loading: true }] } as any, 5000 + 500 * 5],
  ['scr-mcp', { mcp_servers: [{ type: 'url', url: 'https://mcp.example.com/sse', name: 'ex' }] } as any, 5000 + 500 * 5],
];

describe('a stream whose client leaves, read on to its final usage', () => {
  it.each(cases)('%s %j: billed the usage its message_delta states', async (model, extra, expected) => {
    const before = await settledAccountQuota(stack, account.id);
    const ac = new AbortController();
    const { data: stream, response } = await client.messages.create({ model, max_tokens: 1000, stream: true, messages: [{ role: 'user', content: LONG_PROMPT }], ...extra } as Anthropic.MessageCreateParamsStreaming, { signal: ac.signal }).withResponse();
    const requestId = response.headers.get('x-gateway-request-id')!;
    let n = 0;
    await (async () => { for await (const e of stream) { if (e.type === 'content_block_delta' && ++n === 3) ac.abort(); } })().catch(() => {});
    await new Promise((r) => setTimeout(r, 300));
    holds.shift()?.();
    await billingSettled(stack);
    const row = await ledgerRow(stack, requestId);
    const logs = await stack.ch.query({ query: 'SELECT quota, web_search_requests FROM logs FINAL WHERE request_id = {r:String}', query_params: { r: requestId }, format: 'JSONEachRow' }).then((r) => r.json<Record<string, unknown>>());
    const after = await settledAccountQuota(stack, account.id);
    expect(row.quota).toBe(expected);
    expect(logs.map((l) => Number(l.quota))).toEqual([expected]);
    expect(before - after).toBe(expected);
  });
});
