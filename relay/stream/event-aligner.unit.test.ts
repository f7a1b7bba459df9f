// EventAligner: whole events pass, an unfinished one waits; a stream cut at any byte, then ended with
// the relay's error event, reads as whole events whose data all parse, the error last.
import { describe, expect, it } from 'vitest';
import { DELTA_EVENT, messageUsage, streamHead, streamTail } from '../../bench/mock-upstream/wire-format.js';
import { STREAM_FAILED_EVENT } from '../messages/stream-relay.js';
import { EventAligner, lastEventEnd, MAX_HELD_EVENT } from './event-aligner.js';

const LF_STREAM = streamHead('msg_1', 'claude-x', messageUsage(11, 0, 0, 3)) + DELTA_EVENT + DELTA_EVENT.replace('tok ', 'é€ ') + streamTail('end_turn', 3);
const CRLF_STREAM = LF_STREAM.replace(/\n/g, '\r\n');
const OPENAI_STREAM = 'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"choices":[{"delta":{"content":"b"}}]}\n\ndata: [DONE]\n\n';

/** The events an SSE reader dispatches (the spec's framing: CRLF, LF or CR; an empty line ends an event). */
function sseEvents(text: string): Array<{ event: string; data: string }> {
  const out: Array<{ event: string; data: string }> = [];
  let event = '';
  let data: string[] = [];
  for (const line of text.split(/\r\n|\n|\r/)) {
    if (line === '') {
      if (data.length > 0) out.push({ event, data: data.join('\n') });
      event = '';
      data = [];
    } else if (line.startsWith('event:')) event = line.slice(6).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
  }
  return out;
}

function feed(aligner: EventAligner, whole: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < whole.length; i += size) out.push(aligner.push(whole.subarray(i, i + size)));
  return out;
}

describe('lastEventEnd', () => {
  it.each([
    ['', 0], ['data: x', 0], ['data: x\n', 0], ['data: x\n\n', 9], ['data: x\r\n\r\n', 11], ['data: x\n\r\n', 10],
    ['data: x\r\r', 0], ['data: x\r\ry', 9], ['a\n\nb\n', 3], ['a\r\n\r\nb', 5], ['\n\n', 2], ['a\r\n', 0],
  ])('%j → %i', (text, end) => {
    expect(lastEventEnd(Buffer.from(text))).toBe(end);
  });
});

describe('EventAligner', () => {
  it.each([1, 2, 3, 7, 64, 100_000])('chunks of %i bytes: every byte passes, in order, each piece ends an event', (size) => {
    for (const stream of [LF_STREAM, CRLF_STREAM, OPENAI_STREAM]) {
      const aligner = new EventAligner();
      const pieces = feed(aligner, Buffer.from(stream), size);
      const rest = aligner.rest();
      expect(Buffer.concat([...pieces, rest]).toString()).toBe(stream);
      expect(rest.length).toBe(0);
      for (const p of pieces) if (p.length > 0) expect(lastEventEnd(p)).toBe(p.length);
      // Fed a byte or two at a time, each event goes as soon as its empty line is in: one piece each.
      if (size <= 2) expect(pieces.filter((p) => p.length > 0).length).toBe(sseEvents(stream).length);
    }
  });

  it('a whole chunk passes as it came: the same buffer, no copy', () => {
    const chunk = Buffer.from(OPENAI_STREAM);
    expect(new EventAligner().push(chunk)).toBe(chunk);
  });

  it.each(['lf', 'crlf', 'openai'])('a %s stream cut at every byte, then the error event: whole events, every data parses, the error last', (kind) => {
    const stream = Buffer.from(kind === 'lf' ? LF_STREAM : kind === 'crlf' ? CRLF_STREAM : OPENAI_STREAM);
    const whole = sseEvents(stream.toString());
    for (let cut = 0; cut < stream.length; cut++) {
      const aligner = new EventAligner();
      const sent = [aligner.push(stream.subarray(0, Math.min(cut, 10))), ...(cut > 10 ? [aligner.push(stream.subarray(10, cut))] : []), aligner.salvage()];
      const events = sseEvents(Buffer.concat(sent).toString() + STREAM_FAILED_EVENT);
      expect(events.at(-1)!.event).toBe('error');
      for (const e of events) if (e.data !== '[DONE]') expect(() => JSON.parse(e.data)).not.toThrow();
      // What was sent before the error are the stream's own events, whole, in order.
      expect(events.slice(0, -1)).toEqual(whole.slice(0, events.length - 1));
    }
  });

  it('salvage: a held event whose data line ended goes, with the empty line that ends it; an event line alone or a partial line does not', () => {
    const a = new EventAligner();
    expect(a.push(Buffer.from('event: content_block_delta\ndata: {"a":1}\n')).length).toBe(0);
    expect(a.salvage().toString()).toBe('event: content_block_delta\ndata: {"a":1}\n\n');
    const b = new EventAligner();
    b.push(Buffer.from('event: content_block_delta\ndata: {"a":1}\r'));
    expect(b.salvage().toString()).toBe('event: content_block_delta\ndata: {"a":1}\r\n\n');
    const c = new EventAligner();
    c.push(Buffer.from('event: content_block_delta\ndata: {"a"'));
    expect(c.salvage().length).toBe(0);
    const d = new EventAligner();
    d.push(Buffer.from('event: ping\n'));
    expect(d.salvage().length).toBe(0);
    // `database:` is no data line.
    const e = new EventAligner();
    e.push(Buffer.from('database: x\n'));
    expect(e.salvage().length).toBe(0);
  });

  it('an event longer than MAX_HELD_EVENT passes unaligned rather than being held', () => {
    const a = new EventAligner();
    expect(a.push(Buffer.from('data: "')).length).toBe(0);
    const big = Buffer.alloc(MAX_HELD_EVENT, 0x61);
    expect(a.push(big).length).toBe(MAX_HELD_EVENT + 7);
    expect(a.push(Buffer.from('"\n\n')).toString()).toBe('"\n\n');
  });

  it('rest: a last event without its empty line is sent at a clean end', () => {
    const a = new EventAligner();
    expect(a.push(Buffer.from('data: {"x":1}\n\ndata: [DONE]')).toString()).toBe('data: {"x":1}\n\n');
    expect(a.rest().toString()).toBe('data: [DONE]');
    expect(a.rest().length).toBe(0);
  });
});
