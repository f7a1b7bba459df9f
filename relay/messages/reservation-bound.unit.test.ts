import { describe, expect, it, vi } from 'vitest';
import { inputBoundsFromOptions, DEFAULT_WEB_SEARCH_CALL_PRICE } from '../../core/pricing/input-bound.js';
import { decodeUsageEvent } from '../../core/usage/usage-event.js';
import { relayMetrics } from '../metrics/relay-metrics.js';
import { messagesRequestSchema, type MessagesRequest } from './messages-request.js';
import { boundedWebSearchTools, inputBeyondBytes, PER_TOOL_TOKENS, promptPasses, SERVER_LOOP_MAX_PASSES, TOOL_PROMPT_TOKENS, UNBOUNDED, webSearchUses } from './reservation-bound.js';
import { settleExchange, type SettledExchange } from './settlement.js';

/** The tokens beyond the bytes of a request whose models have no image bound. */
const extraOf = (body: MessagesRequest) => inputBeyondBytes(body, undefined).extra;
const request = (extra: Record<string, unknown>, content: unknown = 'hello') =>
  messagesRequestSchema.parse({ model: 'claude-haiku-4-5', max_tokens: 10, messages: [{ role: 'user', content }], ...extra });

describe('what bounds a reservation', () => {
  it('bounds text by its bytes: strings, text, tool_use, thinking, and tool results of text', () => {
    expect(extraOf(request({ system: 'be brief' }))).toBe(0);
    expect(extraOf(request({ system: [{ type: 'text', text: 'x' }] }, [
      { type: 'text', text: 'a' },
      { type: 'thinking', thinking: 'b', signature: 's' },
      { type: 'tool_use', id: 't', name: 'n', input: {} },
      { type: 'tool_result', tool_use_id: 't', content: [{ type: 'text', text: 'r' }] },
      { type: 'tool_result', tool_use_id: 't', content: 'plain' },
    ]))).toBe(0);
  });

  it('bounds a tool_reference by the definition of the tool it names, once a reference; a name no tool has is unbounded', () => {
    // Claude Code's ToolSearch answers with tool_reference blocks: before, each later turn reserved
    // the model's whole window (5,400,000 quota for a 23,955-quota Opus turn).
    const read = { name: 'Read', description: 'Reads a file', input_schema: { type: 'object' }, defer_loading: true };
    const bytes = Buffer.byteLength(JSON.stringify(read));
    const refs = (n: number, name = 'Read') => [{ type: 'tool_result', tool_use_id: 't', content: Array.from({ length: n }, () => ({ type: 'tool_reference', tool_name: name })) }];
    const tools = [read, { name: 'Other', input_schema: { type: 'object' } }];
    expect(extraOf(request({ tools }, refs(1)))).toBe(TOOL_PROMPT_TOKENS + PER_TOOL_TOKENS * 2 + bytes);
    // 200 references to one tool: each bounded by its definition.
    expect(extraOf(request({ tools }, refs(200)))).toBe(TOOL_PROMPT_TOKENS + PER_TOOL_TOKENS * 2 + 200 * bytes);
    expect(extraOf(request({ tools }, refs(1, 'Missing')))).toBe(UNBOUNDED);
    expect(extraOf(request({}, refs(1)))).toBe(UNBOUNDED);
  });

  it('bounds an image by the bound given, at any depth, and takes its base64 data out of the bytes', () => {
    const png = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'QUJD'.repeat(1000) } };
    const byUrl = { type: 'image', source: { type: 'url', url: 'https://x/y.png' } };
    const byFile = { type: 'image', source: { type: 'file', file_id: 'file_1' } };
    const content = [png, { type: 'text', text: 'what is it?' }, { type: 'tool_result', tool_use_id: 't', content: [byUrl, byFile] }];
    expect(inputBeyondBytes(request({}, content), 5_500)).toEqual({ extra: 3 * 5_500, imageDataChars: 4_000, images: 3 });
    // With client tools, their prompt as well.
    const tools = [{ name: 'Read', input_schema: { type: 'object' } }];
    expect(inputBeyondBytes(request({ tools }, [png]), 1_760)).toEqual({ extra: TOOL_PROMPT_TOKENS + PER_TOOL_TOKENS + 1_760, imageDataChars: 4_000, images: 1 });
    // Without a bound (a model whose image cost is not known), the window: nothing taken out.
    expect(inputBeyondBytes(request({}, content), undefined)).toEqual({ extra: UNBOUNDED, imageDataChars: 0, images: 0 });
    // Anything else unbounded stays so, images or not: a document beside the image.
    expect(inputBeyondBytes(request({}, [png, { type: 'document', source: { type: 'url', url: 'https://x/y.pdf' } }]), 5_500).extra).toBe(UNBOUNDED);
    // Text alone: nothing beyond the bytes.
    expect(inputBeyondBytes(request({}, 'hello'), 5_500)).toEqual({ extra: 0, imageDataChars: 0, images: 0 });
    // Data under an image's name that is no image format (a lenient provider may read a PDF or text
    // there), an unknown source or none: the window.
    for (const source of [
      { type: 'base64', media_type: 'application/pdf', data: 'JVBE' }, { type: 'base64', media_type: 'text/plain', data: 'QUJD' },
      { type: 'base64', data: 'QUJD' }, { type: 'base64', media_type: 'image/png' }, { type: 'text', data: 'x' }, null,
    ]) {
      expect(inputBeyondBytes(request({}, [{ type: 'image', source }]), 5_500).extra, JSON.stringify(source)).toBe(UNBOUNDED);
    }
  });

  it('gives up the byte bound for media, search results, server tools, MCP and unknown blocks, at any depth', () => {
    for (const block of [
      { type: 'image', source: { type: 'url', url: 'https://x/y.png' } },
      { type: 'document', source: { type: 'file', file_id: 'file_1' } },
      { type: 'search_result', source: 's', title: 't', content: [] },
      { type: 'container_upload', file_id: 'f' },
      { type: 'redacted_thinking', data: 'abc' },
      { type: 'web_search_tool_result', tool_use_id: 't', content: [] },
      { type: 'something_new' },
      { type: 'tool_result', tool_use_id: 't', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA' } }] },
    ]) expect(extraOf(request({}, [block])), block.type).toBe(UNBOUNDED);
    expect(extraOf(request({ system: [{ type: 'document', source: { type: 'url', url: 'u' } }] }))).toBe(UNBOUNDED);
    expect(extraOf(request({ tools: [{ type: 'web_search_20250305', name: 'web_search' }] }))).toBe(UNBOUNDED);
    expect(extraOf(request({ tools: [{ type: 'bash_20250124', name: 'bash' }] }))).toBe(UNBOUNDED);
    expect(extraOf(request({ mcp_servers: [{ type: 'url', url: 'https://m', name: 'm' }] }))).toBe(UNBOUNDED);
  });

  it('adds the hidden tool prompt of client tools to the byte bound', () => {
    const tool = { name: 'get_weather', input_schema: { type: 'object' } };
    expect(extraOf(request({ tools: [tool, { ...tool, type: 'custom' }] }))).toBe(TOOL_PROMPT_TOKENS + 2 * PER_TOOL_TOKENS);
    expect(extraOf(request({ tools: [] }))).toBe(0);
  });

  it('counts the web searches a request may make: max_uses, or the default', () => {
    expect(webSearchUses(request({ tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 3 }, { name: 'x', input_schema: {} }] }), 20)).toBe(3);
    expect(webSearchUses(request({ tools: [{ type: 'web_search_20250305', name: 'web_search' }] }), 20)).toBe(20);
    expect(webSearchUses(request({}), 20)).toBe(0);
  });

  it('bounds each web_search tool without max_uses by the searches it was reserved for, and changes nothing else', () => {
    const client = { name: 'x', input_schema: {} };
    const unbounded = { type: 'web_search_20250305', name: 'web_search', allowed_domains: ['example.com'] };
    const bounded = { type: 'web_search_20250305', name: 'web_search', max_uses: 3 };
    const body = request({ tools: [client, unbounded, bounded] });
    expect(boundedWebSearchTools(body, 20)).toEqual([client, { ...unbounded, max_uses: 20 }, bounded]);
    // The request itself is left as the client sent it.
    expect((body.tools as unknown[])[1]).toEqual(unbounded);
    // What is reserved is what is sent: 20 + 3 searches.
    expect(webSearchUses(body, 20)).toBe(23);
    for (const max of [1.5, -1, '3', null]) expect(boundedWebSearchTools(request({ tools: [{ ...unbounded, max_uses: max }] }), 20)).toEqual([{ ...unbounded, max_uses: 20 }]);
    expect(boundedWebSearchTools(request({ tools: [client, bounded] }), 20)).toBeNull();
    expect(boundedWebSearchTools(request({}), 20)).toBeNull();
  });

  it('reads context windows and the search price from the options, with defaults', () => {
    const d = inputBoundsFromOptions(new Map());
    expect(d.contextWindow('claude-sonnet-4-5', false)).toBe(200_000);
    expect(d.contextWindow('claude-sonnet-4-5', true)).toBe(1_000_000);
    expect(d.webSearchCallPrice).toBe(DEFAULT_WEB_SEARCH_CALL_PRICE);
    expect(DEFAULT_WEB_SEARCH_CALL_PRICE).toBe(5_000);
    const o = inputBoundsFromOptions(new Map([['ModelContextWindow', '{"big":2000000,"bad":-1}'], ['WebSearchCallPrice', '7000']]));
    expect(o.contextWindow('big', true)).toBe(2_000_000);
    expect(o.contextWindow('bad', false)).toBe(200_000);
    for (const name of ['constructor', 'toString', '__proto__']) {
      expect([o.contextWindow(name, false), o.maxOutputTokens(name)]).toEqual([200_000, 4096]);
    }
    expect(o.webSearchCallPrice).toBe(7000);
    expect(inputBoundsFromOptions(new Map([['ModelContextWindow', 'not json']])).contextWindow('m', false)).toBe(200_000);
  });
});

describe('a cost above the reservation', () => {
  function exchange(reservedAmount: number) {
    const settle = vi.fn(async () => true);
    const log = { warn: vi.fn(), error: vi.fn() };
    const ex = {
      ctx: { quota: { settle, settleSoon: settle, sliceOf: () => undefined }, log },
      requestId: 'r1', upstreamRequestId: '', startedAt: Date.now(), ip: '', group: 'default', tpmLimited: false,
      record: { userId: 1, tokenId: 2, username: 'u', name: 'k', unlimitedQuota: true },
      body: { model: 'm', stream: false }, channel: null,
      price: { model: 1, completion: 1, group: 1, cacheRead: 1, cacheWrite: 1, cacheWrite1h: 1 },
      reservedAmount,
    } as unknown as SettledExchange;
    return { ex, settle, log };
  }
  const usage = { inputTokens: 100, outputTokens: 10, cacheReadTokens: 0, cacheCreationTokens: 0, cacheCreation1hTokens: 0 };

  it('is billed in full, flagged on the event, logged and counted', () => {
    const { ex, settle, log } = exchange(50);
    const before = relayMetrics.overReservations.value;
    settleExchange(ex, { kind: 'ok', usage } as never);
    const s = (settle.mock.calls[0] as unknown as [{ cost: number; eventJson: string }])[0];
    expect(s.cost).toBe(110);
    expect(decodeUsageEvent(s.eventJson).over_reservation).toBe(60);
    expect(log.error).toHaveBeenCalledTimes(1);
    expect(relayMetrics.overReservations.value).toBe(before + 1);
  });

  it('leaves a cost within the reservation unflagged', () => {
    const { ex, settle, log } = exchange(110);
    const before = relayMetrics.overReservations.value;
    settleExchange(ex, { kind: 'ok', usage } as never);
    const s = (settle.mock.calls[0] as unknown as [{ eventJson: string }])[0];
    expect(JSON.parse(s.eventJson)).not.toHaveProperty('over_reservation');
    expect(log.error).not.toHaveBeenCalled();
    expect(relayMetrics.overReservations.value).toBe(before);
  });
});

describe('promptPasses', () => {
  const req = (extra: Record<string, unknown>) => ({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: 'x' }], ...extra }) as unknown as MessagesRequest;
  it('is 1 without server tools: none, custom tools, tools the client runs', () => {
    expect(promptPasses(req({}), 20)).toBe(1);
    expect(promptPasses(req({ tools: [{ name: 'f', input_schema: {} }, { type: 'custom', name: 'g', input_schema: {} }] }), 20)).toBe(1);
    expect(promptPasses(req({ tools: [{ type: 'bash_20250124', name: 'bash' }, { type: 'computer_20251124', name: 'computer' }, { type: 'text_editor_20250728', name: 'e' }, { type: 'memory_20250818', name: 'memory' }] }), 20)).toBe(1);
  });
  it('is one more than the searches and fetches allowed, at most 10', () => {
    expect(promptPasses(req({ tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 2 }] }), 20)).toBe(3);
    expect(promptPasses(req({ tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 2 }, { type: 'web_fetch_20250910', name: 'web_fetch', max_uses: 3 }] }), 20)).toBe(6);
    expect(promptPasses(req({ tools: [{ type: 'web_search_20260318', name: 'web_search' }] }), 20)).toBe(SERVER_LOOP_MAX_PASSES);
    expect(promptPasses(req({ tools: [{ type: 'web_search_20260318', name: 'web_search' }] }), 3)).toBe(4);
  });
  it('is the most for a tool without a bound: web fetch without max_uses, tool search, an MCP toolset or server, an unknown typed tool', () => {
    for (const extra of [
      { tools: [{ type: 'web_fetch_20250910', name: 'web_fetch' }] },
      { tools: [{ type: 'tool_search_tool_regex_20251119', name: 'tool_search' }] },
      { tools: [{ type: 'mcp_toolset', mcp_server_name: 'docs' }] },
      { mcp_servers: [{ type: 'url', url: 'https://mcp.example', name: 'docs' }] },
      { tools: [{ type: 'something_20270101', name: 'x' }] },
    ]) expect(promptPasses(req(extra), 20), JSON.stringify(extra)).toBe(SERVER_LOOP_MAX_PASSES);
  });
});
