// Delivered-text counting through the SSE parser's hook and the real workers (dist/ must be built).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SseUsageParser } from '../stream/sse-usage-parser.js';
import { countText } from './bpe-count.js';
import { DeliveredTextCounter } from './delivered-text-counter.js';
import { TokenCounter } from './token-counter.js';

let counter: TokenCounter;
beforeAll(() => {
  counter = new TokenCounter({ minThreads: 1, maxThreads: 2 });
});
afterAll(async () => {
  await counter.close();
});

function rng(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

function sse(name: string, data: unknown): string {
  return `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** An Anthropic stream delivering `text` in deltas of random lengths (words and characters split anywhere). */
function streamOf(text: string, random: () => number, opts: { thinking?: string } = {}): string {
  const out = [sse('message_start', { type: 'message_start', message: { id: 'msg_1', usage: { input_tokens: 10, output_tokens: 1 } } })];
  let index = 0;
  if (opts.thinking) {
    out.push(sse('content_block_start', { type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '' } }));
    out.push(sse('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: opts.thinking } }));
    out.push(sse('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: 'EqQBCgIYAhIM'.repeat(20) } }));
    out.push(sse('content_block_stop', { type: 'content_block_stop', index }));
    index++;
  }
  out.push(sse('content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } }));
  const chars = Array.from(text); // whole code points: a delta never holds half a surrogate pair
  for (let i = 0; i < chars.length;) {
    const n = 1 + Math.floor(random() * 12);
    out.push(sse('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text: chars.slice(i, i + n).join('') } }));
    if (random() < 0.05) out.push(sse('ping', { type: 'ping' }));
    i += n;
  }
  out.push(sse('content_block_stop', { type: 'content_block_stop', index }));
  return out.join('');
}

/** Feeds `stream` in random chunk sizes through a parser hooked to a DeliveredTextCounter. */
function feed(stream: Buffer, delivered: DeliveredTextCounter, random: () => number, maxChunk: number): { maxPayload: number } {
  let maxPayload = 0;
  const parser = new SseUsageParser((data) => {
    maxPayload = Math.max(maxPayload, data.length);
    delivered.push(data);
  });
  for (let i = 0; i < stream.length;) {
    const n = 1 + Math.floor(random() * maxChunk);
    parser.push(stream.subarray(i, i + n));
    i += n;
  }
  return { maxPayload };
}

const TEXTS: Record<string, string> = {
  mock: 'tok '.repeat(2000),
  words: Array.from({ length: 3000 }, (_, i) => ['gateway', 'billing', 'exactly', 'once,', 'streams', 'cut\nshort.', 'a', '"quoted"', '42'][i % 9]).join(' '),
  multilingual: 'Größenwahn naïve café — “quotes”. 日本語のテキストです、空白なし。中文文本。 Привет, мир! مرحبا بالعالم 🙂👍🏽 it\'s fine.\n'.repeat(150),
};

describe('DeliveredTextCounter', () => {
  for (const [name, text] of Object.entries(TEXTS)) {
    it(`counts the ${name} text exactly, however the stream and the batches are cut`, async () => {
      const whole = countText(text.trimEnd());
      for (const [seed, flushBytes, maxChunk] of [[1, 64, 7], [2, 512, 100], [3, 4096, 1500], [4, 16 * 1024, 64 * 1024]] as const) {
        const random = rng(seed);
        const stream = Buffer.from(streamOf(text, random));
        const delivered = new DeliveredTextCounter(counter, { flushBytes });
        const { maxPayload } = feed(stream, delivered, random, maxChunk);
        expect(await delivered.total(), `seed ${seed}, flush ${flushBytes}`).toBe(whole);
        // Pending bytes never exceed the threshold plus one payload (and its separator).
        expect(delivered.peakPendingBytes).toBeLessThanOrEqual(flushBytes + maxPayload + 1);
      }
    });
  }

  it('counts thinking deltas and skips signatures', async () => {
    const random = rng(9);
    const delivered = new DeliveredTextCounter(counter, { flushBytes: 256 });
    feed(Buffer.from(streamOf('The answer is 4.', random, { thinking: 'Two plus two is four.' })), delivered, random, 50);
    expect(await delivered.total()).toBe(countText('Two plus two is four.The answer is 4.'));
  });

  it('counts K deltas "tok " of the mock as K tokens, for every K', async () => {
    for (const k of [0, 1, 2, 3, 7, 64, 1000]) {
      const delivered = new DeliveredTextCounter(counter, { flushBytes: 512 });
      const random = rng(k + 1);
      const parser = new SseUsageParser((data) => delivered.push(data));
      const delta = sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'tok ' } });
      const bytes = Buffer.from(delta.repeat(k));
      for (let i = 0; i < bytes.length;) {
        const n = 1 + Math.floor(random() * 300);
        parser.push(bytes.subarray(i, i + n));
        i += n;
      }
      expect(await delivered.total(), `K=${k}`).toBe(k);
    }
  });

  it('keeps memory flat on a long stream (100 000 deltas of the mock)', async () => {
    const delta = Buffer.from(sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'tok ' } }));
    const chunk = Buffer.concat(Array.from({ length: 100 }, () => delta));
    const delivered = new DeliveredTextCounter(counter);
    const parser = new SseUsageParser((data) => delivered.push(data));
    let peakOutstanding = 0;
    for (let i = 0; i < 1000; i++) {
      parser.push(chunk);
      peakOutstanding = Math.max(peakOutstanding, delivered.pendingBytes);
      if (i % 50 === 0) await new Promise((r) => setImmediate(r));
    }
    // Each of the mock's output tokens ("tok ") counts one.
    expect(await delivered.total()).toBe(100_000);
    expect(delivered.payloads).toBe(100_000);
    expect(delivered.peakPendingBytes).toBeLessThanOrEqual(delivered.flushBytes + 200);
  });

  it('discard() drops pending bytes without counting, and later batches are ignored', async () => {
    let calls = 0;
    const fake = { countDeltas: async () => { calls++; return { count: 1, carry: '' }; } };
    const delivered = new DeliveredTextCounter(fake, { flushBytes: 1024 });
    for (let i = 0; i < 10; i++) delivered.push(Buffer.from('{"delta":{"type":"text_delta","text":"tok "}}'));
    delivered.discard();
    expect(delivered.pendingBytes).toBe(0);
    delivered.push(Buffer.from('{"delta":{"type":"text_delta","text":"tok "}}'));
    await new Promise((r) => setTimeout(r, 10));
    expect(calls).toBe(0);
  });

  it('reports congestion while too many bytes wait for a worker, and its end', async () => {
    const releases: Array<() => void> = [];
    const fake = {
      countDeltas: (_d: Uint8Array, carry: string) => new Promise<{ count: number; carry: string }>((resolve) => releases.push(() => resolve({ count: 1, carry }))),
    };
    const events: boolean[] = [];
    const delivered = new DeliveredTextCounter(fake, { flushBytes: 100, maxOutstandingBytes: 300, onCongestion: (c) => events.push(c) });
    const payload = Buffer.from(JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: ' '.repeat(60) } }));
    for (let i = 0; i < 6; i++) delivered.push(payload); // pieces of 60 bytes + separator: 3 batches of 122 bytes, 366 outstanding
    expect(delivered.congested).toBe(true);
    expect(events).toEqual([true]);
    await new Promise((r) => setImmediate(r));
    expect(releases.length).toBe(1); // one batch at a time
    while (releases.length) {
      releases.shift()!();
      await new Promise((r) => setImmediate(r));
    }
    expect(delivered.congested).toBe(false);
    expect(events).toEqual([true, false]);
    // Nothing pending and nothing carried: no final batch is sent.
    expect(await delivered.total()).toBe(3);
    expect(releases.length).toBe(0);
  });

  it('sends nothing to a worker during a normal stream, keeps only the text, and discard() frees it', () => {
    let calls = 0;
    const fake = { countDeltas: async () => { calls++; return { count: 0, carry: '' }; } };
    const delivered = new DeliveredTextCounter(fake);
    const parser = new SseUsageParser(delivered);
    const delta = sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'tok ' } });
    parser.push(Buffer.from(delta.repeat(4000)));
    expect(delivered.payloads).toBe(4000);
    expect(delivered.pendingBytes).toBe(4000 * 5); // "tok " and a separator, of ~90 payload bytes
    expect(calls).toBe(0);
    delivered.discard();
    expect([delivered.pendingBytes, delivered.countingBytes, delivered.retainedBytes]).toEqual([0, 0, 0]);
  });

  it('holds nothing after 2,000 streams cut short are counted (the abort storm)', async () => {
    const bytes = Buffer.from(streamOf('Größe naïve "café" 🙂 tok tok.\n'.repeat(8), rng(5)));
    const cut = bytes.subarray(0, 2048);
    const expected: number[] = [];
    const live = new Set<DeliveredTextCounter>();
    const heap0 = process.memoryUsage().heapUsed;
    for (let i = 0; i < 2000; i++) {
      const delivered = new DeliveredTextCounter(counter);
      const parser = new SseUsageParser(delivered);
      // Cut at a different point each time.
      parser.push(cut.subarray(0, 1024 + (i % 1024)));
      live.add(delivered);
      const n = await delivered.total();
      if (i < 3) expected.push(n);
      expect([delivered.pendingBytes, delivered.countingBytes, delivered.retainedBytes]).toEqual([0, 0, 0]);
    }
    expect(expected[0]).toBeGreaterThan(0);
    live.clear();
    const gc = (globalThis as { gc?: () => void }).gc;
    if (gc) {
      gc();
      expect(process.memoryUsage().heapUsed - heap0).toBeLessThan(8 * 1024 * 1024);
    }
  });

  it('a settled counter holds no buffer and no promise chain', async () => {
    const fake = { countDeltas: async (_d: Uint8Array, carry: string) => ({ count: 1, carry }) };
    const delivered = new DeliveredTextCounter(fake, { flushBytes: 16 });
    for (let i = 0; i < 10; i++) delivered.push(Buffer.from('{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"tok tok "}}'));
    expect(delivered.batches).toBe(5); // pieces of 9 bytes: a batch every 2
    expect(await delivered.total()).toBe(6); // and a final one, as batches were in flight (their carry unknown)
    expect([delivered.pendingBytes, delivered.countingBytes, delivered.retainedBytes]).toEqual([0, 0, 0]);
  });

  it('total() rejects when the worker fails, so the caller can fall back', async () => {
    const fake = { countDeltas: async () => { throw new Error('worker died'); } };
    const delivered = new DeliveredTextCounter(fake, { flushBytes: 10 });
    delivered.push(Buffer.from('{"delta":{"text":"abcdefghijkl"}}'));
    await expect(delivered.total()).rejects.toThrow('worker died');
  });
});
