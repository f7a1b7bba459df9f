// Content a Messages request names by file id (`source: {type: "file", file_id}` of an image or a
// document, a `container_upload` block), refused (400, before anything is reserved). The gateway serves
// no Files API, so no account can upload a file through it: a file id reaches Anthropic under the
// channel's credential, where it names a file of the operator's organization, and an account that
// learned one (a log, a shared transcript) could have the model read the operator's file or another
// tenant's. `thread` and `container` are refused for the same reason (unpriced-fields.ts). The data
// itself (base64), a URL or text are served.
//
// The walk runs only for a body whose bytes name `"file_id"` (the key such a reference needs; a
// quote inside a string is escaped, so text never matches): one search of bytes the JSON parser read
// anyway, rather than a walk over every block of every request.
import { RelayError } from '../errors.js';

const FILE_ID = Buffer.from('"file_id"');

/** The refusal of the first content block of `body` that names a file by id, or null. */
export function fileReferenceRefusal(raw: Buffer, body: { messages: unknown; system?: unknown }): RelayError | null {
  if (raw.indexOf(FILE_ID) < 0) return null;
  const messages = body.messages as { content?: unknown }[];
  for (let i = 0; i < messages.length; i++) {
    const at = blocksNamingFile(messages[i]?.content, `messages.${i}.content`);
    if (at !== null) return refusal(at);
  }
  const at = blocksNamingFile(body.system, 'system');
  return at === null ? null : refusal(at);
}

/** Where in `content` (a block list) a block names a file by id, its tool results' and documents' blocks included; null if none. */
function blocksNamingFile(content: unknown, path: string): string | null {
  if (!Array.isArray(content)) return null;
  for (let i = 0; i < content.length; i++) {
    const block = content[i] as { type?: unknown; source?: unknown; content?: unknown } | null;
    if (block === null || typeof block !== 'object') continue;
    if (block.type === 'container_upload') return `${path}.${i}`;
    const source = block.source as { type?: unknown; content?: unknown } | null | undefined;
    if (source !== null && typeof source === 'object') {
      if (source.type === 'file') return `${path}.${i}.source`;
      // A document of content blocks (text and images).
      const inDocument = blocksNamingFile(source.content, `${path}.${i}.source.content`);
      if (inDocument !== null) return inDocument;
    }
    // A tool result's content: text, images, documents.
    const inResult = blocksNamingFile(block.content, `${path}.${i}.content`);
    if (inResult !== null) return inResult;
  }
  return null;
}

function refusal(at: string): RelayError {
  return new RelayError('invalid_request', `${at}: content named by file id is not served by this gateway (it serves no Files API, so a file id names none of this account's files); send the data (base64), a URL or the text`);
}
