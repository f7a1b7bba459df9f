// Micro-benchmark (not a test): relay CPU spent converting one streamed answer from one protocol's
// events to the other's, for both rewriters: AnthropicToChatStream (a Chat Completions client on an
// Anthropic channel, the bench's chat-stream64) and ChatToAnthropicStream (a Messages client on an
// OpenAI channel, which no bench scenario drives). The meters, the scrubber and the writes are not in
// it: chat-stream64 measures the whole path.
//
//   npx tsc -p tsconfig.json && node --expose-gc dist/bench/conversion-cost.js [relayDir [otherRelayDir]]
//
// relayDir (default: this build's relay/) lets the same script run against another build, e.g. one
// compiled from an earlier commit in a worktree. Given a second directory, the two builds run turn about
// (the same streams, the same number of rounds) and their outputs are compared byte for byte: a
// conversion made faster must write exactly what it wrote before.
//
// CPU is process.cpuUsage() (user + system), per stream; streams of DELTAS text deltas (default 64,
// as chat-stream64), in chunks of one event each and coalesced into 16 KiB reads.
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join, resolve } from 'node:path';
import { chunked } from './lib/provider-reads.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
type Any = any;

const DELTAS = Number(process.env.DELTAS ?? 64);
const STREAMS = Number(process.env.STREAMS ?? 5000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);

/** Text deltas as models write them: words, punctuation, line breaks, quotes, accents, CJK. */
const WORDS = ['the', ' gateway', ' bills', ' exactly', ',', ' once', '.', '\n', ' "quoted"', ' Größe', ' 日本', ' tok', ' 42', ' café'];

function anthropicEvent(name: string, data: unknown): string {
  return `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** An Anthropic Messages stream of `deltas` text deltas, as the API writes it. */
function anthropicStream(deltas: number): Buffer[] {
  const out: string[] = [
    anthropicEvent('message_start', { type: 'message_start', message: { id: 'msg_01', type: 'message', role: 'assistant', model: 'claude-haiku-4-5', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 10, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 } } }),
    anthropicEvent('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
    anthropicEvent('ping', { type: 'ping' }),
  ];
  for (let i = 0; i < deltas; i++) out.push(anthropicEvent('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: WORDS[i % WORDS.length]! } }));
  out.push(anthropicEvent('content_block_stop', { type: 'content_block_stop', index: 0 }));
  out.push(anthropicEvent('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: deltas } }));
  out.push(anthropicEvent('message_stop', { type: 'message_stop' }));
  return out.map((s) => Buffer.from(s));
}

/** A Chat Completions stream of `deltas` content deltas with include_usage, as OpenAI's API writes it. */
function chatStream(deltas: number): Buffer[] {
  const chunk = (delta: unknown, finish: string | null, usage: unknown = null) => `data: ${JSON.stringify({
    id: 'chatcmpl-01', object: 'chat.completion.chunk', created: 1764000000, model: 'gpt-4o-mini-2024-07-18', service_tier: 'default',
    system_fingerprint: 'fp_01', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], usage, obfuscation: 'aBc1',
  })}\n\n`;
  const out: string[] = [chunk({ role: 'assistant', content: '', refusal: null }, null)];
  for (let i = 0; i < deltas; i++) out.push(chunk({ content: WORDS[i % WORDS.length]! }, null));
  out.push(chunk({}, 'stop'));
  out.push(`data: ${JSON.stringify({ id: 'chatcmpl-01', object: 'chat.completion.chunk', created: 1764000000, model: 'gpt-4o-mini-2024-07-18', service_tier: 'default', system_fingerprint: 'fp_01', choices: [], usage: { prompt_tokens: 10, completion_tokens: deltas, total_tokens: 10 + deltas, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } } })}\n\n`);
  out.push('data: [DONE]\n\n');
  return out.map((s) => Buffer.from(s));
}

interface Build {
  dir: string;
  toChat: (chunks: Buffer[]) => string;
  toMessages: (chunks: Buffer[]) => string;
}

async function load(dir: string): Promise<Build> {
  const mod = (p: string) => import(pathToFileURL(join(dir, p)).href) as Promise<Any>;
  const { AnthropicToChatStream } = await mod('providers/anthropic/to-chat.js');
  const { ChatToAnthropicStream } = await mod('providers/openai/to-messages.js');
  const through = (r: Any, chunks: Buffer[]): string => {
    let out = '';
    for (const c of chunks) out += r.push(c);
    return out;
  };
  return {
    dir,
    toChat: (chunks) => through(new AnthropicToChatStream('gpt-4o-mini', true), chunks),
    toMessages: (chunks) => through(new ChatToAnthropicStream('claude-haiku-4-5'), chunks),
  };
}

/** CPU ms per stream of `convert` over `chunks`, `n` streams. */
function cpuPerStream(convert: (chunks: Buffer[]) => string, chunks: Buffer[], n: number): number {
  let bytes = 0;
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) bytes += convert(chunks).length;
  const c = process.cpuUsage(c0);
  if (bytes === 0) throw new Error('the conversion wrote nothing');
  return (c.user + c.system) / 1000 / n;
}

/** The output of a conversion with the stream's id and creation time (from the clock) made the same in both builds. */
function comparable(out: string): string {
  return out.replace(/"created":\d+/g, '"created":0').replace(/chatcmpl-[0-9a-z]+"/g, 'chatcmpl-X"');
}

async function main(): Promise<void> {
  const here = dirname(fileURLToPath(import.meta.url));
  const dirs = [resolve(process.argv[2] ?? join(here, '..', 'relay'))];
  if (process.argv[3]) dirs.push(resolve(process.argv[3]));
  const builds = await Promise.all(dirs.map(load));
  const cases: Array<{ label: string; convert: (b: Build) => (chunks: Buffer[]) => string; chunks: Buffer[] }> = [
    { label: `Anthropic → Chat, ${DELTAS} deltas, a read per event`, convert: (b) => b.toChat, chunks: chunked(anthropicStream(DELTAS), false) },
    { label: `Anthropic → Chat, ${DELTAS} deltas, 16 KiB reads`, convert: (b) => b.toChat, chunks: chunked(anthropicStream(DELTAS), true) },
    { label: `Chat → Anthropic, ${DELTAS} deltas, a read per event`, convert: (b) => b.toMessages, chunks: chunked(chatStream(DELTAS), false) },
    { label: `Chat → Anthropic, ${DELTAS} deltas, 16 KiB reads`, convert: (b) => b.toMessages, chunks: chunked(chatStream(DELTAS), true) },
  ];
  for (const b of builds) console.log(`build ${builds.indexOf(b) + 1}: ${b.dir}`);
  for (const c of cases) {
    if (builds.length === 2) {
      const [a, b] = builds.map((build) => comparable(c.convert(build)(c.chunks)));
      if (a !== b) throw new Error(`${c.label}: the two builds wrote different streams`);
    }
    // Warm-up: both builds optimised before either is measured.
    for (const b of builds) cpuPerStream(c.convert(b), c.chunks, Math.min(STREAMS, 500));
    const figures: number[][] = builds.map(() => []);
    for (let r = 0; r < ROUNDS; r++) {
      for (let i = 0; i < builds.length; i++) {
        globalThis.gc?.();
        figures[i]!.push(cpuPerStream(c.convert(builds[i]!), c.chunks, STREAMS));
      }
    }
    const text = figures.map((f, i) => `build ${i + 1} ${f.map((ms) => (ms * 1000).toFixed(1)).join(' / ')} µs`).join('   ');
    const ratio = builds.length === 2 ? `   (2 ÷ 1: ${(Math.min(...figures[1]!) / Math.min(...figures[0]!)).toFixed(2)}, best of each)` : '';
    console.log(`${c.label.padEnd(48)} ${text}${ratio}${builds.length === 2 ? '; same output' : ''}`);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
