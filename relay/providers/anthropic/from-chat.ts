// A Chat Completions request as an Anthropic Messages request: what a /v1/chat/completions request
// becomes on its way to an Anthropic channel, and the form the relay prices and reserves every
// request in (messages-handler.ts).
//
//   system and developer messages        → `system` (text joined by blank lines, wherever they stand;
//                                            blocks where a part sets cache_control, below)
//   user / assistant content (string or parts) → text blocks; image_url → image block (a data: URL
//                                            as base64, any other URL as a url source); file with
//                                            file_data (a PDF as a data: URL) → document block
//   assistant tool_calls                 → tool_use blocks (arguments parsed as JSON; arguments that
//                                            are not a JSON object, as a call cut short at
//                                            finish_reason length leaves them, as an empty input)
//   tool messages                        → tool_result blocks in a user turn (consecutive turns of
//                                            one role are merged, as Anthropic alternates them)
//   tool call ids                        → in Anthropic's pattern, the same in a tool_use and its
//                                            tool_result (ToolIds)
//   text of whitespace alone (Anthropic refuses such a block) → left out; a user message left with
//                                            nothing stands as "..." unless its turn has content
//                                            (settleBlankUserMessages); a tool result of it, without content
//   tools (function) / tool_choice       → tools with input_schema / auto, none, any (required),
//                                            tool (a named function), allowed_tools → the tools it
//                                            names with auto or any (its mode); parallel_tool_calls false →
//                                            disable_parallel_tool_use (not with none, whose
//                                            choice Anthropic takes bare); a parameters schema
//                                            without its type gets type object
//   stop → stop_sequences, without the empty or whitespace ones Anthropic refuses; temperature
//   (clamped to Anthropic's 0..1), top_p only without temperature (current Claude models refuse the
//   pair); user → metadata.user_id as its SHA-256 (Anthropic refuses an e-mail address there: an
//   opaque id, the same for the same user); system messages alone → one user turn of their text;
//   data:image/jpg → image/jpeg
//   cache_control on a content part, a tool, or a part of a system or tool message → on the block or
//                                            tool it becomes (the relay reserves cache writes for it:
//                                            cacheUseOfChat; OpenRouter and LiteLLM take the same marks
//                                            for Claude); a system or tool message with one goes as
//                                            text blocks, a part a block with its own mark (else as one
//                                            string). Anthropic refuses a 1-hour mark after a 5-minute
//                                            one: system messages move before every turn, so a 5-minute
//                                            one there ahead of a 1-hour one in a turn is the provider's 400
//   max_completion_tokens, else max_tokens, else the model's default bound (option
//   ModelMaxOutputTokens, DEFAULT_MAX_OUTPUT_TOKENS = 4096 when unset) → max_tokens
// Refused (400) on every channel: audio input and output (`audio`, `modalities` other than text),
// `web_search_options`, `prediction`, `service_tier` other than auto/default/flex, providers' paid
// extras (`search_parameters`, `plugins`, `models`, `enable_search`: unpricedFieldRefusal),
// legacy `function` messages and functions, tools other than functions. Refused when routed to an
// Anthropic channel (anthropicOnlyRefusal): no user or assistant message with content, n > 1,
// response_format json_object (Anthropic's structured outputs need a schema; json_schema → its
// output_config.format, the answer's JSON text the message's content), logprobs true (an app reading choices[0].logprobs.content of an
// answer that has none fails further from its cause than on a 400).
// reasoning_effort low / medium / high / xhigh → extended thinking with a budget of 1024 / 2048 /
//   4096 / 8192 tokens, at most ¾ of max_tokens (thinkingFor says when none is asked), temperature and top_p
//   then left out; the answer's thinking is its message's `reasoning_content` (to-chat.ts).
// Ignored: logprobs false, top_logprobs without logprobs, seed, presence/frequency penalties, logit_bias, service_tier,
// store, metadata.
import { createHash } from 'node:crypto';
import { RelayError } from '../../errors.js';
import { MAX_JSON_KEYS, MAX_JSON_VALUES } from '../../messages/raw-json-guard.js';
import { DEFAULT_MAX_OUTPUT_TOKENS } from '../../../core/pricing/input-bound.js';
import type { ChatMessage, ChatRequest } from '../../chat-completions/chat-request.js';
import type { MessagesRequest } from '../../messages/messages-request.js';

/** max_tokens of a converted request that set neither max_tokens nor max_completion_tokens, and no option says otherwise. */
export const DEFAULT_MAX_TOKENS = DEFAULT_MAX_OUTPUT_TOKENS;

type Block = Record<string, unknown> & { type: string };
interface Turn { role: 'user' | 'assistant'; content: Block[] }

/**
 * A base64 data URL (RFC 2397): its media type, then any parameters (`;charset=utf-8`, `;name=a.png`,
 * which browsers' FileReader and some SDKs write, and which Anthropic's source has no place for), then
 * the data. Without the parameters' part such a URL was refused as "not base64".
 */
const DATA_URL = /^data:([^;,]+)(?:;[^;,=]+=[^;,]*)*;base64,(.*)$/s;

/** A data URL's media type as Anthropic names it: lower case (types are case-insensitive), image/jpg as image/jpeg. */
function mediaType(type: string): string {
  const lower = type.trim().toLowerCase();
  return lower === 'image/jpg' ? 'image/jpeg' : lower;
}

/**
 * Text of whitespace alone, which Anthropic refuses as a text block anywhere (400 "messages: text
 * content blocks must contain non-whitespace text") and OpenAI takes: a user's "\n", an assistant's
 * "\n\n" before its tool calls, a " " part beside an image. \s is what JavaScript's trim() removes; \x1c-\x1f
 * and \x85 are what Python's str.isspace() adds, in case Anthropic's check is that one: such a block
 * carries nothing, so leaving it out loses nothing either way.
 */
const BLANK = /^[\s\x1c-\x1f\x85]*$/;

function isBlank(text: string): boolean {
  return BLANK.test(text);
}

function invalid(message: string): RelayError {
  return new RelayError('invalid_request', message);
}

/**
 * A part's cache breakpoint, as Anthropic takes it on the block it becomes (an object; anything else
 * is not one). The relay reserves a request's cache writes by these marks (cacheUseOfChat), so the
 * provider is sent them: left out, a mark doubled the reservation and cached nothing.
 */
function cacheMark(part: unknown): Record<string, unknown> | undefined {
  const cc = (part as { cache_control?: unknown } | null)?.cache_control;
  return cc !== null && typeof cc === 'object' && !Array.isArray(cc) ? cc as Record<string, unknown> : undefined;
}

/**
 * A system or tool message's parts as text blocks, each with its own breakpoint, or null when no part
 * sets one (the message is then one string, as ever). Blank parts are left out (Anthropic refuses a
 * text block of whitespace); a mark on one is lost, which only over-reserves.
 */
function markedTextBlocks(content: ChatMessage['content']): Block[] | null {
  if (!Array.isArray(content) || !content.some((p) => cacheMark(p) !== undefined)) return null;
  const blocks: Block[] = [];
  for (const p of content) {
    if (typeof p.text === 'string' && !isBlank(p.text)) blocks.push(marked({ type: 'text', text: p.text }, p));
  }
  return blocks;
}

function marked<T extends Record<string, unknown>>(block: T, part: unknown): T {
  const mark = cacheMark(part);
  if (mark !== undefined) (block as Record<string, unknown>).cache_control = mark;
  return block;
}

function textOf(content: ChatMessage['content'], where: string): string | RelayError {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  let out = '';
  for (const p of content) {
    if (p.type !== 'text' || typeof p.text !== 'string') return invalid(`${where}: only text parts are allowed here`);
    out += (out ? '\n' : '') + p.text;
  }
  return out;
}

function imageBlock(part: Record<string, unknown>, where: string): Block | RelayError {
  const image = part.image_url as { url?: unknown } | string | undefined;
  const url = typeof image === 'string' ? image : image?.url;
  if (typeof url !== 'string' || !url) return invalid(`${where}.image_url.url: required string`);
  const data = DATA_URL.exec(url);
  if (data) return { type: 'image', source: { type: 'base64', media_type: mediaType(data[1]!), data: data[2] } };
  if (url.startsWith('data:')) return invalid(`${where}.image_url.url: a data URL must be base64`);
  return { type: 'image', source: { type: 'url', url } };
}

function fileBlock(part: Record<string, unknown>, where: string): Block | RelayError {
  const file = part.file as { file_data?: unknown } | undefined;
  const data = typeof file?.file_data === 'string' ? DATA_URL.exec(file.file_data) : null;
  if (!data) return invalid(`${where}.file: only file_data as a base64 data URL is served (a file_id names a file stored with OpenAI, which the gateway can neither read nor price)`);
  return { type: 'document', source: { type: 'base64', media_type: mediaType(data[1]!), data: data[2] } };
}

function contentBlocks(content: ChatMessage['content'], where: string, user: boolean): Block[] | RelayError {
  if (content === null || content === undefined) return [];
  if (typeof content === 'string') return isBlank(content) ? [] : [{ type: 'text', text: content }];
  const blocks: Block[] = [];
  for (let i = 0; i < content.length; i++) {
    const p = content[i]!;
    const at = `${where}.${i}`;
    if (p.type === 'text') {
      if (typeof p.text !== 'string') return invalid(`${at}.text: required string`);
      if (!isBlank(p.text)) blocks.push(marked({ type: 'text', text: p.text }, p));
    } else if (p.type === 'refusal' && !user) {
      if (typeof p.refusal === 'string' && !isBlank(p.refusal)) blocks.push(marked({ type: 'text', text: p.refusal }, p));
    } else if (p.type === 'image_url' && user) {
      const b = imageBlock(p, at);
      if (b instanceof RelayError) return b;
      blocks.push(marked(b, p));
    } else if (p.type === 'file' && user) {
      const b = fileBlock(p, at);
      if (b instanceof RelayError) return b;
      blocks.push(marked(b, p));
    } else {
      // Every request is priced in Anthropic's form, whatever its channel: what has no place in it has no price.
      return invalid(p.type === 'input_audio'
        ? `${at}.type: content parts of type "input_audio" are not served by this gateway (audio tokens are priced apart from text, at a price it does not have)`
        : `${at}.type: content parts of type "${p.type}" are not served by this gateway${user || (p.type !== 'image_url' && p.type !== 'file') ? '' : ' in this role'} (it prices text, images and PDF files)`);
    }
  }
  return blocks;
}

/**
 * On a tool_use block, the arguments its call was sent with when they were no JSON object (the block's
 * input is then {}). A symbol: JSON.stringify leaves it out of the body an Anthropic channel is sent.
 */
export const SENT_ARGUMENTS: unique symbol = Symbol('sentArguments');

/**
 * The Anthropic form as the token counter should read it for a request an OpenAI-format channel was
 * sent: each tool_use whose arguments were no object holds their text as its input (prompt-text.ts
 * counts a string input as its text). The form itself when no call had such arguments.
 */
export function countedForm(body: MessagesRequest): string {
  return JSON.stringify(body, function (this: Record<PropertyKey, unknown>, key: string, value: unknown) {
    return key === 'input' && typeof this[SENT_ARGUMENTS] === 'string' ? this[SENT_ARGUMENTS] : value;
  });
}

/** The characters of a tool call id outside Anthropic's pattern for a tool_use id, ^[a-zA-Z0-9_-]+$. */
const OUTSIDE_TOOL_ID = /[^a-zA-Z0-9_-]/g;

/**
 * Tool call ids in the pattern Anthropic takes (400 "tool_use.id: String should match pattern
 * '^[a-zA-Z0-9_-]+$'"). OpenAI takes any string, and histories from other providers carry ids such as
 * Kimi's "functions.get_weather:0", or ids with dots, spaces or slashes. Each character outside the
 * pattern becomes _ (as LiteLLM's _sanitize_anthropic_tool_use_id does, "tool_use_id" for an empty id),
 * and an id already given in this request (two ids alike but for those characters, or one id
 * used by two calls, which Anthropic refuses as duplicate tool_use ids) gets _2, _3...: unique within
 * the request. A tool message's id is given the id of the latest call of that id, which its result
 * answers. Ids are given in the order of the conversation, so a conversation that goes on keeps the
 * ids it was sent with (its cached prefix stays the same). Only the request needs them: the ids of an
 * answer are Anthropic's own.
 */
class ToolIds {
  private readonly latest = new Map<string, string>();
  private readonly given = new Set<string>();
  /**
   * The suffix each base tries next. Tried from 2 every time, the k-th call of one id tried k
   * suffixes: 20,000 calls of one id (a 1.7 MB body) held the event loop 12 s, 40,000 99 s.
   */
  private nextSuffix: Map<string, number> | null = null;

  /** The id of a tool_use: unique in the request. */
  call(id: string): string {
    const base = toolIdPattern(id);
    let out = base;
    if (this.given.has(out)) {
      this.nextSuffix ??= new Map();
      let n = this.nextSuffix.get(base) ?? 2;
      while (this.given.has(`${base}_${n}`)) n++;
      out = `${base}_${n}`;
      this.nextSuffix.set(base, n + 1);
    }
    this.given.add(out);
    this.latest.set(id, out);
    return out;
  }

  /** The id of a tool_result: its call's (the latest of that id); one without a call, in the pattern (Anthropic refuses it as a result without its call). */
  result(id: string): string {
    return this.latest.get(id) ?? toolIdPattern(id);
  }
}

function toolIdPattern(id: string): string {
  return id.replace(OUTSIDE_TOOL_ID, '_') || 'tool_use_id';
}

function toolUses(calls: unknown, where: string, ids: ToolIds, budget: ArgumentsBudget): Block[] | RelayError {
  if (calls === undefined || calls === null) return [];
  if (!Array.isArray(calls)) return invalid(`${where}: must be an array`);
  const out: Block[] = [];
  for (let i = 0; i < calls.length; i++) {
    const c = calls[i] as { id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown } } | null;
    const at = `${where}.${i}`;
    if (!c || typeof c.id !== 'string' || typeof c.function?.name !== 'string') return invalid(`${at}: id and function.name are required strings`);
    const args = c.function.arguments;
    const given = typeof args === 'string' && args.trim() !== '';
    let input: unknown = {};
    if (given) {
      // Bounded before it is parsed: the body's guard (raw-json-guard.ts) does not look inside strings.
      const refused = budget.take(args, `${at}.function.arguments`);
      if (refused !== null) return refused;
      try {
        input = JSON.parse(args);
      } catch {
        // Cut short (finish_reason length) and sent back as it was: OpenAI takes it, Anthropic's
        // tool_use needs an object.
        input = null;
      }
    }
    const object = input !== null && typeof input === 'object' && !Array.isArray(input);
    const block: Block & { [SENT_ARGUMENTS]?: string } = { type: 'tool_use', id: ids.call(c.id), name: c.function.name, input: object ? input : {} };
    // Arguments that are no object go to an Anthropic channel as {}, to an OpenAI-format one as they
    // came: a prompt the relay counts (its provider did not state it: a stream cut before its usage)
    // counts their text for a channel sent them (countedForm), where {} billed 80,000 tokens of them as 33.
    if (given && !object) block[SENT_ARGUMENTS] = args;
    out.push(block);
  }
  return out;
}

/** Deeper than the request body may nest (MAX_JSON_DEPTH, 128), less the ~6 levels that hold a tool_use's input. */
const MAX_ARGUMENTS_DEPTH = 120;
/**
 * The most object keys, and objects, arrays and array items, that the tool-call arguments of one
 * request may hold in all: the body's own fixed limits (MAX_JSON_KEYS, MAX_JSON_VALUES in
 * raw-json-guard.ts), whose costliest bodies JSON.parse in ~55 ms. The body's guard counts a string
 * as one value, and an arguments string of 2.6 million empty objects (7.8 MB) held the event loop
 * 2.6-6 s, before anything was reserved (review http).
 */
export const MAX_ARGUMENTS_KEYS = MAX_JSON_KEYS;
export const MAX_ARGUMENTS_VALUES = MAX_JSON_VALUES;

/**
 * What the tool-call arguments of one request may still hold (MAX_ARGUMENTS_KEYS, _VALUES), and their
 * nesting (MAX_ARGUMENTS_DEPTH), read from each string's characters before it is parsed: keys are
 * the colons outside strings, values the opening brackets and commas. Repeated keys are not refused
 * here, as the body's are: arguments are the model's text, sent back as it wrote them.
 */
class ArgumentsBudget {
  private keys = MAX_ARGUMENTS_KEYS;
  private values = MAX_ARGUMENTS_VALUES;

  /** The refusal of `args` (named `at`), or null with its keys and values taken from what is left. */
  take(args: string, at: string): RelayError | null {
    let keys = 0;
    let values = 0;
    let depth = 0;
    let inString = false;
    let escaped = false;
    for (let i = 0; i < args.length; i++) {
      const c = args.charCodeAt(i);
      if (inString) {
        if (escaped) escaped = false;
        else if (c === 0x5c) escaped = true;
        else if (c === 0x22) inString = false;
      } else if (c === 0x22) {
        inString = true;
      } else if (c === 0x7b || c === 0x5b) {
        // 20,000 levels inside arguments made JSON.stringify of the converted body throw, a 500.
        if (++depth > MAX_ARGUMENTS_DEPTH) return invalid(`${at}: nests objects and arrays more than ${MAX_ARGUMENTS_DEPTH} levels deep`);
        values++;
      } else if (c === 0x7d || c === 0x5d) {
        depth--;
      } else if (c === 0x2c) {
        values++;
      } else if (c === 0x3a) {
        keys++;
      }
    }
    this.keys -= keys;
    this.values -= values;
    if (this.keys < 0) return invalid(`${at}: the tool calls' arguments hold more than ${MAX_ARGUMENTS_KEYS.toLocaleString('en-US')} object keys in all`);
    if (this.values < 0) return invalid(`${at}: the tool calls' arguments hold more than ${MAX_ARGUMENTS_VALUES.toLocaleString('en-US')} JSON values in all (objects, arrays and array items)`);
    return null;
  }
}

function push(turns: Turn[], role: Turn['role'], blocks: Block[]): void {
  if (blocks.length === 0) return;
  const last = turns[turns.length - 1];
  if (last && last.role === role) last.content.push(...blocks);
  else turns.push({ role, content: blocks });
}

function convertTools(chat: ChatRequest): Record<string, unknown> | RelayError {
  const out: Record<string, unknown> = {};
  if (chat.tools && chat.tools.length > 0) {
    const tools: Record<string, unknown>[] = [];
    for (let i = 0; i < chat.tools.length; i++) {
      const t = chat.tools[i]!;
      const f = t.function as { name?: unknown; description?: unknown; parameters?: unknown } | undefined;
      if (t.type !== 'function' || typeof f?.name !== 'string') return invalid(`tools.${i}: only function tools with a name are supported (custom tools are not: the gateway meters a tool call by its function arguments)`);
      const params = f.parameters && typeof f.parameters === 'object' && !Array.isArray(f.parameters) ? f.parameters as Record<string, unknown> : null;
      const schema = params === null ? { type: 'object', properties: {} } : params.type === undefined ? { type: 'object', ...params } : params;
      const tool: Record<string, unknown> = { name: f.name, input_schema: schema };
      if (typeof f.description === 'string') tool.description = f.description;
      tools.push(marked(tool, t));
    }
    out.tools = tools;
  }
  const choice = chat.tool_choice;
  let toolChoice: Record<string, unknown> | undefined;
  if (choice === 'auto') toolChoice = { type: 'auto' };
  else if (choice === 'none') toolChoice = { type: 'none' };
  else if (choice === 'required') toolChoice = { type: 'any' };
  else if (typeof choice === 'string') return invalid(`tool_choice: "${choice}" is not one of auto, none, required`);
  else if (choice && typeof choice === 'object' && choice.type === 'allowed_tools') {
    const allowed = allowedTools(chat);
    if (allowed instanceof RelayError) return allowed;
    // The tools themselves are narrowed for an Anthropic channel only (narrowedTools): the request is
    // priced with every tool it sends an OpenAI-format provider.
    toolChoice = { type: allowed!.required ? 'any' : 'auto' };
  } else if (choice && typeof choice === 'object') {
    const name = (choice.function as { name?: unknown } | undefined)?.name;
    if (choice.type !== 'function' || typeof name !== 'string') return invalid('tool_choice: a named choice needs type "function" and function.name, or type "allowed_tools"');
    toolChoice = { type: 'tool', name };
  }
  if (chat.parallel_tool_calls === false && out.tools && toolChoice?.type !== 'none') toolChoice = { ...(toolChoice ?? { type: 'auto' }), disable_parallel_tool_use: true };
  if (toolChoice && out.tools) out.tool_choice = toolChoice;
  return out;
}

/**
 * tool_choice `{type: "allowed_tools", allowed_tools: {mode: "auto" | "required", tools: [{type:
 * "function", function: {name}}]}}`: the model may call only the tools named, which must be among the
 * request's tools. null when the choice is of another kind.
 */
export function allowedTools(chat: ChatRequest): { required: boolean; names: Set<string> } | null | RelayError {
  const choice = chat.tool_choice;
  if (!choice || typeof choice !== 'object' || choice.type !== 'allowed_tools') return null;
  const spec = choice.allowed_tools as { mode?: unknown; tools?: unknown } | undefined;
  if (!spec || typeof spec !== 'object') return invalid('tool_choice.allowed_tools: required object');
  if (spec.mode !== 'auto' && spec.mode !== 'required') return invalid('tool_choice.allowed_tools.mode: must be "auto" or "required"');
  if (!Array.isArray(spec.tools) || spec.tools.length === 0) return invalid('tool_choice.allowed_tools.tools: a non-empty array is required');
  const declared = new Set((chat.tools ?? []).map((t) => (t.function as { name?: unknown } | undefined)?.name));
  const names = new Set<string>();
  for (let i = 0; i < spec.tools.length; i++) {
    const t = spec.tools[i] as { type?: unknown; function?: { name?: unknown } } | null;
    const name = t?.function?.name;
    if (t?.type !== 'function' || typeof name !== 'string') return invalid(`tool_choice.allowed_tools.tools.${i}: needs type "function" and function.name`);
    if (!declared.has(name)) return invalid(`tool_choice.allowed_tools.tools.${i}: no tool named "${name}" is in tools`);
    names.add(name);
  }
  return { required: spec.mode === 'required', names };
}

/** The converted tools an Anthropic channel is sent: those an allowed_tools choice names, else all (undefined: unchanged). */
export function narrowedTools(chat: ChatRequest, body: MessagesRequest): Array<Record<string, unknown>> | undefined {
  const allowed = allowedTools(chat);
  const tools = body.tools;
  if (!allowed || allowed instanceof RelayError || !Array.isArray(tools)) return undefined;
  return (tools as Array<Record<string, unknown>>).filter((t) => allowed.names.has(t.name as string));
}

/** Service tiers the provider bills at most at the model's standard price, which the ratios express. */
const PRICED_SERVICE_TIERS = new Set(['auto', 'default', 'flex']);

/**
 * Fields that make an OpenAI-format provider bill what the relay can neither price nor bound, refused
 * whatever the channel (money bound, docs/billing.md): audio output (audio tokens, priced apart),
 * web search (a fee per search the usage does not report), predicted outputs (rejected prediction
 * tokens billed beyond max_completion_tokens), service tiers dearer than the standard price; and the
 * paid extras of OpenAI-compatible providers, which pass through to them as unknown fields do: xAI's
 * Live Search (`search_parameters`, a fee per source), OpenRouter's `plugins` (web results, PDF
 * parsing: a fee each; an empty list asks for none) and `models` (fallbacks: another model answers,
 * at its own price), DashScope's `enable_search` (Qwen's web search, a fee per search).
 */
export function unpricedFieldRefusal(chat: ChatRequest): RelayError | null {
  const c = chat as Record<string, unknown>;
  if (c.audio !== undefined && c.audio !== null) return invalid('audio: audio output is not served by this gateway');
  const modalities = c.modalities;
  // Not an array (OpenAI refuses a string; a looser provider may read "audio" as asked): refused too.
  if (modalities !== undefined && modalities !== null && !(Array.isArray(modalities) && modalities.every((m) => m === 'text'))) return invalid('modalities: only ["text"] is served by this gateway');
  if (c.web_search_options !== undefined && c.web_search_options !== null) return invalid('web_search_options: web search is not served on /v1/chat/completions by this gateway');
  if (c.prediction !== undefined && c.prediction !== null) return invalid('prediction: predicted outputs are not served by this gateway');
  const tier = c.service_tier;
  if (tier !== undefined && tier !== null && !(typeof tier === 'string' && PRICED_SERVICE_TIERS.has(tier))) return invalid('service_tier: only "auto", "default" and "flex" are served by this gateway');
  if (c.search_parameters !== undefined && c.search_parameters !== null) return invalid('search_parameters: live search is not served by this gateway (billed per source, beyond the request\'s tokens)');
  if (c.plugins !== undefined && c.plugins !== null && !(Array.isArray(c.plugins) && c.plugins.length === 0)) return invalid('plugins: provider plugins are not served by this gateway (billed beyond the request\'s tokens)');
  if (c.models !== undefined && c.models !== null) return invalid('models: model fallbacks are not served by this gateway (the request is priced for its `model`)');
  if (c.enable_search !== undefined && c.enable_search !== null && c.enable_search !== false) return invalid('enable_search: web search is not served by this gateway (billed per search, beyond the request\'s tokens)');
  return null;
}

/**
 * What an Anthropic channel cannot carry, checked when the request is routed to one (an OpenAI-format
 * channel passes it): no message with content, several choices, a response format other than text,
 * log probabilities.
 */
export function anthropicOnlyRefusal(chat: ChatRequest, body: MessagesRequest): RelayError | null {
  if (body.messages.length === 0) return invalid('messages: at least one user or assistant message with content is required by this model\'s provider');
  if (chat.n !== undefined && chat.n !== null && chat.n > 1) return invalid('n: only 1 choice is generated by this model\'s provider');
  const format = (chat as { response_format?: { type?: unknown } | null }).response_format;
  if (format && format.type !== 'text' && format.type !== 'json_schema') {
    return invalid('response_format: "text" and "json_schema" are converted for this model\'s provider (its structured outputs need a schema)');
  }
  // chatToMessages converted a usable schema to output_config.format already.
  if (format?.type === 'json_schema' && body.output_config === undefined) return invalid('response_format.json_schema.schema: a JSON Schema object is required by this model\'s provider');
  const logprobs = (chat as { logprobs?: unknown }).logprobs;
  if (logprobs === true) return invalid('logprobs: log probabilities are not returned by this model\'s provider');
  if (logprobs !== undefined && logprobs !== null && logprobs !== false) return invalid('logprobs: must be a boolean');
  const effort = (chat as { reasoning_effort?: unknown }).reasoning_effort;
  if (effort !== undefined && effort !== null && !(typeof effort === 'string' && REASONING_EFFORTS.has(effort))) {
    return invalid(`reasoning_effort: must be one of ${[...REASONING_EFFORTS].map((e) => `"${e}"`).join(', ')}`);
  }
  return null;
}

/**
 * The request in Anthropic's form: what an Anthropic channel is sent (after anthropicOnlyRefusal),
 * and what every request is priced and reserved by (max_tokens is the output bound of one choice).
 */
export function chatToMessages(chat: ChatRequest, defaultMaxTokens = DEFAULT_MAX_TOKENS): MessagesRequest | RelayError {
  const unpriced = unpricedFieldRefusal(chat);
  if (unpriced) return unpriced;
  if ((chat as { functions?: unknown }).functions !== undefined) return invalid('functions: deprecated; send tools instead');
  // As OpenAI refuses them: a request for usage in a stream that is not one, and a tool call demanded
  // with no tool to call (the choice was dropped and a text answered, where the client forced a call).
  if (chat.stream_options != null && chat.stream !== true) return invalid('stream_options: only allowed when stream is true');
  const demandsTool = chat.tool_choice != null && chat.tool_choice !== 'auto' && chat.tool_choice !== 'none';
  if (demandsTool && (chat.tools == null || chat.tools.length === 0)) return invalid('tool_choice: only allowed when tools are specified');

  // Each system message's text as a block; a message a part of which sets a breakpoint, its parts as
  // blocks each with its own (systemMarked: then the blocks are sent, else their texts joined).
  const systemBlocks: Block[] = [];
  let systemMarked = false;
  const systemText = (): string => systemBlocks.map((b) => b.text).join('\n\n');
  const turns: Turn[] = [];
  const ids = new ToolIds();
  const argumentsBudget = new ArgumentsBudget();
  for (let i = 0; i < chat.messages.length; i++) {
    const m = chat.messages[i]!;
    const where = `messages.${i}`;
    if (m.role === 'system' || m.role === 'developer') {
      const text = textOf(m.content, `${where}.content`);
      if (text instanceof RelayError) return text;
      // Joined into one string, a blank one adds only blank lines (and alone, a system of whitespace).
      if (!isBlank(text)) {
        const blocks = markedTextBlocks(m.content);
        if (blocks !== null) systemMarked = true;
        systemBlocks.push(...(blocks ?? [{ type: 'text', text }]));
      }
    } else if (m.role === 'user') {
      const blocks = contentBlocks(m.content, `${where}.content`, true);
      if (blocks instanceof RelayError) return blocks;
      // A user message of nothing, or of whitespace alone: marked, so that it keeps its turn where
      // leaving it out would leave none (settleBlankUserMessages).
      push(turns, 'user', blocks.length > 0 ? blocks : [BLANK_USER_MESSAGE]);
    } else if (m.role === 'assistant') {
      const blocks = contentBlocks(m.content, `${where}.content`, false);
      if (blocks instanceof RelayError) return blocks;
      // The assistant's refusal (its message-level `refusal`, content null) is what it said: as a
      // refusal part in content is, it stays in the conversation, else the turn vanished and the
      // user turns around it merged.
      const refusal = (m as { refusal?: unknown }).refusal;
      if (typeof refusal === 'string' && !isBlank(refusal)) blocks.push({ type: 'text', text: refusal });
      const uses = toolUses(m.tool_calls, `${where}.tool_calls`, ids, argumentsBudget);
      if (uses instanceof RelayError) return uses;
      push(turns, 'assistant', [...blocks, ...uses]);
    } else if (m.role === 'tool') {
      if (typeof m.tool_call_id !== 'string' || !m.tool_call_id) return invalid(`${where}.tool_call_id: required string`);
      const text = textOf(m.content, `${where}.content`);
      if (text instanceof RelayError) return text;
      const result: Block = { type: 'tool_result', tool_use_id: ids.result(m.tool_call_id) };
      // content is optional in a tool_result: a result of nothing, or of whitespace alone, goes
      // without it, so no text of whitespace can be refused in it.
      const blocks = markedTextBlocks(m.content);
      if (blocks !== null && blocks.length > 0) result.content = blocks;
      else if (!isBlank(text)) result.content = text;
      push(turns, 'user', [result]);
    } else {
      return invalid(`${where}.role: "function" messages are deprecated; send tool messages instead`);
    }
  }
  settleBlankUserMessages(turns);
  trimFinalAssistantTurn(turns);
  // System messages alone: OpenAI answers them; Anthropic needs a user turn, so they are one.
  if (turns.length === 0 && systemBlocks.length > 0) {
    push(turns, 'user', systemMarked ? systemBlocks.slice() : [{ type: 'text', text: systemText() }]);
    systemBlocks.length = 0;
  }
  // No turn with content (only empty or blank user messages, say): an OpenAI-format provider answers
  // it, so it is priced as it is (no messages) and refused only on its way to an Anthropic channel
  // (anthropicOnlyRefusal).

  const tools = convertTools(chat);
  if (tools instanceof RelayError) return tools;
  const body: MessagesRequest = {
    model: chat.model,
    messages: turns as MessagesRequest['messages'],
    max_tokens: chat.max_completion_tokens ?? chat.max_tokens ?? defaultMaxTokens,
    ...tools,
  };
  // One string, as ever, unless a part of a system message sets a breakpoint: then blocks, each part's with its own.
  if (systemBlocks.length > 0) body.system = systemMarked ? systemBlocks as MessagesRequest['system'] : systemText();
  if (chat.stream === true) body.stream = true;
  if (typeof chat.temperature === 'number') body.temperature = Math.min(1, chat.temperature);
  else if (typeof chat.top_p === 'number') body.top_p = chat.top_p;
  if (chat.stop !== undefined && chat.stop !== null) {
    const stops = (typeof chat.stop === 'string' ? [chat.stop] : chat.stop).filter((x) => typeof x === 'string' && x.trim() !== '');
    if (stops.length > 0) body.stop_sequences = stops;
  }
  if (chat.user) body.metadata = { user_id: createHash('sha256').update(chat.user).digest('hex') };
  const schema = jsonSchemaFormat(chat);
  if (schema !== null) body.output_config = { format: { type: 'json_schema', schema } };
  const thinking = thinkingFor(chat, body);
  if (thinking !== null) {
    body.thinking = thinking;
    // Extended thinking takes neither a temperature nor top_p below 0.95 (Anthropic refuses them),
    // and OpenAI's reasoning models take no temperature either: an app sends them out of habit.
    delete body.temperature;
    delete body.top_p;
  }
  return body;
}

/**
 * What a user message of nothing, or of whitespace alone, says to Anthropic where its turn has nothing
 * else: new-api's placeholder for an empty message (relay/channel/claude/relay-claude.go, "..."). A
 * short one, since the model reads it: LiteLLM's "[System: Empty message content sanitised to satisfy
 * protocol]" (modify_params) is known to be echoed back by models into their answers (LiteLLM #24498).
 */
const BLANK_USER_PLACEHOLDER = '...';
/** The mark of a blank user message while the turns are built (compared by identity; never sent). */
const BLANK_USER_MESSAGE: Block = Object.freeze({ type: 'text', text: BLANK_USER_PLACEHOLDER });

/**
 * A blank user message (marked BLANK_USER_MESSAGE) is left out of a user turn that has content
 * (after tool results, or beside another user message: the turn stands without it). Where it is the
 * user's whole turn it stands as BLANK_USER_PLACEHOLDER: left out, the assistant's message before it
 * would end the conversation and be continued as a prefill instead of answered (OpenAI answers the
 * blank message), or two assistant turns would merge, or the conversation open with the assistant.
 * A conversation with nothing but blank messages has no turn: refused on its way to an Anthropic
 * channel as one of empty messages is (anthropicOnlyRefusal), the system text standing as the user's
 * turn if there is one.
 */
function settleBlankUserMessages(turns: Turn[]): void {
  if (turns.every((t) => t.content.every((b) => b === BLANK_USER_MESSAGE))) {
    turns.length = 0;
    return;
  }
  for (const turn of turns) {
    if (!turn.content.includes(BLANK_USER_MESSAGE)) continue;
    const rest = turn.content.filter((b) => b !== BLANK_USER_MESSAGE);
    turn.content = rest.length > 0 ? rest : [{ type: 'text', text: BLANK_USER_PLACEHOLDER }];
  }
}

/**
 * A conversation that ends with an assistant message is, to Anthropic, an answer to continue (a
 * prefill), whose text may not end in whitespace (a 400: "final assistant content cannot end with
 * trailing whitespace"); OpenAI takes it as it is. Its trailing whitespace is dropped, and a turn left
 * with nothing is dropped too.
 */
function trimFinalAssistantTurn(turns: Turn[]): void {
  const last = turns.at(-1);
  if (last === undefined || last.role !== 'assistant') return;
  const block = last.content.at(-1);
  if (block === undefined || block.type !== 'text' || typeof block.text !== 'string') return;
  const text = block.text.trimEnd();
  if (text !== '') last.content[last.content.length - 1] = { ...block, text };
  else last.content.pop();
  if (last.content.length === 0) turns.pop();
}

/**
 * The schema of `response_format: {type: "json_schema", json_schema: {schema}}`, for Anthropic's
 * structured outputs (`output_config.format`, generally available: no beta header), whose answer is
 * a text block holding the JSON, as OpenAI's content does; null for any other response_format. The
 * schema goes as it is: what Anthropic's structured outputs do not support it refuses (400, passed on).
 */
function jsonSchemaFormat(chat: ChatRequest): Record<string, unknown> | null {
  const format = (chat as { response_format?: { type?: unknown; json_schema?: { schema?: unknown } | null } | null }).response_format;
  if (!format || format.type !== 'json_schema') return null;
  const schema = format.json_schema?.schema;
  return schema !== null && typeof schema === 'object' && !Array.isArray(schema) ? schema as Record<string, unknown> : null;
}

/**
 * The thinking budget of each `reasoning_effort` (LiteLLM's: what OpenAI clients of Claude through a
 * gateway meet elsewhere). `none` and `minimal` ask for no reasoning.
 */
export const THINKING_BUDGET: Readonly<Record<string, number>> = { low: 1024, medium: 2048, high: 4096, xhigh: 8192 };
/** The values of `reasoning_effort` OpenAI takes (`none` and `minimal` ask for no reasoning). */
const REASONING_EFFORTS: ReadonlySet<string> = new Set(['none', 'minimal', ...Object.keys(THINKING_BUDGET)]);
/**
 * The most of max_tokens the thinking may take: the rest is the answer's. At max_tokens − 1 (the most
 * Anthropic allows), an effort above the bound left the answer a single token.
 */
const THINKING_SHARE = 0.75;
/** Anthropic's smallest thinking budget. */
const MIN_THINKING_BUDGET = 1024;

/**
 * Extended thinking for a `reasoning_effort`, or null. The budget is bounded by THINKING_SHARE of
 * max_tokens, which holds the thinking as OpenAI's max_completion_tokens holds the reasoning (so the
 * reservation, made on max_tokens, bounds it); below Anthropic's minimum there is no room to think and
 * none is asked.
 * None either where Anthropic would refuse it: a forced tool choice, or a conversation that goes on
 * from an assistant turn (a prefill, or tool results answering its tool calls), whose thinking blocks
 * an OpenAI client does not send back and Anthropic requires first in that turn.
 */
function thinkingFor(chat: ChatRequest, body: MessagesRequest): { type: 'enabled'; budget_tokens: number } | null {
  const effort = (chat as { reasoning_effort?: unknown }).reasoning_effort;
  // Own keys only: "constructor" would read Object's.
  const wanted = typeof effort === 'string' && Object.hasOwn(THINKING_BUDGET, effort) ? THINKING_BUDGET[effort] : undefined;
  if (wanted === undefined) return null;
  const budget = Math.min(wanted, Math.floor(body.max_tokens * THINKING_SHARE));
  if (budget < MIN_THINKING_BUDGET) return null;
  const choice = (body as { tool_choice?: { type?: unknown } }).tool_choice;
  if (choice?.type === 'any' || choice?.type === 'tool') return null;
  const last = body.messages.at(-1) as Turn | undefined;
  if (last === undefined || last.role === 'assistant') return null;
  if (last.content.some((b) => b.type === 'tool_result')) return null;
  return { type: 'enabled', budget_tokens: budget };
}
