// A stream whose bill only its final usage says is read on to that usage when its client leaves,
// within the reservation that covers it, and billed what the provider billed. Before, the client's
// leaving cancelled the provider and the stream was billed its visible text and a prompt the relay
// counted itself: OpenAI's reasoning models (o-series, gpt-5) stream none of their reasoning, Claude 4
// streams a summary of its thinking and bills the whole, and an OpenAI-format stream states its prompt
// only at its end, its images counted here at Anthropic's 1,600 tokens (gpt-4o-mini bills 25,501 for
// one at detail high). A client that asked for an end marker and left on it got the whole answer,
// billed 20 output tokens of 5,020. Found by a review (the OpenAI endpoint as a hostile client).
import type { ServerResponse } from 'node:http';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockOpenAI, type MockOpenAI } from '../../bench/mock-upstream-openai/mock-openai.js';
import { sse, startScriptedProvider, type ScriptedProvider, type ScriptedRequest } from '../../tests/harness/scripted-provider.js';
import { createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type LedgerRow } from '../../tests/harness/gateway-stack.js';

const REASONING = 5_000;
const VISIBLE = 20;
let stack: GatewayStack;
let provider: ScriptedProvider;
let claude: ScriptedProvider;
let client: OpenAI;
let images: MockOpenAI;
const IMAGES_KEY = 'sk-proj-images';
const PER_IMAGE = 2_833 + 4 * 5_667;

function chunk(delta: object, finish: string | null = null): string {
  return `data: ${JSON.stringify({ id: 'chatcmpl-r', object: 'chat.completion.chunk', created: 1, model: 'o3-mini', choices: [{ index: 0, delta, finish_reason: finish }], usage: null })}\n\n`;
}

function script(_req: ScriptedRequest, res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  // The reasoning happened before the first byte; OpenAI sends nothing of it.
  res.write(chunk({ role: 'assistant', content: '' }));
  let i = 0;
  const timer = setInterval(() => {
    if (res.destroyed) return clearInterval(timer);
    i++;
    if (i < VISIBLE) return void res.write(chunk({ content: 'word ' }));
    clearInterval(timer);
    res.write(chunk({ content: '###' }));
    setTimeout(() => {
      if (res.destroyed) return;
      res.write(chunk({}, 'stop'));
      res.end(`data: ${JSON.stringify({ id: 'chatcmpl-r', object: 'chat.completion.chunk', created: 1, model: 'o3-mini', choices: [], usage: {
        prompt_tokens: 30, completion_tokens: REASONING + VISIBLE, total_tokens: 30 + REASONING + VISIBLE,
        prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: REASONING },
      } })}\n\ndata: [DONE]\n\n`);
    }, 200);
  }, 20);
}

// Claude 4 models stream a summary of their thinking and bill the full thinking (Anthropic's docs:
// "you're charged for the full thinking tokens ... not the summary tokens"); the count comes only in
// message_delta, after the text. Scripted: a 2-sentence summary, 20 text deltas ending in "###",
// then message_delta with 3,000 thinking + 20 text output tokens.
const FULL_THINKING = 3_000;
function claudeScript(req: ScriptedRequest, res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write(sse('message_start', { type: 'message_start', message: { id: 'msg_t', type: 'message', role: 'assistant', model: req.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 30, output_tokens: 1 } } }));
  res.write(sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } }));
  res.write(sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'I weighed the options. I chose the simplest. ' } }));
  res.write(sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'c2lnbmF0dXJl' } }));
  res.write(sse('content_block_stop', { type: 'content_block_stop', index: 0 }));
  res.write(sse('content_block_start', { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } }));
  let i = 0;
  const timer = setInterval(() => {
    if (res.destroyed) return clearInterval(timer);
    i++;
    const text = i < VISIBLE ? 'word ' : '###';
    res.write(sse('content_block_delta', { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text } }));
    if (i < VISIBLE) return;
    clearInterval(timer);
    setTimeout(() => {
      if (res.destroyed) return;
      res.write(sse('content_block_stop', { type: 'content_block_stop', index: 1 }));
      res.write(sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: FULL_THINKING + VISIBLE } }));
      res.end(sse('message_stop', { type: 'message_stop' }));
    }, 200);
  }, 20);
}

beforeAll(async () => {
  provider = await startScriptedProvider(script);
  claude = await startScriptedProvider(claudeScript);
  stack = await startGatewayStack();
  await mockChannel(stack, ['o3-mini'], 'default', { base_url: provider.url, key: 'sk-proj-reasoning', type: 1 });
  // An operator's alias of a reasoning model: the name the channel is sent decides.
  await mockChannel(stack, ['house-reasoner'], 'default', { base_url: provider.url, key: 'sk-proj-reasoning', type: 1, model_mapping: JSON.stringify({ 'house-reasoner': 'o3-mini' }) });
  await mockChannel(stack, ['claude-sonnet-4-5'], 'default', { base_url: claude.url });
  images = await startMockOpenAI({ apiKey: IMAGES_KEY, outputTokens: 40, tokenDelayMs: 30, imageInputTokens: PER_IMAGE });
  await mockChannel(stack, ['gpt-4o-mini'], 'default', { base_url: images.url, key: IMAGES_KEY, type: 1 });
  client = new OpenAI({ apiKey: (await createApiKey(stack, await fundedAccount(stack, 100_000_000))).key, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
});
afterAll(async () => { await stack?.close(); await provider?.close(); await claude?.close(); await images?.close(); });

// A stream read to its end: its text and its ledger row.
async function readWhole(req: OpenAI.ChatCompletionCreateParamsStreaming): Promise<{ text: string; row: LedgerRow }> {
  const whole = await client.chat.completions.create(req).withResponse();
  let text = '';
  for await (const c of whole.data) text += c.choices[0]?.delta.content ?? '';
  return { text, row: await ledgerRow(stack, whole.response.headers.get('x-gateway-request-id')!) };
}

// A stream the client leaves as soon as `leave` says so of the text seen so far: that text, and the
// stream's ledger row once billed.
async function readUntil(req: OpenAI.ChatCompletionCreateParamsStreaming, leave: (seen: string) => boolean): Promise<{ seen: string; row: LedgerRow }> {
  const controller = new AbortController();
  const cut = await client.chat.completions.create(req, { signal: controller.signal }).withResponse();
  let seen = '';
  try {
    for await (const c of cut.data) {
      seen += c.choices[0]?.delta.content ?? '';
      if (leave(seen)) controller.abort();
    }
  } catch {
    // the client's own abort
  }
  return { seen, row: await ledgerRow(stack, cut.response.headers.get('x-gateway-request-id')!) };
}

const onMarker = (seen: string): boolean => seen.endsWith('###');

const request = { model: 'o3-mini', max_completion_tokens: 8000, stream: true as const, messages: [{ role: 'user' as const, content: 'Think hard, then answer; end your answer with ###' }] };

describe('a reasoning model\'s stream left on its end marker', () => {
  it('is billed the reasoning the provider billed, as the same stream read to its end is', async () => {
    const full = await readWhole(request);
    expect(full.row.completion_tokens).toBe(REASONING + VISIBLE);
    const cut = await readUntil(request, onMarker);
    // The client has the whole answer.
    expect(cut.seen).toBe(full.text);
    expect(cut.row.completion_tokens).toBe(full.row.completion_tokens);
  });

  // Before: decided on the client's name, a mapped alias was billed 20 output tokens of 5,020.
  it('a reasoning model behind a channel\'s model_mapping alias: the cut stream is billed its reasoning too', async () => {
    const cut = await readUntil({ ...request, model: 'house-reasoner' }, onMarker);
    expect(cut.row.completion_tokens).toBe(REASONING + VISIBLE);
  });

  it('Claude\'s summarized thinking (reasoning_effort): the cut stream is billed the full thinking the provider bills', async () => {
    const req = { model: 'claude-sonnet-4-5', max_tokens: 8000, reasoning_effort: 'high' as const, stream: true as const, messages: [{ role: 'user' as const, content: 'Think hard, then answer; end your answer with ###' }] };
    const full = await readWhole(req);
    expect(full.row.completion_tokens).toBe(FULL_THINKING + VISIBLE);
    const cut = await readUntil(req, onMarker);
    expect(cut.seen).toBe(full.text);
    expect(cut.row.completion_tokens).toBe(full.row.completion_tokens);
  });
});

const png = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
const imageRequest = {
  model: 'gpt-4o-mini', max_tokens: 40, stream: true as const,
  messages: [{ role: 'user' as const, content: [
    { type: 'text' as const, text: 'Compare these two photos in detail.' },
    { type: 'image_url' as const, image_url: { url: png, detail: 'high' as const } },
    { type: 'image_url' as const, image_url: { url: png, detail: 'high' as const } },
  ] }],
};

describe('images in an OpenAI-format stream the client cuts', () => {
  it('are billed as the provider bills them, not 16× less', async () => {
    const full = await readWhole(imageRequest);
    expect(full.row.prompt_tokens).toBeGreaterThan(2 * PER_IMAGE);
    const cut = await readUntil(imageRequest, (seen) => seen.length > 0);
    // The provider billed the operator full.row.prompt_tokens for this prompt either way.
    expect({ cutPrompt: cut.row.prompt_tokens, fullPrompt: full.row.prompt_tokens }).toEqual({ cutPrompt: full.row.prompt_tokens, fullPrompt: full.row.prompt_tokens });
  });
});
