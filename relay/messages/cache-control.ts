// How a request can touch the prompt cache: Anthropic reads or writes it only at a cache_control
// breakpoint (on the request itself for automatic caching, on a system block, a tool, a message's
// content block or a block nested in one: a tool result's, a search result's, a document's content), and writes it for an hour only at a breakpoint with ttl
// "1h" (5 minutes otherwise). A request without a breakpoint is billed its input at 1×, one without
// an hour's breakpoint its writes at the 5-minute ratio, and its reservation need not price input at
// a dearer ratio than those (core/pricing quotaCostBound). Checked on the parsed body, so an escaped
// key (`"cache\u005fcontrol"`) is found too; no allocation.
import type { CacheUse } from '../../core/pricing/quota-cost.js';
import type { MessagesRequest } from './messages-request.js';

export function cacheUseOf(body: MessagesRequest): CacheUse {
  let use = breakpoint(body);
  if (use === '1h') return use;
  if (Array.isArray(body.system)) use = widest(use, anyMarked(body.system, MAX_NESTING));
  if (use === '1h') return use;
  return widest(use, cacheUseOfChat(body));
}

/**
 * The same for a Chat Completions request, whose content parts carry `cache_control` as Anthropic's
 * blocks do (DashScope's explicit cache, an OpenAI-format proxy of Claude): passed to an OpenAI-format
 * provider as they are, they may make it write the cache, billed as writes only where a part marks
 * one. The request itself is read, not its Messages form: that form (from-chat.ts) carries the marks
 * of parts it keeps, but a mark on a part it leaves out (a blank text) still counts here, so the
 * reservation is never below what the form sent can write.
 */
export function cacheUseOfChat(chat: { messages: ReadonlyArray<{ content?: unknown }>; tools?: unknown }): CacheUse {
  // Its tools' and messages' breakpoints, found as in a Messages request (whose cacheUseOf adds the
  // request's own and its system blocks'): both protocols put cache_control on the same shapes.
  let use: CacheUse = 'none';
  const tools = chat.tools;
  if (Array.isArray(tools)) use = anyMarked(tools, 0);
  const messages = chat.messages;
  for (let i = 0; i < messages.length && use !== '1h'; i++) {
    const content = messages[i]!.content;
    if (Array.isArray(content)) use = widest(use, anyMarked(content, MAX_NESTING));
  }
  return use;
}

/**
 * How deep blocks are looked into for a breakpoint: a tool result's blocks, a search result's text
 * blocks inside one, a document's `source.content` blocks (type "content"), and so on. The edge's
 * depth bound (relay/edge-schema.ts) stops a body long before; this only bounds the walk.
 */
const MAX_NESTING = 16;

function widest(a: CacheUse, b: CacheUse): CacheUse {
  return a === '1h' || b === '1h' ? '1h' : a === '5m' || b === '5m' ? '5m' : 'none';
}

/** The breakpoint an object carries: none, or its TTL (Anthropic's default is 5 minutes). */
function breakpoint(o: unknown): CacheUse {
  if (typeof o !== 'object' || o === null) return 'none';
  const cc = (o as { cache_control?: unknown }).cache_control;
  if (cc == null) return 'none';
  return (cc as { ttl?: unknown }).ttl === '1h' ? '1h' : '5m';
}

/**
 * The widest breakpoint of the blocks and (depth > 0) of the blocks nested in them: a block's
 * `content` array (a tool result's, a search result's) and a document's `source.content`. Only one
 * level was looked into: a breakpoint on a search result's text inside a tool result, or in a
 * document's content source, was missed, and the cache writes it caused billed as plain input.
 */
function anyMarked(blocks: readonly unknown[], depth: number): CacheUse {
  let use: CacheUse = 'none';
  for (let i = 0; i < blocks.length && use !== '1h'; i++) {
    const b = blocks[i];
    use = widest(use, breakpoint(b));
    if (depth > 0 && use !== '1h' && typeof b === 'object' && b !== null) {
      const inner = (b as { content?: unknown }).content;
      if (Array.isArray(inner)) use = widest(use, anyMarked(inner, depth - 1));
      const source = (b as { source?: unknown }).source;
      const sourced = typeof source === 'object' && source !== null ? (source as { content?: unknown }).content : undefined;
      if (use !== '1h' && Array.isArray(sourced)) use = widest(use, anyMarked(sourced, depth - 1));
    }
  }
  return use;
}
