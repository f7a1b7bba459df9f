// Micro-benchmark (not a test): relay CPU spent on one streamed answer by SseUsageParser +
// DeliveredTextCounter, i.e. what the relay does besides passing the bytes on.
//
//   npx tsc -p tsconfig.json && node --expose-gc dist/bench/stream-cost.js [relayDir]
//
// relayDir (default: this build's relay/) lets the same script run against another build of
// relay/stream and relay/token-count (relay/tokens before its rename), e.g. one compiled from git HEAD,
// to compare before and after.
// Both API generations are supported: parser hook `(data) => counter.push(data)` or `new
// SseUsageParser(counter)` (a sink with pushDelta).
//
// CPU is process.cpuUsage() (user + system, all threads: the counting workers included), per stream.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join, resolve } from 'node:path';
import { chunked } from './lib/provider-reads.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
type Any = any;

const DELTAS = 4000;
const STREAMS = Number(process.env.STREAMS ?? 200);

function sse(name: string, data: unknown): string {
  return `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}

const WORDS = ['the', ' gateway', ' bills', ' exactly', ',', ' once', '.', '\n', ' "quoted"', ' Größe', ' 日本', ' tok', ' 42', ' café'];

function events(deltas: number, final: boolean): Buffer[] {
  const out: string[] = [
    sse('message_start', { type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-haiku-4-5', content: [], usage: { input_tokens: 10, output_tokens: 1 } } }),
    sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
  ];
  for (let i = 0; i < deltas; i++) {
    out.push(sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: WORDS[i % WORDS.length]! } }));
    if (i % 100 === 99) out.push(sse('ping', { type: 'ping' }));
  }
  if (final) {
    out.push(sse('content_block_stop', { type: 'content_block_stop', index: 0 }));
    out.push(sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: deltas } }));
    out.push(sse('message_stop', { type: 'message_stop' }));
  }
  return out.map((s) => Buffer.from(s));
}

async function main(): Promise<void> {
  const here = dirname(fileURLToPath(import.meta.url));
  const relayDir = resolve(process.argv[2] ?? join(here, '..', 'relay'));
  const mod = (p: string) => import(pathToFileURL(join(relayDir, p)).href) as Promise<Any>;
  const { SseUsageParser } = await mod('stream/sse-usage-parser.js');
  // Builds from before the rename keep the counters in relay/tokens/.
  const counting = existsSync(join(relayDir, 'token-count')) ? 'token-count' : 'tokens';
  const { DeliveredTextCounter } = await mod(`${counting}/delivered-text-counter.js`);
  const { TokenCounter } = await mod(`${counting}/token-counter.js`);
  const tokens = new TokenCounter({ minThreads: 2, maxThreads: 2 });
  await tokens.countText('warm up');

  const makeParser = (delivered: Any) =>
    typeof delivered.pushDelta === 'function' ? new SseUsageParser(delivered) : new SseUsageParser((d: Buffer) => delivered.push(d));

  async function run(label: string, chunks: Buffer[], settle: 'discard' | 'total', n: number): Promise<number> {
    // warm-up
    for (let i = 0; i < 20; i++) await once(chunks, settle);
    if (globalThis.gc) globalThis.gc();
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    let last = 0;
    for (let i = 0; i < n; i++) last = await once(chunks, settle);
    const wall = performance.now() - t0;
    const c = process.cpuUsage(c0);
    const cpuMs = (c.user + c.system) / 1000 / n;
    console.log(`${label.padEnd(58)} cpu ${cpuMs.toFixed(3)} ms/stream  wall ${(wall / n).toFixed(3)} ms/stream  (result ${last})`);
    return cpuMs;
  }

  async function once(chunks: Buffer[], settle: 'discard' | 'total'): Promise<number> {
    const delivered = new DeliveredTextCounter(tokens);
    const parser = makeParser(delivered);
    // Chunks arrive in separate turns of the event loop: let microtasks (batch posting) run between them.
    for (const c of chunks) {
      parser.push(c);
      await null;
    }
    if (settle === 'discard') {
      delivered.discard();
      return parser.outputTokens;
    }
    return delivered.total();
  }

  console.log(`relay dir: ${relayDir}`);
  const full = events(DELTAS, true);
  const cut = events(DELTAS, false);
  await run(`${DELTAS} deltas, chunk per event, complete → discard()`, chunked(full, false), 'discard', STREAMS);
  await run(`${DELTAS} deltas, 16 KiB chunks, complete → discard()`, chunked(full, true), 'discard', STREAMS);
  await run(`${DELTAS} deltas, chunk per event, cut → total()`, chunked(cut, false), 'total', STREAMS);
  // The abort storm: streams cut after ~2 KB.
  const small: Buffer[] = [];
  let bytes = 0;
  for (const e of cut) {
    if (bytes > 2048) break;
    small.push(e);
    bytes += e.length;
  }
  await run(`cut after 2 KB (${small.length - 2} deltas) → total()`, small, 'total', STREAMS * 10);

  if (globalThis.gc) {
    globalThis.gc();
    const h0 = process.memoryUsage();
    for (let i = 0; i < 5000; i++) await once(small, 'total');
    globalThis.gc();
    const h1 = process.memoryUsage();
    const mb = (x: number) => (x / 1048576).toFixed(1);
    console.log(`5000 cut streams: heapUsed ${mb(h0.heapUsed)} → ${mb(h1.heapUsed)} MB, external ${mb(h0.external)} → ${mb(h1.external)} MB, rss ${mb(h0.rss)} → ${mb(h1.rss)} MB`);
  }
  await tokens.close();
}

await main();
