// BufferedCall reads a provider's answer whole through a real undici Pool against a real HTTP server:
// what request() + arrayBuffer() gave (status, headers, body, the same errors), the cancel before and
// after the headers, the size bound, a connection lost mid-body, the headers and body timeouts, and
// WholeAnswer's reading of it.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool, errors, type Dispatcher } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BufferedCall, rawHeader } from './buffered-call.js';
import { WholeAnswer } from './provider-response.js';

let server: Server;
let pool: Pool;
const held: ServerResponse[] = [];
const BIG = Buffer.alloc(256 * 1024, 'x');

beforeAll(async () => {
  server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const sent = Buffer.concat(parts).toString();
      if (req.url === '/hang') return void held.push(res);
      if (req.url === '/half') {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
        res.write('{"partial":');
        return void setTimeout(() => res.socket?.destroy(), 20);
      }
      if (req.url === '/slow-body') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"a":');
        return void held.push(res);
      }
      if (req.url === '/trickle') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"a":');
        const t = setInterval(() => (res.destroyed ? clearInterval(t) : res.write(' ')), 20);
        return void held.push(res);
      }
      if (req.url === '/big') {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        return void res.end(BIG);
      }
      if (req.url === '/error') {
        res.writeHead(529, { 'Content-Type': 'application/json', 'Retry-After': '7' });
        return void res.end('{"type":"error","error":{"type":"overloaded_error","message":"busy"}}');
      }
      res.writeHead(200, { 'Content-Type': 'application/json', 'Request-Id': 'req_abc', 'X-Echo-Length': String(sent.length) });
      // Written in pieces: the answer reaches the handler as several chunks.
      res.write('{"echo":');
      setTimeout(() => res.end(`${JSON.stringify(sent)}}`), 5);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { connections: 4 });
});
afterAll(async () => {
  for (const res of held) res.destroy();
  await pool.close();
  await new Promise<void>((r) => server.close(() => r()));
});

function call(path: string, maxBytes = 1024 * 1024, opts: Partial<Dispatcher.DispatchOptions> = {}): BufferedCall {
  const c = new BufferedCall(maxBytes);
  pool.dispatch({ path, method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"hello":"world"}', ...opts }, c);
  return c;
}

describe('BufferedCall', () => {
  it('gives the status, the headers by any case and the whole body, as request() does', async () => {
    const before = performance.now();
    const a = await call('/ok').answer;
    expect(a.statusCode).toBe(200);
    expect(a.truncated).toBe(false);
    expect(JSON.parse(a.body.toString())).toEqual({ echo: '{"hello":"world"}' });
    expect(rawHeader(a.rawHeaders, 'request-id')).toBe('req_abc');
    expect(rawHeader(a.rawHeaders, 'content-type')).toBe('application/json');
    expect(rawHeader(a.rawHeaders, 'x-echo-length')).toBe('17');
    expect(rawHeader(a.rawHeaders, 'retry-after')).toBe('');
    expect(a.headersAt).toBeGreaterThanOrEqual(before);
    const viaRequest = await pool.request({ path: '/ok', method: 'POST', body: '{"hello":"world"}' });
    expect(Buffer.from(await viaRequest.body.arrayBuffer()).equals(a.body)).toBe(true);
    expect(viaRequest.headers['request-id']).toBe(rawHeader(a.rawHeaders, 'request-id'));
  });

  it('gives an error answer with its body and headers', async () => {
    const a = await call('/error').answer;
    expect(a.statusCode).toBe(529);
    expect(rawHeader(a.rawHeaders, 'retry-after')).toBe('7');
    expect(JSON.parse(a.body.toString()).error.type).toBe('overloaded_error');
  });

  it('cancels a call waiting for its headers with the AbortError request() gives', async () => {
    const c = call('/hang');
    await new Promise((r) => setTimeout(r, 20));
    expect(c.statusCode).toBe(0);
    c.abort();
    const err = await c.answer.then(() => null, (e: unknown) => e);
    const controller = new AbortController();
    const theirs = pool.request({ path: '/hang', method: 'POST', body: '{}', signal: controller.signal }).then(() => null, (e: unknown) => e);
    await new Promise((r) => setTimeout(r, 20));
    controller.abort();
    expect(err).toBeInstanceOf(DOMException);
    expect((err as DOMException).name).toBe((await theirs as DOMException).name);
    expect((err as DOMException).message).toBe((await theirs as DOMException).message);
  });

  it('cancels a call aborted before undici connected it', async () => {
    const c = new BufferedCall(1024);
    c.abort();
    pool.dispatch({ path: '/ok', method: 'POST', body: '{}' }, c);
    const err = await c.answer.then(() => null, (e: unknown) => e);
    expect((err as DOMException).name).toBe('AbortError');
  });

  it('cancels a call whose body is arriving: the answer comes with the AbortError as its body\'s, and the pool serves the next call', async () => {
    const c = call('/slow-body');
    for (let i = 0; i < 50 && c.statusCode === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(c.statusCode).toBe(200);
    c.abort();
    const a = await c.answer;
    expect(a.statusCode).toBe(200);
    expect(rawHeader(a.rawHeaders, 'content-type')).toBe('application/json');
    expect((a.bodyError as unknown as DOMException).name).toBe('AbortError');
    const whole = new WholeAnswer(a);
    expect(((await whole.bytes().then(() => null, (e: unknown) => e)) as DOMException).name).toBe('AbortError');
    expect(((await whole.text().then(() => null, (e: unknown) => e)) as DOMException).name).toBe('AbortError');
    expect((await call('/ok').answer).statusCode).toBe(200);
  });

  it('stops reading at the bound and closes the connection, giving what came before it', async () => {
    const a = await call('/big', 100_000).answer;
    expect(a.truncated).toBe(true);
    expect(a.bodyError).toBe(null);
    expect(a.body.length).toBe(100_000);
    expect(a.body.equals(BIG.subarray(0, 100_000))).toBe(true);
    // An error's text is what came before the bound; a whole body over it is not read at all.
    expect(await new WholeAnswer(a).text()).toBe(BIG.subarray(0, 100_000).toString());
    expect(await new WholeAnswer(a).bytes().then(() => 'read', (e: Error) => e.message)).toMatch(/over/);
    const whole = await call('/big', BIG.length).answer;
    expect(whole.truncated).toBe(false);
    expect(whole.body.equals(BIG)).toBe(true);
    expect((await call('/ok').answer).statusCode).toBe(200);
  });

  it('gives undici\'s error as the body\'s when the connection is lost mid-body', async () => {
    const a = await call('/half').answer;
    expect(a.statusCode).toBe(200);
    expect(a.bodyError).toBeInstanceOf(errors.UndiciError);
    expect(await new WholeAnswer(a).bytes().then(() => null, (e: unknown) => e)).toBe(a.bodyError);
  });

  it('rejects with undici\'s headers timeout', async () => {
    const err = await call('/hang', 1024, { headersTimeout: 50 }).answer.then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(errors.HeadersTimeoutError);
  });

  it('gives undici\'s body timeout as the body\'s error', async () => {
    const a = await call('/slow-body', 1024, { bodyTimeout: 50 }).answer;
    expect(a.bodyError).toBeInstanceOf(errors.BodyTimeoutError);
  });

  it('cuts a body still coming `bodyWithinMs` after the headers, though each chunk restarts undici\'s body timeout', async () => {
    const tooSlow = new Error('too slow');
    const c = new BufferedCall(1024, 150, tooSlow);
    pool.dispatch({ path: '/trickle', method: 'POST', body: '{}', bodyTimeout: 1_000 }, c);
    const a = await c.answer;
    expect(a.statusCode).toBe(200);
    expect(a.bodyError).toBe(tooSlow);
    expect(((await new WholeAnswer(a).bytes().then(() => null, (e: unknown) => e)))).toBe(tooSlow);
    expect((await call('/ok').answer).statusCode).toBe(200);
  });

  it('rejects a connection that fails with the connect error', async () => {
    const dead = new Pool('http://127.0.0.1:1', { connections: 1 });
    const c = new BufferedCall(1024);
    dead.dispatch({ path: '/', method: 'POST', body: '{}' }, c);
    const err = await c.answer.then(() => null, (e: unknown) => e);
    expect((err as { code?: string }).code).toBe('ECONNREFUSED');
    await dead.close();
  });
});
