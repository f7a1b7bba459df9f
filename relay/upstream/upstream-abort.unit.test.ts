// UpstreamAbort cancels an undici request as an AbortController's signal does: before the answer's
// headers (request() rejects with the same AbortError), after them (the body is destroyed with it),
// and undici lets go of its listener once a request is over (nothing accumulates per request).
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UpstreamAbort } from './upstream-abort.js';

let server: Server;
let pool: Pool;
/** Answers held open by the server (/hang: no headers; /stream: headers and one chunk). */
const held: ServerResponse[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    if (req.url === '/hang') return void held.push(res);
    if (req.url === '/stream') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: ping\n\n');
      return void held.push(res);
    }
    res.end('ok');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { connections: 4 });
});
afterAll(async () => {
  for (const res of held) res.destroy();
  await pool.close();
  await new Promise<void>((r) => server.close(() => r()));
});

/** What request() rejects with when aborted before the headers, with this signal. */
async function abortedBeforeHeaders(signal: UpstreamAbort | AbortController): Promise<unknown> {
  const sig = signal instanceof AbortController ? signal.signal : (signal as unknown as AbortSignal);
  const pending = pool.request({ path: '/hang', method: 'POST', body: '{}', signal: sig });
  await new Promise((r) => setTimeout(r, 20));
  signal.abort();
  return pending.then(() => 'answered', (err: unknown) => err);
}

describe('UpstreamAbort', () => {
  it('cancels a request waiting for its headers with the error an AbortController gives', async () => {
    const ours = await abortedBeforeHeaders(new UpstreamAbort());
    const theirs = await abortedBeforeHeaders(new AbortController());
    expect(ours).toBeInstanceOf(DOMException);
    expect((ours as DOMException).name).toBe('AbortError');
    expect((ours as DOMException).name).toBe((theirs as DOMException).name);
    expect((ours as DOMException).message).toBe((theirs as DOMException).message);
  });

  it('destroys the body of a stream in progress with that error', async () => {
    const abort = new UpstreamAbort();
    const res = await pool.request({ path: '/stream', method: 'POST', body: '{}', signal: abort as unknown as AbortSignal });
    expect(res.statusCode).toBe(200);
    const failed = new Promise<Error>((resolve) => res.body.on('error', resolve));
    res.body.resume();
    abort.abort();
    const err = await failed;
    expect(err.name).toBe('AbortError');
    expect(res.body.destroyed).toBe(true);
    expect(abort.aborted).toBe(true);
    abort.abort(); // a second abort does nothing
  });

  it('holds no listener once a request is over, and aborting then changes nothing', async () => {
    const abort = new UpstreamAbort();
    const res = await pool.request({ path: '/ok', method: 'POST', body: '{}', signal: abort as unknown as AbortSignal });
    expect(abort.listenerCount).toBe(1);
    expect(await res.body.text()).toBe('ok');
    await new Promise((r) => setImmediate(r));
    expect(abort.listenerCount).toBe(0);
    abort.abort();
    expect(abort.reason).toBeInstanceOf(DOMException);
  });

  it('rejects at once a request given an already aborted handle', async () => {
    const abort = new UpstreamAbort();
    abort.abort();
    const err = await pool.request({ path: '/ok', method: 'POST', body: '{}', signal: abort as unknown as AbortSignal }).then(() => null, (e: unknown) => e);
    expect((err as DOMException).name).toBe('AbortError');
  });
});
