// A Chat Completions client that did not ask for the usage (no stream_options.include_usage) is sent
// none, as OpenAI sends none, although the relay asks the provider for it (it bills by it): not the
// usage chunk, not a usage the provider attaches to its finish_reason chunk, and not the
// `"usage":null` OpenAI puts in every chunk once include_usage is on. Before, only a usage chunk with
// empty choices was left out: the others reached the client. A client that asked gets them all.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

// A model no ratio names: model ratio 1, completion ratio 5, group default 1.
const cost = (input: number, output: number) => input + output * 5;
const USAGE = { prompt_tokens: 40, completion_tokens: 3, total_tokens: 43 };

let stack: GatewayStack;
let provider: Server;
let account: TestAccount;
let apiKey: string;
let openai: OpenAI;

function chunk(delta: object, finish: string | null, usage: unknown, spaced: boolean): string {
  const json = JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }], usage });
  // Python's json.dumps spacing, as some compatible servers write it.
  return `data: ${spaced ? json.replace(/":/g, '": ').replace(/,"/g, ', "') : json}\n\n`;
}

// The usage rides on the finish_reason chunk (vLLM, several proxies); every other chunk says "usage": null.
function scripted(req: IncomingMessage, res: ServerResponse): void {
  let raw = '';
  req.on('data', (c: Buffer) => { raw += c.toString(); });
  req.on('end', () => {
    const spaced = (JSON.parse(raw) as { model: string }).model === 'usage-on-finish-spaced';
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(chunk({ role: 'assistant', content: '' }, null, null, spaced));
    res.write(chunk({ content: 'one ' }, null, null, spaced) + chunk({ content: 'two ' }, null, null, spaced));
    res.write(chunk({ content: 'three' }, null, null, spaced));
    res.end(chunk({}, 'stop', USAGE, spaced) + 'data: [DONE]\n\n');
  });
}

beforeAll(async () => {
  provider = createServer(scripted);
  await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;
  stack = await startGatewayStack();
  await mockChannel(stack, ['usage-on-finish', 'usage-on-finish-spaced'], 'default', { base_url: url, key: 'sk-proj-scripted', type: 1 });
  account = await fundedAccount(stack, 10_000_000);
  apiKey = (await createApiKey(stack, account)).key;
  openai = new OpenAI({ apiKey, baseURL: `${stack.relayUrl}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  await stack?.close();
  provider?.closeAllConnections();
  await new Promise((r) => provider?.close(r));
});

describe('a client that did not ask for the usage', () => {
  for (const model of ['usage-on-finish', 'usage-on-finish-spaced']) {
    it(`${model}: no chunk carries a usage key; the request is billed the provider's usage`, async () => {
      const { data: stream, response } = await openai.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: 'Count to three' }] }).withResponse();
      let text = '';
      const keys = new Set<string>();
      let finish: string | null = null;
      for await (const c of stream) {
        for (const k of Object.keys(c)) keys.add(k);
        text += c.choices[0]?.delta.content ?? '';
        finish = c.choices[0]?.finish_reason ?? finish;
      }
      expect(text).toBe('one two three');
      expect(finish).toBe('stop');
      expect(keys.has('usage')).toBe(false);
      const row = await ledgerRow(stack, response.headers.get('x-gateway-request-id')!);
      expect(row).toMatchObject({ prompt_tokens: 40, completion_tokens: 3, quota: cost(40, 3) });
    });
  }

  it('the bytes: every chunk is JSON, none names "usage", the stream ends with [DONE]', async () => {
    const res = await fetch(`${stack.relayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'usage-on-finish', stream: true, stream_options: { include_usage: false }, messages: [{ role: 'user', content: 'Count to three' }] }),
    });
    const body = await res.text();
    expect(body).not.toContain('"usage"');
    const events = body.split('\n\n').filter((e) => e !== '');
    expect(events.at(-1)).toBe('data: [DONE]');
    for (const e of events.slice(0, -1)) expect(() => JSON.parse(e.slice('data: '.length)) as unknown).not.toThrow();
    expect(events).toHaveLength(6);
  });
});

describe('a client that asked for the usage', () => {
  it('gets the chunks as the provider sent them, its usage on the finish_reason chunk', async () => {
    const stream = await openai.chat.completions.create({ model: 'usage-on-finish', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Count to three' }] });
    const usages: unknown[] = [];
    for await (const c of stream) usages.push(c.usage);
    expect(usages.slice(0, -1).every((u) => u === null)).toBe(true);
    expect(usages.at(-1)).toMatchObject(USAGE);
  });
});
