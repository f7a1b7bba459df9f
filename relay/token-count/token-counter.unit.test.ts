// Runs the compiled worker (dist/relay/token-count/count-worker-entry.cjs): build dist/ first (make test does).
import { execFileSync } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countText } from './bpe-count.js';
import { IMAGE_TOKENS, MESSAGE_OVERHEAD, PDF_PAGE_TOKENS, pdfPages, promptParts } from './prompt-text.js';
import { CountQueueFull, countWorkerFile, reservationInputTokens, TokenCounter } from './token-counter.js';

let counter: TokenCounter;
beforeAll(async () => {
  counter = new TokenCounter({ minThreads: 1, maxThreads: 2 });
  await counter.countText('warm up');
});
afterAll(async () => {
  await counter.close();
});

const PARAGRAPH =
  'The gateway keeps serving while a worker thread counts. Größe, naïve café, 日本語のテキスト, Привет мир. ' +
  'function add(a, b) { return a + b; }\n\n';

describe('TokenCounter', () => {
  it('hands piscina a worker file that require() loads without require(esm)', () => {
    // Piscina require()s the task file first; require(esm) of an ES module aborted a process in CI
    // (V8 fatal error in a worker thread). With require(esm) switched off, an ES module fails to
    // load here, and the CommonJS entry loads and counts.
    const script = `
      const count = require(${JSON.stringify(countWorkerFile())});
      Promise.resolve(count({ kind: 'text', text: 'hello world' })).then((r) => process.stdout.write(JSON.stringify(r)));
    `;
    // Before Node 20.17 the flag does not exist, and require(esm) is off anyway.
    const off = process.allowedNodeEnvironmentFlags.has('--no-experimental-require-module') ? ['--no-experimental-require-module'] : [];
    const out = execFileSync(process.execPath, [...off, '-e', script], { encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ count: countText('hello world'), carry: '' });
  });

  it('counts text as the in-process counter does', async () => {
    expect(await counter.countText(PARAGRAPH)).toBe(countText(PARAGRAPH));
    expect(await counter.countText('')).toBe(0);
  });

  it('counts system, messages, tool definitions, images and message framing of a prompt', async () => {
    const tool = { name: 'get_weather', description: 'Weather of a city', input_schema: { type: 'object', properties: { city: { type: 'string' } } } };
    const body = {
      model: 'claude-sonnet-4-5',
      max_tokens: 10,
      system: [{ type: 'text', text: 'You are terse.' }],
      messages: [
        { role: 'user', content: 'Hello there' },
        { role: 'assistant', content: [{ type: 'text', text: 'Hi.' }, { type: 'tool_use', id: 't1', name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'Sunny' }] }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }] },
      ],
      tools: [tool],
    };
    const expected = countText('You are terse.') + countText('Hello there') + countText('Hi.') + countText('get_weather') +
      countText('{"city":"Paris"}') + countText('Sunny') + countText(JSON.stringify(tool)) + IMAGE_TOKENS + 3 * MESSAGE_OVERHEAD;
    expect(await counter.countPrompt(body)).toBe(expected);
    // The raw bytes, parsed in the worker, count the same.
    expect(await counter.countPrompt(Buffer.from(JSON.stringify(body)))).toBe(expected);
    // A string input (a Chat Completions call's arguments that were no object: countedForm) counts as its text.
    const cut = { messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'f', input: '{"path": "/tm' }] }] };
    expect(await counter.countPrompt(cut)).toBe(countText('f') + countText('{"path": "/tm') + MESSAGE_OVERHEAD);
  });

  it('estimates documents for count_tokens (pages of a base64 PDF, a page for one by URL or file, text as text) and keeps their JSON bytes for billing', async () => {
    const page = (n: number) => `${n} 0 obj << /Type /Page /Parent 2 0 R >> endobj\n`;
    const pdf = Buffer.from(`%PDF-1.7\n2 0 obj << /Type /Pages /Count 2 >> endobj\n${page(3)}${page(4)}%%EOF`).toString('base64');
    const blocks = [
      { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: pdf } },
      { type: 'document', source: { type: 'url', url: 'https://example.com/a.pdf' } },
      { type: 'document', source: { type: 'file', file_id: 'file_011' } },
      { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'Plain words.' } },
    ];
    const body = { messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: blocks.slice(0, 1) }, ...blocks.slice(1)] }] };
    expect(promptParts(body, { estimateMedia: true })).toEqual({ text: ['Plain words.'], opaqueTokens: 2 * PDF_PAGE_TOKENS + 2 * PDF_PAGE_TOKENS + MESSAGE_OVERHEAD });
    // Billed: a base64 document's JSON bytes; one by URL or file id (its JSON only an address: 86 tokens
    // billed for a PDF count_tokens put at 3,857) a page at least.
    const bytes = Buffer.byteLength(JSON.stringify(blocks[0])) + 2 * PDF_PAGE_TOKENS;
    expect(Buffer.byteLength(JSON.stringify(blocks[1]))).toBeLessThan(PDF_PAGE_TOKENS);
    expect(promptParts(body)).toEqual({ text: ['Plain words.'], opaqueTokens: bytes + MESSAGE_OVERHEAD });
    expect(await counter.countBilledPrompt(Buffer.from(JSON.stringify(body)))).toBe(bytes + countText('Plain words.') + MESSAGE_OVERHEAD);
  });

  it('reads a PDF\'s pages from its bytes: /Type /Page objects, with or without whitespace, not /Pages or /PageLabel', () => {
    const pdf = (s: string) => Buffer.from(`%PDF-1.4\n${s}\n%%EOF`);
    expect(pdfPages(pdf('<< /Type /Page >> << /Type/Page/Parent 2 0 R >> << /Type\r\n\t/Page\n>> << /Type /Pages /Count 3 >>'))).toBe(3);
    expect(pdfPages(pdf('<< /Type /PageLabel >> << /Type /Pages >> /Type /Pag'))).toBe(0);
    expect(pdfPages(pdf('/Type /Page'))).toBe(1);
    expect(pdfPages(Buffer.from('/Type /Page'))).toBe(1);
    expect(pdfPages(Buffer.alloc(0))).toBe(0);
    // Linear work: 4 MB of "/Type" and whitespace is read at once.
    const started = performance.now();
    expect(pdfPages(Buffer.from('/Type      '.repeat(400_000)))).toBe(0);
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('refuses a count past its queue, but never a settlement\'s (countBilledPrompt)', async () => {
    const c = new TokenCounter({ maxThreads: 1, maxQueue: 0 });
    try {
      const body = { messages: [{ role: 'user', content: 'x'.repeat(200_000) }] };
      const first = c.countPrompt(body);
      await expect(c.countPrompt(body)).rejects.toBeInstanceOf(CountQueueFull);
      // The queue is full, and a settlement's count still runs.
      const billed = await c.countBilledPrompt(body);
      expect(billed).toBe(await first);
      expect(billed).toBeGreaterThan(0);
    } finally {
      await c.close();
    }
  });

  it('a prompt place is taken at once and holds the queue until its count ends or it is released', async () => {
    const c = new TokenCounter({ maxThreads: 1, maxQueue: 0 });
    try {
      const body = { messages: [{ role: 'user', content: 'x'.repeat(200_000) }] };
      const place = c.takePromptPlace()!;
      expect(place).not.toBeNull();
      // Full while the place is held, before its count even starts (the budget's await in between).
      expect(c.takePromptPlace()).toBeNull();
      await expect(c.countPrompt(body)).rejects.toBeInstanceOf(CountQueueFull);
      const counted = await place.count(body);
      expect(counted).toBeGreaterThan(0);
      await expect(place.count(body)).rejects.toThrow(/already used/);
      // Freed by its count; a place released unused frees it too, once.
      const unused = c.takePromptPlace()!;
      unused.release();
      unused.release();
      expect(c.stats.prompts).toBe(0);
      expect(await c.takePromptPlace()!.count(body)).toBe(counted);
    } finally {
      await c.close();
    }
  });

  it('holds each owner to maxPerOwner places, queued or running, whatever room the queue has', async () => {
    const c = new TokenCounter({ maxThreads: 1, maxPerOwner: 2 });
    try {
      const body = { messages: [{ role: 'user', content: 'x y z' }] };
      const [a1, a2] = [c.takePromptPlace(7), c.takePromptPlace(7)];
      expect(c.takePromptPlace(7)).toBe('owner_busy');
      const b1 = c.takePromptPlace(8);
      expect(b1).not.toBe('owner_busy');
      expect(c.takePromptPlace()).not.toBeNull();
      if (a1 === null || a1 === 'owner_busy' || a2 === null || a2 === 'owner_busy' || b1 === null || b1 === 'owner_busy') throw new Error('no place');
      await a1.count(body);
      const a3 = c.takePromptPlace(7);
      expect(a3).not.toBe('owner_busy');
      a2.release();
      if (a3 !== null && a3 !== 'owner_busy') a3.release();
      b1.release();
      expect(c.takePromptPlace(7)).not.toBe('owner_busy');
    } finally {
      await c.close();
    }
  });

  it('rejects after close', async () => {
    const c = new TokenCounter({ maxThreads: 1 });
    await c.close();
    await expect(c.countText('x')).rejects.toThrow(/closed/);
  });

  it('reserves the byte bound for small bodies and factor × count (capped by bytes) for large ones', () => {
    expect(reservationInputTokens(5000, null, 2)).toBe(5000);
    expect(reservationInputTokens(1_000_000, 250_000, 2)).toBe(500_016);
    expect(reservationInputTokens(1_000_000, 900_000, 2)).toBe(1_000_000);
    // Text cl100k packs tight (40,000 spaces) is taken for a token per 8 bytes at least.
    expect(reservationInputTokens(40_087, 500, 2)).toBe(Math.ceil(40_087 / 8) * 2 + 16);
  });
});

describe('the event loop is not blocked while a 1 MB prompt is counted', () => {
  let server: Server;
  let port = 0;
  beforeAll(async () => {
    server = createServer((_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const get = () =>
    new Promise<void>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end();
    });

  const prompt = {
    model: 'claude-sonnet-4-5',
    max_tokens: 16,
    messages: [{ role: 'user', content: PARAGRAPH.repeat(Math.ceil(1_048_576 / Buffer.byteLength(PARAGRAPH))) }],
  };
  const raw = Buffer.from(JSON.stringify(prompt));

  it('serves requests one after another for the whole count, and the loop delay stays a small part of it', async () => {
    expect(raw.length).toBeGreaterThan(1_048_576);
    const h = monitorEventLoopDelay({ resolution: 1 });
    h.enable();
    const started = performance.now();
    let done = false;
    let served = 0;
    const counting = counter.countPrompt(raw).then((n) => {
      done = true;
      return n;
    });
    while (!done) {
      await get();
      if (!done) served++;
    }
    const tokens = await counting;
    const duration = performance.now() - started;
    h.disable();
    const maxDelayMs = h.max / 1e6;
    console.log(`1 MB prompt: ${tokens} tokens in ${duration.toFixed(0)} ms; ${served} requests served meanwhile; max loop delay ${maxDelayMs.toFixed(1)} ms`);
    expect(tokens).toBeGreaterThan(100_000);
    expect(served).toBeGreaterThanOrEqual(20);
    expect(maxDelayMs / duration).toBeLessThan(0.25);
  });

  it('(control) the same count on the event loop blocks it for most of its duration', async () => {
    const h = monitorEventLoopDelay({ resolution: 1 });
    h.enable();
    await new Promise((r) => setTimeout(r, 20));
    const started = performance.now();
    await new Promise<void>((resolve) => setImmediate(() => {
      countText(prompt.messages[0]!.content);
      resolve();
    }));
    const duration = performance.now() - started;
    await new Promise((r) => setTimeout(r, 5));
    h.disable();
    expect(h.max / 1e6 / duration).toBeGreaterThan(0.5);
  });
});
