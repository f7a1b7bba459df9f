import { describe, expect, it } from 'vitest';
import { DATA_PREFIX, LineBreaks, LineCarry, StringPieces, closingQuote, endsObject, indexOfBytes, lineEnd, rangeEquals, startsWith } from './sse-bytes.js';

const WORD = Buffer.from('data:');

describe('startsWith', () => {
  it('matches at the start and at the very end of the range, and not when the word runs past it', () => {
    const buf = Buffer.from('data: xdata:');
    expect(startsWith(buf, 0, buf.length, WORD)).toBe(true);
    expect(startsWith(buf, 7, buf.length, WORD)).toBe(true);
    expect(startsWith(buf, 8, buf.length, WORD)).toBe(false);
    // The bytes are there, but past `end`.
    expect(startsWith(buf, 7, buf.length - 1, WORD)).toBe(false);
    expect(startsWith(buf, 0, 4, WORD)).toBe(false);
    expect(startsWith(buf, buf.length, buf.length, WORD)).toBe(false);
    expect(startsWith(buf, 3, 3, Buffer.alloc(0))).toBe(true);
    expect(startsWith(Buffer.from('datA:'), 0, 5, WORD)).toBe(false);
    expect(DATA_PREFIX.equals(WORD)).toBe(true);
  });
});

describe('rangeEquals', () => {
  it('is true only for a range of exactly the word', () => {
    const buf = Buffer.from('message_start message_stop');
    expect(rangeEquals(buf, 0, 13, Buffer.from('message_start'))).toBe(true);
    expect(rangeEquals(buf, 0, 13, Buffer.from('message_delta'))).toBe(false);
    expect(rangeEquals(buf, 0, 14, Buffer.from('message_start'))).toBe(false);
    expect(rangeEquals(buf, 0, 7, Buffer.from('message_start'))).toBe(false);
    expect(rangeEquals(buf, 14, buf.length, Buffer.from('message_stop'))).toBe(true);
  });
});

describe('closingQuote', () => {
  /** The closing quote of the string opened by the first quote of s, or -1. */
  function close(s: string, end?: number): number {
    const buf = Buffer.from(s);
    return closingQuote(buf, s.indexOf('"') + 1, end ?? buf.length);
  }

  it('skips escaped quotes and escaped backslashes', () => {
    expect(close('"abc" x')).toBe(4);
    expect(close('"a\\"b" x')).toBe(5);
    // An escaped backslash: the quote after it closes the string.
    expect(close('"a\\\\" x')).toBe(4);
    expect(close('"a\\\\\\"b" x')).toBe(7);
    expect(close('"" x')).toBe(1);
  });

  it('is -1 when no closing quote comes before the end', () => {
    expect(close('"abc')).toBe(-1);
    expect(close('"abc\\"')).toBe(-1);
    // A backslash as the last byte escapes what lies past the end.
    expect(close('"abc\\')).toBe(-1);
    expect(close('"abc" x', 4)).toBe(-1);
    expect(close('"abc" x', 5)).toBe(4);
  });
});

describe('lineEnd', () => {
  it('leaves out the CR of a CRLF, and nothing of an empty line', () => {
    const buf = Buffer.from('ab\r\n\n\r\n');
    expect(lineEnd(buf, 0, 3)).toBe(2);
    expect(lineEnd(buf, 4, 4)).toBe(4);
    expect(lineEnd(buf, 5, 6)).toBe(5);
    expect(lineEnd(Buffer.from('ab\n'), 0, 2)).toBe(2);
  });
});

describe('LineCarry', () => {
  /** Splits `text` into chunks, carrying lines across them as the scanners do; returns the lines read. */
  function lines(carry: LineCarry, chunks: string[]): string[] {
    const out: string[] = [];
    for (const c of chunks) {
      const chunk = Buffer.from(c);
      let pos = 0;
      if (carry.carrying) {
        const nl = chunk.indexOf(0x0a);
        if (nl < 0) {
          carry.append(chunk, 0, chunk.length);
          continue;
        }
        out.push(carry.finish(chunk, nl).toString('utf8', 0, carry.end));
        pos = nl + 1;
      }
      while (pos < chunk.length) {
        const nl = chunk.indexOf(0x0a, pos);
        if (nl < 0) {
          carry.begin(chunk, pos, chunk.length);
          break;
        }
        out.push(chunk.toString('utf8', pos, lineEnd(chunk, pos, nl)));
        pos = nl + 1;
      }
    }
    return out;
  }

  it('gathers a line carried over three chunks', () => {
    const carry = new LineCarry();
    expect(lines(carry, ['a\ndata: {"x"', ':"one', ' two"}\nb\n'])).toEqual(['a', 'data: {"x":"one two"}', 'b']);
    expect(carry.carrying).toBe(false);
  });

  it('drops the CR of a CRLF, whether the CR ends a chunk or not', () => {
    const carry = new LineCarry();
    expect(lines(carry, ['data: 1\r\ndata: ', '2\r', '\ndata: 3', '\r\n'])).toEqual(['data: 1', 'data: 2', 'data: 3']);
    // A carried line that is only a CR is an empty line.
    expect(lines(carry, ['x\n\r', '\n'])).toEqual(['x', '']);
  });

  it('reuses its buffer from line to line, and lets go of a huge one once read', () => {
    const carry = new LineCarry();
    carry.begin(Buffer.from('first'), 0, 5);
    const a = carry.finish(Buffer.from(' line\n'), 5);
    expect(a.toString('utf8', 0, carry.end)).toBe('first line');
    carry.begin(Buffer.from('xyz second'), 4, 10);
    const b = carry.finish(Buffer.from('\n'), 0);
    expect(b).toBe(a);
    expect(b.toString('utf8', 0, carry.end)).toBe('second');

    const huge = Buffer.alloc(40 * 1024, 0x61);
    carry.begin(huge, 0, huge.length);
    carry.append(huge, 0, 10);
    const c = carry.finish(Buffer.from('z\n'), 1);
    expect(carry.end).toBe(huge.length + 11);
    expect(c[carry.end - 1]).toBe(0x7a);
    carry.begin(Buffer.from('q'), 0, 1);
    expect(carry.finish(Buffer.from('\n'), 0)).not.toBe(c);
  });
});

describe('LineBreaks', () => {
  /** The lines of `chunks` as a scanner using LineBreaks reads them (a line cut by a chunk is carried as text here). */
  function lines(chunks: string[]): string[] {
    const breaks = new LineBreaks();
    const out: string[] = [];
    let carried = '';
    for (const c of chunks) {
      const buf = Buffer.from(c);
      let pos = breaks.start(buf);
      while (pos < buf.length) {
        const br = breaks.find(buf, pos);
        if (br < 0) {
          carried += buf.toString('utf8', pos);
          break;
        }
        out.push(carried + buf.toString('utf8', pos, br));
        carried = '';
        pos = breaks.after(buf, br);
      }
    }
    return out;
  }

  it('ends a line at LF, CRLF and a lone CR, as the SSE spec does', () => {
    expect(lines(['a\nb\r\nc\rd\r\r\n\n'])).toEqual(['a', 'b', 'c', 'd', '', '']);
  });

  it('reads a CRLF cut between two chunks as one line break, and a CR ending the stream as one', () => {
    expect(lines(['data: 1\r', '\ndata: 2\r', 'data: 3\r', '\r\n'])).toEqual(['data: 1', 'data: 2', 'data: 3', '']);
    // However the text is cut, the same lines.
    const text = 'event: x\rdata: {"a":1}\r\n\r\ndata: 2\n\r\r\n';
    const whole = lines([text]);
    for (let size = 1; size < text.length; size++) {
      const chunks: string[] = [];
      for (let i = 0; i < text.length; i += size) chunks.push(text.slice(i, i + size));
      expect(lines(chunks)).toEqual(whole);
    }
  });
});

describe('endsObject', () => {
  it('is true when the last byte but blanks closes an object', () => {
    const t = (s: string) => endsObject(Buffer.from(s), 0, Buffer.byteLength(s));
    expect(t(' {"a":1}')).toBe(true);
    expect(t('{"a":1} \t')).toBe(true);
    expect(t('{"a":')).toBe(false);
    expect(t('null')).toBe(false);
    expect(t('')).toBe(false);
  });
});

describe('StringPieces', () => {
  /** The pieces a string's raw bytes are handed over in, fed in chunks of `size` bytes. */
  function pieces(raw: Buffer, size: number): { pieces: Buffer[]; quote: number } {
    const s = new StringPieces();
    const out: Buffer[] = [];
    const sink = { pushText: (b: Buffer, from: number, to: number) => void out.push(Buffer.from(b.subarray(from, to))) };
    s.begin();
    let quote = -1;
    for (let i = 0; i < raw.length && quote < 0; i += size) {
      const q = s.feed(raw, i, Math.min(raw.length, i + size), sink);
      if (q >= 0) quote = q;
    }
    return { pieces: out, quote };
  }

  it('hands over the string to its closing quote in pieces that each decode alone: whole escapes, whole characters', () => {
    const text = 'a "q" \\ é 😀 \u0001 z'.repeat(3);
    const raw = Buffer.from(JSON.stringify(text).slice(1) + ',"next":1}');
    const close = raw.indexOf('",');
    for (let size = 1; size <= 24; size++) {
      const { pieces: got, quote } = pieces(raw, size);
      expect(quote).toBe(close);
      for (const p of got) expect(() => JSON.parse('"' + p.toString('utf8') + '"')).not.toThrow();
      expect(got.map((p) => JSON.parse('"' + p.toString('utf8') + '"') as string).join('')).toBe(text);
    }
  });

  it('is -1 while the string goes on; a backslash ending one chunk escapes the quote beginning the next', () => {
    const s = new StringPieces();
    s.begin();
    expect(s.feed(Buffer.from('abc\\'), 0, 4, null)).toBe(-1);
    expect(s.feed(Buffer.from('"x"'), 0, 3, null)).toBe(2);
  });
});

describe('indexOfBytes', () => {
  it('answers what buf.indexOf answers, on short buffers (its own loop) and long ones (indexOf)', () => {
    let seed = 17;
    const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n;
    const alphabet = Buffer.from('"usage":null,error ');
    for (let t = 0; t < 3000; t++) {
      const buf = Buffer.from(Array.from({ length: rnd(t % 10 === 0 ? 2000 : 120) }, () => alphabet[rnd(alphabet.length)]!));
      const needle = [Buffer.from('"usage"'), Buffer.from('error'), Buffer.from('"'), Buffer.from('null,')][rnd(4)]!;
      const from = rnd(buf.length + 3) - 1;
      expect(indexOfBytes(buf, needle, Math.max(0, from)), `${buf.toString()} ${needle.toString()} ${from}`).toBe(buf.indexOf(needle, Math.max(0, from)));
    }
  });
});
