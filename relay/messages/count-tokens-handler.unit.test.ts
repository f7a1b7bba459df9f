import { afterAll, describe, expect, it } from 'vitest';
import { countText } from '../token-count/bpe-count.js';
import { MESSAGE_OVERHEAD, PDF_BYTES_PER_TOKEN, PDF_PAGE_TOKENS } from '../token-count/prompt-text.js';
import { TokenCounter } from '../token-count/token-counter.js';
import { RelayError } from '../errors.js';
import { checkCountTokensRequest, countTokensResponse } from './count-tokens-handler.js';
import { pngOfSize } from '../../tests/harness/image-headers.js';

const counter = new TokenCounter({ maxThreads: 1 });
afterAll(() => counter.close());

describe('POST /v1/messages/count_tokens', () => {
  it('answers {input_tokens} for a body without max_tokens', async () => {
    const json = { model: 'claude-sonnet-4-5', system: 'Be brief.', messages: [{ role: 'user', content: 'Hello, world' }] };
    const body = checkCountTokensRequest(json);
    if (body instanceof RelayError) throw new Error(body.message);
    expect(body).toBe(json);
    const expected = countText('Be brief.') + countText('Hello, world') + MESSAGE_OVERHEAD;
    expect(await countTokensResponse(counter.takePromptPlace()!, body)).toEqual({ input_tokens: expected });
    expect(await countTokensResponse(counter.takePromptPlace()!, body, Buffer.from(JSON.stringify(json)))).toEqual({ input_tokens: expected });
  });

  it('counts a tool_use block whose name is no string (an object whose toString is none) as its JSON, not a failure', async () => {
    for (const name of [{ toString: 1 }, { toString: null, valueOf: 2 }, 7, null, ['x']]) {
      const json = { model: 'claude-sonnet-4-5', messages: [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name, input: {} }, { type: 'server_tool_use', id: 'srvtoolu_1', name, input: {} }] },
      ] };
      const body = checkCountTokensRequest(json);
      if (body instanceof RelayError) throw new Error(body.message);
      const named = name === null ? '""' : JSON.stringify(name);
      const expected = countText('q') + 2 * (countText(named) + countText('{}')) + 2 * MESSAGE_OVERHEAD;
      expect(await countTokensResponse(counter.takePromptPlace()!, body, Buffer.from(JSON.stringify(json)))).toEqual({ input_tokens: expected });
    }
  });

  it('estimates an image by its size as the model the provider is sent scales it: 108 tokens for a 320 × 240 picture to Sonnet 4.5, 3,888 for 2,000 × 1,500 to Opus 4.7 (1,600 each before)', async () => {
    const image = (w: number, h: number) => ({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: pngOfSize(w, h).toString('base64') } });
    const cases = [
      ['claude-sonnet-4-5', [], 320, 240, 108], ['claude-opus-4-7', [], 2000, 1500, 3_888], ['claude-sonnet-4-5', [], 2000, 1500, 1_568],
      ['acme-vision-1', [], 320, 240, 1_600],
      // A public name a channel maps to Opus 4.7; the largest sizing of the models the channels send.
      ['vision-pro', ['claude-opus-4-7'], 2000, 1500, 3_888], ['vision-pro', ['gpt-4o', 'claude-sonnet-4-5', 'claude-opus-4-7'], 2000, 1500, 3_888],
      ['claude-opus-4-7', ['gpt-4o'], 2000, 1500, 3_888],
    ] as const;
    for (const [model, sent, w, h, tokens] of cases) {
      const json = { model, messages: [{ role: 'user', content: [image(w, h), { type: 'text', text: 'What is this?' }] }] };
      const body = checkCountTokensRequest(json);
      if (body instanceof RelayError) throw new Error(body.message);
      const expected = tokens + countText('What is this?') + MESSAGE_OVERHEAD;
      expect(await countTokensResponse(counter.takePromptPlace()!, body, Buffer.from(JSON.stringify(json)), sent), `${model} → ${sent.join()}`).toEqual({ input_tokens: expected });
    }
  });

  it('requires model and messages, with Anthropic-style messages', () => {
    const problem = (body: unknown) => {
      const r = checkCountTokensRequest(body);
      return r instanceof RelayError ? r.message : null;
    };
    expect(problem({ messages: [{ role: 'user', content: 'x' }] })).toMatch(/^model:/);
    expect(problem({ model: 'm' })).toMatch(/^messages:/);
    expect(problem({ model: 'm', messages: [] })).toMatch(/at least one/);
    expect(problem({ model: 'm', messages: [{ role: 'user', content: 'x' }], tools: 'no' })).toMatch(/^tools:/);
    expect(problem({ model: 'm', messages: [{ role: 'user', content: 'x' }], max_tokens: 'ignored', thinking: {} })).toBeNull();
  });

  it('accepts tools without a name (toolsets, MCP toolsets), as /v1/messages does, and counts their JSON', async () => {
    for (const tool of [{ type: 'computer_toolset_20260801' }, { type: 'browser_toolset_20260801' }, { type: 'mcp_toolset', mcp_server_name: 'docs' }]) {
      const json = { model: 'claude-sonnet-4-5', messages: [{ role: 'user', content: 'q' }], tools: [tool] };
      const body = checkCountTokensRequest(json);
      if (body instanceof RelayError) throw new Error(body.message);
      const expected = countText('q') + countText(JSON.stringify(tool)) + MESSAGE_OVERHEAD;
      expect(await countTokensResponse(counter.takePromptPlace()!, body, Buffer.from(JSON.stringify(json)))).toEqual({ input_tokens: expected });
    }
  });

  it('still refuses tools that are not an array of objects, with the field named', () => {
    for (const tools of ['no', {}, 7, null, [1], ['tool'], [null], [[]], [{ name: 'a' }, 'b']]) {
      const r = checkCountTokensRequest({ model: 'm', messages: [{ role: 'user', content: 'x' }], tools });
      expect(r, JSON.stringify(tools)).toBeInstanceOf(RelayError);
      expect((r as RelayError).code).toBe('invalid_request');
      expect((r as RelayError).message).toMatch(/^tools(\.\d+)?: /);
    }
  });

  it('counts a base64 PDF by its pages, not its bytes (the settlement count keeps the byte bound)', async () => {
    const pages = 3;
    const pdf = minimalPdf(pages, 100_000);
    const json = { model: 'claude-sonnet-4-5', messages: [{ role: 'user', content: [
      { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: pdf.toString('base64') } },
      { type: 'text', text: 'Summarise.' },
    ] }] };
    const body = checkCountTokensRequest(json);
    if (body instanceof RelayError) throw new Error(body.message);
    const expected = pages * PDF_PAGE_TOKENS + countText('Summarise.') + MESSAGE_OVERHEAD;
    expect(await countTokensResponse(counter.takePromptPlace()!, body, Buffer.from(JSON.stringify(json)))).toEqual({ input_tokens: expected });
    expect(await countTokensResponse(counter.takePromptPlace()!, body)).toEqual({ input_tokens: expected });
    // A settlement of a prompt the provider did not state bills what it did before: the block's JSON bytes.
    expect(await counter.countBilledPrompt(Buffer.from(JSON.stringify(json)))).toBe(
      Buffer.byteLength(JSON.stringify(json.messages[0]!.content[0])) + countText('Summarise.') + MESSAGE_OVERHEAD);
  });

  it('counts a base64 document whose pages cannot be read far below a token per byte: a 300 KB one under 200,000', async () => {
    const data = Buffer.alloc(300_000, 7).toString('base64');
    const json = { model: 'claude-haiku-4-5', messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data } }] }] };
    const body = checkCountTokensRequest(json);
    if (body instanceof RelayError) throw new Error(body.message);
    const { input_tokens: n } = await countTokensResponse(counter.takePromptPlace()!, body, Buffer.from(JSON.stringify(json)));
    expect(n).toBe(Math.ceil(300_000 / PDF_BYTES_PER_TOKEN) + MESSAGE_OVERHEAD);
    expect(n).toBeLessThan(200_000);
  });
});

/** A PDF of `pages` pages (its page objects written as `/Type /Page`, `/Type/Page` and `/Type\n/Page` in turn) padded to `bytes`. */
function minimalPdf(pages: number, bytes: number): Buffer {
  const kids = Array.from({ length: pages }, (_, i) => `${i + 3} 0 R`).join(' ');
  const spaces = [' ', '', '\n'];
  const objs = [`1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj`, `2 0 obj << /Type /Pages /Kids [${kids}] /Count ${pages} >> endobj`,
    `99 0 obj << /Type /PageLabel /S /D >> endobj`];
  for (let i = 0; i < pages; i++) objs.push(`${i + 3} 0 obj << /Type${spaces[i % 3]}/Page /Parent 2 0 R /MediaBox [0 0 612 792] >> endobj`);
  const head = `%PDF-1.4\n${objs.join('\n')}\n`;
  return Buffer.concat([Buffer.from(head), Buffer.alloc(Math.max(0, bytes - head.length), 0x41), Buffer.from('\n%%EOF\n')]);
}
