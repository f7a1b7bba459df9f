// A stream folded into the JSON answer a client asked for: a JSON answer made into its stream by
// answer-as-stream.ts folds back to itself; streams as providers write them (tool arguments in pieces,
// several choices, CRLF, an error part way) fold to what the SDKs' own accumulators would make.
import { describe, expect, it } from 'vitest';
import { COMPLETION, MESSAGE } from '../../tests/harness/answer-fixtures.js';
import { completionAsChunks, messageAsEvents } from './answer-as-stream.js';
import { chunksAsCompletion, eventsAsMessage } from './stream-as-answer.js';



const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
const chunk = (c: Record<string, unknown>) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', ...c })}\n\n`;

describe('eventsAsMessage', () => {
  it('folds the events answer-as-stream makes of a Message back into that Message', () => {
    const folded = eventsAsMessage(Buffer.from(messageAsEvents(Buffer.from(JSON.stringify(MESSAGE)))!));
    expect(folded).toEqual({ answer: MESSAGE, error: null });
  });

  it('joins text and tool input sent in pieces, merges message_delta\'s usage over message_start\'s, reads CRLF and multi-line data', () => {
    const stream = [
      sse('message_start', { type: 'message_start', message: { id: 'm', type: 'message', role: 'assistant', model: 'x', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 100, output_tokens: 1, cache_read_input_tokens: 40 } } }),
      'event: ping\ndata: {"type":"ping"}\n\n',
      sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
      sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hel' } }),
      // A data field over two lines: joined with a newline, as the SSE specification says.
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,\ndata: "delta":{"type":"text_delta","text":"lo"}}\n\n',
      sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'citations_delta', citation: { type: 'char_location', cited_text: 'x' } } }),
      sse('content_block_stop', { type: 'content_block_stop', index: 0 }),
      sse('content_block_start', { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 't', name: 'f', input: {} } }),
      sse('content_block_delta', { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"city": "Par' } }),
      sse('content_block_delta', { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: 'is"}' } }),
      sse('content_block_stop', { type: 'content_block_stop', index: 1 }),
      sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 22 } }),
      sse('message_stop', { type: 'message_stop' }),
    ].join('').replaceAll('\n', '\r\n');
    expect(eventsAsMessage(Buffer.from(stream))).toEqual({
      answer: {
        id: 'm', type: 'message', role: 'assistant', model: 'x', stop_reason: 'tool_use', stop_sequence: null,
        content: [
          { type: 'text', text: 'Hello', citations: [{ type: 'char_location', cited_text: 'x' }] },
          { type: 'tool_use', id: 't', name: 'f', input: { city: 'Paris' } },
        ],
        usage: { input_tokens: 100, output_tokens: 22, cache_read_input_tokens: 40 },
      },
      error: null,
    });
  });

  it('an error event: what came before it, and the error', () => {
    const stream = sse('message_start', { type: 'message_start', message: { id: 'm', type: 'message', role: 'assistant', content: [], usage: { input_tokens: 5, output_tokens: 1 } } })
      + sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
      + sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'par' } })
      + sse('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })
      + sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'ignored' } });
    expect(eventsAsMessage(Buffer.from(stream))).toEqual({
      answer: { id: 'm', type: 'message', role: 'assistant', content: [{ type: 'text', text: 'par' }], usage: { input_tokens: 5, output_tokens: 1 } },
      error: { type: 'overloaded_error', message: 'Overloaded' },
    });
    // An error before anything: an empty message beside it, so that the client is told the error.
    expect(eventsAsMessage(Buffer.from(sse('error', { type: 'error', error: { type: 'api_error', message: 'x' } }))))
      .toEqual({ answer: { type: 'message', role: 'assistant', content: [] }, error: { type: 'api_error', message: 'x' } });
  });

  it('null for bytes that hold no Messages stream; malformed events and hostile indexes are skipped', () => {
    expect(eventsAsMessage(Buffer.from('<html>502</html>'))).toBeNull();
    expect(eventsAsMessage(Buffer.from(chunk({ choices: [] })))).toBeNull();
    const stream = sse('message_start', { type: 'message_start', message: { type: 'message', content: [] } })
      + 'data: {"type":"content_block_start","index":0,\n\n'
      + sse('content_block_start', { type: 'content_block_start', index: 1e9, content_block: { type: 'text', text: '' } })
      + sse('content_block_start', { type: 'content_block_start', index: -1, content_block: { type: 'text', text: '' } })
      + sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 't', name: 'f', input: {} } })
      + sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"cut' } })
      + sse('content_block_stop', { type: 'content_block_stop', index: 0 });
    expect(eventsAsMessage(Buffer.from(stream))).toEqual({ answer: { type: 'message', content: [{ type: 'tool_use', id: 't', name: 'f', input: {} }] }, error: null });
  });
});

describe('keys a provider could poison a prototype with', () => {
  it('are left out of what is folded', () => {
    const stream = 'event: message_start\ndata: {"type":"message_start","message":{"type":"message","content":[]}}\n\n'
      + 'event: message_delta\ndata: {"type":"message_delta","delta":{"__proto__":{"polluted":1},"stop_reason":"end_turn"}}\n\n';
    const folded = eventsAsMessage(Buffer.from(stream))!.answer;
    expect(Object.getPrototypeOf(folded)).toBe(Object.prototype);
    expect(folded).toEqual({ type: 'message', content: [], stop_reason: 'end_turn' });
    const chunks = 'data: {"id":"c","choices":[{"index":0,"delta":{"content":"a"},"logprobs":{"__proto__":[1],"constructor":[2]}}]}\n\n';
    const logprobs = chunksAsCompletion(Buffer.from(chunks))!.answer.choices as Array<{ logprobs: Record<string, unknown> }>;
    expect(Object.getPrototypeOf(logprobs[0]!.logprobs)).toBe(Object.prototype);
    expect(logprobs[0]!.logprobs).toEqual({ constructor: [2] });
  });
});

describe('chunksAsCompletion', () => {
  it('folds the chunks answer-as-stream makes of a Chat Completion back into it', () => {
    const folded = chunksAsCompletion(Buffer.from(completionAsChunks(Buffer.from(JSON.stringify(COMPLETION)), true)!));
    expect(folded).toEqual({ answer: COMPLETION, error: null });
  });

  it('joins content, refusal and tool-call arguments by index, concatenates logprobs, takes the last usage', () => {
    const stream = chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: { content: [] }, finish_reason: null }], usage: null })
      + chunk({ choices: [{ index: 0, delta: { content: 'A' }, logprobs: { content: [{ token: 'A', logprob: -0.1 }] }, finish_reason: null }], usage: null })
      + chunk({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get', arguments: '' } }, { index: 1, id: 'call_b', type: 'function', function: { name: 'put', arguments: '{"k"' } }] }, finish_reason: null }] })
      + chunk({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"x":' } }, { index: 1, function: { arguments: ':2}' } }] }, logprobs: { content: [{ token: 'B', logprob: -0.2 }] }, finish_reason: null }] })
      + chunk({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '1}' } }] }, finish_reason: 'tool_calls' }] })
      + chunk({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 8, total_tokens: 11 } })
      + 'data: [DONE]\n\n';
    expect(chunksAsCompletion(Buffer.from(stream))).toEqual({
      answer: {
        id: 'c1', object: 'chat.completion', created: 1, model: 'm',
        choices: [{
          index: 0, finish_reason: 'tool_calls',
          logprobs: { content: [{ token: 'A', logprob: -0.1 }, { token: 'B', logprob: -0.2 }] },
          message: {
            role: 'assistant', content: 'A', refusal: null, annotations: [],
            tool_calls: [
              { id: 'call_a', type: 'function', function: { name: 'get', arguments: '{"x":1}' } },
              { id: 'call_b', type: 'function', function: { name: 'put', arguments: '{"k":2}' } },
            ],
          },
        }],
        usage: { prompt_tokens: 3, completion_tokens: 8, total_tokens: 11 },
      },
      error: null,
    });
  });

  it('a chunk with an error: what came before it, and the error; null for bytes that hold no chunk', () => {
    const stream = chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: 'par' }, finish_reason: null }] })
      + `data: ${JSON.stringify({ error: { message: 'boom', type: 'server_error' } })}\n\n`;
    expect(chunksAsCompletion(Buffer.from(stream))).toEqual({
      answer: { id: 'c1', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'par', refusal: null, annotations: [] }, logprobs: null, finish_reason: 'stop' }] },
      error: { message: 'boom', type: 'server_error' },
    });
    expect(chunksAsCompletion(Buffer.from('data: [DONE]\n\n'))).toBeNull();
    expect(chunksAsCompletion(Buffer.from('{"id":"x"}'))).toBeNull();
  });
});
