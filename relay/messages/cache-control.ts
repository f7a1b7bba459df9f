// Whether a request can touch the prompt cache: Anthropic reads or writes it only at a cache_control
// breakpoint (on the request itself for automatic caching, on a system block, a tool, a message's
// content block or a tool result's block), so a request without one is billed its input at 1× and its
// reservation need not price input at the dearest cache ratio (core/pricing quotaCostBound). Checked on
// the parsed body, so an escaped key (`"cache\u005fcontrol"`) is found too; no allocation.
import type { MessagesRequest } from './messages-request.js';

export function mayUseCache(body: MessagesRequest): boolean {
  if (marked(body)) return true;
  if (Array.isArray(body.system) && anyMarked(body.system, 1)) return true;
  const tools = (body as { tools?: unknown }).tools;
  if (Array.isArray(tools) && anyMarked(tools, 0)) return true;
  const messages = body.messages;
  for (let i = 0; i < messages.length; i++) {
    const content = messages[i]!.content;
    if (Array.isArray(content) && anyMarked(content, 1)) return true;
  }
  return false;
}

function marked(o: unknown): boolean {
  return typeof o === 'object' && o !== null && (o as { cache_control?: unknown }).cache_control != null;
}

/** A block carries a breakpoint, or (depth > 0) a block of its `content` array does (tool results). */
function anyMarked(blocks: readonly unknown[], depth: number): boolean {
  for (let i = 0; i < blocks.length; i++) {
    const b = blocks[i];
    if (marked(b)) return true;
    if (depth > 0) {
      const inner = (b as { content?: unknown } | null)?.content;
      if (Array.isArray(inner) && anyMarked(inner, depth - 1)) return true;
    }
  }
  return false;
}
