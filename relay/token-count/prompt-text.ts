// What of a Messages request body is counted as prompt tokens (countPrompt, count_tokens):
//   - `system`: the string, or the `text` of its text blocks;
//   - every message's content: the string, or per block
//       text → text; thinking → thinking; redacted_thinking → data;
//       tool_use / server_tool_use → name and JSON of input;
//       tool_result (and *_tool_result) → its content (string or blocks, recursively);
//       document with a text or content source → that text; search_result → title and content;
//       image, base64/URL/file documents and any other block → not tokenized: IMAGE_TOKENS per image,
//       and the JSON byte length of other blocks (a token is at least one byte) in `opaqueTokens`;
//   - `tools`: the JSON of each tool definition (name, description, input_schema, ...);
//   - MESSAGE_OVERHEAD tokens per message for the role framing.
// Unknown fields (metadata, tool_choice, temperature, ...) are not counted.

/** Anthropic bills an image at (width × height) / 750 tokens after resizing to ≤ 1.15 MP: ≤ ~1600. */
export const IMAGE_TOKENS = 1600;
export const MESSAGE_OVERHEAD = 4;

export interface PromptParts {
  /** Text to tokenize, pieces separated by "\n". */
  text: string[];
  /** Tokens charged without tokenizing (images, opaque blocks, message framing). */
  opaqueTokens: number;
}

export function promptParts(body: unknown): PromptParts {
  const out: PromptParts = { text: [], opaqueTokens: 0 };
  if (!body || typeof body !== 'object') return out;
  const b = body as Record<string, unknown>;
  content(b.system, out);
  if (Array.isArray(b.messages)) {
    for (const m of b.messages) {
      out.opaqueTokens += MESSAGE_OVERHEAD;
      if (m && typeof m === 'object') content((m as Record<string, unknown>).content, out);
    }
  }
  if (Array.isArray(b.tools)) for (const t of b.tools) out.text.push(JSON.stringify(t));
  return out;
}

function content(c: unknown, out: PromptParts): void {
  if (typeof c === 'string') {
    out.text.push(c);
    return;
  }
  if (!Array.isArray(c)) return;
  for (const block of c) {
    if (!block || typeof block !== 'object') continue;
    const k = block as Record<string, unknown>;
    const type = typeof k.type === 'string' ? k.type : '';
    if (type === 'text' && typeof k.text === 'string') out.text.push(k.text);
    else if (type === 'thinking' && typeof k.thinking === 'string') out.text.push(k.thinking);
    else if (type === 'redacted_thinking' && typeof k.data === 'string') out.text.push(k.data);
    // A name that is not a string is counted as its JSON: String() of an object whose own `toString`
    // is not a function throws, and that made count_tokens answer 500 and a cut stream's prompt unbilled.
    else if (type === 'tool_use' || type === 'server_tool_use') out.text.push(typeof k.name === 'string' ? k.name : JSON.stringify(k.name ?? ''), JSON.stringify(k.input ?? {}));
    else if (type === 'tool_result' || type.endsWith('_tool_result')) content(k.content, out);
    else if (type === 'search_result') {
      if (typeof k.title === 'string') out.text.push(k.title);
      content(k.content, out);
    } else if (type === 'image') out.opaqueTokens += IMAGE_TOKENS;
    else if (type === 'document' && isTextSource(k.source)) {
      const src = k.source as Record<string, unknown>;
      if (typeof src.data === 'string') out.text.push(src.data);
      else content(src.content, out);
    } else out.opaqueTokens += Buffer.byteLength(JSON.stringify(block));
  }
}

function isTextSource(s: unknown): boolean {
  if (!s || typeof s !== 'object') return false;
  const type = (s as Record<string, unknown>).type;
  return type === 'text' || type === 'content';
}
