import { describe, expect, it } from 'vitest';
import { decodePieces, deltaText, findDeltaText, type TextRange } from './delta-text.js';

/** What the text of a payload is, by the book (JSON.parse). */
function reference(payload: string): string | null {
  let p: { delta?: Record<string, unknown> };
  try {
    p = JSON.parse(payload) as { delta?: Record<string, unknown> };
  } catch {
    return null;
  }
  const d = p?.delta;
  if (!d || typeof d !== 'object') return null;
  if (typeof d.text === 'string' && (d.type === 'text_delta' || d.type === undefined)) return d.text;
  if (d.type === 'thinking_delta' && typeof d.thinking === 'string') return d.thinking;
  if (d.type === 'input_json_delta' && typeof d.partial_json === 'string') return d.partial_json;
  return null;
}

function found(payload: string): string | null {
  const b = Buffer.from(`data: ${payload}\nmore`);
  const r: TextRange = { start: -1, end: -1 };
  if (!findDeltaText(b, 6, 6 + Buffer.byteLength(payload), r)) return null;
  return JSON.parse('"' + b.toString('utf8', r.start, r.end) + '"') as string;
}

const TEXTS = ['tok ', '', ' "quoted" \\ back\\slash', 'line\nbreak\ttab', 'Größe 日本語 🙂👍🏽', '\u2028\u0000\u001f', '}"}]', 'text":"', '\\u0041'];

describe('findDeltaText', () => {
  it('finds what JSON.parse finds, in Anthropic\'s layout and in others', () => {
    const payloads: string[] = [];
    for (const t of TEXTS) {
      payloads.push(JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: t } }));
      payloads.push(JSON.stringify({ type: 'content_block_delta', index: 12, delta: { type: 'thinking_delta', thinking: t } }));
      payloads.push(JSON.stringify({ type: 'content_block_delta', index: 3, delta: { type: 'input_json_delta', partial_json: t } }));
      payloads.push(JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: t } }));
      payloads.push(JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'citations_delta', citation: { type: 'char_location', cited_text: t, text: t } } }));
      payloads.push(JSON.stringify({ delta: { text: t }, index: 0, type: 'content_block_delta' }));
      payloads.push(JSON.stringify({ index: 0, delta: { text: t, type: 'text_delta', extra: [1, { a: '}' }] } }));
      payloads.push(JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: t, more: t } }));
      payloads.push(JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', text: t } }));
      payloads.push(JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: t } }, null, 1));
      payloads.push(` ${JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: t } })}  `);
    }
    payloads.push('[DONE]', '', '{}', '{"delta":1}', '{"delta":{"text":1}}', '{"delta":{"type":"text_delta","text":"unterminated', '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"');
    for (const p of payloads) expect(found(p), p).toBe(reference(p));
  });
});

describe('decodePieces', () => {
  it('decodes pieces joined as each piece decoded, surrogate halves in separate deltas included', () => {
    const pieces = ['tok ', '\\"q\\"', '\\ud83d', '\\ude42', 'caf\\u00e9', 'Größe', '\\\\', '\\n'];
    expect(decodePieces(Buffer.from(pieces.join('\n')))).toBe('tok "q"🙂caféGröße\\\n');
  });

  it('skips a piece that is not a valid JSON string and keeps the others', () => {
    expect(decodePieces(Buffer.from(['a', 'b\\x', 'c\u0001', 'd'].join('\n')))).toBe('ad');
  });

  it('deltaText reads payloads one per line', () => {
    const lines = TEXTS.map((t) => JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: t } }));
    expect(deltaText(Buffer.from(lines.join('\n')))).toBe(TEXTS.join(''));
  });
});
