// An Anthropic Messages request as a Chat Completions request: what a /v1/messages request becomes on
// its way to an OpenAI-format channel.
//
//   system (string or text blocks)       → a system message
//   text blocks                          → text content (a string when text only, else parts)
//   image blocks (base64, url)           → image_url parts (base64 as a data: URL)
//   assistant tool_use blocks            → tool_calls (input as JSON arguments)
//   user tool_result blocks              → tool messages, before the rest of that user turn; one with
//                                            is_error true says "Error: <its text>" (a tool message has no flag)
//   tools / tool_choice                  → function tools / auto, none, required (any), a named
//                                            function (tool); disable_parallel_tool_use → parallel_tool_calls false
//   stop_sequences → stop; temperature, top_p; metadata.user_id → user; structured outputs
//   (output_config.format, output_format) → response_format json_schema
//   max_tokens                           → max_tokens, or max_completion_tokens for OpenAI's
//                                            reasoning models (core/channels/output-limit.ts)
//   stream → stream with stream_options.include_usage (the answer is billed by its usage)
// Refused (400): document blocks, server tools (web search…), tool results holding anything but text,
// a tool_choice Anthropic refuses (a type other than auto/any/tool/none, type "tool" without a name).
// Left out: thinking blocks and the thinking setting, cache_control, top_k, anthropic-beta features.
import { RelayError } from '../../errors.js';
import type { MessagesRequest } from '../../messages/messages-request.js';
import { outputLimitField } from '../../../core/channels/output-limit.js';
import { isObject } from '../../../infra/json/is-object.js';

/**
 * The JSON Schema of Anthropic's structured outputs (`output_config.format`, or the beta's
 * `output_format`), for OpenAI's `response_format` json_schema; null when none is asked. Not strict:
 * OpenAI's strict mode has rules of its own (every property required) that a schema Anthropic takes
 * may break, and a 400 for it would be the provider's, about a field the client never sent.
 */
function structuredOutputSchema(body: MessagesRequest): Record<string, unknown> | null | RelayError {
  const b = body as { output_config?: { format?: unknown } | null; output_format?: unknown };
  const field = b.output_config?.format !== undefined && b.output_config?.format !== null ? 'output_config.format' : 'output_format';
  const format = (b.output_config?.format ?? b.output_format) as { type?: unknown; schema?: unknown } | null | undefined;
  if (format === undefined || format === null) return null;
  // Asked for and not carried over, the client would get free text where it asked for its schema.
  if (typeof format !== 'object' || format.type !== 'json_schema') return invalid(`${field}.type: only "json_schema" is served`);
  const schema = format.schema;
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return invalid(`${field}.schema: a JSON Schema object is required`);
  return schema as Record<string, unknown>;
}

/** OpenAI's bound on `stop` (relay/chat-completions/chat-request.ts holds its own clients to it). */
const MAX_CHAT_STOP_SEQUENCES = 4;

function invalid(message: string): RelayError {
  return new RelayError('invalid_request', message);
}

/**
 * A content's blocks, each still to be checked as an object (isObject): the blocks of tool results and
 * the entries of `tools` are not schema-checked before this conversion (an Anthropic channel takes them
 * as they are), and a null among them threw here.
 */
function blocksOf(content: unknown): readonly unknown[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return Array.isArray(content) ? content : [];
}

function textOfBlocks(content: unknown, where: string): string | RelayError {
  let out = '';
  const blocks = blocksOf(content);
  for (let i = 0; i < blocks.length; i++) {
    const b = blocks[i];
    if (!isObject(b)) return invalid(`${where}.${i}: must be an object`);
    if (b.type !== 'text' || typeof b.text !== 'string') return invalid(`${where}: only text blocks are converted for this model's provider`);
    out += (out ? '\n' : '') + b.text;
  }
  return out;
}

function imagePart(b: Record<string, unknown>, where: string): Record<string, unknown> | RelayError {
  const source = b.source as { type?: unknown; media_type?: unknown; data?: unknown; url?: unknown } | undefined;
  if (source?.type === 'base64' && typeof source.media_type === 'string' && typeof source.data === 'string') {
    return { type: 'image_url', image_url: { url: `data:${source.media_type};base64,${source.data}` } };
  }
  if (source?.type === 'url' && typeof source.url === 'string') return { type: 'image_url', image_url: { url: source.url } };
  return invalid(`${where}.source: only base64 and url images are converted`);
}

/** A tool message for a tool_result with is_error true: its text after "Error: ", or "Error" when it has none. */
function toolErrorText(text: string): string {
  return text === '' ? 'Error' : `Error: ${text}`;
}

type ToolChoice = { type?: unknown; name?: unknown; disable_parallel_tool_use?: unknown };

/**
 * The request's tool_choice, checked as Anthropic checks it: an object of type auto, any, tool (with
 * the tool's name) or none. Dropped, an invalid one left the provider's default (auto), and the
 * client believed the tool forced.
 */
function checkedToolChoice(choice: unknown): ToolChoice | undefined | RelayError {
  if (choice === undefined || choice === null) return undefined;
  if (!isObject(choice)) return invalid('tool_choice: must be an object');
  if (choice.type !== 'auto' && choice.type !== 'any' && choice.type !== 'tool' && choice.type !== 'none') {
    return invalid(`tool_choice.type: must be one of "auto", "any", "tool", "none"${typeof choice.type === 'string' ? `, not "${choice.type}"` : ''}`);
  }
  if (choice.type === 'tool' && (typeof choice.name !== 'string' || choice.name === '')) return invalid('tool_choice.name: the name of a tool is required when tool_choice.type is "tool"');
  return choice;
}

export function messagesToChat(body: MessagesRequest, model: string): Record<string, unknown> | RelayError {
  // Anthropic's MCP connector: its tools would be left out and the model answer as if none were offered.
  const mcp = (body as { mcp_servers?: unknown }).mcp_servers;
  if (mcp !== undefined && mcp !== null && !(Array.isArray(mcp) && mcp.length === 0)) return invalid('mcp_servers: MCP servers are not converted for this model\'s provider');
  const messages: Record<string, unknown>[] = [];
  if (body.system !== undefined) {
    const system = textOfBlocks(body.system, 'system');
    if (system instanceof RelayError) return system;
    if (system) messages.push({ role: 'system', content: system });
  }
  for (let i = 0; i < body.messages.length; i++) {
    const m = body.messages[i]!;
    const where = `messages.${i}.content`;
    const blocks = blocksOf(m.content);
    const parts: Record<string, unknown>[] = [];
    const toolCalls: Record<string, unknown>[] = [];
    let textOnly = true;
    for (let j = 0; j < blocks.length; j++) {
      const b = blocks[j];
      const at = `${where}.${j}`;
      if (!isObject(b)) return invalid(`${at}: must be an object`);
      if (b.type === 'text') {
        if (typeof b.text === 'string') parts.push({ type: 'text', text: b.text });
      } else if (b.type === 'image' && m.role === 'user') {
        const p = imagePart(b, at);
        if (p instanceof RelayError) return p;
        parts.push(p);
        textOnly = false;
      } else if (b.type === 'tool_use' && m.role === 'assistant') {
        toolCalls.push({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } });
      } else if (b.type === 'tool_result' && m.role === 'user') {
        const text = textOfBlocks(b.content ?? '', `${at}.content`);
        if (text instanceof RelayError) return text;
        // A tool message has no error flag: a failed call's result says so in its text, else the
        // model read the failure as the tool's answer.
        messages.push({ role: 'tool', tool_call_id: b.tool_use_id, content: b.is_error === true ? toolErrorText(text) : text });
      } else if (b.type === 'thinking' || b.type === 'redacted_thinking') {
        // Not carried over: an OpenAI-format model has no use for another model's signed thinking.
      } else {
        return invalid(`${at}.type: blocks of type "${b.type}" are not converted for this model's provider`);
      }
    }
    if (m.role === 'assistant') {
      const text = parts.map((p) => p.text as string).join('');
      if (text === '' && toolCalls.length === 0) continue;
      const out: Record<string, unknown> = { role: 'assistant', content: text === '' ? null : text };
      if (toolCalls.length > 0) out.tool_calls = toolCalls;
      messages.push(out);
    } else if (parts.length > 0) {
      messages.push({ role: 'user', content: textOnly ? parts.map((p) => p.text as string).join('\n') : parts });
    }
  }

  const choice = checkedToolChoice(body.tool_choice);
  if (choice instanceof RelayError) return choice;
  // The bound the request was reserved at, in the field the model takes (core/channels/output-limit.ts).
  const chat: Record<string, unknown> = { model, messages, [outputLimitField(model)]: body.max_tokens };
  const tools = body.tools as Array<Record<string, unknown>> | undefined;
  if (Array.isArray(tools) && tools.length > 0) {
    const out: Record<string, unknown>[] = [];
    for (let i = 0; i < tools.length; i++) {
      const t: unknown = tools[i];
      if (!isObject(t)) return invalid(`tools.${i}: must be an object`);
      if ((t.type !== undefined && t.type !== 'custom') || typeof t.name !== 'string') return invalid(`tools.${i}: server tools are not converted for this model's provider`);
      const fn: Record<string, unknown> = { name: t.name, parameters: t.input_schema ?? { type: 'object', properties: {} } };
      if (typeof t.description === 'string') fn.description = t.description;
      out.push({ type: 'function', function: fn });
    }
    chat.tools = out;
    if (choice?.type === 'auto') chat.tool_choice = 'auto';
    else if (choice?.type === 'none') chat.tool_choice = 'none';
    else if (choice?.type === 'any') chat.tool_choice = 'required';
    else if (choice?.type === 'tool' && typeof choice.name === 'string') chat.tool_choice = { type: 'function', function: { name: choice.name } };
    if (choice?.disable_parallel_tool_use === true) chat.parallel_tool_calls = false;
  }
  if (Array.isArray(body.stop_sequences)) {
    // Chat Completions takes at most 4 stop sequences (OpenAI refuses more with a 400): refused here,
    // in the client's words, rather than by the provider after the request was sent.
    if (body.stop_sequences.length > MAX_CHAT_STOP_SEQUENCES) return invalid(`stop_sequences: at most ${MAX_CHAT_STOP_SEQUENCES} are served by this model's provider`);
    chat.stop = body.stop_sequences;
  }
  if (typeof body.temperature === 'number') chat.temperature = body.temperature;
  if (typeof body.top_p === 'number') chat.top_p = body.top_p;
  const schema = structuredOutputSchema(body);
  if (schema instanceof RelayError) return schema;
  if (schema !== null) chat.response_format = { type: 'json_schema', json_schema: { name: 'output', schema } };
  const user = (body.metadata as { user_id?: unknown } | undefined)?.user_id;
  if (typeof user === 'string' && user) chat.user = user;
  if (body.stream === true) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
  return chat;
}
