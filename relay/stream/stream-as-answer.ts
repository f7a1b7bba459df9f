// A whole stream folded into the JSON answer the client asked for: a provider that streams whatever
// it is asked (some OpenAI-compatible servers, proxies that force `stream`) answered a request
// without `stream` with events, which the SDKs, waiting for one JSON object, could not read (the
// Anthropic SDK's `messages.create` and OpenAI's `chat.completions.create` failed on `event: …`)
// though it was billed. The inverse of answer-as-stream.ts, in the provider's protocol; the folded
// answer then goes the way of any JSON answer (usage read from it, converted to the client's
// protocol where the provider spoke the other).
//
//   Anthropic events → the Message of message_start, each content block from its start with its
//     deltas applied (text, tool input JSON parsed at the block's stop, thinking and its signature,
//     citations), message_delta's stop_reason, stop_sequence and usage merged over message_start's.
//   Chat Completion chunks → per choice index its message (role, content, refusal and annotations concatenated,
//     tool calls by index with their arguments concatenated), logprobs concatenated, finish_reason
//     and the stop sequence that matched (vLLM's stop_reason, SGLang's matched_stop, which name a
//     stop_sequences entry for an Anthropic client); the last non-null usage.
//
// A stream that stated an error (Anthropic's `event: error`, a chunk `{"error": …}`) folds to what came
// before it, with the error beside it. null when the bytes hold no such stream.
import { isObject } from '../../infra/json/is-object.js';

export interface FoldedStream {
  /** The answer as the provider's JSON would have been; what the stream delivered up to an error. */
  answer: Record<string, unknown>;
  /** The error the stream ended with, as the provider wrote it (its `error` object), or null. */
  error: Record<string, unknown> | null;
}

/** Each event's data (its `data:` lines joined), parsed; events whose data is no JSON object are skipped. */
function eventData(buf: Buffer): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const event of buf.toString('utf8').split(/\r\n\r\n|\n\n|\r\r/)) {
    let data: string | null = null;
    for (const line of event.split(/\r\n|\n|\r/)) {
      if (!line.startsWith('data:')) continue;
      const value = line.charCodeAt(5) === 0x20 ? line.slice(6) : line.slice(5);
      data = data === null ? value : `${data}\n${value}`;
    }
    if (data === null || data === '[DONE]') continue;
    try {
      const parsed: unknown = JSON.parse(data);
      if (isObject(parsed)) out.push(parsed);
    } catch {
      // A malformed event carries nothing to fold.
    }
  }
  return out;
}

/** Most blocks, choices or tool calls one answer folds: an index past it is the provider's nonsense, not an array to grow. */
const MAX_INDEX = 4096;

/** An event's index when it is a whole number below MAX_INDEX, else `fallback`. */
function indexOr(v: unknown, fallback: number): number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < MAX_INDEX ? v : fallback;
}

const appended = (was: unknown, more: unknown): unknown => (typeof more === 'string' ? (typeof was === 'string' ? was + more : more) : was);

/** Anthropic's Messages stream as its Message; null when neither message_start nor the answer's events came. */
export function eventsAsMessage(buf: Buffer): FoldedStream | null {
  let message: Record<string, unknown> | null = null;
  const blocks: Array<Record<string, unknown> | undefined> = [];
  const inputJson = new Map<number, string>();
  let error: Record<string, unknown> | null = null;
  for (const data of eventData(buf)) {
    if (data.type === 'message_start' && isObject(data.message)) {
      message = { ...data.message };
      continue;
    }
    if (data.type === 'error') {
      error = isObject(data.error) ? data.error : { type: 'api_error', message: 'The model provider failed to answer.' };
      break;
    }
    if (message === null) {
      // A message_start the relay could not read (its JSON cut or malformed) and then the answer:
      // folded from what follows, as the same events streamed are passed on and billed. Dropped, the
      // answer was billed 0 and the client told it was unreadable.
      if (data.type !== 'content_block_start' && data.type !== 'content_block_delta' && data.type !== 'message_delta') continue;
      message = { type: 'message', role: 'assistant', content: [], stop_reason: null, stop_sequence: null };
    }
    const index = indexOr(data.index, -1);
    switch (data.type) {
      case 'content_block_start':
        if (index >= 0 && isObject(data.content_block)) blocks[index] = { ...data.content_block };
        break;
      case 'content_block_delta': {
        const block = index >= 0 ? blocks[index] : undefined;
        const delta = data.delta;
        if (block === undefined || !isObject(delta)) break;
        if (delta.type === 'text_delta') block.text = appended(block.text, delta.text);
        else if (delta.type === 'input_json_delta' && typeof delta.partial_json === 'string') inputJson.set(index, (inputJson.get(index) ?? '') + delta.partial_json);
        else if (delta.type === 'thinking_delta') block.thinking = appended(block.thinking, delta.thinking);
        else if (delta.type === 'signature_delta') block.signature = delta.signature;
        else if (delta.type === 'citations_delta' && delta.citation !== undefined) block.citations = [...(Array.isArray(block.citations) ? block.citations : []), delta.citation];
        break;
      }
      case 'content_block_stop': {
        const block = index >= 0 ? blocks[index] : undefined;
        const json = inputJson.get(index);
        if (block === undefined || json === undefined || json === '') break;
        try {
          block.input = JSON.parse(json);
        } catch {
          // A tool input cut or malformed: its start's input stands.
        }
        break;
      }
      case 'message_delta':
        if (isObject(data.delta)) {
          for (const [k, v] of Object.entries(data.delta)) if (k !== '__proto__') message[k] = v;
        }
        if (isObject(data.usage)) message.usage = { ...(isObject(message.usage) ? message.usage : {}), ...data.usage };
        break;
    }
  }
  if (message === null) return error === null ? null : { answer: { type: 'message', role: 'assistant', content: [] }, error };
  // Blocks still open (a stream cut before their stop) keep their input as far as it parsed.
  message.content = blocks.filter((b): b is Record<string, unknown> => b !== undefined);
  return { answer: message, error };
}

interface ChoiceFold {
  index: number;
  message: Record<string, unknown>;
  toolCalls: Array<Record<string, unknown> & { function: Record<string, unknown> }>;
  logprobs: Record<string, unknown[]> | null;
  finishReason: unknown;
  /** vLLM's `stop_reason`, SGLang's `matched_stop`: the stop sequence that ended the choice, as the last chunk naming it said. */
  matched: Record<string, unknown>;
}

/** OpenAI's Chat Completions stream as its Chat Completion; null when no chunk came. */
export function chunksAsCompletion(buf: Buffer): FoldedStream | null {
  let head: Record<string, unknown> | null = null;
  let usage: unknown = undefined;
  let error: Record<string, unknown> | null = null;
  const choices = new Map<number, ChoiceFold>();
  for (const chunk of eventData(buf)) {
    if (chunk.error !== undefined && chunk.error !== null) {
      error = isObject(chunk.error) ? chunk.error : { message: String(chunk.error) };
      break;
    }
    if (!Array.isArray(chunk.choices)) continue;
    head ??= { id: chunk.id, object: 'chat.completion', created: chunk.created, model: chunk.model };
    if (chunk.system_fingerprint !== undefined) head.system_fingerprint = chunk.system_fingerprint;
    if (chunk.service_tier !== undefined) head.service_tier = chunk.service_tier;
    if (isObject(chunk.usage)) usage = chunk.usage;
    for (const c of chunk.choices as unknown[]) {
      if (!isObject(c)) continue;
      const index = indexOr(c.index, 0);
      let fold = choices.get(index);
      if (fold === undefined) {
        fold = { index, message: { role: 'assistant', content: null, refusal: null, annotations: [] }, toolCalls: [], logprobs: null, finishReason: null, matched: {} };
        choices.set(index, fold);
      }
      const delta = isObject(c.delta) ? c.delta : {};
      const message = fold.message;
      if (typeof delta.role === 'string') message.role = delta.role;
      if (typeof delta.content === 'string') message.content = appended(message.content, delta.content);
      if (typeof delta.refusal === 'string') message.refusal = appended(message.refusal, delta.refusal);
      // OpenAI streams url_citation annotations (web search) as deltas; its answers always hold the list.
      if (Array.isArray(delta.annotations)) (message.annotations as unknown[]).push(...(delta.annotations as unknown[]));
      if (Array.isArray(delta.tool_calls)) {
        for (const t of delta.tool_calls as unknown[]) {
          if (!isObject(t)) continue;
          const at = indexOr(t.index, fold.toolCalls.length);
          const call = fold.toolCalls[at] ??= { id: '', type: 'function', function: { name: '', arguments: '' } };
          if (typeof t.id === 'string') call.id = t.id;
          if (typeof t.type === 'string') call.type = t.type;
          const fn = isObject(t.function) ? t.function : {};
          if (typeof fn.name === 'string') call.function.name = appended(call.function.name, fn.name);
          if (typeof fn.arguments === 'string') call.function.arguments = appended(call.function.arguments, fn.arguments);
        }
      }
      if (isObject(c.logprobs)) {
        fold.logprobs ??= {};
        for (const [k, v] of Object.entries(c.logprobs)) if (Array.isArray(v) && k !== '__proto__') fold.logprobs[k] = [...(Object.hasOwn(fold.logprobs, k) ? fold.logprobs[k]! : []), ...v];
      }
      if (c.finish_reason !== null && c.finish_reason !== undefined) fold.finishReason = c.finish_reason;
      if (c.stop_reason !== null && c.stop_reason !== undefined) fold.matched.stop_reason = c.stop_reason;
      if (c.matched_stop !== null && c.matched_stop !== undefined) fold.matched.matched_stop = c.matched_stop;
    }
  }
  if (head === null) return error === null ? null : { answer: { object: 'chat.completion', choices: [] }, error };
  const answer: Record<string, unknown> = {
    ...head,
    choices: [...choices.values()].sort((a, b) => a.index - b.index).map((f) => {
      const message = { ...f.message };
      const calls = f.toolCalls.filter((t) => t !== undefined);
      if (calls.length > 0) message.tool_calls = calls;
      return { index: f.index, message, logprobs: f.logprobs, finish_reason: f.finishReason ?? 'stop', ...f.matched };
    }),
  };
  if (usage !== undefined) answer.usage = usage;
  return { answer, error };
}
