// The usage of a non-streaming Message answer, read without parsing the whole body: Anthropic puts
// `usage` last, so its value is parsed alone when it ends the body's object. The last `"usage":` of a
// body that puts it elsewhere can be a tool input's (a client asks for one through its tool schema):
// that body, and anything else unexpected, is parsed whole.
import { usageOfMessage, type StatedUsage } from '../stream/sse-usage-parser.js';

const USAGE_KEY = Buffer.from('"usage":');
const OPEN = 0x7b;
const CLOSE = 0x7d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

export function usageOfMessageBody(body: Buffer): StatedUsage | null {
  const at = body.lastIndexOf(USAGE_KEY);
  if (at >= 0) {
    let start = at + USAGE_KEY.length;
    while (start < body.length && isBlank(body[start]!)) start++;
    // Not an object (a tool input's `"usage":"…"`): the next `{` would be some other key's value.
    const end = body[start] === OPEN ? matchingBrace(body, start) : -1;
    if (end > 0 && endsObject(body, end + 1)) {
      try {
        const usage = usageOfMessage({ usage: JSON.parse(body.toString('utf8', start, end + 1)) });
        if (usage) return usage;
      } catch {
        // fall through to the full parse
      }
    }
  }
  try {
    return usageOfMessage(JSON.parse(body.toString('utf8')));
  } catch {
    return null;
  }
}

/**
 * Only blanks, one `}`, then blanks to the end: the value just before closes the body's own object,
 * so its key is at the top level. One nested deeper would be followed by at least two closers.
 */
function endsObject(buf: Buffer, from: number): boolean {
  let i = from;
  while (i < buf.length && isBlank(buf[i]!)) i++;
  if (buf[i] !== CLOSE) return false;
  for (i++; i < buf.length; i++) if (!isBlank(buf[i]!)) return false;
  return true;
}

function isBlank(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function matchingBrace(buf: Buffer, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < buf.length; i++) {
    const c = buf[i];
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN) depth++;
    else if (c === CLOSE && --depth === 0) return i;
  }
  return -1;
}

/** What a Message answer delivers: its text, thinking and tool inputs (as JSON); null when the body is not one. */
export function textOfMessageBody(body: Buffer): string | null {
  let m: { content?: unknown };
  try {
    m = JSON.parse(body.toString('utf8')) as { content?: unknown };
  } catch {
    return null;
  }
  if (!m || typeof m !== 'object' || !Array.isArray(m.content)) return null;
  const parts: string[] = [];
  for (const b of m.content as Array<{ type?: unknown; text?: unknown; thinking?: unknown; input?: unknown } | null>) {
    if (!b || typeof b !== 'object') continue;
    if (typeof b.text === 'string') parts.push(b.text);
    if (typeof b.thinking === 'string') parts.push(b.thinking);
    if (b.type === 'tool_use' || b.type === 'server_tool_use') parts.push(JSON.stringify(b.input ?? {}));
  }
  return parts.join('\n');
}
