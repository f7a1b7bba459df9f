// What of a Messages request body is counted as prompt tokens (countPrompt, count_tokens):
//   - `system`: the string, or the `text` of its text blocks;
//   - every message's content: the string, or per block
//       text → text; thinking → thinking; redacted_thinking → data;
//       tool_use / server_tool_use → name and JSON of input (a string input as its text);
//       tool_result (and *_tool_result) → its content (string or blocks, recursively);
//       document with a text or content source → that text; search_result → title and content;
//       image, base64/URL/file documents and any other block → not tokenized: an image at the most
//       its model bills one (`imageScaling`, image-tokens.ts) or, for a model whose sizing is not
//       known, IMAGE_TOKENS; the JSON byte length of other blocks (a token is at least one byte),
//       in `opaqueTokens`;
//       with `estimateMedia` (count_tokens' answer only), an image is taken for its size and a
//       base64/URL/file document for its pages instead (documentTokens);
//   - `tools`: the JSON of each tool definition (name, description, input_schema, ...; a toolset or
//     MCP toolset, which has no name, is its JSON all the same);
//   - MESSAGE_OVERHEAD tokens per message for the role framing.
// Unknown fields (metadata, tool_choice, temperature, ...) are not counted.
//
// The JSON byte length of a document (a page at least, PDF_PAGE_TOKENS, for one by URL or file id,
// whose JSON is only its address) and an image's most are kept wherever the count is money: a
// settlement bills a prompt its provider did not state at this count (capped at the input its
// reservation covered: the model's window for a request with documents, images at their model's
// bound); a page estimate would bill a 300 KB PDF of 3 pages ~12k tokens where the bytes bill it
// ~200k, and a size read from a crafted image's header can be far below what the provider decodes.
// Only count_tokens, whose answer is an estimate, reads pages and sizes.

import type { ImageScaling } from '../../core/pricing/input-bound.js';
import { estimatedImageTokens } from './image-tokens.js';

/**
 * An image to a model whose sizing is not known (not Claude: imageScaling), ~1.15 MP / 750, about the
 * most a Claude model up to 4.6 bills one. A Claude model's image is counted at its model's most
 * (image-tokens.ts): before, every image was 1,600 here whatever the model, and a cut stream of Opus
 * 4.7 screenshots (up to 4,784 tokens each) was billed 1,600 each.
 */
export const IMAGE_TOKENS = 1600;
export const MESSAGE_OVERHEAD = 4;
/**
 * A PDF page as count_tokens estimates it: Anthropic puts a page's text at 1,500-3,000 tokens
 * depending on its density (the middle of that, 2,250) and adds the page as an image (IMAGE_TOKENS).
 */
export const PDF_PAGE_TOKENS = 2_250 + IMAGE_TOKENS;
/**
 * A base64 document whose pages cannot be read from its bytes (page objects in compressed object
 * streams, or no PDF at all) is estimated at a token per this many decoded bytes (a page of ~31 KB
 * per PDF_PAGE_TOKENS), and at least a page: a 300 KB one 37,500 tokens, where a token per base64
 * byte of its JSON made it 400,000.
 */
export const PDF_BYTES_PER_TOKEN = 8;

export interface PromptOptions {
  /**
   * How the model sizes an image (imageScaling, core/pricing/input-bound.ts): an image is counted at
   * its model's most then, or by its size with estimateMedia; without it, at IMAGE_TOKENS.
   */
  imageScaling?: ImageScaling;
  /**
   * Documents given as base64, URL or file are estimated by their pages (documentTokens), not their
   * JSON bytes, and images by their size. For count_tokens' answer only: the money paths keep the
   * bytes and the most (see the header).
   */
  estimateMedia?: boolean;
}

export interface PromptParts {
  /** Text to tokenize, pieces separated by "\n". */
  text: string[];
  /** Tokens charged without tokenizing (images, opaque blocks, message framing). */
  opaqueTokens: number;
}

export function promptParts(body: unknown, options: PromptOptions = {}): PromptParts {
  const out: PromptParts = { text: [], opaqueTokens: 0 };
  if (!body || typeof body !== 'object') return out;
  const b = body as Record<string, unknown>;
  content(b.system, out, options);
  if (Array.isArray(b.messages)) {
    for (const m of b.messages) {
      out.opaqueTokens += MESSAGE_OVERHEAD;
      if (m && typeof m === 'object') content((m as Record<string, unknown>).content, out, options);
    }
  }
  if (Array.isArray(b.tools)) for (const t of b.tools) out.text.push(JSON.stringify(t));
  return out;
}

function content(c: unknown, out: PromptParts, options: PromptOptions): void {
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
    // A string input is a Chat Completions call's arguments that were no object (countedForm), counted as their text.
    else if (type === 'tool_use' || type === 'server_tool_use') out.text.push(typeof k.name === 'string' ? k.name : JSON.stringify(k.name ?? ''), typeof k.input === 'string' ? k.input : JSON.stringify(k.input ?? {}));
    else if (type === 'tool_result' || type.endsWith('_tool_result')) content(k.content, out, options);
    else if (type === 'search_result') {
      if (typeof k.title === 'string') out.text.push(k.title);
      content(k.content, out, options);
    } else if (type === 'image') out.opaqueTokens += imageTokens(k.source, options);
    else if (type === 'document' && isTextSource(k.source)) {
      const src = k.source as Record<string, unknown>;
      if (typeof src.data === 'string') out.text.push(src.data);
      else content(src.content, out, options);
    } else if (type === 'document' && options.estimateMedia === true) out.opaqueTokens += documentTokens(k.source);
    // A document by URL or file id: its JSON is the address alone, a few dozen bytes for what the
    // provider reads as pages (one billed 86 tokens where count_tokens says 3,857): a page at least.
    else if (type === 'document' && !hasDocumentBytes(k.source)) out.opaqueTokens += Math.max(Buffer.byteLength(JSON.stringify(block)), PDF_PAGE_TOKENS);
    else out.opaqueTokens += Buffer.byteLength(JSON.stringify(block));
  }
}

/** Whether a document's source holds its bytes (base64 data), not only an address (a URL, a file id). */
function hasDocumentBytes(source: unknown): boolean {
  return !!source && typeof source === 'object' && typeof (source as Record<string, unknown>).data === 'string';
}

/** An image block's tokens (image-tokens.ts): the model's most, by its size in an estimate, IMAGE_TOKENS for a model of no known sizing. */
function imageTokens(source: unknown, options: PromptOptions): number {
  const scaling = options.imageScaling;
  if (scaling === undefined) return IMAGE_TOKENS;
  return options.estimateMedia === true ? estimatedImageTokens(source, scaling) : scaling.tokens;
}

/**
 * count_tokens' estimate of a document that is not text: PDF_PAGE_TOKENS per page of a base64 PDF
 * whose pages its bytes show (pdfPages); else a token per PDF_BYTES_PER_TOKEN decoded bytes, at least
 * a page; a document by URL or file_id, whose bytes the relay does not have, a page.
 */
export function documentTokens(source: unknown): number {
  const s = source && typeof source === 'object' ? source as Record<string, unknown> : {};
  if (s.type !== 'base64' || typeof s.data !== 'string') return PDF_PAGE_TOKENS;
  const bytes = Buffer.from(s.data, 'base64');
  const pages = pdfPages(bytes);
  return pages > 0 ? pages * PDF_PAGE_TOKENS : Math.max(PDF_PAGE_TOKENS, Math.ceil(bytes.length / PDF_BYTES_PER_TOKEN));
}

const TYPE = Buffer.from('/Type');
const PAGE = Buffer.from('/Page');

/**
 * The pages of a PDF, read from its bytes: its page objects, `/Type /Page` (any whitespace, or none,
 * between the two names) where `/Page` is a whole name, so not `/Pages` (the page tree) nor
 * `/PageLabel`. 0 when none shows: pages in compressed object streams (PDF 1.5+) are not read, which
 * would take inflating them. Linear in the bytes: each search starts past the last.
 */
export function pdfPages(pdf: Buffer): number {
  let pages = 0;
  let i = pdf.indexOf(TYPE);
  while (i !== -1) {
    let j = i + TYPE.length;
    while (j < pdf.length && isPdfWhitespace(pdf[j]!)) j++;
    if (pdf.compare(PAGE, 0, PAGE.length, j, Math.min(pdf.length, j + PAGE.length)) === 0) {
      j += PAGE.length;
      if (j === pdf.length || isPdfWhitespace(pdf[j]!) || isPdfDelimiter(pdf[j]!)) pages++;
    }
    i = pdf.indexOf(TYPE, j);
  }
  return pages;
}

/** NUL, tab, LF, FF, CR, space (PDF 32000-1, 7.2.2). */
function isPdfWhitespace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09 || c === 0x0c || c === 0x00;
}

/** ( ) < > [ ] { } / % */
function isPdfDelimiter(c: number): boolean {
  return c === 0x28 || c === 0x29 || c === 0x3c || c === 0x3e || c === 0x5b || c === 0x5d || c === 0x7b || c === 0x7d || c === 0x2f || c === 0x25;
}

function isTextSource(s: unknown): boolean {
  if (!s || typeof s !== 'object') return false;
  const type = (s as Record<string, unknown>).type;
  return type === 'text' || type === 'content';
}
