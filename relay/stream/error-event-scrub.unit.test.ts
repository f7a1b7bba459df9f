// ErrorEventScrubber: a provider's error event on its way to the client loses the channel's key (by
// value, as JSON escapes it, however the provider escaped it) and anything key-shaped; every other
// chunk is written as it came (the same object: not copied, not re-encoded), key-shaped content
// included. An error event written in pieces is held until its end, within a bound.
import { describe, expect, it } from 'vitest';
import { CENSOR } from '../../infra/secrets/credential-text.js';
import { ErrorEventScrubber, horspoolShifts, indexOfError, indexOfPattern, mayHoldErrorEvent } from './error-event-scrub.js';
import { MAX_HELD_EVENT } from './event-aligner.js';

const KEY = 'chan-cred-7Hq2Lr9Xw4Tb8Kz1';
const SHAPED = 'sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123';
const MESSAGE = `Incorrect API key provided: ${KEY}. Also ${SHAPED}, Bearer abcdefgh12345678 (org-123)`;

function scrubber(key: string | undefined = KEY) {
  const out: (Buffer | string)[] = [];
  const s = new ErrorEventScrubber(key, (b) => out.push(b));
  return { s, out, text: () => out.map((b) => b.toString()).join('') };
}

const anthropicError = (message: string) => `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'authentication_error', message } })}\n\n`;
const openaiError = (message: string) => `data: ${JSON.stringify({ error: { message, type: 'invalid_request_error', code: 'invalid_api_key' } })}\n\n`;
const delta = (text: string) => `event: content_block_delta\ndata: ${JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } })}\n\n`;
const chatDelta = (content: string) => `data: ${JSON.stringify({ id: 'c', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;

/** The data of each event in an SSE text (its lines joined), parsed. */
function dataOf(sse: string): unknown[] {
  return sse.split(/\n\n/).filter((e) => e.includes('data:')).map((e) => JSON.parse(e.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5)).join('\n')));
}

function expectClean(text: string): void {
  expect(text).not.toContain(KEY);
  expect(text).not.toContain(SHAPED);
  expect(text).not.toContain('abcdefgh12345678');
  expect(text).toContain(CENSOR);
}

describe('content passes as it came', () => {
  it('a chunk without an error event is written as the same object, key-shaped text and the word "error" included', () => {
    const { s, out } = scrubber();
    const chunks: (Buffer | string)[] = [
      Buffer.from(delta(`use ${SHAPED} or ${KEY}`)),
      delta('an error: the "error" key, event: error'),
      Buffer.from(chatDelta(`{"error": "${SHAPED}"}`)),
      chatDelta('error'),
      Buffer.from(delta('error') + 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"error"'),
    ];
    for (const c of chunks.slice(0, 4)) s.push(c);
    expect(out).toHaveLength(4);
    chunks.slice(0, 4).forEach((c, i) => expect(out[i]).toBe(c));
    // An event cut after its quoted "error" is held to its end, then written unchanged.
    s.push(chunks[4]!);
    expect(out.slice(4).map((b) => b.toString())).toEqual([delta('error')]);
    s.push(Buffer.from(`}}\n\n${delta(SHAPED)}`));
    const text = out.slice(4).map((b) => b.toString()).join('');
    expect(text).toBe(chunks[4]!.toString() + `}}\n\n${delta(SHAPED)}`);
  });

  it('the pre-check: `error` quoted or as an event name, not in escaped or plain text', () => {
    expect(mayHoldErrorEvent(Buffer.from('data: {"text":"an \\"error\\" here"}\n\n'))).toBe(false);
    expect(mayHoldErrorEvent(Buffer.from('data: {"text":"errors and error"}\n\n'))).toBe(false);
    expect(mayHoldErrorEvent(Buffer.from('data: {"error":{}}\n\n'))).toBe(true);
    expect(mayHoldErrorEvent(Buffer.from('data: {"type": "error"}\n\n'))).toBe(true);
    expect(mayHoldErrorEvent(Buffer.from('event: error\ndata: x\n\n'))).toBe(true);
    expect(mayHoldErrorEvent(Buffer.from('id: 1\r\nevent:error\r\n'))).toBe(true);
  });
});

describe('an error event is scrubbed', () => {
  it('Anthropic\'s, among content events in one chunk: only the error changes', () => {
    const { s, text } = scrubber();
    const before = delta(`say ${SHAPED}`);
    s.push(Buffer.from(before + anthropicError(MESSAGE) + delta('after')));
    const t = text();
    expect(t.startsWith(before)).toBe(true);
    expect(t.endsWith(delta('after'))).toBe(true);
    const error = t.slice(before.length, t.length - delta('after').length);
    expectClean(error);
    expect(error.startsWith('event: error\ndata: ')).toBe(true);
    expect(dataOf(error)[0]).toEqual({ type: 'error', error: { type: 'authentication_error', message: `Incorrect API key provided: ${CENSOR}. Also sk-${CENSOR}, Bearer ${CENSOR} (org-123)` } });
  });

  // JSON.parse keeps the last of two members of one name: the scrub of the parsed value saw only the
  // clean second `error` and passed the event as the provider wrote it, the key in the first one.
  it('an error event naming its member twice, the key in the first: scrubbed as text too', () => {
    const event = `data: {"error":{"message":"Incorrect API key provided: ${KEY}","type":"invalid_request_error"},"error":{"message":"bad request","type":"invalid_request_error"}}\n\n`;
    const { s, text } = scrubber();
    s.push(Buffer.from(event));
    expect(text()).not.toContain(KEY);
    expect(text()).toContain(CENSOR);
  });

  it('a data-only {"type":"error"}, OpenAI\'s {"error":…} (string or object), as a string or a Buffer', () => {
    for (const event of [
      `data: ${JSON.stringify({ type: 'error', error: { type: 'api_error', message: MESSAGE } })}\n\n`,
      openaiError(MESSAGE),
      `data: ${JSON.stringify({ error: MESSAGE })}\n\n`,
    ]) {
      for (const chunk of [event, Buffer.from(event)]) {
        const { s, text } = scrubber();
        s.push(chunk);
        expectClean(text());
        expect(dataOf(text())).toHaveLength(1);
      }
    }
  });

  it('the key however the provider escaped it: JSON\'s escapes, `\\/`, `\\u` escapes, in a key name, in data over several lines', () => {
    const key = 'ab"c\\d/ef-0123456789';
    const escaped = JSON.stringify(key).slice(1, -1);
    const variants = [
      `event: error\ndata: {"type":"error","error":{"message":"bad key ${escaped}"}}\n\n`,
      `event: error\ndata: {"type":"error","error":{"message":"bad key ${escaped.replace('/', '\\/')}"}}\n\n`,
      `event: error\ndata: {"type":"error","error":{"message":"bad key ${escaped.replace('a', '\\u0061')}"}}\n\n`,
      `data: {"error":{"${escaped}":"the key"}}\n\n`,
      `event: error\ndata: {"type":"error",\ndata: "error":{"message":"bad key ${escaped}"}}\n\n`,
    ];
    for (const v of variants) {
      const { s, text } = scrubber(key);
      s.push(Buffer.from(v));
      const data = dataOf(text());
      expect(JSON.stringify(data)).not.toContain(escaped);
      expect(JSON.stringify(data)).toContain(CENSOR);
    }
  });

  it('an `event: error` whose data is no JSON is scrubbed as text', () => {
    const { s, text } = scrubber();
    s.push(`event: error\ndata: ${MESSAGE}\n\n`);
    expectClean(text());
    expect(text()).toBe(`event: error\ndata: Incorrect API key provided: ${CENSOR}. Also sk-${CENSOR}, Bearer ${CENSOR} (org-123)\n\n`);
  });

  it('CRLF framing is kept', () => {
    const { s, text } = scrubber();
    s.push(Buffer.from(anthropicError(MESSAGE).replaceAll('\n', '\r\n')));
    expectClean(text());
    expect(text().endsWith('\r\n\r\n')).toBe(true);
    expect(text().split('\r\n')).toHaveLength(4);
  });

  it('an error event written line by line is held to its end, then scrubbed; the content before it is not held', () => {
    const { s, out, text } = scrubber();
    const first = delta('before');
    s.push(first);
    expect(out).toEqual([first]);
    const lines = openaiError(MESSAGE).split(/(?<=\n)/);
    // `event: error`, then its data line; OpenAI's error over two data lines, then its end.
    for (const piece of ['event: error\n', `data: ${JSON.stringify({ type: 'error', error: { message: MESSAGE } }).replace(',', ',\ndata: ')}\n`, '\n', ...lines]) {
      s.push(Buffer.from(piece));
    }
    s.flush();
    expectClean(text());
    expect(dataOf(text().slice(first.length))).toHaveLength(2);
  });

  it('an error event without its empty line at the stream\'s end is scrubbed at flush()', () => {
    const { s, text } = scrubber();
    s.push(Buffer.from(anthropicError(MESSAGE).trimEnd()));
    expect(text()).toBe('');
    s.flush();
    expectClean(text());
  });

  it('an event held past MAX_HELD_EVENT is written then, scrubbed as text when it looks like an error', () => {
    const { s, out, text } = scrubber();
    s.push(Buffer.from(`event: error\ndata: {"type":"error","error":{"message":"${KEY} `));
    const junk = Buffer.alloc(64 * 1024, 0x61);
    let sent = 0;
    while (out.length === 0) {
      s.push(junk);
      sent += junk.length;
      expect(sent).toBeLessThanOrEqual(MAX_HELD_EVENT + junk.length);
    }
    expect(text()).not.toContain(KEY);
    s.push(Buffer.from('"}}\n\n'));
    expect(text().endsWith('"}}\n\n')).toBe(true);
  });

  it('without a channel key, key shapes are scrubbed', () => {
    const { s, text } = scrubber(undefined);
    s.push(anthropicError(`bad ${SHAPED}`));
    expect(text()).not.toContain(SHAPED);
  });

  it('an error event with nothing to scrub is written as it came', () => {
    const { s, out } = scrubber();
    const event = Buffer.from(anthropicError('Overloaded'));
    s.push(event);
    expect(out).toEqual([event]);
    expect(out[0]).toBe(event);
  });
});

describe('indexOfError', () => {
  it('finds the bytes `error` where Buffer#indexOf does, at every offset and next to every shifting byte', () => {
    const fillers = ['', 'e', 'r', 'o', 'x', 'er', 'err', 'erro', 'rr', 'or', 'eerror', 'errror', 'rror', 'erorr', 'errorr'];
    for (const before of fillers) {
      for (const after of fillers) {
        for (const middle of ['error', 'erro', 'rror', 'eror', 'errer', '']) {
          const buf = Buffer.from(`${before}${middle}${after}`);
          expect(indexOfError(buf), buf.toString()).toBe(buf.indexOf('error'));
        }
      }
    }
    const event = Buffer.from('event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"tok "}}\n\n');
    expect(indexOfError(event)).toBe(-1);
    expect(indexOfError(Buffer.from('data: {"error":{"message":"x"}}\n\n'))).toBe(8);
  });
});

// Findings F2 of the secrets review: events that are not error-shaped reached the client byte for byte.
describe('events no SDK reads as errors, that hold the channel key', () => {
  const SLASHED = 'zqPHP/KEY+q8Wm3/Nv5Bx7Lk2J';
  const escapedSlashes = SLASHED.replaceAll('/', '\\/');

  it('vLLM\'s {"object":"error",…} is an error event: scrubbed, as a string and as a Buffer', () => {
    const event = `data: ${JSON.stringify({ object: 'error', message: MESSAGE, type: 'BadRequestError', code: 401 })}\n\n`;
    for (const chunk of [event, Buffer.from(event)]) {
      const { s, text } = scrubber();
      s.push(chunk);
      expectClean(text());
      expect((dataOf(text())[0] as { object: string }).object).toBe('error');
    }
  });

  it('a data line that is no JSON: the key as written, `\\/`-escaped or `\\u`-escaped, and key shapes are scrubbed', () => {
    const uEscaped = [...SLASHED].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
    for (const form of [SLASHED, escapedSlashes, SLASHED.replace('<', '\\u003C')]) {
      const { s, text } = scrubber(SLASHED);
      s.push(Buffer.from(`data: {broken Incorrect API key provided: ${form} ${SHAPED}\n\n`));
      expect(text()).toBe(`data: {broken Incorrect API key provided: ${CENSOR} sk-${CENSOR}\n\n`);
    }
    // Fully `\u`-escaped, the key's anchor is not there: the chunk is not read (see key-forms.ts).
    const { s, out } = scrubber(SLASHED);
    const chunk = Buffer.from(`data: {broken ${uEscaped}\n\n`);
    s.push(chunk);
    expect(out[0]).toBe(chunk);
  });

  it('an unknown `event:` name, its data JSON or not, is scrubbed of the key', () => {
    for (const data of [JSON.stringify({ message: `bad key ${SLASHED}` }), `{"message":"bad key ${escapedSlashes}"}`, `bad key ${SLASHED}`]) {
      const { s, text } = scrubber(SLASHED);
      s.push(`event: x\ndata: ${data}\n\n`);
      expect(text()).not.toContain(SLASHED);
      expect(text()).not.toContain(escapedSlashes);
      expect(text()).toContain(CENSOR);
    }
  });

  it('a well-formed event of either protocol that holds the key is written as it came (the same object)', () => {
    const { s, out } = scrubber(SLASHED);
    const chunks: (Buffer | string)[] = [
      Buffer.from(delta(`the key ${SLASHED}`)),
      chatDelta(`the key ${SLASHED}`),
      Buffer.from(`event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"${escapedSlashes}"}}\n\n`),
      Buffer.from('data: [DONE]\n\n'),
    ];
    for (const c of chunks) s.push(c);
    expect(out).toHaveLength(chunks.length);
    chunks.forEach((c, i) => expect(out[i]).toBe(c));
  });
});

describe('indexOfPattern', () => {
  it('finds a pattern where Buffer#indexOf does, at every offset, with repeats and near misses', () => {
    for (const p of ['Nv5Bx7Lk2J', 'aaaaab', 'abcabcabd', 'sk-ant-mock-channel-credential']) {
      const pattern = Buffer.from(p);
      const shifts = horspoolShifts(pattern);
      for (const filler of ['', 'x', 'aaaa', 'abcabcab', p.slice(0, -1), p.slice(1)]) {
        for (let at = 0; at < 12; at++) {
          const hay = Buffer.from(filler.repeat(3).slice(0, at) + p + filler);
          expect(indexOfPattern(hay, pattern, shifts)).toBe(hay.indexOf(pattern));
          const miss = Buffer.from(filler.repeat(3).slice(0, at) + p.slice(0, -1) + '!' + filler);
          expect(indexOfPattern(miss, pattern, shifts)).toBe(miss.indexOf(pattern));
        }
      }
      expect(indexOfPattern(Buffer.alloc(0), pattern, shifts)).toBe(-1);
    }
  });
});

// Before: passed as the provider wrote it; both SDKs read billing_error / insufficient_quota (and "Your
// credit balance is too low") as the client's own balance, as the relay's own 402 words it.
describe('a provider\'s account refusal mid-stream', () => {
  it('Anthropic\'s billing_error (and its "credit balance is too low" in any type) becomes an api_error about the gateway\'s own account', () => {
    for (const error of [
      { type: 'billing_error', message: 'Your credit balance is too low to access the Anthropic API.' },
      { type: 'invalid_request_error', message: 'Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing.' },
      { type: 'api_error', message: 'You exceeded your current quota, please check your plan and billing details.' },
    ]) {
      const { s, text } = scrubber();
      s.push(delta('Hel') + `event: error\ndata: ${JSON.stringify({ type: 'error', error })}\n\n`);
      expect(text()).toContain('event: error\n');
      expect(dataOf(text())).toEqual([
        { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hel' } },
        { type: 'error', error: { type: 'api_error', message: 'The model provider refused this gateway\'s own credential or account for the request (not your API key).' } },
      ]);
    }
  });

  it('OpenAI\'s insufficient_quota becomes a server_error about the gateway\'s own account', () => {
    const { s, text } = scrubber();
    s.push(chatDelta('Hel'));
    s.push(`data: ${JSON.stringify({ error: { message: 'You exceeded your current quota, please check your plan and billing details.', type: 'insufficient_quota', param: null, code: 'insufficient_quota' } })}\n\n`);
    expect(dataOf(text())[1]).toEqual({ error: { message: 'The model provider refused this gateway\'s own credential or account for the request (not your API key).', type: 'server_error', param: null, code: null } });
  });

  // Before: the reply's protocol was read off the error's shape, and an `error` that is a string or
  // vLLM's object passed as the provider wrote it.
  it('told in the client\'s protocol whatever the error\'s shape: an Anthropic error without its type, a string error, vLLM\'s object', () => {
    const anthropicApiError = { type: 'error', error: { type: 'api_error', message: 'The model provider refused this gateway\'s own credential or account for the request (not your API key).' } };
    const openaiServerError = { error: { message: 'The model provider refused this gateway\'s own credential or account for the request (not your API key).', type: 'server_error', param: null, code: null } };
    const shapes = [
      { error: { type: 'billing_error', message: 'Your credit balance is too low to access the Anthropic API.' } },
      { error: 'You exceeded your current quota, please check your plan and billing details.' },
      { object: 'error', message: 'Insufficient quota for this organization', type: 'insufficient_quota', code: 429 },
    ];
    for (const shape of shapes) {
      for (const [protocol, want] of [['anthropic', anthropicApiError], ['openai', openaiServerError]] as const) {
        const out: string[] = [];
        const s = new ErrorEventScrubber(KEY, (b) => out.push(b.toString()), protocol);
        s.push(`event: error\ndata: ${JSON.stringify(shape)}\n\n`);
        expect(dataOf(out.join('')), `${protocol} ${JSON.stringify(shape)}`).toEqual([want]);
      }
    }
  });

  it('any other error passes as it came; a client\'s words quoted in one do not make it a refusal', () => {
    const events = [
      `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })}\n\n`,
      `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: 'tool_use id insufficient_quota: your credit balance is too low' } })}\n\n`,
      `data: ${JSON.stringify({ error: { message: 'Rate limit reached', type: 'requests', code: 'rate_limit_exceeded' } })}\n\n`,
    ];
    for (const e of events) {
      const { s, out } = scrubber();
      s.push(e);
      expect(out.map(String).join('')).toBe(e);
    }
  });
});
