// Whole answers of both protocols, every kind of part in them, shared by the tests that turn an
// answer into its stream and a stream back into its answer (relay/stream/answer-as-stream.ts,
// stream-as-answer.ts).

/** An Anthropic Message: thinking, redacted thinking, text, a tool call with input and one without. */
export const MESSAGE = {
  id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-x', container: null,
  content: [
    { type: 'thinking', thinking: 'Let me look.', signature: 'sig==' },
    { type: 'redacted_thinking', data: 'opaque' },
    { type: 'text', text: 'Calling two tools.', citations: null },
    { type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: 'é', n: [1, 2] } },
    { type: 'tool_use', id: 'toolu_2', name: 'now', input: {} },
  ],
  stop_reason: 'tool_use', stop_sequence: null,
  usage: { input_tokens: 12, output_tokens: 34, cache_read_input_tokens: 5, cache_creation_input_tokens: 0, service_tier: 'standard' },
};

/** A Chat Completion of two choices: text, and a tool call. */
export const COMPLETION = {
  id: 'chatcmpl-1', object: 'chat.completion', created: 1_700_000_000, model: 'gpt-x', system_fingerprint: 'fp_1',
  choices: [
    { index: 0, message: { role: 'assistant', content: 'Hello there', refusal: null, annotations: [{ type: 'url_citation', url_citation: { url: 'https://example.com/', title: 'Example', start_index: 0, end_index: 5 } }] }, logprobs: null, finish_reason: 'stop' },
    { index: 1, message: { role: 'assistant', content: null, refusal: null, annotations: [], tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] }, logprobs: null, finish_reason: 'tool_calls' },
  ],
  usage: { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 },
};
