// /v1/messages served by an OpenAI-format channel (type 1), read by @anthropic-ai/sdk: what the
// conversion (from-messages.ts, to-messages.ts) must give an Anthropic client when the provider
// interleaves tool calls, fails mid-stream, names the stop sequence it stopped at, or sends [DONE]
// alone, and what it sends the provider or refuses for a tool error and a tool_choice.
//
// Before: interleaved tool-call deltas made tool_use blocks without id nor name and the SDK's
// finalMessage threw; an error event was followed by message_delta end_turn and message_stop; a
// stop sequence the provider named came back as end_turn; [DONE] alone gave events without
// message_start (the SDK threw); is_error was dropped and an invalid tool_choice silently became auto.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { billingSettled, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount } from '../../../tests/harness/gateway-stack.js';
import { balanceOf, CHAT_DONE, chatChunk, startScriptedProvider, type ScriptedProvider } from '../../../tests/harness/scripted-provider.js';

const ch = (delta: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = {}) =>
  chatChunk({ id: 'chatcmpl-x', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish, ...extra }] });
const usage = (p: number, c: number) => chatChunk({ id: 'chatcmpl-x', object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: p, completion_tokens: c, total_tokens: p + c } });
const call = (index: number, args: string, id?: string, name?: string) =>
  ch({ tool_calls: [{ index, ...(id ? { id, type: 'function' } : {}), function: { ...(name ? { name } : {}), arguments: args } }] });

const MODELS = ['a2o-interleave', 'a2o-midstream-error', 'a2o-vllm-stop', 'a2o-done-only', 'a2o-echo', 'a2o-always-streams-stop', 'a2o-finish-then-close', 'a2o-close-unfinished'];

let stack: GatewayStack;
let provider: ScriptedProvider;
let account: TestAccount;
let key: string;
let client: Anthropic;

beforeAll(async () => {
  provider = await startScriptedProvider(({ model, body }, res) => {
    // A server that streams whatever it is asked (stream-as-answer.ts folds it), naming SGLang's matched_stop.
    if (model === 'a2o-always-streams-stop') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      return void res.end(ch({ role: 'assistant', content: 'one two' }) + ch({}, 'stop', { matched_stop: 'three' }) + usage(10, 2) + CHAT_DONE);
    }
    if (body.stream !== true) {
      res.writeHead(200, { 'content-type': 'application/json' });
      const stopped = model === 'a2o-vllm-stop' ? { stop_reason: 'three' } : {};
      return void res.end(JSON.stringify({ id: 'chatcmpl-x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'one two' }, finish_reason: 'stop', ...stopped }], usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 } }));
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    switch (model) {
      case 'a2o-interleave':
        return void res.end(ch({ role: 'assistant', content: null })
          + call(0, '{"a":', 'call_a', 'f') + call(1, '{"b":', 'call_b', 'g') + call(0, '1}') + call(1, '2}')
          + ch({}, 'tool_calls') + usage(10, 10) + CHAT_DONE);
      case 'a2o-midstream-error':
        return void res.end(ch({ role: 'assistant', content: '' }) + ch({ content: 'one ' }) + ch({ content: 'two' })
          + chatChunk({ error: { message: 'The server had an error', type: 'server_error', code: null } }) + CHAT_DONE);
      case 'a2o-vllm-stop':
        return void res.end(ch({ role: 'assistant', content: 'one two' }) + ch({}, 'stop', { stop_reason: 'three' }) + usage(10, 2) + CHAT_DONE);
      case 'a2o-done-only':
        return void res.end(CHAT_DONE);
      // A server that ignores include_usage and closes without [DONE]: the answer is whole.
      case 'a2o-finish-then-close':
        return void res.end(ch({ role: 'assistant', content: 'one ' }) + ch({ content: 'two' }) + ch({}, 'stop'));
      // Closed before its finish_reason: cut.
      case 'a2o-close-unfinished':
        return void res.end(ch({ role: 'assistant', content: 'one ' }) + ch({ content: 'two' }));
      default:
        return void res.end(ch({ role: 'assistant', content: 'ok' }) + ch({}, 'stop') + usage(10, 1) + CHAT_DONE);
    }
  });
  stack = await startGatewayStack();
  await mockChannel(stack, MODELS, 'default', { base_url: provider.url, type: 1, key: 'sk-a2o' });
  account = await fundedAccount(stack, 100_000_000);
  key = (await createApiKey(stack, account)).key;
  client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });
}, 90_000);

afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

const HI = [{ role: 'user' as const, content: 'Hi' }];

async function rawStream(model: string): Promise<string> {
  const r = await fetch(`${stack.relayUrl}/v1/messages`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
    body: JSON.stringify({ model, max_tokens: 50, stream: true, messages: HI }),
  });
  expect(r.status).toBe(200);
  return r.text();
}

describe('an Anthropic client of an OpenAI-format channel', () => {
  it('tool calls interleaved by index: the SDK\'s finalMessage has both calls whole (it threw)', async () => {
    const final = await client.messages.stream({ model: 'a2o-interleave', max_tokens: 50, messages: HI }).finalMessage();
    expect(final.content).toEqual([
      { type: 'tool_use', id: 'call_a', name: 'f', input: { a: 1 } },
      { type: 'tool_use', id: 'call_b', name: 'g', input: { b: 2 } },
    ]);
    expect(final.stop_reason).toBe('tool_use');
  });

  it('a mid-stream provider error is the stream\'s last event: no message_delta nor message_stop after it', async () => {
    const text = await rawStream('a2o-midstream-error');
    const events = [...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
    expect(events.at(-1)).toBe('error');
    expect(events).not.toContain('message_delta');
    expect(events).not.toContain('message_stop');
    await expect(client.messages.stream({ model: 'a2o-midstream-error', max_tokens: 50, messages: HI }).finalMessage()).rejects.toBeInstanceOf(Anthropic.APIError);
  });

  it('the stop sequence the provider names (vLLM\'s stop_reason): stop_reason stop_sequence, streamed and not', async () => {
    const params = { model: 'a2o-vllm-stop', max_tokens: 50, messages: HI, stop_sequences: ['three', 'four'] };
    const whole = await client.messages.create(params);
    expect([whole.stop_reason, whole.stop_sequence]).toEqual(['stop_sequence', 'three']);
    const streamed = await client.messages.stream(params).finalMessage();
    expect([streamed.stop_reason, streamed.stop_sequence]).toEqual(['stop_sequence', 'three']);
    // Asked without `stream` and answered with a stream, folded (before: end_turn, the fold dropped matched_stop).
    const folded = await client.messages.create({ ...params, model: 'a2o-always-streams-stop' });
    expect([folded.stop_reason, folded.stop_sequence, folded.content]).toEqual(['stop_sequence', 'three', [{ type: 'text', text: 'one two' }]]);
    // Not asked by the request: the provider's word is not taken.
    const unasked = await client.messages.create({ ...params, stop_sequences: ['four'] });
    expect([unasked.stop_reason, unasked.stop_sequence]).toEqual(['end_turn', null]);
  });

  it('a stream of [DONE] alone is no answer: the stream\'s error event (the SDK raises it), billed nothing', async () => {
    await billingSettled(stack);
    const before = await balanceOf(stack, account.id);
    const stream = client.messages.stream({ model: 'a2o-done-only', max_tokens: 50, messages: HI });
    // Until 2026-12-03 an empty message (message_start and message_stop written for it), billed the
    // prompt as counted: a provider that sent no chunk at all said nothing was answered, as a lone
    // message_stop from an Anthropic channel does, and the client is told so and may retry.
    const err = await stream.finalMessage().then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: 'error', error: { type: 'api_error' } });
    const rid = (await stream.withResponse()).response.headers.get('x-gateway-request-id');
    await billingSettled(stack);
    const [ledger] = await stack.sql`SELECT COALESCE(SUM(quota), 0)::bigint AS q FROM ledger WHERE request_id = ${rid}`;
    expect(Number(ledger!.q)).toBe(0);
    expect(await balanceOf(stack, account.id)).toBe(before);
  });

  // Review messages: finalMessage() threw api_error "The model provider stream failed." on it, billed all the same.
  it('a stream that finished (finish_reason) and was closed without usage or [DONE] is a whole answer, billed for its counted text; one closed before its finish_reason is cut', async () => {
    for (const [model, whole] of [['a2o-finish-then-close', true], ['a2o-close-unfinished', false]] as const) {
      await billingSettled(stack);
      const before = await balanceOf(stack, account.id);
      const stream = client.messages.stream({ model, max_tokens: 50, messages: HI });
      const final = await stream.finalMessage().catch((e: unknown) => e);
      if (whole) expect(final).toMatchObject({ content: [{ type: 'text', text: 'one two' }], stop_reason: 'end_turn' });
      else expect(final).toBeInstanceOf(Anthropic.APIError);
      const rid = (await stream.withResponse()).response.headers.get('x-gateway-request-id');
      await billingSettled(stack);
      const [row] = await stack.sql`SELECT quota, prompt_tokens, completion_tokens FROM ledger WHERE request_id = ${rid}`;
      // Unpriced: ratio 1, completion ratio 5; the prompt and the text counted by the relay.
      expect(row, model).toMatchObject({ completion_tokens: 2 });
      expect(Number(row!.prompt_tokens)).toBeGreaterThan(0);
      expect(Number(row!.quota)).toBe(Number(row!.prompt_tokens) + 2 * 5);
      expect(await balanceOf(stack, account.id)).toBe(before - Number(row!.quota));
      // The same through a raw reader: ended by message_stop, or by the error event.
      const raw = await rawStream(model);
      expect(raw.includes('event: message_stop'), model).toBe(whole);
      expect(raw.includes('event: error'), model).toBe(!whole);
    }
  });

  it('a tool_result with is_error true reaches the model as "Error: …"', async () => {
    await client.messages.create({
      model: 'a2o-echo', max_tokens: 50,
      tools: [{ name: 'weather', input_schema: { type: 'object' } }],
      messages: [
        { role: 'user', content: 'Weather in Atlantis?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Atlantis' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', is_error: true, content: 'city not found' }] },
      ],
    });
    const sent = provider.seen.get('a2o-echo')!.body.messages as Array<Record<string, unknown>>;
    expect(sent.find((m) => m.role === 'tool')).toEqual({ role: 'tool', tool_call_id: 'toolu_1', content: 'Error: city not found' });
  });

  it('a tool_choice of type "tool" without a name, or of an unknown type: 400 invalid_request_error naming the field, nothing billed, the provider not called', async () => {
    provider.seen.delete('a2o-echo');
    await billingSettled(stack);
    const before = await balanceOf(stack, account.id);
    for (const [tool_choice, field] of [[{ type: 'tool' }, 'tool_choice.name'], [{ type: 'required' }, 'tool_choice.type']] as const) {
      const err = await client.messages.create({
        model: 'a2o-echo', max_tokens: 50, messages: HI,
        tools: [{ name: 'weather', input_schema: { type: 'object' } }],
        tool_choice: tool_choice as unknown as Anthropic.ToolChoice,
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.BadRequestError);
      const e = err as InstanceType<typeof Anthropic.BadRequestError>;
      expect((e.error as { error: { type: string; message: string } }).error).toMatchObject({ type: 'invalid_request_error' });
      expect((e.error as { error: { message: string } }).error.message.startsWith(`${field}:`)).toBe(true);
    }
    expect(provider.seen.has('a2o-echo')).toBe(false);
    await billingSettled(stack);
    expect(await balanceOf(stack, account.id)).toBe(before);
  });
});
