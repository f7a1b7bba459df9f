// HTTP framing at the relay's edge, over raw TCP (fetch and the SDKs never send these shapes):
//   - a client pipelining requests on one connection without reading the answers gets that connection
//     closed, on every route that can answer inside uWS's parser callback (from the headers alone, the
//     key cache, or a body refused before the reservation). uWS went on parsing and buffered every such
//     answer: RSS grew without limit (+167 MB for 1,000,000 `GET /a`). Those answers are now deferred
//     a turn of the event loop, so the next request read finds one pending and uWS closes the connection;
//   - kept-alive clients keep their connection for successful requests all the same;
//   - a request with more than one Content-Length is answered 400 and its connection closed (RFC 9112
//     §6.3): uWS framed the body by the first and parsed the rest as the next request, the request
//     smuggling shape.
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { Client } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack,
} from '../tests/harness/gateway-stack.js';

const MODEL = 'claude-haiku-4-5';
let stack: GatewayStack;
let key: string;
let port: number;

beforeAll(async () => {
  // A key the cache keeps for the whole file: its requests are answered without a lookup, inside the
  // parser callback, which is the case that buffered.
  stack = await startGatewayStack({ env: { KEY_CACHE_TTL_MS: '600000' } });
  port = stack.relay.port;
  await mockChannel(stack, [MODEL]);
  key = (await createApiKey(stack, await fundedAccount(stack, 50_000_000))).key;
  const warm = await fetch(`${stack.relayUrl}/v1/models`, { headers: { 'x-api-key': key } });
  expect(warm.status).toBe(200);
});
afterAll(async () => {
  await stack?.close();
});

/**
 * A request read behind a pending answer closes the connection: at most one answer per read of the
 * connection gets out, where a client sending `n` requests was answered all `n` before.
 */
const ANSWER_BOUND = 10;
const STATUS_LINE = 'HTTP/1.1 ';

/** Resolves when the socket can take more, or is gone (events.once would reject on its 'error'). */
function drainedOrClosed(sock: Socket): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      sock.off('drain', done);
      sock.off('close', done);
      resolve();
    };
    sock.on('drain', done);
    sock.on('close', done);
  });
}

/**
 * Writes `request` `n` times on one connection without reading, then reads what the relay answered:
 * how many answers, and whether the relay closed the connection (rather than the answers running out).
 */
async function pipelineUnread(request: string, n: number): Promise<{ answers: number; closed: boolean }> {
  const sock = connect(port, '127.0.0.1');
  sock.pause();
  let closed = false;
  sock.on('close', () => { closed = true; });
  // EPIPE or ECONNRESET once the relay has closed the connection.
  sock.on('error', () => {});
  await once(sock, 'connect');
  const batch = request.repeat(1_000);
  for (let sent = 0; sent < n && !closed; sent += 1_000) {
    if (!sock.write(batch)) await drainedOrClosed(sock);
  }
  let answers = 0;
  let carry = '';
  return new Promise((resolve) => {
    const done = () => {
      sock.destroy();
      resolve({ answers, closed });
    };
    if (closed && sock.readableLength === 0) return done();
    sock.setEncoding('latin1');
    sock.on('data', (chunk: string) => {
      const text = carry + chunk;
      for (let at = text.indexOf(STATUS_LINE); at >= 0; at = text.indexOf(STATUS_LINE, at + 1)) answers++;
      // A status line split between two chunks is counted with the next one.
      carry = text.slice(-(STATUS_LINE.length - 1));
      if (carry.includes('H')) carry = carry.slice(carry.indexOf('H'));
      else carry = '';
      if (answers >= n) done();
    });
    sock.on('close', done);
    sock.resume();
  });
}

describe('a client pipelining requests without reading the answers', () => {
  it('gets its connection closed after a bounded number of 404s', async () => {
    const n = 200_000;
    const r = await pipelineUnread('GET /a HTTP/1.1\r\nHost: x\r\n\r\n', n);
    expect(r.closed).toBe(true);
    expect(r.answers).toBeLessThan(ANSWER_BOUND);
  });

  const cases: [string, () => string][] = [
    ['GET /health', () => 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['POST /v1/messages without a key (refused from the headers)', () => 'POST /v1/messages HTTP/1.1\r\nHost: x\r\ncontent-length: 0\r\n\r\n'],
    ['POST /v1/messages with a cached key and an invalid body', () => `POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\ncontent-length: 2\r\n\r\n{}`],
    ['POST /v1/chat/completions with a cached key and an invalid body', () => `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nauthorization: Bearer ${key}\r\ncontent-length: 2\r\n\r\n{}`],
    ['POST /v1/messages/count_tokens without a key', () => 'POST /v1/messages/count_tokens HTTP/1.1\r\nHost: x\r\ncontent-length: 0\r\n\r\n'],
    ['POST /v1/messages/count_tokens with a cached key and an invalid body', () => `POST /v1/messages/count_tokens HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\ncontent-length: 2\r\n\r\n{}`],
    ['GET /v1/models without a key', () => 'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['GET /v1/models with a cached key (200)', () => `GET /v1/models HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\n\r\n`],
  ];
  for (const [name, request] of cases) {
    it(`is closed after a bounded number of answers: ${name}`, async () => {
      const n = 20_000;
      const r = await pipelineUnread(request(), n);
      expect(r.closed).toBe(true);
      expect(r.answers).toBeLessThan(ANSWER_BOUND);
    });
  }

  it('reaches no provider', async () => {
    expect(stack.mock.stats.requests).toBe(0);
  });
});

describe('a kept-alive client', () => {
  it('reuses one connection for successful requests of every route', async () => {
    const client = new Client(`http://127.0.0.1:${port}`, { pipelining: 1 });
    let connections = 0;
    client.on('connect', () => { connections++; });
    const headers = { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' };
    const messages = JSON.stringify({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'Hi' }] });
    try {
      for (let i = 0; i < 3; i++) {
        for (const [method, path, body] of [
          ['POST', '/v1/messages', messages],
          ['POST', '/v1/messages', JSON.stringify({ model: MODEL, max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'Hi' }] })],
          ['POST', '/v1/chat/completions', JSON.stringify({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'Hi' }] })],
          ['POST', '/v1/messages/count_tokens', messages],
          ['GET', '/v1/models', undefined],
          ['GET', '/health', undefined],
          ['GET', `/v1/models/${MODEL}`, undefined],
        ] as const) {
          const res = await client.request({ method, path, headers: path.includes('chat') ? { ...headers, authorization: `Bearer ${key}` } : headers, body });
          await res.body.text();
          expect(res.statusCode, `${method} ${path}`).toBe(200);
          expect(res.headers.connection, `${method} ${path}`).not.toBe('close');
        }
      }
    } finally {
      await client.close();
    }
    expect(connections).toBe(1);
  });
});

describe('answers without a body (a preflight\'s 204, a HEAD\'s)', () => {
  /** Writes each request on one connection after the answer to the one before; the raw bytes read. */
  async function inTurn(requests: string[]): Promise<string[]> {
    const sock = connect(port, '127.0.0.1');
    sock.on('error', () => {});
    sock.setEncoding('latin1');
    let text = '';
    let closed = false;
    sock.on('data', (d: string) => { text += d; });
    sock.on('close', () => { closed = true; });
    await once(sock, 'connect');
    const answers: string[] = [];
    try {
      for (const request of requests) {
        text = '';
        sock.write(request, 'latin1');
        const by = Date.now() + 3_000;
        // An answer is whole once its headers are and, with a length and a body, that many bytes.
        while (!closed && Date.now() < by) {
          const end = text.indexOf('\r\n\r\n');
          if (end >= 0) {
            const head = answerOf(text);
            const bodyWanted = !request.startsWith('HEAD') && head.status !== 204 ? Number(head.headers['content-length'] ?? 0) : 0;
            if (text.length >= end + 4 + bodyWanted) break;
          }
          await new Promise((r) => setTimeout(r, 10));
        }
        answers.push(text);
      }
    } finally {
      sock.destroy();
    }
    return answers;
  }

  it('keeps the connection for the request after them: a browser\'s POST after its preflight, a second HEAD', async () => {
    const body = JSON.stringify({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'Hi' }] });
    const post = `POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\nanthropic-version: 2023-06-01\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
    const preflight = 'OPTIONS /v1/messages HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: x-api-key, content-type\r\n\r\n';
    const head = 'HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n';
    const [first, second, third, fourth] = await inTurn([preflight, post, head, head]);
    expect(answerOf(first!).status).toBe(204);
    // No length at all on a 204 (RFC 9110 §8.6); this uWS build wrote 2^63 for none.
    expect(answerOf(first!).headers['content-length']).toBeUndefined();
    expect(answerOf(second!).status).toBe(200);
    expect(JSON.parse(answerOf(second!).body)).toMatchObject({ type: 'message' });
    for (const a of [third!, fourth!]) {
      expect(answerOf(a).status).toBe(200);
      expect(answerOf(a).headers['content-length']).toBe(String('{"status":"ok"}'.length));
      expect(a.endsWith('\r\n\r\n')).toBe(true);
    }
  });

  it('answers HEAD on the model list and a model as GET does, without the body, on one connection', async () => {
    const auth = `x-api-key: ${key}\r\nanthropic-version: 2023-06-01\r\n`;
    const [list, model, get] = await inTurn([
      `HEAD /v1/models HTTP/1.1\r\nHost: x\r\n${auth}\r\n`,
      `HEAD /v1/models/${MODEL} HTTP/1.1\r\nHost: x\r\n${auth}\r\n`,
      `GET /v1/models HTTP/1.1\r\nHost: x\r\n${auth}\r\n`,
    ]);
    const full = answerOf(get!);
    expect(full.status).toBe(200);
    for (const a of [list!, model!]) {
      expect(answerOf(a).status).toBe(200);
      expect(answerOf(a).headers['content-type']).toBe('application/json');
      expect(a.endsWith('\r\n\r\n')).toBe(true);
    }
    // The length GET's body has; the model's answer is its own, shorter body.
    expect(answerOf(list!).headers['content-length']).toBe(String(Buffer.byteLength(full.body)));
    expect(Number(answerOf(model!).headers['content-length'])).toBeGreaterThan(0);
    // Unauthenticated, a HEAD is refused as a GET would be: the status, no body.
    const { text } = await sendUntilClosed('HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n', 2_000);
    expect(answerOf(text).status).toBe(401);
    expect(text.endsWith('\r\n\r\n')).toBe(true);
  });

  it('sends no body with a HEAD\'s 404, and closes the connection at once as after any error', async () => {
    const { text, timedOut } = await sendUntilClosed('HEAD /v1/nothing-here HTTP/1.1\r\nHost: x\r\n\r\n', 2_000);
    expect(timedOut).toBe(false);
    expect(answerOf(text).status).toBe(404);
    expect(text.endsWith('\r\n\r\n')).toBe(true);
  });
});

/** Sends `bytes` on a new connection and reads until the relay closes it; `timedOut` when it did not. */
async function sendUntilClosed(bytes: string, timeoutMs = 5_000): Promise<{ text: string; timedOut: boolean }> {
  const sock = connect(port, '127.0.0.1');
  sock.on('error', () => {});
  let text = '';
  sock.setEncoding('latin1');
  sock.on('data', (d: string) => { text += d; });
  sock.write(bytes, 'latin1');
  const timer = new Promise<boolean>((resolve) => setTimeout(() => resolve(true), timeoutMs).unref());
  const timedOut = await Promise.race([once(sock, 'close').then(() => false), timer]);
  sock.destroy();
  return { text, timedOut };
}

function answerOf(text: string): { status: number; headers: Record<string, string>; body: string } {
  const end = text.indexOf('\r\n\r\n');
  const lines = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  return { status: Number(lines[0]!.split(' ')[1]), headers, body: text.slice(end + 4, end + 4 + Number(headers['content-length'] ?? 0)) };
}

describe('a request with more than one Content-Length', () => {
  const body = JSON.stringify({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'Hi' }] });

  for (const [path, shape] of [['/v1/messages', 'anthropic'], ['/v1/chat/completions', 'openai']] as const) {
    it(`is answered 400 in ${shape}'s error JSON on ${path}, its connection closed, nothing forwarded`, async () => {
      const before = stack.mock.stats.requests;
      const auth = shape === 'openai' ? `authorization: Bearer ${key}` : `x-api-key: ${key}`;
      const head = `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}\r\ncontent-type: application/json\r\n` +
        `content-length: 5\r\ncontent-length: ${body.length}\r\n\r\n`;
      const r = await sendUntilClosed(head + body);
      expect(r.timedOut).toBe(false);
      const answer = answerOf(r.text);
      expect(answer.status).toBe(400);
      expect(answer.headers.connection).toBe('close');
      const json = JSON.parse(answer.body) as { type?: string; error: { type: string; message: string } };
      if (shape === 'anthropic') expect(json).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
      else expect(json.error.type).toBe('invalid_request_error');
      expect(json.error.message).toMatch(/Content-Length/);
      // Exactly one answer: nothing after the first Content-Length's 5 bytes was taken as a request.
      expect(r.text.split('HTTP/1.1 ').length - 1).toBe(1);
      expect(stack.mock.stats.requests).toBe(before);
    });
  }

  it('never runs a request smuggled after the first Content-Length\'s body', async () => {
    const before = stack.mock.stats.requests;
    const smuggled = `POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
    const r = await sendUntilClosed(`POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\ncontent-length: 5\r\ncontent-length: ${5 + smuggled.length}\r\n\r\nhello${smuggled}`);
    expect(r.timedOut).toBe(false);
    // Closed with the 400, or (the smuggled bytes read with it) before it: never a 200.
    expect(r.text).not.toContain('HTTP/1.1 200');
    if (r.text) expect(answerOf(r.text).status).toBe(400);
    // A request sent after it reaches the provider alone: the smuggled one, started first, never did.
    const control = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST', headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' }, body,
    });
    expect(control.status).toBe(200);
    await control.arrayBuffer();
    expect(stack.mock.stats.requests).toBe(before + 1);
  });

  it('is refused on a route without a body too, and repeated equal values as well', async () => {
    const r = await sendUntilClosed('GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\ncontent-length: 0\r\n\r\n');
    expect(r.timedOut).toBe(false);
    expect(answerOf(r.text)).toMatchObject({ status: 400, headers: { connection: 'close' } });
  });

  it('leaves a request with a single Content-Length alone', async () => {
    const r = await sendUntilClosed(`POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    expect(answerOf(r.text).status).toBe(200);
  });
});

describe('a request whose Transfer-Encoding is not "chunked" alone', () => {
  const body = JSON.stringify({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'Hi' }] });
  const chunked = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;

  // uWS framed every one of these as chunked, where a proxy reading the codings refuses or frames them otherwise.
  for (const coding of ['foo', 'xchunked', 'chunked, gzip', 'gzip, chunked', 'chunked, identity', 'chunked\r\nTransfer-Encoding: chunked']) {
    it(`is answered 400 and closed, nothing forwarded: ${JSON.stringify(coding)}`, async () => {
      const before = stack.mock.stats.requests;
      const r = await sendUntilClosed(`POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\ncontent-type: application/json\r\n` +
        `Transfer-Encoding: ${coding}\r\n\r\n${chunked}`);
      expect(r.timedOut).toBe(false);
      const answer = answerOf(r.text);
      expect(answer.status).toBe(400);
      expect(answer.headers.connection).toBe('close');
      expect(JSON.parse(answer.body)).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: 'The request\'s Transfer-Encoding is not "chunked" alone: its body cannot be framed.' } });
      expect(r.text.split('HTTP/1.1 ').length - 1).toBe(1);
      expect(stack.mock.stats.requests).toBe(before);
    });
  }

  it('leaves "chunked" alone, in any case', async () => {
    for (const coding of ['chunked', 'Chunked', ' CHUNKED ']) {
      const r = await sendUntilClosed(`POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\ncontent-type: application/json\r\nconnection: close\r\n` +
        `Transfer-Encoding: ${coding}\r\n\r\n${chunked}`);
      expect(answerOf(r.text).status, coding).toBe(200);
    }
  });
});

describe('a body coded on a second Content-Encoding line', () => {
  it('is refused 415 as one line `identity, gzip` is (only the first line was read, and the gzip body went on as JSON)', async () => {
    const before = stack.mock.stats.requests;
    const body = JSON.stringify({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'Hi' }] });
    const r = await sendUntilClosed(`POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\ncontent-type: application/json\r\nconnection: close\r\n` +
      `Content-Encoding: identity\r\nContent-Encoding: gzip\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    const answer = answerOf(r.text);
    expect(answer.status).toBe(415);
    expect(JSON.parse(answer.body)).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringMatching(/Content-Encoding/) } });
    // Two identity lines are identity.
    const plain = await sendUntilClosed(`POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\ncontent-type: application/json\r\nconnection: close\r\n` +
      `Content-Encoding: identity\r\nContent-Encoding: Identity\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    expect(answerOf(plain.text).status).toBe(200);
    expect(stack.mock.stats.requests).toBe(before + 1);
  });
});
