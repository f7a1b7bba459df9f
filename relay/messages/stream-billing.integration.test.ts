// Streams cut short are billed exactly for what was delivered: the client going away cancels the
// provider at once; the provider dying mid-stream gives the client Anthropic's error event. And the
// relay keeps serving while a large prompt is counted on the worker threads.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockUpstream } from '../../bench/mock-upstream/mock-upstream.js';
import {
  settledAccountQuota,
  createApiKey, fundedAccount, ledgerRow, MOCK_CHANNEL_KEY, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

const MODEL = 'claude-haiku-4-5';
// claude-haiku-4-5: model ratio 0.5, completion ratio 5, group default 1 (core/pricing/ratios.ts).
const cost = (input: number, output: number) => Math.round((input + output * 5) * 0.5);
const FUNDS = 10_000_000;

let stack: GatewayStack;
let account: TestAccount;
let key: string;

beforeAll(async () => {
  stack = await startGatewayStack({ mock: { tokenDelayMs: 40, outputTokens: 400 } });
  await mockChannel(stack, [MODEL]);
  account = await fundedAccount(stack, FUNDS);
  key = (await createApiKey(stack, account)).key;
});
afterAll(async () => {
  await stack?.close();
});

// Settled first: a test's last answer may still be settling when the next test reads its 'before'.
const balance = (): Promise<number> => settledAccountQuota(stack, account.id);

describe('a client that goes away mid-stream', () => {
  it('cancels the provider at once and pays exactly for the tokens delivered', async () => {
    const K = 12;
    const before = await balance();
    const abortedBefore = stack.mock.stats.aborted;
    const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
    const stream = client.messages.stream({ model: MODEL, max_tokens: 400, messages: [{ role: 'user', content: 'Tell me a long story' }] });
    let input = 0;
    let deltas = 0;
    let text = '';
    stream.on('streamEvent', (e) => {
      if (e.type === 'message_start') input = e.message.usage.input_tokens;
      if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') {
        deltas++;
        text += e.delta.text;
        if (deltas === K) stream.abort();
      }
    });
    await stream.done().catch(() => {});
    const { response } = await stream.withResponse();
    const requestId = response.headers.get('x-gateway-request-id')!;
    expect(deltas).toBe(K);
    expect(text).toBe('tok '.repeat(K));

    const row = await ledgerRow(stack, requestId);
    // Each mock delta is one token (bench/mock-upstream): the bill is what the relay wrote to the
    // client's socket, to the unit: the K the client read, and a delta or two the relay may have
    // written before the close reached it (13 once, on a loaded machine, two relays behind a balancer).
    const delivered = row.completion_tokens;
    expect(delivered).toBeGreaterThanOrEqual(K);
    expect(delivered).toBeLessThanOrEqual(K + 3);
    expect(row).toMatchObject({ prompt_tokens: input, quota: cost(input, delivered) });
    expect(await balance()).toBe(before - cost(input, delivered));
    expect(await stack.quota.accountBalance(account.id)).toBe(before - cost(input, delivered));
    // The provider saw the cancellation and stopped long before its 400 tokens.
    expect(stack.mock.stats.aborted).toBe(abortedBefore + 1);
  });
});

describe('a provider that dies mid-stream', () => {
  it('sends the client an Anthropic error event and bills exactly the tokens delivered', async () => {
    const dying = await startMockUpstream({ apiKey: MOCK_CHANNEL_KEY, tokenDelayMs: 5, failMidStreamAfterTokens: 7 });
    try {
      const model = 'stream-dies';
      await mockChannel(stack, [model], 'default', { base_url: dying.url });
      const res = await fetch(`${stack.relayUrl}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model, max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'hi there' }] }),
      });
      const body = await res.text();
      expect(res.status).toBe(200);
      expect((body.match(/event: content_block_delta/g) ?? []).length).toBe(7);
      expect(body).toMatch(/event: error\ndata: \{"type":"error","error":\{"type":"api_error"/);
      expect(body).not.toContain('message_stop');
      const input = Number(/"input_tokens":(\d+)/.exec(body)![1]);
      // Unknown model: ratio 1, completion 5.
      const row = await ledgerRow(stack, res.headers.get('x-gateway-request-id')!);
      expect(row).toMatchObject({ completion_tokens: 7, prompt_tokens: input, quota: input + 7 * 5 });
    } finally {
      await dying.close();
    }
  });

  it('through the SDK, the error event raises an APIError', async () => {
    const dying = await startMockUpstream({ apiKey: MOCK_CHANNEL_KEY, tokenDelayMs: 5, streamErrorAfterTokens: 3 });
    try {
      const model = 'stream-error-event';
      await mockChannel(stack, [model], 'default', { base_url: dying.url });
      const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
      const err = await client.messages.stream({ model, max_tokens: 50, messages: [{ role: 'user', content: 'x' }] })
        .finalMessage().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.APIError);
    } finally {
      await dying.close();
    }
  });
});

describe('token counting off the event loop', () => {
  it('keeps serving other requests while a 1 MB prompt is counted', async () => {
    stack.mock.setOptions({ tokenDelayMs: 0 });
    const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
    const prompt = 'word '.repeat(210_000);
    expect(prompt.length).toBeGreaterThan(1_000_000);
    // A prompt is counted only when its byte bound is more than the balance allows. The bound is never
    // above the model's context window, so the request asks for the 1M window (context-1m beta): its
    // bound is then 1,000,000 tokens (cost ~500,000), and the counted estimate (~210,000 tokens × 2:
    // cost ~210,000) fits in 350,000. With the 200k window it would reserve 100,010 and not be counted.
    const modest = await fundedAccount(stack, 350_000);
    const modestClient = new Anthropic({ apiKey: (await createApiKey(stack, modest)).key, baseURL: stack.relayUrl, maxRetries: 0 });
    let done = false;
    const big = modestClient.messages.create({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: prompt }] }, { headers: { 'anthropic-beta': 'context-1m-2025-08-07' } })
      .finally(() => { done = true; });
    let served = 0;
    while (!done) {
      await client.messages.create({ model: MODEL, max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });
      served++;
    }
    expect((await big).type).toBe('message');
    // Several small requests were answered from start to finish while the big one was in flight,
    // which an event loop busy counting a million characters could not do.
    expect(served).toBeGreaterThanOrEqual(3);
    stack.mock.setOptions({ tokenDelayMs: 40 });
  });
});

describe('extended thinking (the mock thinks 30 tokens, then writes 20 of text)', () => {
  const model = 'claude-thinks';
  // Unpriced until mockChannel prices it: ratio 1, completion 5.
  const thinkingCost = (input: number, output: number) => input + output * 5;
  const request = { model, max_tokens: 200, thinking: { type: 'enabled' as const, budget_tokens: 100 }, messages: [{ role: 'user' as const, content: 'Think it through' }] };

  /** Streams `request` through the SDK, aborting after `cutAfter` deltas (thinking and text alike) when given. */
  async function run(cutAfter?: number) {
    const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
    const stream = client.messages.stream(request);
    let input = 0;
    let thinking = '';
    let text = '';
    let signature = '';
    let deltas = 0;
    stream.on('streamEvent', (e) => {
      if (e.type === 'message_start') input = e.message.usage.input_tokens;
      if (e.type !== 'content_block_delta') return;
      if (e.delta.type === 'signature_delta') signature += e.delta.signature;
      if (e.delta.type === 'thinking_delta') thinking += e.delta.thinking;
      if (e.delta.type === 'text_delta') text += e.delta.text;
      if (e.delta.type !== 'signature_delta' && ++deltas === cutAfter) stream.abort();
    });
    const final = await stream.finalMessage().catch(() => null);
    const { response } = await stream.withResponse();
    return { input, thinking, text, signature, final, row: await ledgerRow(stack, response.headers.get('x-gateway-request-id')!) };
  }

  let thinker: Awaited<ReturnType<typeof startMockUpstream>>;
  beforeAll(async () => {
    thinker = await startMockUpstream({ apiKey: MOCK_CHANNEL_KEY, outputTokens: 20, thinkingTokens: 30, tokenDelayMs: 5 });
    await mockChannel(stack, [model], 'default', { base_url: thinker.url });
  });
  afterAll(async () => {
    await thinker?.close();
  });

  it('a whole answer is billed its stated output, thinking included, and reaches the client signed', async () => {
    const before = await balance();
    const r = await run();
    expect(r.thinking).toBe('tok '.repeat(30));
    expect(r.text).toBe('tok '.repeat(20));
    expect(r.final!.content[0]).toMatchObject({ type: 'thinking', signature: r.signature });
    expect(r.signature.length).toBeGreaterThan(0);
    expect(r.final!.usage.output_tokens).toBe(50);
    expect(r.row).toMatchObject({ prompt_tokens: r.input, completion_tokens: 50, quota: thinkingCost(r.input, 50) });
    expect(await balance()).toBe(before - thinkingCost(r.input, 50));
  });

  // Extended thinking is billed in full while Claude 4 streams a summary of it: what was delivered says
  // nothing of the bill, so a stream with thinking is read on to its final usage when its client leaves
  // (stream-relay.ts billedByFinalUsage) and billed what the provider states, as when read to its end.
  it('a client leaving mid-thinking or mid-text: the provider is read on to its final usage and the stream billed by it', async () => {
    for (const cut of [8, 30, 35]) {
      const before = await balance();
      const r = await run(cut);
      const received = (r.thinking.length + r.text.length) / 'tok '.length;
      expect(received).toBeGreaterThanOrEqual(cut);
      expect(received).toBeLessThan(50);
      expect(r.row, `cut after ${cut}`).toMatchObject({ prompt_tokens: r.input, completion_tokens: 50, quota: thinkingCost(r.input, 50) });
      expect(await balance()).toBe(before - thinkingCost(r.input, 50));
      expect(await stack.quota.accountBalance(account.id)).toBe(before - thinkingCost(r.input, 50));
    }
  });
});
