// The usage of a non-streaming Message answer, read without parsing the whole body: Anthropic puts
// `usage` last, and the byte sequence `"usage":` cannot occur inside a JSON string (its quotes would
// be escaped), so the last occurrence is the usage key. Only that object is parsed; anything
// unexpected falls back to parsing the whole body.
import { usageOfMessage, type StreamUsage } from '../stream/sse-usage-parser.js';

const USAGE_KEY = Buffer.from('"usage":');
const OPEN = 0x7b;
const CLOSE = 0x7d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

export function usageOfMessageBody(body: Buffer): StreamUsage | null {
  const at = body.lastIndexOf(USAGE_KEY);
  if (at >= 0) {
    const start = body.indexOf(OPEN, at + USAGE_KEY.length);
    const end = start < 0 ? -1 : matchingBrace(body, start);
    if (end > 0) {
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
