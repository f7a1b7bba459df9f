// One request and its response on uWebSockets.js, and the bookkeeping every handler needs: when
// `res` may still be touched, the timer or drain callback to cancel when the exchange ends, and the
// body collected from uWS' chunks.
import uWS from 'uWebSockets.js';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { randomId } from './wire-format.js';

export interface Exchange {
  res: HttpResponse;
  requestId: string;
  /** The client went away (or we force-closed): `res` must not be touched any more. */
  aborted: boolean;
  /** The mock has finished (or deliberately killed) the response. */
  done: boolean;
  timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  /** Called when the socket drains after a write() reported backpressure. */
  onDrain: (() => void) | undefined;
}

export interface Exchanges {
  /** Exchanges begun and not yet finished. */
  readonly live: Set<Exchange>;
  begin(res: HttpResponse): Exchange;
  /** Ends the exchange for the mock: cancels its timer and drain callback. Idempotent. */
  finish(ex: Exchange): void;
}

export function exchanges(stats: { requests: number; aborted: number }): Exchanges {
  const live = new Set<Exchange>();

  function begin(res: HttpResponse): Exchange {
    const ex: Exchange = { res, requestId: randomId('req_'), aborted: false, done: false, timer: undefined, onDrain: undefined };
    stats.requests++;
    live.add(ex);
    res.onAborted(() => {
      ex.aborted = true;
      if (!ex.done) stats.aborted++;
      finish(ex);
    });
    return ex;
  }

  function finish(ex: Exchange): void {
    ex.done = true;
    if (ex.timer !== undefined) {
      clearTimeout(ex.timer as NodeJS.Timeout);
      clearImmediate(ex.timer as NodeJS.Immediate);
      ex.timer = undefined;
    }
    ex.onDrain = undefined;
    live.delete(ex);
  }

  return { live, begin, finish };
}

/** Run `then` once the socket drained (onWritable). */
export function waitDrain(ex: Exchange, then: () => void): void {
  ex.onDrain = then;
  ex.res.onWritable(() => {
    const cb = ex.onDrain;
    ex.onDrain = undefined;
    if (cb && !ex.aborted) cb();
    return true;
  });
}

export function readHeaders(req: HttpRequest): Record<string, string> {
  const headers: Record<string, string> = {};
  req.forEach((k, v) => { headers[k] = v; });
  return headers;
}

/** Collect the whole body (copying each chunk: uWS neuters them), then call onBody (null = too large). */
export function readBody(ex: Exchange, max: number, onBody: (raw: Buffer | null) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let tooLarge = false;
  ex.res.onData((chunk, isLast) => {
    if (!tooLarge) {
      size += chunk.byteLength;
      if (size > max) {
        tooLarge = true;
        chunks.length = 0;
      } else if (chunk.byteLength > 0) {
        chunks.push(Buffer.from(new Uint8Array(chunk)));
      }
    }
    if (isLast && !ex.aborted) onBody(tooLarge ? null : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
  });
}

/** A mock's app listening on host:port (0: any free port), with the URL a client uses to reach it. */
export async function listenMock(app: TemplatedApp, host: string, port: number, what: string): Promise<{ listenSocket: us_listen_socket; port: number; url: string }> {
  const listenSocket = await new Promise<us_listen_socket>((resolve, reject) => {
    app.listen(host, port, (s) => {
      if (s) resolve(s);
      else reject(new Error(`${what}: cannot listen on ${host}:${port}`));
    });
  });
  const bound = uWS.us_socket_local_port(listenSocket as unknown as uWS.us_socket);
  const urlHost = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
  return { listenSocket, port: bound, url: `http://${urlHost}:${bound}` };
}
