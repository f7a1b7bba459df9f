// Whether a request's bytes bound its input tokens, read from the parsed body without copying it
// (docs/billing.md, "Reserve"). A token is at least one byte of the text it encodes, so a body made of
// text alone costs at most its byte length. An image (by URL, file_id or base64) costs at most a bound of
// its model's (InputBounds.imageTokenBound, core/pricing/input-bound.ts) where one is known: it is
// counted at that bound, and its base64 data, which the provider does not read as text, is taken out
// of the bytes. Anything else the provider turns into tokens it does not take from those bytes (an
// image of a model without a bound, a PDF or other document, search results, a container upload,
// server tools and their results, MCP servers, a block type this code does not know) is bounded only
// by the model's context window. Client tools are text, but the provider wraps them in a hidden system
// prompt: a fixed allowance covers it.
import type { MessagesRequest } from './messages-request.js';

/** inputBeyondBytes().extra: the bytes do not bound the input; reserve the context window. */
export const UNBOUNDED = -1;
/** Anthropic's tool-use system prompt is 313 to 346 tokens on current models; kept well above. */
export const TOOL_PROMPT_TOKENS = 1_000;
/** Per client tool: the wrapping of each definition in that prompt. */
export const PER_TOOL_TOKENS = 64;

type Block = { type: string; content?: unknown };

/** What bounds a request's input besides its bytes (inputBeyondBytes). */
export interface InputBeyondBytes {
  /** Tokens the provider adds beyond the bytes (the tools' prompt, the images at their bound), or UNBOUNDED. */
  extra: number;
  /**
   * Characters of the images' base64 data: bytes of the body the provider reads as images, not as
   * text, taken out of the byte bound (each is at least a byte of the body, so the rest still bounds
   * the text). 0 when `extra` is UNBOUNDED.
   */
  imageDataChars: number;
  /** Image blocks in the prompt (counted while `extra` is not UNBOUNDED). */
  images: number;
}

/**
 * What the request's input costs beyond its text bytes. `imageTokenBound`: the most an image costs on
 * the models the request may be sent (undefined when one of them has no known bound: an image then
 * makes the input UNBOUNDED, the window's).
 */
export function inputBeyondBytes(body: MessagesRequest, imageTokenBound: number | undefined): InputBeyondBytes {
  references.length = 0;
  imageCount.images = 0;
  imageCount.dataChars = 0;
  imageCount.bound = imageTokenBound;
  const extra = extraTokens(body);
  if (extra === UNBOUNDED) return { extra, imageDataChars: 0, images: 0 };
  // Images passed contentIsText only with a bound: none were counted without one.
  const images = imageCount.images;
  return { extra: images === 0 ? extra : extra + images * imageTokenBound!, imageDataChars: imageCount.dataChars, images };
}

function extraTokens(body: MessagesRequest): number {
  if (!contentIsText(body.system)) return UNBOUNDED;
  const messages = body.messages;
  for (let i = 0; i < messages.length; i++) if (!contentIsText(messages[i]!.content)) return UNBOUNDED;
  const b = body as Record<string, unknown>;
  if (namesMcpServers(b)) return UNBOUNDED;
  const tools = b.tools;
  if (tools === undefined) return references.length === 0 ? 0 : UNBOUNDED;
  if (!Array.isArray(tools)) return UNBOUNDED;
  if (tools.length === 0) return references.length === 0 ? 0 : UNBOUNDED;
  for (let i = 0; i < tools.length; i++) {
    const t = tools[i] as { type?: unknown } | null;
    // A typed tool (web_search_…, bash_…, computer_…, code_execution_…) is the provider's: its
    // prompt, and for server tools the results it adds to the input, are not in the request.
    if (t === null || typeof t !== 'object' || (t.type !== undefined && t.type !== 'custom')) return UNBOUNDED;
  }
  const referenced = referencedDefinitionBytes(tools);
  return referenced === UNBOUNDED ? UNBOUNDED : TOOL_PROMPT_TOKENS + PER_TOOL_TOKENS * tools.length + referenced;
}

/** The formats Anthropic takes as an image (its vision guide), the media types a base64 image may name. */
const IMAGE_MEDIA_TYPES: ReadonlySet<string> = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);

/** The images contentIsText met in the body (reset per body), and the bound that lets it pass them. */
const imageCount: { images: number; dataChars: number; bound: number | undefined } = { images: 0, dataChars: 0, bound: undefined };

/** Whether the request names MCP servers (an empty list names none): the provider loads their tools. */
function namesMcpServers(b: Record<string, unknown>): boolean {
  const mcp = b.mcp_servers;
  return mcp !== undefined && !(Array.isArray(mcp) && mcp.length === 0);
}

/** The tool names of the body's tool_reference blocks, collected by contentIsText (reset per body). */
const references: string[] = [];

/**
 * A tool_reference block has the provider load the definition of the tool it names: the bytes hold
 * that definition once, in `tools`, and each reference is bounded by it again (whether the provider
 * loads it once a reference or once in all, a bound either way). A name no tool of the request has is
 * not bounded by the bytes.
 */
function referencedDefinitionBytes(tools: readonly unknown[]): number {
  if (references.length === 0) return 0;
  // A session references the same tools turn after turn: each definition is found and measured once.
  const sizes = new Map<string, number>();
  let bytes = 0;
  for (let r = 0; r < references.length; r++) {
    const name = references[r]!;
    let size = sizes.get(name);
    if (size === undefined) {
      const tool = tools.find((t) => (t as { name?: unknown }).name === name);
      if (tool === undefined) return UNBOUNDED;
      size = Buffer.byteLength(JSON.stringify(tool));
      sizes.set(name, size);
    }
    bytes += size;
  }
  return bytes;
}

/** How many web searches the request may make: Σ max_uses of its web_search tools (a default when unset). */
export function webSearchUses(body: MessagesRequest, defaultMaxUses: number): number {
  const tools = (body as Record<string, unknown>).tools;
  if (!Array.isArray(tools)) return 0;
  let n = 0;
  for (let i = 0; i < tools.length; i++) {
    const max = webSearchMaxUses(tools[i]);
    if (max !== undefined) n += max ?? defaultMaxUses;
  }
  return n;
}

/**
 * The request's tools with `max_uses` set on each web_search tool that sets none, or null when every
 * one sets it (or there is none). Anthropic sets no cap of its own: such a tool could search more
 * often than the `defaultMaxUses` it was reserved (and is billed at most) for; sent with that bound,
 * the provider stops there.
 */
export function boundedWebSearchTools(body: MessagesRequest, defaultMaxUses: number): unknown[] | null {
  const tools = (body as Record<string, unknown>).tools;
  if (!Array.isArray(tools)) return null;
  let out: unknown[] | null = null;
  for (let i = 0; i < tools.length; i++) {
    if (webSearchMaxUses(tools[i]) !== null) continue;
    out ??= tools.slice();
    out[i] = { ...(tools[i] as object), max_uses: defaultMaxUses };
  }
  return out;
}

/**
 * Anthropic's server-side sampling loop: a request with server tools is answered `pause_turn` after at
 * most 10 iterations (its stop reasons' reference; the limit the SDKs' tool runners continue from).
 */
export const SERVER_LOOP_MAX_PASSES = 10;
/** Typed tools the client runs (the model only asks for them): each answer is one sampling pass. */
const CLIENT_TOOL_PREFIXES = ['bash_', 'computer_', 'text_editor_', 'memory_', 'browser_toolset_'];

/**
 * How many times the provider may read the request's prompt in one answer. Once, but for a request
 * with server tools that loop (web search, web fetch, tool search, an MCP toolset or server, or a
 * typed tool this code does not know): each tool use is followed by another sampling pass over the
 * whole context, and the usage Anthropic states and bills is the sum of the passes' (cumulative input
 * tokens). So up to one pass more than the tools' uses (Σ max_uses of web_search, the default injected
 * where it sets none, and web_fetch), at most SERVER_LOOP_MAX_PASSES; a tool without such a bound, the
 * most. Before, such a prompt was bounded and billed at one window: 480,000 tokens over four passes
 * were billed 200,000.
 */
export function promptPasses(body: MessagesRequest, defaultSearchUses: number): number {
  const b = body as Record<string, unknown>;
  if (namesMcpServers(b)) return SERVER_LOOP_MAX_PASSES;
  const tools = b.tools;
  if (!Array.isArray(tools)) return 1;
  let uses = 0;
  for (let i = 0; i < tools.length; i++) {
    const t = tools[i] as { type?: unknown; max_uses?: unknown } | null;
    const type = t?.type;
    if (type === undefined || type === 'custom') continue;
    if (typeof type !== 'string') return SERVER_LOOP_MAX_PASSES;
    if (CLIENT_TOOL_PREFIXES.some((p) => type.startsWith(p))) continue;
    const max = t!.max_uses;
    const bounded = typeof max === 'number' && Number.isInteger(max) && max >= 0;
    if (type.startsWith('web_search')) uses += bounded ? max : defaultSearchUses;
    else if (type.startsWith('web_fetch') && bounded) uses += max;
    else return SERVER_LOOP_MAX_PASSES;
    if (uses + 1 >= SERVER_LOOP_MAX_PASSES) return SERVER_LOOP_MAX_PASSES;
  }
  return uses + 1;
}

/** Whether a tool of this type is a web_search tool (any of its versions). */
export function isWebSearchType(type: string): boolean {
  return type.startsWith('web_search');
}

/** A web_search tool's max_uses as this gateway takes it: a whole number of searches, 0 or more (unpriced-fields.ts refuses another). */
export function isWebSearchMaxUses(max: unknown): max is number {
  return Number.isSafeInteger(max) && (max as number) >= 0;
}

/** A web_search tool's own max_uses, null when it sets none (or an invalid one); undefined for any other tool. */
function webSearchMaxUses(tool: unknown): number | null | undefined {
  const t = tool as { type?: unknown; max_uses?: unknown } | null;
  if (t === null || typeof t !== 'object' || typeof t.type !== 'string' || !isWebSearchType(t.type)) return undefined;
  return isWebSearchMaxUses(t.max_uses) ? t.max_uses : null;
}

function contentIsText(content: unknown): boolean {
  if (content === undefined || typeof content === 'string') return true;
  if (!Array.isArray(content)) return false;
  for (let i = 0; i < content.length; i++) {
    const block = content[i] as Block | null;
    if (block === null || typeof block !== 'object') return false;
    switch (block.type) {
      case 'text':
      case 'tool_use':
      case 'thinking':
        break;
      // A tool search's result (Claude Code's ToolSearch): it names a tool of the request's `tools`,
      // whose definition the provider then loads (referencedDefinitionBytes).
      case 'tool_reference': {
        const name = (block as { tool_name?: unknown }).tool_name;
        if (typeof name !== 'string') return false;
        references.push(name);
        break;
      }
      case 'tool_result':
        // Its content may hold images, documents or search results in turn.
        if (!contentIsText(block.content)) return false;
        break;
      // By URL, file_id or base64 alike, an image costs at most its model's bound; base64 data is
      // taken out of the bytes (a string's characters are each at least a byte of the body).
      case 'image': {
        if (imageCount.bound === undefined) return false;
        const source = (block as { source?: unknown }).source as { type?: unknown; data?: unknown; media_type?: unknown } | null | undefined;
        if (source === null || typeof source !== 'object') return false;
        if (source.type === 'base64') {
          // Only an image format's bytes are an image's: other data under an image's name (a PDF, text)
          // is what a lenient provider may read otherwise; it keeps the window.
          if (typeof source.data !== 'string' || typeof source.media_type !== 'string' || !IMAGE_MEDIA_TYPES.has(source.media_type)) return false;
          imageCount.dataChars += source.data.length;
        } else if (source.type !== 'url' && source.type !== 'file') return false;
        imageCount.images++;
        break;
      }
      default:
        return false;
    }
  }
  return true;
}
