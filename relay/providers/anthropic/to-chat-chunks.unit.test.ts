// The converted stream's chunks are written by concatenation (to-chat.ts #chunk), not by stringifying
// a chunk object: their text must be exactly JSON.stringify's of the chunk OpenAI's shape names, member
// for member and in order, whatever the text, the model name or the message id hold.
import { describe, expect, it } from 'vitest';
import { AnthropicToChatStream } from './to-chat.js';

const HOSTILE_TEXTS = [
  'plain', '', 'quote " and \\ backslash', 'line\nbreak\r\ttab', '\u0000\u001f control', 'é€𝄞 wide',
  '\ud800 lone high', 'lone low \udc00', '</script><!--', '\u2028\u2029 separators', '{"content":"x"}',
];
const HOSTILE_NAMES = ['claude-x', 'model "quoted"', 'mödel\\€', '\u0001'];

function sse(type: string, data: unknown): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data as object })}\n\n`;
}

/** An Anthropic stream of a text block, a thinking block and a tool call, with every hostile text. */
function anthropicStream(messageId: unknown): string {
  let s = sse('message_start', { message: { id: messageId, type: 'message', role: 'assistant', content: [], usage: { input_tokens: 3, output_tokens: 1 } } });
  s += sse('content_block_start', { index: 0, content_block: { type: 'thinking', thinking: '' } });
  for (const t of HOSTILE_TEXTS) s += sse('content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: t } });
  s += sse('content_block_start', { index: 1, content_block: { type: 'text', text: '' } });
  for (const t of HOSTILE_TEXTS) s += sse('content_block_delta', { index: 1, delta: { type: 'text_delta', text: t } });
  s += sse('content_block_start', { index: 2, content_block: { type: 'tool_use', id: 'toolu_"1', name: 'f\n', input: {} } });
  s += sse('content_block_delta', { index: 2, delta: { type: 'input_json_delta', partial_json: '{"a": "\\u0000"' } });
  s += sse('content_block_delta', { index: 2, delta: { type: 'input_json_delta', partial_json: '}' } });
  s += sse('content_block_stop', { index: 2 });
  s += sse('message_delta', { delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 9 } });
  return s + sse('message_stop', {});
}

describe('AnthropicToChatStream chunks', () => {
  for (const includeUsage of [true, false]) {
    for (const model of HOSTILE_NAMES) {
      for (const messageId of ['msg_1', 'msg_"\\é', 42, undefined]) {
        it(`include_usage ${includeUsage}, model ${JSON.stringify(model)}, message id ${JSON.stringify(messageId)}: JSON.stringify's text of OpenAI's chunk`, () => {
          const out = new AnthropicToChatStream(model, includeUsage).push(Buffer.from(anthropicStream(messageId)));
          const events = out.split('\n\n').filter((e) => e !== '');
          expect(events.at(-1)).toBe('data: [DONE]');
          const chunks = events.slice(0, -1).map((e) => {
            expect(e.startsWith('data: ')).toBe(true);
            return e.slice(6);
          });
          const contentChunks = chunks.filter((c) => (JSON.parse(c) as { choices: unknown[] }).choices.length > 0);
          // the role, the thinking deltas but the empty one, every text delta, the tool start, 2 argument deltas, the finish
          expect(contentChunks).toHaveLength(1 + 10 + 11 + 1 + 2 + 1);
          const first = JSON.parse(contentChunks[0]!) as { id: string; created: number };
          if (typeof messageId === 'string') expect(first.id).toBe(`chatcmpl-${messageId}`);
          else expect(first.id).toMatch(/^chatcmpl-[0-9a-z]+$/);
          for (const text of contentChunks) {
            const parsed = JSON.parse(text) as { choices: Array<{ delta: unknown; finish_reason: string | null }> };
            const { delta, finish_reason } = parsed.choices[0]!;
            const expected = JSON.stringify({
              id: first.id, object: 'chat.completion.chunk', created: first.created, model,
              service_tier: 'default', system_fingerprint: null,
              choices: [{ index: 0, delta, logprobs: null, finish_reason }],
              ...(includeUsage ? { usage: null } : {}),
            });
            expect(text).toBe(expected);
          }
          const texts = contentChunks.map((c) => (JSON.parse(c) as { choices: Array<{ delta: { content?: string; reasoning_content?: string } }> }).choices[0]!.delta);
          expect(texts.filter((d) => d.content !== undefined).map((d) => d.content)).toEqual(HOSTILE_TEXTS);
          expect(texts.filter((d) => d.reasoning_content !== undefined).map((d) => d.reasoning_content)).toEqual(HOSTILE_TEXTS.filter((t) => t !== ''));
          const finish = JSON.parse(contentChunks.at(-1)!) as { choices: Array<{ finish_reason: string }> };
          expect(finish.choices[0]!.finish_reason).toBe('tool_calls');
        });
      }
    }
  }
});

describe('AnthropicToChatStream text deltas read without parsing', () => {
  const head = 'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":1}}}\n\n';
  const contents = (sse: string): unknown[] => new AnthropicToChatStream('m', false).push(Buffer.from(head + sse)).split('\n\n')
    .filter((e) => e.startsWith('data: {'))
    .map((e) => (JSON.parse(e.slice(6)) as { choices: Array<{ delta: { content?: unknown } }> }).choices[0]!.delta.content)
    .filter((c) => c !== undefined);
  const line = (data: string, event = 'content_block_delta') => `event: ${event}\ndata: ${data}\n\n`;

  it.each([
    ['the plain form', '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi there"}}', ['Hi there']],
    ['a later block', '{"type":"content_block_delta","index":12,"delta":{"type":"text_delta","text":"x"}}', ['x']],
    ['an empty text', '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}', ['']],
    ['escapes', '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\\"b\\\\c\\n\\u00e9"}}', ['a"b\\c\né']],
    ['an emoji', '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"🙂"}}', ['🙂']],
    ['a member after the text', '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","x":"b"}}', ['a']],
    ['a second delta member', '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"delta":{"type":"text_delta","text":"b"}}', ['b']],
    ['an index with a leading 0 (no JSON)', '{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"a"}}', []],
    ['a negative index', '{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"a"}}', ['a']],
    ['an unclosed text (no JSON)', '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"}}', []],
    ['a raw control character (no JSON)', '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\u0001"}}', []],
  ])('%s: as JSON.parse reads it', (_name, data, expected) => {
    expect(contents(line(data))).toEqual(expected);
  });

  it('the event line names what the data is: a text delta under another event name sends nothing', () => {
    expect(contents(line('{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}', 'ping'))).toEqual([]);
  });

  it('a data line without an event line is read by its type', () => {
    expect(contents('data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}\n\n')).toEqual(['a']);
  });
});

describe('AnthropicToChatStream text deltas, random texts', () => {
  // Every kind of character the fast path must tell apart: plain ASCII, what JSON escapes, what it
  // passes as it is (non-ASCII, U+2028), surrogate pairs and lone halves.
  const POOL = ['a', 'Z', ' ', '0', '"', '\\', '/', '\n', '\r', '\t', '\u0000', '\u001f', '\u007f', 'é', '€', '\u2028', '🙂', '\ud800', '\udfff', '{', '}', ':', ','];
  let seed = 20261203;
  const random = (n: number): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed % n;
  };

  it('2,000 texts of up to 12 characters: each chunk says the text, in JSON.stringify\'s text of the chunk', () => {
    const texts = Array.from({ length: 2000 }, () => Array.from({ length: random(13) }, () => POOL[random(POOL.length)]).join(''));
    const sse = 'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_r","usage":{"input_tokens":1}}}\n\n'
      + texts.map((text) => `event: content_block_delta\ndata: ${JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } })}\n\n`).join('');
    const rewriter = new AnthropicToChatStream('m', true);
    // Cut at every 97 bytes: lines end in other reads than they begin.
    const bytes = Buffer.from(sse);
    let out = '';
    for (let i = 0; i < bytes.length; i += 97) out += rewriter.push(bytes.subarray(i, i + 97));
    const chunks = out.split('\n\n').filter((e) => e !== '').map((e) => e.slice('data: '.length)).slice(1);
    expect(chunks).toHaveLength(texts.length);
    chunks.forEach((text, i) => {
      const created = (JSON.parse(text) as { created: number }).created;
      expect(text).toBe(JSON.stringify({
        id: 'chatcmpl-msg_r', object: 'chat.completion.chunk', created, model: 'm', service_tier: 'default', system_fingerprint: null,
        choices: [{ index: 0, delta: { content: texts[i] }, logprobs: null, finish_reason: null }], usage: null,
      }));
    });
  });
});
