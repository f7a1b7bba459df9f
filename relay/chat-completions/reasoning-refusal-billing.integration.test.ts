// An OpenAI-format provider that states no usage is billed for the text the relay counts (docs/billing.md):
// that text includes the reasoning, under the name OpenRouter and newer vLLM give it (`reasoning`, not
// only `reasoning_content`), and OpenAI's `refusal`, in a stream's deltas and in a JSON answer's
// message alike. Before, a stream of reasoning or refusal deltas cut before its usage was billed 0
// completion tokens: only `content`, `reasoning_content` and tool-call `arguments` were counted.
import type { ServerResponse } from 'node:http';
import OpenAI from 'openai';
import { countText } from '../token-count/bpe-count.js';
import { type ScriptedProvider, type ScriptedRequest, startScriptedProvider } from '../../tests/harness/scripted-provider.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createApiKey, settledAccountQuota, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

// Models no ratio names: model ratio 1, completion ratio 5, group default 1.
const cost = (input: number, output: number) => input + output * 5;
const THOUGHT = 'Let me weigh the question carefully before I answer it. ';
const REFUSAL = 'I am sorry, but I cannot help with that request. ';

let stack: GatewayStack;
let provider: ScriptedProvider;
let account: TestAccount;
let openai: OpenAI;

function chunk(delta: object): string {
  return `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
}

function scripted(req: ScriptedRequest, res: ServerResponse): void {
  const { model, stream } = req.body as { model: string; stream?: boolean };
  const field = model.startsWith('refuse') ? 'refusal' : 'reasoning';
  const text = field === 'refusal' ? REFUSAL : THOUGHT;
  if (!stream) {
    // No usage stated.
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id: 'chatcmpl-2', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: null, [field]: text.repeat(4) }, finish_reason: 'stop' }] }));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write(chunk({ role: 'assistant', content: null }));
  for (let i = 0; i < 4; i++) res.write(chunk({ [field]: text }));
  // The connection is lost before any usage.
  setTimeout(() => res.socket?.destroy(), 100);
}

beforeAll(async () => {
  provider = await startScriptedProvider(scripted);
  const url = provider.url;
  stack = await startGatewayStack();
  await mockChannel(stack, ['think-model', 'refuse-model'], 'default', { base_url: url, key: 'sk-proj-scripted', type: 1 });
  account = await fundedAccount(stack, 10_000_000);
  openai = new OpenAI({ apiKey: (await createApiKey(stack, account)).key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  await stack?.close();
  await provider?.close();
});

const balance = (): Promise<number> => settledAccountQuota(stack, account.id);

describe('a Chat Completions answer without usage, of reasoning or a refusal', () => {
  for (const [model, field] of [['think-model', 'reasoning'], ['refuse-model', 'refusal']] as const) {
    it(`${model}: a stream of ${field} deltas cut before its usage bills the ${field} delivered`, async () => {
      const before = await balance();
      const { data: stream, response } = await openai.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: 'Help me' }] }).withResponse();
      let deltas = 0;
      const err = await (async () => {
        for await (const c of stream) if ((c.choices[0]?.delta as Record<string, unknown> | undefined)?.[field]) deltas++;
      })().then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect(deltas).toBe(4);
      const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
      // Four times a sentence of about a dozen tokens.
      expect(row.completion_tokens).toBeGreaterThanOrEqual(40);
      expect(row.completion_tokens).toBeLessThanOrEqual(60);
      expect(row.prompt_tokens).toBeGreaterThan(0);
      expect(row.quota).toBe(cost(row.prompt_tokens, row.completion_tokens));
      expect(await balance()).toBe(before - row.quota);
    });

    it(`${model}: a JSON answer whose message holds only its ${field} bills it`, async () => {
      const before = await balance();
      const { data, response } = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'Help me' }] }).withResponse();
      expect((data.choices[0]!.message as unknown as Record<string, unknown>)[field]).toBe((field === 'refusal' ? REFUSAL : THOUGHT).repeat(4));
      const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
      expect(row.completion_tokens).toBeGreaterThanOrEqual(40);
      expect(row.completion_tokens).toBeLessThanOrEqual(60);
      expect(row.quota).toBe(cost(row.prompt_tokens, row.completion_tokens));
      expect(await balance()).toBe(before - row.quota);
    });
  }
});

// The prompt the relay counts is what the OpenAI-format provider was sent: a tool call's arguments that
// are no JSON object (cut at finish_reason length and sent back) go as they are. Before, they were
// counted as the {} an Anthropic channel is sent: 80,000 tokens of them billed as 33.
describe('a prompt counted by the relay, for an OpenAI-format channel', () => {
  it('counts tool call arguments that are no JSON object as their text', async () => {
    const args = `{"notes": "${'the quick brown fox jumps over the lazy dog '.repeat(300)}`;
    const before = await balance();
    const { response } = await openai.chat.completions.create({
      model: 'think-model',
      messages: [
        { role: 'user', content: 'Help me' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'take_notes', arguments: args } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'ok' },
      ],
    }).withResponse();
    const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
    const text = countText(args);
    expect(text).toBeGreaterThan(2_500);
    expect(row.prompt_tokens).toBeGreaterThanOrEqual(text);
    expect(row.prompt_tokens).toBeLessThanOrEqual(text + 40);
    expect(row.quota).toBe(cost(row.prompt_tokens, row.completion_tokens));
    expect(await balance()).toBe(before - row.quota);
  });
});
