// The converted stream's text deltas are written by concatenation (to-messages.ts textDelta), not by
// stringifying an event object: their text must be exactly JSON.stringify's of Anthropic's event,
// member for member and in order, whatever the text holds.
import { describe, expect, it } from 'vitest';
import { ChatToAnthropicStream, chatToMessage } from './to-messages.js';

const HOSTILE_TEXTS = [
  'plain', 'quote " and \\ backslash', 'line\nbreak\r\ttab', '\u0000\u001f control', 'é€𝄞 wide',
  '\ud800 lone high', 'lone low \udc00', '</script><!--', '\u2028\u2029 separators', '{"text":"x"}',
];

function chunk(delta: unknown, finish: string | null = null): string {
  return `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'gpt-x', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
}

describe('ChatToAnthropicStream text deltas', () => {
  for (const [name, withTool] of [['a text block alone', false], ['text held while a tool call streams, then its own block', true]] as const) {
    it(`${name}: each content_block_delta is JSON.stringify's text of Anthropic's event`, () => {
      let sse = chunk({ role: 'assistant', content: '' });
      if (withTool) sse += chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":' } }] });
      for (const t of HOSTILE_TEXTS) sse += chunk({ content: t });
      if (withTool) sse += chunk({ tool_calls: [{ index: 0, function: { arguments: '1}' } }] });
      sse += chunk({}, withTool ? 'tool_calls' : 'stop') + 'data: [DONE]\n\n';
      const out = new ChatToAnthropicStream('claude-x').push(Buffer.from(sse));
      const deltas = out.split('\n\n').filter((e) => e.startsWith('event: content_block_delta\n')).map((e) => e.split('\n')[1]!.slice('data: '.length));
      const texts: string[] = [];
      for (const data of deltas) {
        const parsed = JSON.parse(data) as { index: number; delta: { type: string; text?: string; partial_json?: string } };
        if (parsed.delta.type !== 'text_delta') continue;
        expect(data).toBe(JSON.stringify({ type: 'content_block_delta', index: parsed.index, delta: { type: 'text_delta', text: parsed.delta.text } }));
        texts.push(parsed.delta.text!);
      }
      // Held behind the tool call, the texts come as one delta of their own block.
      expect(texts.join('')).toBe(HOSTILE_TEXTS.join(''));
      if (!withTool) expect(texts).toEqual(HOSTILE_TEXTS);
    });
  }
});

// OpenAI's refusal (the model declining, as structured outputs report it) is in a field of its own,
// `message.refusal` / `delta.refusal`, with content null: an Anthropic client was shown an empty
// answer ending end_turn, though the refusal's tokens were billed. Anthropic says it with text and
// stop_reason "refusal".
describe('a Chat Completions refusal converted for an Anthropic client', () => {
  const refusal = "I'm sorry, I can't help with that.";

  it('unstreamed: a text block holding the refusal, stop_reason refusal', () => {
    const body = { id: 'chatcmpl-1', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: null, refusal }, finish_reason: 'stop' }], usage: { prompt_tokens: 5, completion_tokens: 9, total_tokens: 14 } };
    const m = JSON.parse(chatToMessage(Buffer.from(JSON.stringify(body)), 'claude-x')!) as { content: unknown[]; stop_reason: string };
    expect(m.content).toEqual([{ type: 'text', text: refusal }]);
    expect(m.stop_reason).toBe('refusal');
  });

  it('unstreamed: refusal content parts are its text too', () => {
    const body = { id: 'chatcmpl-1', choices: [{ index: 0, message: { role: 'assistant', content: [{ type: 'refusal', refusal }] }, finish_reason: 'stop' }] };
    const m = JSON.parse(chatToMessage(Buffer.from(JSON.stringify(body)), 'claude-x')!) as { content: unknown[]; stop_reason: string };
    expect(m.content).toEqual([{ type: 'text', text: refusal }]);
    expect(m.stop_reason).toBe('refusal');
  });

  it('an answer without a refusal still ends end_turn', () => {
    const body = { id: 'chatcmpl-1', choices: [{ index: 0, message: { role: 'assistant', content: 'hi', refusal: null }, finish_reason: 'stop' }] };
    const m = JSON.parse(chatToMessage(Buffer.from(JSON.stringify(body)), 'claude-x')!) as { content: unknown[]; stop_reason: string };
    expect(m.content).toEqual([{ type: 'text', text: 'hi' }]);
    expect(m.stop_reason).toBe('end_turn');
  });

  it('streamed: the refusal deltas are a text block, and message_delta says refusal', () => {
    let sse = chunk({ role: 'assistant', content: null, refusal: '' });
    for (const piece of ["I'm sorry, ", "I can't help", ' with that.']) sse += chunk({ refusal: piece });
    sse += chunk({}, 'stop') + 'data: [DONE]\n\n';
    const out = new ChatToAnthropicStream('claude-x').push(Buffer.from(sse));
    const events = out.split('\n\n').filter((e) => e !== '').map((e) => JSON.parse(e.split('\n')[1]!.slice('data: '.length)) as { type: string; delta?: { type?: string; text?: string; stop_reason?: string }; content_block?: { type: string } });
    expect(events.filter((e) => e.type === 'content_block_start').map((e) => e.content_block!.type)).toEqual(['text']);
    expect(events.filter((e) => e.delta?.type === 'text_delta').map((e) => e.delta!.text).join('')).toBe(refusal);
    expect(events.find((e) => e.type === 'message_delta')!.delta!.stop_reason).toBe('refusal');
  });
});
