// A whole JSON answer written as the stream the client asked for: a provider that ignores `stream`
// (some OpenAI-compatible servers, proxies that buffer) answers a stream request with one JSON
// object, which the SDKs, waiting for events, could not read ("request ended without sending any
// chunks") though it was billed. The answer is already in the client's protocol (converted if the
// provider spoke the other); here it becomes that protocol's events, as the provider would have
// streamed them, all at once:
//
//   Anthropic Message → message_start (the message without content, its usage but output 0),
//     per content block: content_block_start, its content as one delta (text_delta,
//     input_json_delta of the tool input as JSON, thinking_delta then signature_delta), content_block_stop
//     (blocks that Anthropic streams whole — redacted thinking, server tool results — start complete),
//     message_delta (stop_reason, stop_sequence, the full usage), message_stop.
//   Chat Completion → per choice a chunk of its message (role, content, refusal, annotations, tool_calls with their
//     index) and a chunk of its finish_reason; with include_usage, every chunk `"usage": null` and a
//     last chunk `choices: []` with the usage; `data: [DONE]`.
//
// null when the answer is not such an object: it then goes as JSON, as before.

import { isObject } from '../../infra/json/is-object.js';

function parse(answer: Buffer | string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(typeof answer === 'string' ? answer : answer.toString('utf8'));
    return isObject(v) ? v : null;
  } catch {
    return null;
  }
}

function event(name: string, data: Record<string, unknown>): string {
  return `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
}

/** One content block of a Message as its events. */
function blockEvents(block: Record<string, unknown>, index: number): string {
  const start = (contentBlock: Record<string, unknown>) => event('content_block_start', { index, content_block: contentBlock });
  const delta = (d: Record<string, unknown>) => event('content_block_delta', { index, delta: d });
  const stop = event('content_block_stop', { index });
  switch (block.type) {
    case 'text': {
      const { text, ...rest } = block;
      const head = start({ ...rest, text: '' });
      return head + (typeof text === 'string' && text !== '' ? delta({ type: 'text_delta', text }) : '') + stop;
    }
    case 'tool_use':
    case 'server_tool_use':
    case 'mcp_tool_use': {
      const { input, ...rest } = block;
      const json = input === undefined ? '' : JSON.stringify(input);
      return start({ ...rest, input: {} }) + delta({ type: 'input_json_delta', partial_json: json === '{}' ? '' : json }) + stop;
    }
    case 'thinking': {
      const { thinking, signature, ...rest } = block;
      return start({ ...rest, thinking: '', signature: '' })
        + (typeof thinking === 'string' && thinking !== '' ? delta({ type: 'thinking_delta', thinking }) : '')
        + (typeof signature === 'string' && signature !== '' ? delta({ type: 'signature_delta', signature }) : '')
        + stop;
    }
    default:
      return start(block) + stop;
  }
}

/** A Message (Anthropic's JSON answer) as the events of its stream; null when it is none. */
export function messageAsEvents(answer: Buffer | string): string | null {
  const m = parse(answer);
  if (m === null || m.type !== 'message' || !Array.isArray(m.content)) return null;
  const { content, stop_reason: stopReason, stop_sequence: stopSequence, usage, ...rest } = m;
  const fullUsage = isObject(usage) ? usage : {};
  let out = event('message_start', {
    message: { ...rest, content: [], stop_reason: null, stop_sequence: null, usage: { ...fullUsage, output_tokens: 0 } },
  });
  const blocks = content as unknown[];
  for (let i = 0; i < blocks.length; i++) if (isObject(blocks[i])) out += blockEvents(blocks[i] as Record<string, unknown>, i);
  out += event('message_delta', { delta: { stop_reason: stopReason ?? null, stop_sequence: stopSequence ?? null }, usage: fullUsage });
  return out + event('message_stop', {});
}

/** A Chat Completion (OpenAI's JSON answer) as the chunks of its stream; null when it is none. */
export function completionAsChunks(answer: Buffer | string, includeUsage: boolean): string | null {
  const c = parse(answer);
  if (c === null || !Array.isArray(c.choices)) return null;
  const head = { id: c.id, object: 'chat.completion.chunk', created: c.created, model: c.model, ...(c.system_fingerprint !== undefined ? { system_fingerprint: c.system_fingerprint } : {}), ...(c.service_tier !== undefined ? { service_tier: c.service_tier } : {}) };
  const tail = includeUsage ? { usage: null } : {};
  const chunk = (choices: unknown[], extra: Record<string, unknown> = tail) => `data: ${JSON.stringify({ ...head, choices, ...extra })}\n\n`;
  let out = '';
  for (const raw of c.choices as unknown[]) {
    if (!isObject(raw)) continue;
    const index = typeof raw.index === 'number' ? raw.index : 0;
    const message = isObject(raw.message) ? raw.message : {};
    const delta: Record<string, unknown> = { role: message.role ?? 'assistant', content: message.content ?? null };
    if (message.refusal !== undefined) delta.refusal = message.refusal;
    // The reasoning providers write beside the content (DeepSeek's, vLLM's and others' reasoning_content,
    // OpenRouter's reasoning), as their streams carry it in deltas: the JSON answer had it, its stream not.
    if (message.reasoning_content !== undefined) delta.reasoning_content = message.reasoning_content;
    if (message.reasoning !== undefined) delta.reasoning = message.reasoning;
    if (Array.isArray(message.annotations) && message.annotations.length > 0) delta.annotations = message.annotations;
    if (Array.isArray(message.tool_calls)) {
      delta.tool_calls = (message.tool_calls as unknown[]).map((t, i) => (isObject(t) ? { index: i, ...t } : t));
    }
    out += chunk([{ index, delta, logprobs: raw.logprobs ?? null, finish_reason: null }]);
    out += chunk([{ index, delta: {}, logprobs: null, finish_reason: raw.finish_reason ?? 'stop' }]);
  }
  if (includeUsage) out += chunk([], { usage: c.usage ?? null });
  return out + 'data: [DONE]\n\n';
}
