// What the provider bills is billed, even when the client never sees the answer: a JSON answer
// received in full after the client left, a stream the client left before message_start (the relay
// reads on until message_start says what the provider bills, then cancels), and a request that may
// have started generating is never sent to a second channel. A JSON answer whose connection breaks
// mid-body bills nothing; a stream answered to a request that did not ask for one is folded into the
// Message it asked for and billed.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockUpstream, type MockUpstream } from '../../bench/mock-upstream/mock-upstream.js';
import {
  billingSettled, createApiKey, fundedAccount, MOCK_CHANNEL_KEY, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

const FUNDS = 10_000_000;
const INPUT = 1000;
const OUTPUT = 50;
// Models no ratio names: model ratio 1, completion ratio 5, group default 1.
const cost = (input: number, output: number) => input + output * 5;
/** A prompt whose bytes bound the INPUT tokens the scripted provider states (the relay bills no more input than a text prompt can hold). */
const PROMPT = 'Please say tok fifty times, separated by spaces. '.repeat(24);

let stack: GatewayStack;
let provider: Server;
let providerUrl = '';
/** When the scripted provider saw each request's connection close, ms after it arrived. */
const closedAfter: number[] = [];

// A provider scripted per model: the answer's headers at once, what bills it 600 ms later.
function scripted(req: IncomingMessage, res: ServerResponse): void {
  let raw = '';
  req.on('data', (c: Buffer) => { raw += c.toString(); });
  req.on('end', () => {
    const model = (JSON.parse(raw) as { model: string }).model;
    const t0 = Date.now();
    res.on('close', () => closedAfter.push(Date.now() - t0));
    const message = { id: 'msg_1', type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null };
    if (model === 'json-cut-body' || model === 'overloaded-cut-body') {
      // Headers, the start of a body, then the connection is lost.
      res.writeHead(model === 'json-cut-body' ? 200 : 529, { 'content-type': 'application/json' });
      res.write('{"type":"message","usage":{"input_tok');
      setTimeout(() => res.socket?.destroy(), 50);
      return;
    }
    if (model === 'sse-for-json') {
      // A provider that streams although the request did not ask to.
      const events = [
        ['message_start', { type: 'message_start', message: { ...message, usage: { input_tokens: INPUT, output_tokens: 0 } } }],
        ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
        ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'tok '.repeat(OUTPUT) } }],
        ['content_block_stop', { type: 'content_block_stop', index: 0 }],
        ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: OUTPUT } }],
        ['message_stop', { type: 'message_stop' }],
      ] as const;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(events.map(([e, d]) => `event: ${e}\ndata: ${JSON.stringify(d)}\n\n`).join(''));
      return;
    }
    if (model === 'json-no-usage') {
      // A provider that states no usage (some compatible servers leave it out).
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ...message, content: [{ type: 'text', text: 'tok '.repeat(OUTPUT) }], stop_reason: 'end_turn' }));
      return;
    }
    if (model === 'json-late-body') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
      setTimeout(() => res.end(JSON.stringify({
        ...message, content: [{ type: 'text', text: 'tok '.repeat(OUTPUT) }], stop_reason: 'end_turn',
        usage: { input_tokens: INPUT, output_tokens: OUTPUT },
      })), 600);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    let pings = 0;
    const timer = setInterval(() => {
      if (res.destroyed) return clearInterval(timer);
      if (pings++ === 6) {
        res.write(`event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message: { ...message, usage: { input_tokens: INPUT, output_tokens: 0 } } })}\n\n`);
      } else {
        res.write('event: ping\ndata: {"type": "ping"}\n\n');
      }
      if (pings > 40) { clearInterval(timer); res.end(); }
    }, 100);
  });
}

beforeAll(async () => {
  provider = createServer(scripted);
  await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));
  providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;
  // An answer read whole has as long for its body as for its headers: json-late-body's, 600 ms after
  // its headers, is within it; slow-gen's headers, 1.5 s after the request, are not.
  stack = await startGatewayStack({ env: { UPSTREAM_HEADERS_TIMEOUT_MS: '500', UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS: '1000' } });
  await mockChannel(stack, ['json-late-body', 'stream-late-start', 'json-cut-body', 'overloaded-cut-body', 'sse-for-json', 'json-no-usage'], 'default', { base_url: providerUrl });
});
afterAll(async () => {
  await stack?.close();
  provider?.closeAllConnections();
  await new Promise((r) => provider?.close(r));
});

async function account(): Promise<{ acct: TestAccount; key: string }> {
  const acct = await fundedAccount(stack, FUNDS);
  return { acct, key: (await createApiKey(stack, acct)).key };
}

interface Row { request_id: string; quota: number; prompt_tokens: number; completion_tokens: number; type: number }

/** The account's one ledger row of the relay, once billed. */
async function onlyRow(acct: TestAccount): Promise<Row> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    await billingSettled(stack);
    const rows = await stack.sql`SELECT request_id, quota, prompt_tokens, completion_tokens, type FROM ledger
                                 WHERE user_id = ${acct.id} AND token_id <> 0 ORDER BY id`;
    if (rows.length > 0) {
      expect(rows).toHaveLength(1);
      return rows[0] as unknown as Row;
    }
    if (Date.now() > deadline) throw new Error('the request was never billed');
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function expectDebited(acct: TestAccount, amount: number): Promise<void> {
  const [u] = await stack.sql`SELECT quota FROM users WHERE id = ${acct.id}`;
  expect(u!.quota).toBe(FUNDS - amount);
  expect(await stack.quota.accountBalance(acct.id)).toBe(FUNDS - amount);
}

function post(key: string, body: object, signal: AbortSignal): Promise<Response> {
  return fetch(`${stack.relayUrl}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify(body),
    signal,
  });
}

describe('a JSON answer the client left before it was delivered', () => {
  it('is billed the usage the provider reported', async () => {
    const { acct, key } = await account();
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(), 250);
    await expect(post(key, { model: 'json-late-body', max_tokens: 100, messages: [{ role: 'user', content: PROMPT }] }, ctl.signal)).rejects.toThrow();
    const row = await onlyRow(acct);
    expect(row).toMatchObject({ prompt_tokens: INPUT, completion_tokens: OUTPUT, quota: cost(INPUT, OUTPUT), type: 2 });
    await expectDebited(acct, cost(INPUT, OUTPUT));
  });
});

describe('a JSON answer without usage', () => {
  it('is delivered and billed for the tokens the relay counts, prompt and answer, as a stream without usage is', async () => {
    const { acct, key } = await account();
    const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
    const msg = await client.messages.create({ model: 'json-no-usage', max_tokens: 100, messages: [{ role: 'user', content: 'say tok fifty times' }] });
    expect(msg.content).toEqual([{ type: 'text', text: 'tok '.repeat(OUTPUT) }]);
    const row = await onlyRow(acct);
    expect(row.type).toBe(2);
    expect(row.prompt_tokens).toBeGreaterThan(0);
    // 'tok ' fifty times: fifty tokens, the last one's trailing space aside.
    expect(row.completion_tokens).toBeGreaterThanOrEqual(OUTPUT - 1);
    expect(row.completion_tokens).toBeLessThanOrEqual(OUTPUT + 1);
    expect(row.quota).toBe(cost(row.prompt_tokens, row.completion_tokens));
    await expectDebited(acct, row.quota);
  });
});

describe('a JSON answer whose connection is lost mid-body', () => {
  // The provider said nothing of what it bills: nothing is debited, the reservation is released, the
  // client is told in Anthropic's error format, and the log row says why.
  for (const [model, status, type] of [['json-cut-body', 500, 'api_error'], ['overloaded-cut-body', 529, 'overloaded_error']] as const) {
    it(`${model}: answered ${status} ${type}, billed nothing`, async () => {
      const { acct, key } = await account();
      const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
      const err = await client.messages.create({ model, max_tokens: 100, messages: [{ role: 'user', content: PROMPT }] }).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.APIError);
      expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(status);
      expect((err as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: 'error', error: { type } });
      const row = await onlyRow(acct);
      expect(row).toMatchObject({ quota: 0, type: 5 });
      await expectDebited(acct, 0);
    });
  }
});

describe('a stream answered to a request that did not ask for one', () => {
  it('is answered as the Message the client asked for and billed its usage', async () => {
    const { acct, key } = await account();
    const res = await post(key, { model: 'sse-for-json', max_tokens: 100, messages: [{ role: 'user', content: PROMPT }] }, new AbortController().signal);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/json');
    expect(await res.json()).toMatchObject({
      type: 'message', content: [{ type: 'text', text: 'tok '.repeat(OUTPUT) }], stop_reason: 'end_turn', usage: { input_tokens: INPUT, output_tokens: OUTPUT },
    });
    const row = await onlyRow(acct);
    expect(row).toMatchObject({ prompt_tokens: INPUT, completion_tokens: OUTPUT, quota: cost(INPUT, OUTPUT), type: 2 });
    await expectDebited(acct, cost(INPUT, OUTPUT));
  });
});

describe('a stream the client left before message_start', () => {
  it('reads on until message_start, bills its input tokens, then cancels the provider', async () => {
    const { acct, key } = await account();
    const before = closedAfter.length;
    const ctl = new AbortController();
    const res = await post(key, { model: 'stream-late-start', max_tokens: 100, stream: true, messages: [{ role: 'user', content: PROMPT }] }, ctl.signal);
    expect(res.status).toBe(200);
    setTimeout(() => ctl.abort(), 200);
    await res.text().catch(() => '');
    const row = await onlyRow(acct);
    expect(row).toMatchObject({ prompt_tokens: INPUT, completion_tokens: 0, quota: cost(INPUT, 0), type: 2 });
    await expectDebited(acct, cost(INPUT, 0));
    // Cancelled right after message_start (~700 ms), long before the provider's 4 s stream ended.
    const deadline = Date.now() + 5000;
    while (closedAfter.length === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(closedAfter[before]).toBeLessThan(1500);
  });
});

describe('a generation that outlives the headers timeout', () => {
  let slow: MockUpstream;
  beforeAll(async () => {
    // Non-streaming answers arrive when generated: 1.5 s, past the relay's 1 s headers timeout.
    slow = await startMockUpstream({ apiKey: MOCK_CHANNEL_KEY, firstTokenDelayMs: 1500, outputTokens: 5 });
    await mockChannel(stack, ['slow-gen'], 'default', { base_url: slow.url });
    await mockChannel(stack, ['slow-gen'], 'default', { base_url: slow.url });
  });
  afterAll(async () => {
    await slow?.close();
  });

  it('is not sent to a second channel', async () => {
    const { acct, key } = await account();
    const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
    const err = await client.messages.create({ model: 'slow-gen', max_tokens: 5, messages: [{ role: 'user', content: PROMPT }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    // Anthropic's own answer to a request that timed out while processing; it was sent, so the
    // provider was reached (this said "could not be reached").
    expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(504);
    expect((err as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({
      type: 'error', error: { type: 'timeout_error', message: 'The model provider did not begin its answer in time.' },
    });
    // The provider may be generating it: one provider, one generation, never two.
    expect(slow.stats.requests).toBe(1);
    const row = await onlyRow(acct);
    expect(row).toMatchObject({ quota: 0, type: 5 });
    await expectDebited(acct, 0);
  });
});
