// The mock provider against the official Anthropic SDK: if the SDK is happy, the wire format is right.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { countInputTokens, startMockUpstream, type MockUpstream } from './mock-upstream.js';

const KEY = 'sk-ant-mock-test-key';
const MODEL = 'claude-haiku-4-5-20251001';
const REQ_ID = /^req_[0-9A-Za-z]{24,}$/;

let mock: MockUpstream;
let client: Anthropic;

beforeAll(async () => {
  mock = await startMockUpstream({ apiKey: KEY, outputTokens: 10 });
  client = new Anthropic({ apiKey: KEY, baseURL: mock.url, maxRetries: 0 });
});
afterAll(async () => {
  await mock.close();
});
afterEach(() => {
  // Reset knobs a test may have changed.
  mock.setOptions({ outputTokens: 10, tokenDelayMs: 0, firstTokenDelayMs: undefined, errorRate: 0,
    failMidStreamAfterTokens: undefined, streamErrorAfterTokens: undefined, thinkingTokens: undefined });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not reached');
    await sleep(5);
  }
}

const messages: Anthropic.MessageParam[] = [
  { role: 'user', content: 'Hello there, mock!' }, // 18 bytes -> 5
  { role: 'assistant', content: [{ type: 'text', text: 'héllo' }] }, // 6 bytes -> 2
  { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: '12345678' }] }, // 1 + 2
];
const system = 'You are terse.'; // 14 bytes -> 4
const EXPECTED_INPUT = 5 + 2 + 1 + 2 + 4;
const EXPECTED_NO_SYSTEM = EXPECTED_INPUT - 4;

describe('countInputTokens', () => {
  it('sums ceil(utf8 bytes / 4) over system and message text', () => {
    expect(countInputTokens({ system, messages })).toBe(EXPECTED_INPUT);
    expect(countInputTokens({ system: [{ type: 'text', text: 'abcde' }], messages: [] })).toBe(2);
    // non-text blocks and empty strings count nothing; malformed bodies count 0
    expect(countInputTokens({ messages: [{ role: 'user', content: [{ type: 'image', source: {} }, { type: 'text', text: '' }] }] })).toBe(0);
    expect(countInputTokens(null)).toBe(0);
    expect(countInputTokens({ messages: 'nope' })).toBe(0);
    expect(countInputTokens({ messages: [{ role: 'user', content: '日本' }] })).toBe(2); // 6 bytes
  });
});

describe('POST /v1/messages (non-streaming)', () => {
  it('returns a full Message with exact usage and a request id', async () => {
    const { data, response, request_id } = await client.messages
      .create({ model: MODEL, max_tokens: 100, system, messages })
      .withResponse();
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(request_id).toMatch(REQ_ID);
    expect((data as unknown as { _request_id?: string })._request_id).toBe(request_id);
    expect(response.headers.get('anthropic-ratelimit-requests-limit')).toBeTruthy();
    expect(data.id).toMatch(/^msg_[0-9A-Za-z]{24}$/);
    expect(data).toMatchObject({
      type: 'message', role: 'assistant', model: MODEL,
      content: [{ type: 'text', text: 'tok '.repeat(10) }],
      stop_reason: 'end_turn', stop_sequence: null,
      usage: { input_tokens: EXPECTED_INPUT, output_tokens: 10, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    });
    const rec = mock.requests.at(-1)!;
    expect(rec).toMatchObject({ method: 'POST', path: '/v1/messages', requestId: request_id });
    // SDK 1.x sends the key as Authorization: Bearer (older SDKs used x-api-key; both are accepted)
    expect(rec.headers['authorization'] ?? rec.headers['x-api-key']).toMatch(KEY);
    expect(rec.body).toMatchObject({ model: MODEL, max_tokens: 100, system });
  });

  it('limits output by max_tokens (stop_reason max_tokens)', async () => {
    const msg = await client.messages.create({ model: MODEL, max_tokens: 3, messages });
    expect(msg.usage.output_tokens).toBe(3);
    expect(msg.stop_reason).toBe('max_tokens');
    expect(msg.content).toEqual([{ type: 'text', text: 'tok tok tok ' }]);
  });

  it('per-request output tokens and cache usage via headers', async () => {
    const msg = await client.messages.create({ model: MODEL, max_tokens: 50, messages }, {
      headers: { 'x-mock-output-tokens': '7', 'x-mock-cache-read-tokens': '11', 'x-mock-cache-creation-tokens': '5', 'x-mock-cache-creation-1h-tokens': '3' },
    });
    expect(msg.stop_reason).toBe('end_turn');
    // cache_creation_input_tokens is both TTLs together, as Anthropic reports it.
    expect(msg.usage).toMatchObject({
      input_tokens: EXPECTED_NO_SYSTEM, output_tokens: 7, cache_read_input_tokens: 11, cache_creation_input_tokens: 8,
      cache_creation: { ephemeral_5m_input_tokens: 5, ephemeral_1h_input_tokens: 3 },
    });
  });

  it('web searches via header or option: usage.server_tool_use, in message_delta when streamed', async () => {
    const msg = await client.messages.create({ model: MODEL, max_tokens: 50, messages }, { headers: { 'x-mock-web-search-requests': '3' } });
    expect(msg.usage.server_tool_use).toEqual({ web_search_requests: 3 });
    const plain = await client.messages.create({ model: MODEL, max_tokens: 50, messages });
    expect(plain.usage).not.toHaveProperty('server_tool_use');
    mock.setOptions({ webSearchRequests: 2 });
    try {
      const events = [];
      for await (const ev of await client.messages.create({ model: MODEL, max_tokens: 50, messages, stream: true })) events.push(ev);
      const start = events.find((e) => e.type === 'message_start');
      const delta = events.find((e) => e.type === 'message_delta');
      expect(start?.type === 'message_start' && start.message.usage.server_tool_use).toEqual({ web_search_requests: 0 });
      expect(delta?.type === 'message_delta' && delta.usage.server_tool_use).toEqual({ web_search_requests: 2 });
    } finally {
      mock.setOptions({ webSearchRequests: 0 });
    }
  });

  it('setOptions changes behaviour of later requests', async () => {
    mock.setOptions({ outputTokens: 2 });
    const msg = await client.messages.create({ model: MODEL, max_tokens: 50, messages });
    expect(msg.usage.output_tokens).toBe(2);
  });
});

describe('errors', () => {
  it('401 authentication_error for a wrong or missing key; Bearer is accepted', async () => {
    const bad = new Anthropic({ apiKey: 'wrong', baseURL: mock.url, maxRetries: 0 });
    const err = await bad.messages.create({ model: MODEL, max_tokens: 5, messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((err as InstanceType<typeof Anthropic.APIError>).type).toBe('authentication_error');
    expect((err as InstanceType<typeof Anthropic.APIError>).requestID).toMatch(REQ_ID);

    const none = await fetch(`${mock.url}/v1/models`);
    expect(none.status).toBe(401);
    const bearer = await fetch(`${mock.url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(bearer.status).toBe(200);
  });

  it('529 overloaded_error via header and via model name', async () => {
    for (const [model, headers] of [[MODEL, { 'x-mock-error': '529' }], ['claude-test-error529', {}]] as const) {
      const err = await client.messages.create({ model, max_tokens: 5, messages }, { headers }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.APIError);
      const e = err as InstanceType<typeof Anthropic.APIError>;
      expect(e.status).toBe(529);
      expect(e.type).toBe('overloaded_error');
      expect(e.error).toMatchObject({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' }, request_id: e.requestID });
    }
  });

  it('model names -error500 / -error429 and every x-mock-error status map to Anthropic error types', async () => {
    const e500 = await client.messages.create({ model: 'm-error500', max_tokens: 5, messages }).catch((e: unknown) => e);
    expect(e500).toBeInstanceOf(Anthropic.InternalServerError);
    expect((e500 as InstanceType<typeof Anthropic.APIError>).type).toBe('api_error');
    const e429 = await client.messages.create({ model: 'm-error429', max_tokens: 5, messages }).catch((e: unknown) => e);
    expect(e429).toBeInstanceOf(Anthropic.RateLimitError);
    expect((e429 as InstanceType<typeof Anthropic.APIError>).headers?.get('retry-after')).toBe('1');

    const table: Array<[number, string]> = [
      [400, 'invalid_request_error'], [401, 'authentication_error'], [403, 'permission_error'], [404, 'not_found_error'],
      [413, 'request_too_large'], [429, 'rate_limit_error'], [500, 'api_error'], [529, 'overloaded_error'],
    ];
    for (const [status, type] of table) {
      const res = await fetch(`${mock.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': KEY, 'content-type': 'application/json', 'x-mock-error': String(status) },
        body: JSON.stringify({ model: MODEL, max_tokens: 5, messages }),
      });
      expect(res.status).toBe(status);
      const body = await res.json() as { type: string; error: { type: string }; request_id: string };
      expect(body.type).toBe('error');
      expect(body.error.type).toBe(type);
      expect(body.request_id).toBe(res.headers.get('request-id'));
    }
  });

  it('errorRate 1 answers every request 529', async () => {
    mock.setOptions({ errorRate: 1 });
    const err = await client.messages.create({ model: MODEL, max_tokens: 5, messages }).catch((e: unknown) => e);
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(529);
  });

  it('400 invalid_request_error on invalid bodies', async () => {
    const post = async (body: string) => {
      const res = await fetch(`${mock.url}/v1/messages`, {
        method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'application/json' }, body,
      });
      const json = await res.json() as { type: string; error: { type: string; message: string }; request_id: string };
      expect(res.status).toBe(400);
      expect(json.type).toBe('error');
      expect(json.error.type).toBe('invalid_request_error');
      expect(json.request_id).toMatch(REQ_ID);
      expect(res.headers.get('request-id')).toBe(json.request_id);
      return json.error.message;
    };
    expect(await post('{not json')).toMatch(/json/i);
    expect(await post(JSON.stringify({ max_tokens: 5, messages }))).toMatch(/^model:/);
    expect(await post(JSON.stringify({ model: MODEL, max_tokens: 5 }))).toMatch(/^messages:/);
    expect(await post(JSON.stringify({ model: MODEL, messages }))).toBe('max_tokens: Field required');
    expect(await post(JSON.stringify({ model: MODEL, max_tokens: '5', messages }))).toMatch(/^max_tokens:/);
    expect(await post(JSON.stringify({ model: MODEL, max_tokens: 5, messages: 'hi' }))).toMatch(/^messages:/);
    expect(await post(JSON.stringify({ model: MODEL, max_tokens: 5, messages: [{ role: 'bot', content: 'x' }] }))).toMatch(/role/);
    expect(await post(JSON.stringify({ model: MODEL, max_tokens: 5, messages, stream: 'yes' }))).toMatch(/^stream:/);

    // and through the SDK
    const err = await client.messages
      .create({ model: MODEL, messages } as unknown as Anthropic.MessageCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as InstanceType<typeof Anthropic.APIError>).type).toBe('invalid_request_error');
  });

  it('unknown routes answer 404 not_found_error', async () => {
    const res = await fetch(`${mock.url}/v1/nope`, { headers: { 'x-api-key': KEY } });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
  });
});

describe('POST /v1/messages (streaming)', () => {
  it('emits the exact SSE event sequence', async () => {
    const res = await fetch(`${mock.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, max_tokens: 3, messages, stream: true }),
    });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('request-id')).toMatch(REQ_ID);
    const text = await res.text();
    const frames = text.split('\n\n').filter(Boolean).map((f) => {
      const [ev, data] = f.split('\n');
      expect(ev).toMatch(/^event: /);
      expect(data).toMatch(/^data: /);
      const event = ev!.slice(7);
      const json = JSON.parse(data!.slice(6)) as { type: string };
      expect(json.type).toBe(event);
      return json;
    });
    expect(frames.map((f) => f.type)).toEqual([
      'message_start', 'content_block_start', 'ping',
      'content_block_delta', 'content_block_delta', 'content_block_delta',
      'content_block_stop', 'message_delta', 'message_stop',
    ]);
    expect(frames[0]).toMatchObject({
      message: { type: 'message', role: 'assistant', model: MODEL, content: [], stop_reason: null,
        usage: { input_tokens: EXPECTED_NO_SYSTEM, output_tokens: 1, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 } },
    });
    expect(frames[3]).toEqual({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'tok ' } });
    expect(frames[7]).toEqual({ type: 'message_delta', delta: { stop_reason: 'max_tokens', stop_sequence: null }, usage: { output_tokens: 3 } });
  });

  it('create({stream: true}) yields the events in order', async () => {
    const stream = await client.messages.create({ model: MODEL, max_tokens: 100, messages, stream: true });
    const types: string[] = [];
    let text = '';
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
    }
    // the SDK swallows `ping`
    expect(types).toEqual(['message_start', 'content_block_start', ...Array(10).fill('content_block_delta'),
      'content_block_stop', 'message_delta', 'message_stop']);
    expect(text).toBe('tok '.repeat(10));
  });

  it('messages.stream() finalMessage() has the same usage as non-streaming', async () => {
    const stream = client.messages.stream({ model: MODEL, max_tokens: 100, system, messages }, {
      headers: { 'x-mock-output-tokens': '4', 'x-mock-cache-read-tokens': '3' },
    });
    const final = await stream.finalMessage();
    expect(final.usage).toMatchObject({ input_tokens: EXPECTED_INPUT, output_tokens: 4, cache_read_input_tokens: 3, cache_creation_input_tokens: 0 });
    expect(final.stop_reason).toBe('end_turn');
    expect(final.content).toEqual([expect.objectContaining({ type: 'text', text: 'tok '.repeat(4) })]);
    expect((final as unknown as { _request_id?: string })._request_id ?? stream.request_id).toMatch(REQ_ID);
  });

  it('large outputs stream completely (batched writes, backpressure)', async () => {
    const final = await client.messages
      .stream({ model: MODEL, max_tokens: 20000, messages }, { headers: { 'x-mock-output-tokens': '20000' } })
      .finalMessage();
    expect(final.usage.output_tokens).toBe(20000);
    expect((final.content[0] as Anthropic.TextBlock).text.length).toBe(4 * 20000);
  });

  it('a stream that dies mid-way makes the SDK raise', async () => {
    const before = { ...mock.stats };
    const stream = client.messages.stream({ model: MODEL, max_tokens: 100, messages }, { headers: { 'x-mock-fail-after-tokens': '3' } });
    let deltas = 0;
    stream.on('text', () => { deltas++; });
    await expect(stream.finalMessage()).rejects.toThrow();
    expect(deltas).toBeLessThanOrEqual(3);
    expect(mock.stats.dropped).toBe(before.dropped + 1);
    expect(mock.stats.aborted).toBe(before.aborted); // a deliberate drop is not a client abort
  });

  it('failMidStreamAfterTokens option does the same without headers', async () => {
    mock.setOptions({ failMidStreamAfterTokens: 2, tokenDelayMs: 5 });
    const stream = await client.messages.create({ model: MODEL, max_tokens: 100, messages, stream: true });
    const seen: string[] = [];
    await expect((async () => { for await (const ev of stream) seen.push(ev.type); })()).rejects.toThrow();
    expect(seen.filter((t) => t === 'content_block_delta')).toHaveLength(2);
    expect(seen).not.toContain('message_stop');
  });

  it('mid-stream overloaded error event surfaces as APIError overloaded_error', async () => {
    const stream = await client.messages.create({ model: MODEL, max_tokens: 100, messages, stream: true }, {
      headers: { 'x-mock-stream-error-after-tokens': '2' },
    });
    const seen: string[] = [];
    const err = await (async () => { for await (const ev of stream) seen.push(ev.type); })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as InstanceType<typeof Anthropic.APIError>).type).toBe('overloaded_error');
    expect(seen.filter((t) => t === 'content_block_delta')).toHaveLength(2);
  });

  it('stops writing when the client aborts, and counts it', async () => {
    const before = mock.stats.aborted;
    const stream = await client.messages.create({ model: MODEL, max_tokens: 1000, messages, stream: true }, {
      headers: { 'x-mock-output-tokens': '1000', 'x-mock-token-delay-ms': '10' },
    });
    const startTokens = mock.stats.tokensStreamed;
    let deltas = 0;
    for await (const ev of stream) {
      if (ev.type === 'content_block_delta' && ++deltas === 3) stream.controller.abort();
    }
    await until(() => mock.stats.aborted === before + 1);
    const atAbort = mock.stats.tokensStreamed;
    await sleep(100);
    expect(mock.stats.tokensStreamed).toBe(atAbort); // timers cleared: nothing more written
    expect(atAbort - startTokens).toBeLessThan(1000);
  });

  it('honours token delay and first-token delay (lower bounds only)', async () => {
    const res = await fetch(`${mock.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': KEY, 'content-type': 'application/json', 'x-mock-token-delay-ms': '25', 'x-mock-first-token-delay-ms': '60' },
      body: JSON.stringify({ model: MODEL, max_tokens: 5, messages, stream: true }),
    });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    const arrivals: Array<{ t: number; events: string[] }> = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const events = [...decoder.decode(value, { stream: true }).matchAll(/^event: (\w+)$/gm)].map((m) => m[1]!);
      arrivals.push({ t: performance.now(), events });
    }
    const deltaTimes = arrivals.flatMap((a) => a.events.filter((e) => e === 'content_block_delta').map(() => a.t));
    expect(deltaTimes).toHaveLength(5);
    const startT = arrivals.find((a) => a.events.includes('message_start'))!.t;
    expect(deltaTimes[0]! - startT).toBeGreaterThanOrEqual(45); // 60 ms first-token delay, minus slack
    // each token in its own chunk, spaced by ~25 ms
    for (let i = 1; i < deltaTimes.length; i++) expect(deltaTimes[i]!).toBeGreaterThan(deltaTimes[i - 1]!);
    expect(deltaTimes[4]! - deltaTimes[0]!).toBeGreaterThanOrEqual(4 * 25 * 0.75);
  });

  it('non-streaming responses also wait for the simulated generation time', async () => {
    const t0 = performance.now();
    await client.messages.create({ model: MODEL, max_tokens: 4, messages }, { headers: { 'x-mock-token-delay-ms': '20' } });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(4 * 20 * 0.75);
  });
});

describe('other endpoints', () => {
  it('count_tokens returns {input_tokens}', async () => {
    const r = await client.messages.countTokens({ model: MODEL, system, messages });
    expect(r).toEqual({ input_tokens: EXPECTED_INPUT });
    expect(r._request_id).toMatch(REQ_ID);
  });

  it('models list in Anthropic page format', async () => {
    const page = await client.models.list();
    expect(page.data.length).toBeGreaterThan(2);
    expect(page.data[0]).toMatchObject({ type: 'model', id: expect.any(String), display_name: expect.any(String), created_at: expect.any(String) });
    expect(page.has_more).toBe(false);
    expect(page.first_id).toBe(page.data[0]!.id);
    expect(page.last_id).toBe(page.data.at(-1)!.id);

    const ids: string[] = [];
    for await (const m of client.models.list({ limit: 2 })) ids.push(m.id);
    expect(ids).toEqual(page.data.map((m) => m.id)); // pagination via after_id walks the whole list

    const one = await client.models.retrieve(page.data[1]!.id);
    expect(one.id).toBe(page.data[1]!.id);
  });
});

describe('extended thinking', () => {
  it('answers a thinking request with a signed thinking block before the text, output_tokens counting both (JSON and streamed, through the SDK)', async () => {
    mock.setOptions({ thinkingTokens: 6 });
    const request = { model: MODEL, max_tokens: 100, thinking: { type: 'enabled' as const, budget_tokens: 1024 }, messages };
    const message = await client.messages.create(request);
    expect(message.content).toEqual([
      { type: 'thinking', thinking: 'tok '.repeat(6), signature: expect.stringMatching(/^[A-Za-z0-9+/=]+$/) },
      { type: 'text', text: 'tok '.repeat(10) },
    ]);
    expect(message.usage.output_tokens).toBe(16);

    const events: string[] = [];
    const stream = client.messages.stream(request);
    stream.on('streamEvent', (e) => events.push(e.type === 'content_block_delta' ? `${e.index}:${e.delta.type}` : e.type === 'content_block_start' ? `${e.index}:start:${e.content_block.type}` : e.type));
    let thought = '';
    stream.on('thinking', (delta) => { thought += delta; });
    const final = await stream.finalMessage();
    expect(thought).toBe('tok '.repeat(6));
    expect(final.content).toEqual(message.content);
    expect(final.usage.output_tokens).toBe(16);
    expect(events).toEqual([
      'message_start', '0:start:thinking', ...Array(6).fill('0:thinking_delta'), '0:signature_delta', 'content_block_stop',
      '1:start:text', ...Array(10).fill('1:text_delta'), 'content_block_stop', 'message_delta', 'message_stop',
    ]);
  });

  it('thinks at most its budget and max_tokens, the text the rest of max_tokens; no thinking unless asked', async () => {
    mock.setOptions({ thinkingTokens: 50 });
    const small = await client.messages.create({ model: MODEL, max_tokens: 40, thinking: { type: 'enabled', budget_tokens: 30 }, messages });
    expect(small.content.map((b) => b.type)).toEqual(['thinking', 'text']);
    expect((small.content[0] as Anthropic.ThinkingBlock).thinking).toBe('tok '.repeat(30));
    expect((small.content[1] as Anthropic.TextBlock).text).toBe('tok '.repeat(10));
    expect(small).toMatchObject({ stop_reason: 'end_turn', usage: { output_tokens: 40 } });
    const capped = await client.messages.create({ model: MODEL, max_tokens: 35, thinking: { type: 'enabled', budget_tokens: 30 }, messages });
    expect(capped).toMatchObject({ stop_reason: 'max_tokens', usage: { output_tokens: 35 } });
    const plain = await client.messages.create({ model: MODEL, max_tokens: 40, messages });
    expect(plain.content.map((b) => b.type)).toEqual(['text']);
    // Cut after 3 of its 30 thinking deltas: the client saw 3 thinking tokens and no text.
    mock.setOptions({ thinkingTokens: 30, failMidStreamAfterTokens: 3, tokenDelayMs: 5 });
    let thought = '';
    const cut = client.messages.stream({ model: MODEL, max_tokens: 100, thinking: { type: 'enabled', budget_tokens: 64 }, messages });
    cut.on('thinking', (d) => { thought += d; });
    await expect(cut.finalMessage()).rejects.toThrow();
    expect(thought).toBe('tok '.repeat(3));
  });
});
