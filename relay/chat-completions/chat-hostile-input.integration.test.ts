// Hostile bodies on POST /v1/chat/completions, to an Anthropic channel and to an OpenAI-format one:
// every answer is a 200 or a 4xx in OpenAI's error JSON, never a 5xx, and the relay keeps serving.
// Seeded (fast-check): FUZZ_SEED replays a run, FUZZ_RUNS sets the number of bodies (150).
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockOpenAI, type MockOpenAI } from '../../bench/mock-upstream-openai/mock-openai.js';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';

const SEED = Number(process.env.FUZZ_SEED ?? 14_2026);
const RUNS = Number(process.env.FUZZ_RUNS ?? 150);
const OPENAI_KEY = 'sk-proj-hostile-input';

let stack: GatewayStack;
let openaiMock: MockOpenAI;
let apiKey: string;

beforeAll(async () => {
  stack = await startGatewayStack({ mock: { outputTokens: 3 } });
  openaiMock = await startMockOpenAI({ apiKey: OPENAI_KEY, outputTokens: 3 });
  await mockChannel(stack, ['claude-haiku-4-5']);
  await mockChannel(stack, ['gpt-4o-mini'], 'default', { base_url: openaiMock.url, key: OPENAI_KEY, type: 1 });
  apiKey = (await createApiKey(stack, await fundedAccount(stack, 100_000_000))).key;
});
afterAll(async () => {
  await openaiMock?.close();
  await stack?.close();
});

const text = fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom('', 'hi', 'data:image/png;base64,AAAA', 'https://x.invalid/a.png', '{', '\u0000'));
const part = fc.oneof(
  fc.record({ type: fc.constantFrom('text', 'image_url', 'file', 'input_audio', 'refusal', 'x'), text: fc.option(text, { nil: undefined }) }),
  fc.record({ type: fc.constant('image_url'), image_url: fc.oneof(fc.record({ url: fc.oneof(text, fc.integer()) }), text, fc.constant(null)) }),
  fc.record({ type: fc.constant('file'), file: fc.oneof(fc.record({ file_data: text }), fc.record({ file_id: text })) }),
  fc.anything({ maxDepth: 2 }),
);
const toolCall = fc.oneof(
  fc.record({ id: text, type: fc.constant('function'), function: fc.record({ name: text, arguments: fc.oneof(text, fc.constant('{"a":1}'), fc.constant('[1]'), fc.integer()) }) }),
  fc.anything({ maxDepth: 2 }),
);
const message = fc.oneof(
  fc.record({ role: fc.constantFrom('system', 'developer', 'user', 'assistant', 'tool', 'function', 'robot'), content: fc.oneof(text, fc.array(part, { maxLength: 3 }), fc.constant(null), fc.integer()) }, { requiredKeys: ['role'] }),
  fc.record({ role: fc.constant('assistant'), content: fc.constant(null), tool_calls: fc.oneof(fc.array(toolCall, { maxLength: 2 }), fc.anything({ maxDepth: 1 })) }),
  fc.record({ role: fc.constant('tool'), tool_call_id: fc.oneof(text, fc.integer()), content: fc.oneof(text, fc.array(part, { maxLength: 2 })) }),
  fc.anything({ maxDepth: 2 }),
);
const body = fc.oneof(
  { weight: 5, arbitrary: fc.record({
    model: fc.constantFrom('claude-haiku-4-5', 'gpt-4o-mini', '', 'nope'),
    messages: fc.oneof(fc.array(message, { minLength: 0, maxLength: 4 }), fc.anything({ maxDepth: 1 })),
    max_tokens: fc.oneof(fc.integer({ min: -2, max: 50 }), fc.constant(null), fc.double()),
    max_completion_tokens: fc.oneof(fc.integer({ min: -2, max: 50 }), fc.constant(null)),
    stream: fc.oneof(fc.boolean(), fc.constant('yes')),
    stream_options: fc.oneof(fc.record({ include_usage: fc.oneof(fc.boolean(), fc.integer()) }), fc.constant(null), fc.integer()),
    n: fc.integer({ min: -1, max: 3 }),
    temperature: fc.oneof(fc.double({ min: -1, max: 3, noNaN: true }), text),
    stop: fc.oneof(text, fc.array(text, { maxLength: 6 }), fc.constant(null)),
    tools: fc.oneof(fc.array(fc.oneof(fc.record({ type: fc.constant('function'), function: fc.record({ name: text, parameters: fc.anything({ maxDepth: 2 }) }) }), fc.anything({ maxDepth: 2 })), { maxLength: 2 }), fc.constant(null)),
    tool_choice: fc.oneof(fc.constantFrom('auto', 'none', 'required', 'any'), fc.record({ type: fc.constantFrom('function', 'tool'), function: fc.record({ name: text }) }), fc.anything({ maxDepth: 1 })),
    response_format: fc.oneof(fc.record({ type: fc.constantFrom('text', 'json_object', 'json_schema') }), fc.anything({ maxDepth: 1 })),
  }, { requiredKeys: ['model', 'messages'] }) },
  { weight: 1, arbitrary: fc.anything({ maxDepth: 3 }) },
);

function openaiError(status: number, raw: string): string | null {
  if (status === 200) return null;
  if (status >= 500) return `${status} from the relay: ${raw.slice(0, 300)}`;
  let j: { error?: { message?: unknown; type?: unknown; code?: unknown } };
  try {
    j = JSON.parse(raw) as typeof j;
  } catch {
    return `${status} not JSON: ${raw.slice(0, 200)}`;
  }
  if (typeof j.error?.message !== 'string' || typeof j.error.type !== 'string') return `${status} outside OpenAI's error JSON: ${raw.slice(0, 200)}`;
  return null;
}

describe(`hostile bodies on /v1/chat/completions (FUZZ_SEED=${SEED})`, () => {
  it(`${RUNS} bodies: a 200 or a 4xx in OpenAI's error JSON, never a 5xx`, async () => {
    await fc.assert(fc.asyncProperty(body, async (b) => {
      const res = await fetch(`${stack.relayUrl}/v1/chat/completions`, {
        method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify(b) ?? 'null',
      });
      const problem = openaiError(res.status, await res.text());
      if (problem) throw new Error(problem);
    }), { numRuns: RUNS, seed: SEED });
    // Still serving.
    const ok = await fetch(`${stack.relayUrl}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-haiku-4-5', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(ok.status).toBe(200);
  });
});

describe('a body that names a key twice in one object', () => {
  it('is refused with 400 in OpenAI\'s error JSON, on either kind of channel', async () => {
    for (const model of ['claude-haiku-4-5', 'gpt-4o-mini']) {
      const res = await fetch(`${stack.relayUrl}/v1/chat/completions`, {
        method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: `{"model":"${model}","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"max_tokens":4000}`,
      });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ error: { type: 'invalid_request_error', message: expect.stringMatching(/"max_tokens" twice/) } });
    }
  });
});

// A provider matching field names without regard to case (Go's encoding/json: new-api and one-api
// as a channel, Go OpenAI-compatible servers) read "Model" or "MAX_TOKENS" as the field the relay
// priced and bounded under its own spelling: one model served, another billed (review http).
describe('a field the relay reads, named in other letters', () => {
  for (const [route, model] of [['/v1/chat/completions', 'claude-haiku-4-5'], ['/v1/chat/completions', 'gpt-4o-mini'], ['/v1/messages', 'claude-haiku-4-5']] as const) {
    it(`is refused with 400 on ${route} (${model}), beside the field or instead of it`, async () => {
      const anthropic = route === '/v1/messages';
      for (const body of [
        `{"model":"${model}","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"MAX_TOKENS":4000}`,
        `{"model":"${model}","Model":"claude-opus-4-1","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`,
        `{"model":"${model}","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"ſtream":true}`,
        `{"model":"${model}","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"Tools":[{"type":"web_search_20250305","name":"web_search"}]}`,
      ]) {
        const res = await fetch(`${stack.relayUrl}${route}`, {
          method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body,
        });
        expect(res.status, body).toBe(400);
        const json = await res.json() as { type?: string; error: { type: string; message: string } };
        if (anthropic) expect(json.type).toBe('error');
        expect(json.error).toMatchObject({ type: 'invalid_request_error', message: expect.stringMatching(/in lower case/) });
      }
    });
  }

  it('an unknown field in capitals the relay does not read is left to the provider', async () => {
    const res = await fetch(`${stack.relayUrl}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], X_Vendor_Flag: true }),
    });
    expect(res.status).toBe(200);
  });
});

describe('what a body may hold that a check of its own nesting or the prices does not catch', () => {
  const post = (b: unknown) => fetch(`${stack.relayUrl}/v1/chat/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify(b),
  });
  const withCalls = (model: string, calls: unknown[]) => ({
    model, max_tokens: 5, messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: null, tool_calls: calls }, { role: 'user', content: 'go' }],
  });

  it('tool call arguments nested 20,000 deep: 400 naming them, streamed or not, on either kind of channel (before: 500 on an Anthropic channel)', async () => {
    const args = `${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}`;
    for (const model of ['claude-haiku-4-5', 'gpt-4o-mini']) {
      for (const stream of [false, true]) {
        const res = await post({ ...withCalls(model, [{ id: 'c', type: 'function', function: { name: 'f', arguments: args } }]), stream });
        expect(res.status).toBe(400);
        expect(await res.json()).toMatchObject({ error: { type: 'invalid_request_error', param: 'messages.[1].tool_calls.[0].function.arguments', message: expect.stringMatching(/more than 120 levels deep/) } });
      }
    }
  });

  it('20,000 tool calls of one id are given distinct ids and served (before: the event loop held 12 s)', async () => {
    const calls = Array.from({ length: 20_000 }, () => ({ id: 'a', type: 'function', function: { name: 'f', arguments: '{}' } }));
    // Text enough beside them that the body's keys are within a key per 16 bytes (raw-json-guard.ts).
    const res = await post({ ...withCalls('claude-haiku-4-5', calls), system: 'x'.repeat(20_000 * 48) });
    expect(res.status, await res.clone().text()).toBe(200);
    const sent = stack.mock.requests[stack.mock.requests.length - 1]!.body as { messages: Array<{ content: Array<{ type: string; id?: string }> }> };
    const ids = sent.messages[1]!.content.filter((b) => b.type === 'tool_use').map((b) => b.id);
    expect(ids.length).toBe(20_000);
    expect(new Set(ids).size).toBe(20_000);
  });

  // At a price below 1 the bound's cost is a number Redis can compare: the balance refuses it (429 insufficient_quota).
  it('an output bound whose cost at the model\'s price is past what any balance can hold (max_tokens 2^53 - 1): 400 naming the field, not 404 model_not_priced', async () => {
    for (const model of ['claude-haiku-4-5']) {
      for (const field of ['max_tokens', 'max_completion_tokens']) {
        const res = await post({ model, [field]: Number.MAX_SAFE_INTEGER, messages: [{ role: 'user', content: 'hi' }] });
        expect(res.status, await res.clone().text()).toBe(400);
        expect(await res.json()).toMatchObject({ error: { type: 'invalid_request_error', param: field, message: expect.stringMatching(new RegExp(`^${field}: .* output tokens cost more at this model's price than any balance can hold$`)) } });
      }
    }
  });
});
