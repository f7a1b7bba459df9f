// The lines the rewriters convert (line-stream.ts): ended by LF, CRLF or a lone CR as the SSE spec
// says, however the chunks cut them; a line too long to carry handed over as it comes where the
// rewriter passes it on (ChatUsageFilter), dropped where it must be whole to be converted.
import { describe, expect, it } from 'vitest';
import { AnthropicToChatStream } from '../providers/anthropic/to-chat.js';
import { ChatToAnthropicStream, ChatUsageFilter } from '../providers/openai/to-messages.js';
import { LineStream } from './line-stream.js';
import { MAX_CARRIED_LINE } from './sse-bytes.js';

class Lines extends LineStream {
  push(chunk: Buffer): string[] {
    const out: string[] = [];
    this.lines(chunk, (l) => { out.push(l); return ''; });
    return out;
  }
}

describe('LineStream', () => {
  it('ends a line at LF, CRLF and a lone CR, a CRLF cut between chunks being one', () => {
    const text = 'event: a\rdata: 1\r\n\r\ndata: é\n\r\r\n';
    const whole = new Lines().push(Buffer.from(text));
    expect(whole).toEqual(['event: a', 'data: 1', '', 'data: é', '', '']);
    const bytes = Buffer.from(text);
    for (let size = 1; size < bytes.length; size++) {
      const l = new Lines();
      const got: string[] = [];
      for (let i = 0; i < bytes.length; i += size) got.push(...l.push(bytes.subarray(i, i + size)));
      expect(got).toEqual(whole);
    }
  });
});

describe('ChatUsageFilter', () => {
  it('passes a chunk longer than MAX_CARRIED_LINE on as it comes, whole', () => {
    const line = `data: {"choices":[{"index":0,"delta":{"content":"${'tok '.repeat(MAX_CARRIED_LINE / 3)}"}}]}\n\n`;
    const bytes = Buffer.from(line + 'data: [DONE]\n\n');
    const f = new ChatUsageFilter();
    let out = '';
    for (let i = 0; i < bytes.length; i += 65_536) out += f.push(bytes.subarray(i, i + 65_536)).toString();
    expect(out).toBe(line + 'data: [DONE]\n\n');
  });
});

describe('the conversions read an event whose data spans several data lines', () => {
  const split = (text: string) => text.replace(/^data: (.*?),/gm, 'data: $1,\ndata: ');
  const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

  it('Anthropic to Chat Completions: the text of split deltas reaches the client', () => {
    const text = split(sse('message_start', { type: 'message_start', message: { id: 'msg_1', usage: { input_tokens: 5, output_tokens: 1 } } })
      + sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'tok ' } }).repeat(3)
      + sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 3 } }) + sse('message_stop', { type: 'message_stop' }));
    const out = new AnthropicToChatStream('m', true).push(Buffer.from(text));
    const contents = out.split('\n').filter((l) => l.startsWith('data: {')).map((l) => (JSON.parse(l.slice(6)) as { choices: { delta?: { content?: string } }[] }).choices[0]?.delta?.content ?? '');
    expect(contents.join('')).toBe('tok tok tok ');
  });

  it('Chat Completions to Anthropic likewise, [DONE] passed at once', () => {
    const chunk = (content: string) => `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
    const out = new ChatToAnthropicStream('m').push(Buffer.from(split(chunk('a') + chunk('b')) + 'data: [DONE]\n\n'));
    expect(out).toContain('"text":"a"');
    expect(out).toContain('"text":"b"');
    expect(out).toContain('event: message_stop');
  });
});
