// Content a Messages request names by file id (`source: {type: "file", file_id}` of an image or a
// document, a `container_upload` block), refused (400, before anything is reserved). The gateway serves
// no Files API, so no account can upload a file through it: a file id reaches Anthropic under the
// channel's credential, where it names a file of the operator's organization, and an account that
// learned one (a log, a shared transcript) could have the model read the operator's file or another
// tenant's. `thread` and `container` are refused for the same reason (unpriced-fields.ts). The data
// itself (base64), a URL or text are served.
//
// The walk visits the blocks alone (no text), allocating nothing unless it finds one: ~0.1 µs for a
// one-message request, a few µs for an agent's conversation of a hundred turns.
import { RelayError } from '../errors.js';

/** The refusal of the first content block of `body` that names a file by id, or null. */
export function fileReferenceRefusal(body: { messages: unknown; system?: unknown }): RelayError | null {
  const messages = body.messages as { content?: unknown }[];
  for (let i = 0; i < messages.length; i++) {
    const content = messages[i]?.content;
    if (namesFile(content)) return refusal(pathOfFile(content, `messages.${i}.content`)!);
  }
  return namesFile(body.system) ? refusal(pathOfFile(body.system, 'system')!) : null;
}

type Block = { type?: unknown; source?: { type?: unknown; content?: unknown } | null; content?: unknown } | null;

/** Whether a block of `content` (a block list) names a file by id, its tool results' and documents' blocks included. */
function namesFile(content: unknown): boolean {
  if (!Array.isArray(content)) return false;
  for (let i = 0; i < content.length; i++) {
    const block = content[i] as Block;
    if (block === null || typeof block !== 'object') continue;
    if (block.type === 'container_upload') return true;
    const source = block.source;
    // A document of content blocks (text and images).
    if (source !== null && typeof source === 'object' && (source.type === 'file' || namesFile(source.content))) return true;
    // A tool result's content: text, images, documents.
    if (namesFile(block.content)) return true;
  }
  return false;
}

/** Where in `content` the first block naming a file is (namesFile found one). */
function pathOfFile(content: unknown, path: string): string | null {
  if (!Array.isArray(content)) return null;
  for (let i = 0; i < content.length; i++) {
    const block = content[i] as Block;
    if (block === null || typeof block !== 'object') continue;
    if (block.type === 'container_upload') return `${path}.${i}`;
    const source = block.source;
    if (source !== null && typeof source === 'object') {
      if (source.type === 'file') return `${path}.${i}.source`;
      const inDocument = pathOfFile(source.content, `${path}.${i}.source.content`);
      if (inDocument !== null) return inDocument;
    }
    const inResult = pathOfFile(block.content, `${path}.${i}.content`);
    if (inResult !== null) return inResult;
  }
  return null;
}

function refusal(at: string): RelayError {
  return new RelayError('invalid_request', `${at}: content named by file id is not served by this gateway (it serves no Files API, so a file id names none of this account's files); send the data (base64), a URL or the text`);
}
