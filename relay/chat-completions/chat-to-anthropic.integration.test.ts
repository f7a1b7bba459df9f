// POST /v1/chat/completions through the relay to an Anthropic channel, with the official `openai` SDK
// unchanged (base URL only): the request is converted to Anthropic's Messages (what the mock received
// is checked), the answer converted back, and every request billed exactly (ledger, users.quota,
// the Redis mirror, the ClickHouse log row, whose `protocol` says `openai`). Bad input answers
// OpenAI's error JSON with the right status. Usage never claims 0 reasoning tokens for an answer that thought.
import OpenAI from 'openai';
import { ChatCompletionStream } from 'openai/lib/ChatCompletionStream';
import type { RunnableToolFunctionWithParse } from 'openai/lib/RunnableFunction';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countInputTokens, startMockUpstream } from '../../bench/mock-upstream/mock-upstream.js';
import {
  settledAccountQuota,
  billingSettled, createApiKey, fundedAccount, ledgerRow, MOCK_CHANNEL_KEY, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

const MODEL = 'claude-haiku-4-5';
// claude-haiku-4-5: model ratio 0.5, completion ratio 5, cache reads 0.1, group default 1. Written out
// here, not taken from core/pricing, so that the test checks the formula rather than repeating it.
const cost = (input: number, output: number, cacheRead = 0) => Math.round((input + cacheRead * 0.1 + output * 5) * 0.5);
const FUNDS = 10_000_000;
const OUTPUT = 12;
const IMAGE_TOKENS = 1_000;

let stack: GatewayStack;
let account: TestAccount;
let client: OpenAI;
let apiKey: string;

beforeAll(async () => {
  stack = await startGatewayStack({ mock: { outputTokens: OUTPUT, imageInputTokens: IMAGE_TOKENS } });
  await mockChannel(stack, [MODEL, 'claude-x-error429', 'claude-x-error400']);
  account = await fundedAccount(stack, FUNDS);
  apiKey = (await createApiKey(stack, account)).key;
  client = new OpenAI({ apiKey, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  await stack?.close();
});

const balance = (): Promise<number> => settledAccountQuota(stack, account.id);

/** The last body the mock provider received: what the relay converted the request to. */
function providerBody(): Record<string, unknown> {
  return stack.mock.requests[stack.mock.requests.length - 1]!.body as Record<string, unknown>;
}

async function logRow(requestId: string): Promise<{ quota: number; prompt_tokens: number; completion_tokens: number; protocol: string; is_stream: boolean }> {
  const rs = await stack.ch.query({
    query: 'SELECT quota, prompt_tokens, completion_tokens, protocol, is_stream FROM logs FINAL WHERE request_id = {r:String}',
    query_params: { r: requestId }, format: 'JSONEachRow',
  });
  const rows = await rs.json<{ quota: string | number; prompt_tokens: number; completion_tokens: number; protocol: string; is_stream: boolean }>();
  expect(rows).toHaveLength(1);
  return { ...rows[0]!, quota: Number(rows[0]!.quota) };
}

/** Every book agrees on one request's bill: ledger, log row, account balance, Redis mirror. */
async function expectBilled(requestId: string, before: number, input: number, output: number, stream: boolean): Promise<void> {
  const row = await ledgerRow(stack, requestId);
  expect(row).toMatchObject({ prompt_tokens: input, completion_tokens: output, quota: cost(input, output) });
  const [ledger] = await stack.sql`SELECT protocol FROM ledger WHERE request_id = ${requestId}`;
  expect(ledger!.protocol).toBe('openai');
  expect(await logRow(requestId)).toEqual({ quota: cost(input, output), prompt_tokens: input, completion_tokens: output, protocol: 'openai', is_stream: stream });
  expect(await balance()).toBe(before - cost(input, output));
  expect(await stack.quota.accountBalance(account.id)).toBe(before - cost(input, output));
}

describe('a non-streaming chat completion', () => {
  it('is converted to Messages and back, and billed exactly', async () => {
    const before = await balance();
    const { data, response } = await client.chat.completions.create({
      model: MODEL,
      max_completion_tokens: 100,
      temperature: 1.5,
      stop: ['\n\nHuman:'],
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'developer', content: 'Answer in English.' },
        { role: 'user', content: 'Say hello' },
        { role: 'assistant', content: 'Hello.' },
        { role: 'user', content: [{ type: 'text', text: 'Again, please' }] },
      ],
    }).withResponse();
    const sent = providerBody();
    expect(sent).toMatchObject({
      model: MODEL, max_tokens: 100, temperature: 1, stop_sequences: ['\n\nHuman:'],
      system: 'You are terse.\n\nAnswer in English.',
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Say hello' }] },
        { role: 'assistant', content: [{ type: 'text', text: 'Hello.' }] },
        { role: 'user', content: [{ type: 'text', text: 'Again, please' }] },
      ],
    });
    const input = countInputTokens(sent);
    expect(data.object).toBe('chat.completion');
    expect(data.model).toBe(MODEL);
    expect(data.choices).toHaveLength(1);
    expect(data.choices[0]!.message).toMatchObject({ role: 'assistant', content: 'tok '.repeat(OUTPUT) });
    expect(data.choices[0]!.finish_reason).toBe('stop');
    expect(data.usage).toMatchObject({ prompt_tokens: input, completion_tokens: OUTPUT, total_tokens: input + OUTPUT, prompt_tokens_details: { cached_tokens: 0 } });
    // No thinking: none of the output was reasoning.
    expect(data.usage!.completion_tokens_details).toEqual({ reasoning_tokens: 0 });
    expect(response.headers.get('x-request-id')).toMatch(/^req_/);
    await expectBilled(response.headers.get('x-gateway-request-id')!, before, input, OUTPUT, false);
  });

  it('maps max_tokens below the answer to finish_reason length', async () => {
    const before = await balance();
    const { data, response } = await client.chat.completions.create({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'Count to ten' }] }).withResponse();
    expect(data.choices[0]!.message.content).toBe('tok '.repeat(5));
    expect(data.choices[0]!.finish_reason).toBe('length');
    expect(data.usage!.completion_tokens).toBe(5);
    await expectBilled(response.headers.get('x-gateway-request-id')!, before, data.usage!.prompt_tokens, 5, false);
  });
});

describe('what OpenAI\'s answers and conversations hold', () => {
  // Before: the refusal turn vanished (its user turns merged), and the answer lacked both members.
  it('an assistant\'s refusal (content null) stays its turn; answers and chunks carry service_tier and system_fingerprint', async () => {
    const { data } = await client.chat.completions.create({
      model: MODEL, max_tokens: 5,
      messages: [
        { role: 'user', content: 'do a bad thing' },
        { role: 'assistant', content: null, refusal: 'I will not help with that.' },
        { role: 'user', content: 'why?' },
      ],
    }).withResponse();
    expect(providerBody().messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'do a bad thing' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'I will not help with that.' }] },
      { role: 'user', content: [{ type: 'text', text: 'why?' }] },
    ]);
    expect(data).toMatchObject({ service_tier: 'default', system_fingerprint: null });
    const stream = await client.chat.completions.create({ model: MODEL, max_tokens: 5, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] });
    let chunks = 0;
    for await (const c of stream) {
      chunks++;
      expect(c).toMatchObject({ service_tier: 'default', system_fingerprint: null });
    }
    expect(chunks).toBeGreaterThan(2);
    // Settled before the next test reads the balance it starts from.
    await billingSettled(stack);
  });
});

describe('a streamed chat completion', () => {
  it('with include_usage: content chunks, a finish_reason, the usage chunk and [DONE]; billed exactly', async () => {
    const before = await balance();
    const { data: stream, response } = await client.chat.completions.create({
      model: MODEL, max_tokens: 100, stream: true, stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'Tell me a story' }],
    }).withResponse();
    let text = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      expect(chunk.object).toBe('chat.completion.chunk');
      if (chunk.usage) {
        expect(chunk.choices).toHaveLength(0);
        usage = chunk.usage;
      }
      for (const c of chunk.choices) {
        text += c.delta.content ?? '';
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    const input = countInputTokens(providerBody());
    expect(text).toBe('tok '.repeat(OUTPUT));
    expect(finish).toBe('stop');
    expect(chunks).toBe(OUTPUT + 3);
    expect(usage).toMatchObject({ prompt_tokens: input, completion_tokens: OUTPUT, total_tokens: input + OUTPUT });
    expect(usage!.completion_tokens_details).toEqual({ reasoning_tokens: 0 });
    await expectBilled(response.headers.get('x-gateway-request-id')!, before, input, OUTPUT, true);
  });

  it('without include_usage: no usage chunk reaches the client, the request is billed all the same', async () => {
    const before = await balance();
    const res = await fetch(`${stack.relayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'Tell me a story' }] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const body = await res.text();
    const events = body.split('\n\n').filter((e) => e !== '');
    expect(events[events.length - 1]).toBe('data: [DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)) as { choices: unknown[]; usage?: unknown });
    expect(chunks.every((c) => c.choices.length === 1 && c.usage === undefined)).toBe(true);
    // The default max_tokens of a request that sets none (4096) reached the provider.
    expect(providerBody().max_tokens).toBe(4096);
    await expectBilled(res.headers.get('x-gateway-request-id')!, before, countInputTokens(providerBody()), OUTPUT, true);
  });
});

describe('reasoning_effort', () => {
  // Before: dropped, so a Claude model asked to reason never thought. Now extended thinking with the
  // effort's budget; its text is reasoning_content, its tokens billed as output, as Anthropic bills them.
  const THINKING = 16; // the mock's thinking tokens (bench/mock-upstream/knobs.ts)

  it('non-streaming: thinking asked with the effort\'s budget, its text as reasoning_content, billed exactly', async () => {
    const before = await balance();
    const { data, response } = await client.chat.completions.create({
      model: MODEL, max_completion_tokens: 3000, reasoning_effort: 'medium', temperature: 0.3, messages: [{ role: 'user', content: 'Think, then say hello' }],
    }).withResponse();
    const sent = providerBody();
    expect(sent).toMatchObject({ thinking: { type: 'enabled', budget_tokens: 2048 }, max_tokens: 3000 });
    expect(sent).not.toHaveProperty('temperature');
    const message = data.choices[0]!.message as typeof data.choices[0]['message'] & { reasoning_content?: string };
    expect(message.content).toBe('tok '.repeat(OUTPUT));
    expect(message.reasoning_content).toBe('tok '.repeat(THINKING));
    expect(data.usage).toMatchObject({ completion_tokens: THINKING + OUTPUT });
    // Anthropic's usage does not tell the thinking from the text (and a summarized or redacted
    // thinking's text is not what was billed): no reasoning_tokens rather than a false 0.
    expect(data.usage!.completion_tokens_details).toEqual({});
    await expectBilled(response.headers.get('x-gateway-request-id')!, before, countInputTokens(sent), THINKING + OUTPUT, false);
  });

  it('streamed: reasoning_content deltas before the content, billed exactly', async () => {
    const before = await balance();
    const { data: stream, response } = await client.chat.completions.create({
      model: MODEL, max_tokens: 3000, reasoning_effort: 'low', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Think, then say hello' }],
    }).withResponse();
    let reasoning = '';
    let content = '';
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta as { content?: string | null; reasoning_content?: string } | undefined;
      if (delta?.reasoning_content) {
        expect(content).toBe('');
        reasoning += delta.reasoning_content;
      }
      content += delta?.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(providerBody()).toMatchObject({ thinking: { type: 'enabled', budget_tokens: 1024 } });
    expect(reasoning).toBe('tok '.repeat(THINKING));
    expect(content).toBe('tok '.repeat(OUTPUT));
    expect(usage).toMatchObject({ completion_tokens: THINKING + OUTPUT });
    expect(usage!.completion_tokens_details).toEqual({});
    await expectBilled(response.headers.get('x-gateway-request-id')!, before, countInputTokens(providerBody()), THINKING + OUTPUT, true);
  });
});

describe('response_format json_schema', () => {
  // Before: 400, so an app using the SDK's .parse() with a schema could not use a Claude model.
  it('goes out as Anthropic\'s structured outputs (output_config.format), the answer\'s text the content; billed exactly', async () => {
    const before = await balance();
    const schema = { type: 'object', properties: { greeting: { type: 'string' } }, required: ['greeting'], additionalProperties: false };
    const { data, response } = await client.chat.completions.create({
      model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'Greet me in JSON' }],
      response_format: { type: 'json_schema', json_schema: { name: 'greeting', strict: true, schema } },
    }).withResponse();
    const sent = providerBody();
    expect(sent.output_config).toEqual({ format: { type: 'json_schema', schema } });
    expect(sent).not.toHaveProperty('response_format');
    expect(data.choices[0]!.message.content).toBe('tok '.repeat(OUTPUT));
    await expectBilled(response.headers.get('x-gateway-request-id')!, before, countInputTokens(sent), OUTPUT, false);
  });
});

describe('a stream cut short', () => {
  it('a client leaving pays exactly the tokens delivered and the input the provider reported', async () => {
    // 150 ms between tokens: the client's abort lands long before the next token, even on a loaded
    // machine (at 30 ms a descheduled test process saw a tenth token already in its socket).
    const slow = await startMockUpstream({ apiKey: MOCK_CHANNEL_KEY, tokenDelayMs: 150, outputTokens: 300 });
    try {
      await mockChannel(stack, ['claude-slow'], 'default', { base_url: slow.url });
      const before = await balance();
      const K = 9;
      const controller = new AbortController();
      const { data: stream, response } = await client.chat.completions.create({
        model: 'claude-slow', max_tokens: 300, stream: true, messages: [{ role: 'user', content: 'Tell me a long story about the sea' }],
      }, { signal: controller.signal }).withResponse();
      let text = '';
      try {
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta.content ?? '';
          if (text === 'tok '.repeat(K)) {
            controller.abort();
            break;
          }
        }
      } catch {
        // aborted
      }
      expect(text).toBe('tok '.repeat(K));
      const input = countInputTokens(slow.requests[slow.requests.length - 1]!.body);
      // claude-slow has no ratio of its own: model ratio 1, completion ratio 5.
      const quota = input + K * 5;
      const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
      expect(row).toMatchObject({ prompt_tokens: input, completion_tokens: K, quota });
      expect(await balance()).toBe(before - quota);
      await new Promise((r) => setTimeout(r, 100));
      expect(slow.stats.aborted).toBe(1);
    } finally {
      await slow.close();
    }
  });

  it('a provider dying mid-stream: the OpenAI client raises an error, the tokens delivered are billed', async () => {
    const dying = await startMockUpstream({ apiKey: MOCK_CHANNEL_KEY, tokenDelayMs: 5, failMidStreamAfterTokens: 6 });
    try {
      await mockChannel(stack, ['claude-dying'], 'default', { base_url: dying.url });
      const { data: stream, response } = await client.chat.completions.create({ model: 'claude-dying', stream: true, messages: [{ role: 'user', content: 'hi there' }] }).withResponse();
      let text = '';
      const err = await (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      })().then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect((err as InstanceType<typeof OpenAI.APIError>).message).toMatch(/stream failed/);
      expect(text).toBe('tok '.repeat(6));
      const input = countInputTokens(dying.requests[dying.requests.length - 1]!.body);
      const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
      expect(row).toMatchObject({ prompt_tokens: input, completion_tokens: 6, quota: input + 6 * 5 });
    } finally {
      await dying.close();
    }
  });
});

describe('a tool call round trip', () => {
  const tools: OpenAI.ChatCompletionTool[] = [{
    type: 'function',
    function: { name: 'get_weather', description: 'The weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] } },
  }];

  it('tools and tool_choice go out as Anthropic tools; tool_use comes back as tool_calls, the result goes back as tool_result', async () => {
    const before = await balance();
    const first = await client.chat.completions.create({
      model: MODEL, max_tokens: 50, tools, tool_choice: 'required', parallel_tool_calls: false,
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
    }).withResponse();
    expect(providerBody()).toMatchObject({
      tools: [{ name: 'get_weather', description: 'The weather of a city', input_schema: (tools[0] as OpenAI.ChatCompletionFunctionTool).function.parameters }],
      tool_choice: { type: 'any', disable_parallel_tool_use: true },
    });
    const input1 = countInputTokens(providerBody());
    const choice = first.data.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    const call = choice.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.type).toBe('function');
    expect(call.id).toMatch(/^toolu_/);
    expect(call.function.name).toBe('get_weather');
    expect(JSON.parse(call.function.arguments)).toEqual({ city: 'tok', days: 1 });
    await expectBilled(first.response.headers.get('x-gateway-request-id')!, before, input1, OUTPUT, false);

    const middle = await balance();
    const second = await client.chat.completions.create({
      model: MODEL, max_tokens: 50, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        choice.message,
        { role: 'tool', tool_call_id: call.id, content: 'Sunny, 24 °C' },
      ],
    }).withResponse();
    const sent = providerBody();
    expect(sent.tool_choice).toEqual({ type: 'tool', name: 'get_weather' });
    expect(sent.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Weather in Paris?' }] },
      { role: 'assistant', content: [{ type: 'tool_use', id: call.id, name: 'get_weather', input: { city: 'tok', days: 1 } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'Sunny, 24 °C' }] },
    ]);
    expect(second.data.choices[0]!.message.content).toBe('tok '.repeat(OUTPUT));
    expect(second.data.choices[0]!.finish_reason).toBe('stop');
    await expectBilled(second.response.headers.get('x-gateway-request-id')!, middle, countInputTokens(sent), OUTPUT, false);
  });

  it('allowed_tools: an Anthropic channel is sent only the tools allowed, with any (required) or auto; billed exactly', async () => {
    const both: OpenAI.ChatCompletionTool[] = [...tools, { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string' } } } } }];
    const before = await balance();
    const { data, response } = await client.chat.completions.create({
      model: MODEL, max_tokens: 50, tools: both, messages: [{ role: 'user', content: 'Time in Paris?' }],
      tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'get_time' } }] } },
    }).withResponse();
    const sent = providerBody();
    expect(sent.tools).toEqual([{ name: 'get_time', input_schema: { type: 'object', properties: { zone: { type: 'string' } } } }]);
    expect(sent.tool_choice).toEqual({ type: 'any' });
    const call = data.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function).toEqual({ name: 'get_time', arguments: '{"zone":"tok"}' });
    await expectBilled(response.headers.get('x-gateway-request-id')!, before, countInputTokens(sent), OUTPUT, false);

    await client.chat.completions.create({
      model: MODEL, max_tokens: 50, tools: both, messages: [{ role: 'user', content: 'Weather?' }],
      tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'get_weather' } }] } },
    });
    expect(providerBody()).toMatchObject({ tools: [{ name: 'get_weather' }], tool_choice: { type: 'auto' } });
    await billingSettled(stack);
  });

  it('streamed: the tool call arrives as tool_calls deltas the SDK assembles', async () => {
    const before = await balance();
    const { data, response } = await client.chat.completions.create({
      model: MODEL, max_tokens: 50, tools, tool_choice: 'required', stream: true, stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
    }).withResponse();
    // The SDK's own accumulator of tool-call deltas, as client.chat.completions.stream() uses it.
    const final = await ChatCompletionStream.fromReadableStream(data.toReadableStream()).finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(final.choices[0]!.finish_reason).toBe('tool_calls');
    expect(call.function.name).toBe('get_weather');
    expect(JSON.parse(call.function.arguments)).toEqual({ city: 'tok', days: 1 });
    const input = countInputTokens(providerBody());
    expect(final.usage).toMatchObject({ prompt_tokens: input, completion_tokens: OUTPUT });
    await expectBilled(response.headers.get('x-gateway-request-id')!, before, input, OUTPUT, true);
  });
});

describe('a tool without arguments', () => {
  it('runTools, streamed: Anthropic streams its call as one empty partial_json; the SDK gets arguments "{}", calls it and finishes', async () => {
    const before = await balance();
    const sentBefore = stack.mock.requests.length;
    let called = 0;
    const now: RunnableToolFunctionWithParse<Record<string, never>> = {
      type: 'function', function: { name: 'now', description: 'The time now', parameters: { type: 'object', properties: {} }, function: () => { called++; return '12:00'; }, parse: JSON.parse },
    };
    const runner = client.chat.completions.runTools({
      model: MODEL, max_tokens: 50, stream: true, stream_options: { include_usage: true },
      tools: [now],
      tool_choice: 'required',
      messages: [{ role: 'user', content: 'What time is it?' }],
    });
    const calls: string[] = [];
    runner.on('functionToolCall', (c) => calls.push(c.arguments));
    const final = await runner.finalChatCompletion();
    expect(calls).toEqual(['{}']);
    expect(called).toBe(1);
    // The mock forces a call while the last turn holds no tool_result, then answers text.
    const sent = stack.mock.requests.slice(sentBefore).map((r) => r.body as Record<string, unknown>);
    expect(sent).toHaveLength(2);
    expect(JSON.stringify(sent[1]!.messages)).toContain('"tool_result"');
    expect(final.choices[0]!.message.content).toBe('tok '.repeat(OUTPUT));
    // Both requests billed exactly: the balance moved by the two costs, priced from what the provider was sent.
    await billingSettled(stack);
    expect(await balance()).toBe(before - cost(countInputTokens(sent[0]!), OUTPUT) - cost(countInputTokens(sent[1]!), OUTPUT));
  });
});

describe('image input', () => {
  it('a data URL becomes a base64 image block, a URL a url image block; the image tokens are billed', async () => {
    const before = await balance();
    const png = Buffer.from('89504e470d0a1a0a', 'hex').toString('base64');
    const { data, response } = await client.chat.completions.create({
      model: MODEL, max_tokens: 100,
      messages: [{ role: 'user', content: [
        { type: 'text', text: 'What is in these images?' },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } },
        { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg', detail: 'low' } },
      ] }],
    }).withResponse();
    const sent = providerBody();
    expect((sent.messages as Array<{ content: unknown }>)[0]!.content).toEqual([
      { type: 'text', text: 'What is in these images?' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
      { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
    ]);
    // The mock's count: the text, plus IMAGE_TOKENS per image block.
    const input = countInputTokens(sent) + 2 * IMAGE_TOKENS;
    expect(data.usage!.prompt_tokens).toBe(input);
    await expectBilled(response.headers.get('x-gateway-request-id')!, before, input, OUTPUT, false);
  });
});

describe('cache breakpoints of an OpenAI client', () => {
  it('reach the provider on the blocks, tools and system blocks they mark; the writes they cause are billed as such (they were dropped and the reservation doubled for nothing)', async () => {
    stack.mock.setOptions({ cacheCreationTokens: 3_000, cacheCreation1hTokens: 2_000 });
    try {
      const before = await balance();
      // Long enough for its writes: a prompt's stated tokens are bounded by its bytes.
      const shared = 'The long shared context. '.repeat(1_200);
      const { response } = await client.chat.completions.create({
        model: MODEL, max_tokens: 100,
        messages: [
          { role: 'system', content: [{ type: 'text', text: 'You are a careful assistant.', cache_control: { type: 'ephemeral', ttl: '1h' } }] as never },
          { role: 'system', content: 'Answer briefly.' },
          { role: 'user', content: [{ type: 'text', text: shared, cache_control: { type: 'ephemeral' } }, { type: 'text', text: 'The question.' }] as never },
          { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'call_1', content: [{ type: 'text', text: 'found', cache_control: { type: 'ephemeral' } }] as never },
        ],
        // An hour's marks before 5 minutes' in the order Anthropic reads (tools, system, messages): it refuses the reverse.
        tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } }, cache_control: { type: 'ephemeral', ttl: '1h' } } as never],
      }).withResponse();
      const sent = providerBody();
      expect(sent.system).toEqual([
        { type: 'text', text: 'You are a careful assistant.', cache_control: { type: 'ephemeral', ttl: '1h' } },
        { type: 'text', text: 'Answer briefly.' },
      ]);
      expect(sent.tools).toEqual([{ name: 'lookup', input_schema: { type: 'object' }, cache_control: { type: 'ephemeral', ttl: '1h' } }]);
      const messages = sent.messages as Array<{ role: string; content: unknown }>;
      expect(messages[0]!.content).toEqual([
        { type: 'text', text: shared, cache_control: { type: 'ephemeral' } },
        { type: 'text', text: 'The question.' },
      ]);
      expect(messages[2]!.content).toEqual([{ type: 'tool_result', tool_use_id: 'call_1', content: [{ type: 'text', text: 'found', cache_control: { type: 'ephemeral' } }] }]);
      // The mock states its input without the writes, which are billed at 1.25× (5 minutes) and 2× (an hour).
      const input = countInputTokens(sent);
      const quota = Math.round((input + 3_000 * 1.25 + 2_000 * 2 + OUTPUT * 5) * 0.5);
      const requestId = response.headers.get('x-gateway-request-id')!;
      const row = await ledgerRow(stack, requestId);
      expect(row).toMatchObject({ prompt_tokens: input + 5_000, completion_tokens: OUTPUT, quota });
      expect((await logRow(requestId)).quota).toBe(quota);
      expect(await balance()).toBe(before - quota);
    } finally {
      stack.mock.setOptions({ cacheCreationTokens: 0, cacheCreation1hTokens: 0 });
    }
  });
});

describe('GET /v1/models', () => {
  it('answers OpenAI\'s list to OpenAI\'s SDK', async () => {
    const ids: string[] = [];
    for await (const m of client.models.list()) {
      expect(m.object).toBe('model');
      expect(typeof m.created).toBe('number');
      ids.push(m.id);
    }
    expect(ids).toContain(MODEL);
    const one = await client.models.retrieve(MODEL);
    expect(one).toMatchObject({ id: MODEL, object: 'model', owned_by: 'anthropic' });
  });
});

describe('errors', () => {
  const raw = (body: unknown, headers: Record<string, string> = {}) => fetch(`${stack.relayUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

  // `param` names the field, in OpenAI's notation (relay/errors.ts); it was always null.
  it.each([
    ['no messages', { model: MODEL }, /^messages/, 'messages'],
    ['an empty model', { model: '', messages: [{ role: 'user', content: 'hi' }] }, /^model/, 'model'],
    ['an unknown role', { model: MODEL, messages: [{ role: 'robot', content: 'hi' }] }, /role/, 'messages.[0].role'],
    ['n of 2', { model: MODEL, n: 2, messages: [{ role: 'user', content: 'hi' }] }, /^n:/, 'n'],
    ['a tool message without tool_call_id', { model: MODEL, messages: [{ role: 'tool', content: 'x' }] }, /tool_call_id/, 'messages.[0].tool_call_id'],
    ['tool calls that are not a list', { model: MODEL, messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', tool_calls: 'f' }] }, /tool_calls/, 'messages.[1].tool_calls'],
    ['an audio part', { model: MODEL, messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'x', format: 'wav' } }] }] }, /input_audio/, 'messages.[0].content.[0].type'],
    ['response_format json_schema without a schema', { model: MODEL, response_format: { type: 'json_schema', json_schema: { name: 'x' } }, messages: [{ role: 'user', content: 'hi' }] }, /schema/, 'response_format.json_schema.schema'],
    ['response_format json_object (Anthropic\'s structured outputs need a schema)', { model: MODEL, response_format: { type: 'json_object' }, messages: [{ role: 'user', content: 'hi' }] }, /json_schema/, 'response_format'],
    // Before: 200 with "logprobs": null, which an app reading choices[0].logprobs.content failed on.
    ['logprobs asked of a Claude model', { model: MODEL, logprobs: true, top_logprobs: 2, messages: [{ role: 'user', content: 'hi' }] }, /^logprobs:/, 'logprobs'],
    ['temperature above 2', { model: MODEL, temperature: 3, messages: [{ role: 'user', content: 'hi' }] }, /temperature/, 'temperature'],
    ['only an empty user message (an OpenAI-format channel answers it)', { model: MODEL, messages: [{ role: 'user', content: '' }] }, /provider/, 'messages'],
    ['allowed_tools naming a tool not sent', {
      model: MODEL, messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'a' } }],
      tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'b' } }] } },
    }, /no tool named "b"/, 'tool_choice.allowed_tools.tools.[0]'],
    ['allowed_tools of an unknown mode', {
      model: MODEL, messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'a' } }],
      tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'always', tools: [{ type: 'function', function: { name: 'a' } }] } },
    }, /mode/, 'tool_choice.allowed_tools.mode'],
  ])('%s: 400 in OpenAI\'s error JSON', async (_name, body, message, param) => {
    const res = await raw(body);
    expect(res.status).toBe(400);
    const json = await res.json() as { error: { message: string; type: string; param: unknown; code: string } };
    expect(json.error.type).toBe('invalid_request_error');
    expect(json.error.code).toBe('invalid_request');
    expect(json.error.param).toBe(param);
    expect(json.error.message).toMatch(message);
  });

  // Before: refused only when the request was converted for its channel, after the reservation, so an
  // account whose balance could not hold the reservation heard 402 "balance too low" for a request no
  // channel of its model could take, and a key's requests per minute counted it.
  it('what no channel of the model can take is refused 400 before the reservation: a balance too small still hears why', async () => {
    const poor = (await createApiKey(stack, await fundedAccount(stack, 1))).key;
    for (const body of [
      { model: MODEL, n: 2, messages: [{ role: 'user', content: 'hi' }] },
      { model: MODEL, logprobs: true, messages: [{ role: 'user', content: 'hi' }] },
      { model: MODEL, response_format: { type: 'json_object' }, messages: [{ role: 'user', content: 'hi' }] },
    ]) {
      const res = await raw(body, { authorization: `Bearer ${poor}` });
      const json = await res.json() as { error: { type: string; param: unknown } };
      expect([res.status, json.error.type], JSON.stringify(body)).toEqual([400, 'invalid_request_error']);
    }
  });

  it('malformed JSON: 400', async () => {
    const res = await raw('{"model":');
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'invalid_json' } });
  });

  it('the SDK raises its typed errors: unknown key 401, unknown model 404, provider 429 and 400 passed on', async () => {
    const stranger = new OpenAI({ apiKey: 'sk-' + 'a'.repeat(48), baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
    const unauthorized = await stranger.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(unauthorized).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((unauthorized as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe('invalid_api_key');

    const missing = await client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);

    const limited = await client.chat.completions.create({ model: 'claude-x-error429', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
    expect((limited as InstanceType<typeof OpenAI.RateLimitError>).type).toBe('rate_limit_exceeded');
    // As OpenAI's own 429 and an OpenAI-format channel's: the code says it too (it was null).
    expect((limited as InstanceType<typeof OpenAI.RateLimitError>).code).toBe('rate_limit_exceeded');
    expect((limited as InstanceType<typeof OpenAI.RateLimitError>).message).toMatch(/rate limit/);

    const refused = await client.chat.completions.create({ model: 'claude-x-error400', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((refused as InstanceType<typeof OpenAI.BadRequestError>).type).toBe('invalid_request_error');
  });

  it('a balance too low: OpenAI\'s 429 insufficient_quota, not retried by the SDK, nothing billed', async () => {
    const poor = await fundedAccount(stack, 10);
    // The SDK's default retries: x-should-retry: false keeps it to one request.
    let sent = 0;
    const poorClient = new OpenAI({
      apiKey: (await createApiKey(stack, poor)).key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 2,
      fetch: (url: string | URL | Request, init?: RequestInit) => { sent++; return fetch(url, init); },
    });
    const err = await poorClient.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(429);
    expect((err as InstanceType<typeof OpenAI.APIError>).type).toBe('insufficient_quota');
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe('insufficient_quota');
    expect((err as InstanceType<typeof OpenAI.APIError>).headers?.get('x-should-retry')).toBe('false');
    expect(sent).toBe(1);
    const [u] = await stack.sql`SELECT quota FROM users WHERE id = ${poor.id}`;
    expect(Number(u!.quota)).toBe(10);
  });
});
