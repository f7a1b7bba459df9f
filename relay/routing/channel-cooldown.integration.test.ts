// A provider that accepts and never answers, beside a healthy channel of the same model. Its request
// cannot be retried elsewhere (it may be generating: 504 after the headers timeout), and it is never
// disabled (no channel fault). Before: cache affinity sent the same users to it on every request, each
// answered 504 after the timeout, 1 of every 2 users for as long as it hung. Now the relay sets it
// aside after CHANNEL_COOLDOWN_FAILURES such failures, and its users are served by the other channel.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';
import { messageStart, sse, startScriptedProvider, type ScriptedProvider } from '../../tests/harness/scripted-provider.js';

const MODEL = 'claude-haiku-4-5';
/** Served by the mock and by a provider whose every stream is a 200 carrying an overload error. */
const OVERLOADED_MODEL = 'claude-sonnet-4-5';
let stack: GatewayStack;
let hung: ScriptedProvider;
let hungRequests = 0;
let overloaded: ScriptedProvider;
let overloadedRequests = 0;
/** Served by the mock and by a provider whose every stream is a 200 of message_stop alone. */
const NO_ANSWER_MODEL = 'claude-opus-4-5';
let noAnswer: ScriptedProvider;
let noAnswerRequests = 0;

beforeAll(async () => {
  stack = await startGatewayStack({
    env: { UPSTREAM_HEADERS_TIMEOUT_MS: '400', UPSTREAM_MESSAGE_HEADERS_TIMEOUT_MS: '400', CHANNEL_COOLDOWN_FAILURES: '3', CHANNEL_COOLDOWN_SEC: '60' },
  });
  // Accepts the request and never answers (held until the test closes it).
  hung = await startScriptedProvider(() => { hungRequests++; });
  // Anthropic reports an overload inside a stream: a 200, message_start, then an error event.
  overloaded = await startScriptedProvider(({ model }, res) => {
    overloadedRequests++;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(messageStart(model) + sse('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
  });
  noAnswer = await startScriptedProvider((_req, res) => {
    noAnswerRequests++;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(sse('message_stop', { type: 'message_stop' }));
  });
  await mockChannel(stack, [MODEL, OVERLOADED_MODEL, NO_ANSWER_MODEL]);
  await mockChannel(stack, [MODEL], 'default', { base_url: hung.url });
  await mockChannel(stack, [OVERLOADED_MODEL], 'default', { base_url: overloaded.url });
  await mockChannel(stack, [NO_ANSWER_MODEL], 'default', { base_url: noAnswer.url });
});
afterAll(async () => {
  await noAnswer?.close();
  await overloaded?.close();
  await hung?.close();
  await stack?.close();
});

/** Streams of `model` for 20 end users, each twice, as a new account; how many failed. */
async function failedStreams(model: string): Promise<number> {
  const account = await fundedAccount(stack, 10_000_000);
  const key = (await createApiKey(stack, account)).key;
  const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
  let failed = 0;
  for (let round = 0; round < 2; round++) {
    for (let u = 0; u < 20; u++) {
      const stream = client.messages.stream({ model, max_tokens: 8, metadata: { user_id: `user-${u}` }, messages: [{ role: 'user', content: 'hi' }] });
      await stream.finalMessage().catch(() => { failed++; });
    }
  }
  return failed;
}

describe('a channel whose provider never answers', () => {
  it('is set aside after 3 timeouts: its users are served by the other channel of the route', async () => {
    const account = await fundedAccount(stack, 10_000_000);
    const key = (await createApiKey(stack, account)).key;
    const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
    const statuses: number[] = [];
    // 20 end users, each twice: by affinity about half of them land on the hung channel.
    for (let round = 0; round < 2; round++) {
      for (let u = 0; u < 20; u++) {
        statuses.push(await client.messages.create({ model: MODEL, max_tokens: 8, metadata: { user_id: `user-${u}` }, messages: [{ role: 'user', content: 'hi' }] })
          .then(() => 200, (e: unknown) => (e as InstanceType<typeof Anthropic.APIError>).status ?? 0));
      }
    }
    // The 3 that met the hung provider before it was set aside (each relay decides alone: 3 per relay
    // of the stack at most); every other request served.
    expect(hungRequests).toBeGreaterThanOrEqual(3);
    expect(hungRequests).toBeLessThanOrEqual(3 * stack.relays.length);
    expect(statuses.filter((s) => s === 504)).toHaveLength(hungRequests);
    expect(statuses.filter((s) => s === 200)).toHaveLength(40 - hungRequests);
    const setAside = await Promise.all(stack.relays.map(async (r) => (await (await fetch(`http://127.0.0.1:${r.metricsPort}/metrics`)).text())));
    // At least once (relays started in one process, as the cluster pass does, share the counter).
    expect(setAside.some((m) => /gateway_relay_channel_set_aside_total\{channel="\d+",reason="failures"\} [1-9]/.test(m))).toBe(true);
  }, 60_000);

  // Before: the 200's headers counted as a success, and the error event as nothing: beside a healthy
  // channel it took its users' streams, all of them failing, for as long as it was overloaded (30 of
  // 40 in the streams review's probe).
  it('a channel whose streams are a 200 carrying an overload error before any content is set aside too', async () => {
    const failed = await failedStreams(OVERLOADED_MODEL);
    expect(overloadedRequests).toBeGreaterThanOrEqual(3);
    expect(overloadedRequests).toBeLessThanOrEqual(3 * stack.relays.length);
    expect(failed).toBe(overloadedRequests);
  }, 60_000);

  // Before: such a stream was a complete 200, a success for the channel.
  it('a channel whose streams end without starting (message_stop alone) is set aside too', async () => {
    const failed = await failedStreams(NO_ANSWER_MODEL);
    expect(noAnswerRequests).toBeGreaterThanOrEqual(3);
    expect(noAnswerRequests).toBeLessThanOrEqual(3 * stack.relays.length);
    expect(failed).toBe(noAnswerRequests);
  }, 60_000);
});
