// How the relay reads a provider's 200 before it meters it: whether it is an event stream (by a media
// type compared without case, or by its first bytes when the label says nothing), in which
// content-coding, and its body decoded (upstream/provider-response.ts).
import { Readable } from 'node:stream';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { contentCodingOf, firstChunk, isEventStream, looksLikeSse, MAX_UPSTREAM_JSON, WholeAnswer } from './provider-response.js';

describe('isEventStream', () => {
  it('compares the media type without case, parameters aside', () => {
    for (const t of ['text/event-stream', 'Text/Event-Stream', 'TEXT/EVENT-STREAM; charset=UTF-8', ' text/event-stream;charset=utf-8', 'text/event-stream ;x=1']) expect(isEventStream(t)).toBe(true);
    for (const t of ['', 'application/json', 'text/event-streams', 'text/event-strea', 'application/octet-stream', 'text/plain']) expect(isEventStream(t)).toBe(false);
  });
});

describe('looksLikeSse', () => {
  it('is true for a body that begins with an SSE field or comment, after a BOM and blank lines', () => {
    for (const b of ['event: message_start\n', 'data: {}\n\n', '\ufeffdata: x', '\r\n\r\nid: 1\n', ': ping\n', 'retry: 10\n']) expect(looksLikeSse(Buffer.from(b), false)).toBe(true);
    for (const b of ['{"type":"message"}', '<html>502 Bad Gateway</html>', 'null', 'Internal Server Error', 'dat a:', 'events: x']) expect(looksLikeSse(Buffer.from(b), true)).toBe(false);
  });

  it('answers `undecided` when the bytes end before it can tell', () => {
    for (const b of ['', '\n\n', 'da', 'eve', 'data']) {
      expect(looksLikeSse(Buffer.from(b), true)).toBe(true);
      expect(looksLikeSse(Buffer.from(b), false)).toBe(false);
    }
  });
});

describe('contentCodingOf', () => {
  it('names the codings the relay decodes, and null for any other', () => {
    expect(['', 'identity', ' Identity ', 'gzip', 'x-gzip', 'GZIP', 'deflate', 'br'].map(contentCodingOf)).toEqual(['identity', 'identity', 'identity', 'gzip', 'gzip', 'gzip', 'deflate', 'br']);
    for (const c of ['zstd', 'compress', 'gzip, br', 'x-unknown']) expect(contentCodingOf(c)).toBeNull();
  });
});

describe('firstChunk', () => {
  it('gives the first chunk and leaves it in the body, paused, to be read again', async () => {
    const body = new Readable({ read() {} });
    body.push(Buffer.from('data: 1\n\n'));
    body.push(Buffer.from('data: 2\n\n'));
    body.push(null);
    expect((await firstChunk(body))!.toString()).toBe('data: 1\n\n');
    expect(body.isPaused()).toBe(true);
    const all: string[] = [];
    for await (const c of body) all.push((c as Buffer).toString());
    expect(all.join('')).toBe('data: 1\n\ndata: 2\n\n');
  });

  it('is null for a body that ends, fails or is destroyed first', async () => {
    const empty = new Readable({ read() {} });
    empty.push(null);
    expect(await firstChunk(empty)).toBeNull();
    const failing = new Readable({ read() {} });
    setImmediate(() => failing.destroy(new Error('cut')));
    expect(await firstChunk(failing)).toBeNull();
    const gone = new Readable({ read() {} });
    gone.destroy();
    expect(await firstChunk(gone)).toBeNull();
  });
});

describe('WholeAnswer.decoded', () => {
  const answer = (body: Buffer) => new WholeAnswer({ statusCode: 200, rawHeaders: [], body, truncated: false, bodyError: null, headersAt: 0 });
  const json = Buffer.from(JSON.stringify({ type: 'message', content: [{ type: 'text', text: 'tok '.repeat(50) }] }));

  it('decodes gzip, deflate (zlib-wrapped or mislabelled gzip) and br', async () => {
    for (const [coding, coded] of [['gzip', gzipSync(json)], ['deflate', deflateSync(json)], ['deflate', gzipSync(json)], ['br', brotliCompressSync(json)]] as const) {
      expect(await (await answer(coded).decoded(coding)).bytes()).toEqual(json);
    }
  });

  it('rejects a corrupt body, and one that decodes past MAX_UPSTREAM_JSON', async () => {
    await expect(answer(Buffer.from('not gzip at all')).decoded('gzip')).rejects.toThrow();
    await expect(answer(gzipSync(Buffer.alloc(MAX_UPSTREAM_JSON + 1))).decoded('gzip')).rejects.toThrow();
  });
});
