// The baseline of what proxying alone costs on this stack: uWebSockets.js in, an undici Pool out, no
// key check, no reservation, no billing, no body parsing. It forwards POST /v1/messages and POST
// /v1/chat/completions to the same path upstream with the upstream credential, streams an SSE answer
// with the same writes per tick and backpressure handling as the relay (the chunks of one tick in one
// cork; pause the provider body when uWS' write() returns false, resume in onWritable), and passes
// other answers through whole.
//
//   node dist/bench/bare-proxy.js --upstream http://127.0.0.1:3090 [--port 0] [--api-key K] [--upstream-api request]
//        [--upstream-format anthropic|openai]
// prints `bare-proxy listening <port>` once ready.
//
// The upstream's format says how the credential goes (as the relay sends a channel's): `anthropic`
// (the default) as x-api-key with anthropic-version, `openai` (an OpenAI-format provider, the bench's
// mock-upstream-openai) as Authorization: Bearer; and which request id header is passed back
// (request-id, x-request-id). Without --api-key the client's own header is passed on.
//
// A request whose bytes do not ask to stream (no `"stream":true`) reads its answer whole through
// undici's dispatch() (relay/upstream/buffered-call.ts), as the relay does: a baseline that read it
// through request() would flatter the relay's ratio by what that costs (docs/performance.md, "A JSON
// answer read without a stream"). `--upstream-api request` (the bench's BENCH_BARE_UPSTREAM_API=request)
// gives the earlier baseline, request() for every answer.
import { parseArgs } from 'node:util';
import { Pool, type Dispatcher } from 'undici';
import { BufferedCall, rawHeader } from '../relay/upstream/buffered-call.js';
import { MAX_UPSTREAM_JSON } from '../relay/upstream/provider-response.js';
import uWS from 'uWebSockets.js';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';

/** How the bare hop reads an answer to a request that does not ask to stream. */
export type BareUpstreamApi = 'request' | 'dispatch';
/** The upstream's wire format: how the credential is sent and which request id header comes back. */
export type BareUpstreamFormat = 'anthropic' | 'openai';

export interface BareProxyOptions {
  upstream: string;
  host?: string;
  port?: number;
  /** Sent upstream as the relay sends its channel's credential: x-api-key, or Authorization: Bearer to an `openai` upstream. */
  apiKey?: string;
  connections?: number;
  /** How a request that does not ask to stream reads its answer: dispatch() (default, as the relay) or request(). */
  upstreamApi?: BareUpstreamApi;
  /** Default anthropic. */
  upstreamFormat?: BareUpstreamFormat;
}

export interface BareProxy {
  port: number;
  close(): Promise<void>;
}

const STATUS_TEXT: Record<number, string> = { 200: '200 OK', 400: '400 Bad Request', 401: '401 Unauthorized', 404: '404 Not Found', 429: '429 Too Many Requests', 500: '500 Internal Server Error', 529: '529 Overloaded' };
const statusLine = (s: number): string => STATUS_TEXT[s] ?? `${s} Status`;
const first = (v: string | string[] | undefined): string => (Array.isArray(v) ? (v[0] ?? '') : (v ?? ''));

/** An answer read whole, passed on with its status, type and request id. */
function sendWhole(res: HttpResponse, status: number, contentType: string, idHeader: string, requestId: string, body: Buffer | ArrayBuffer): void {
  res.cork(() => {
    res.writeStatus(statusLine(status)).writeHeader('content-type', contentType || 'application/json');
    if (requestId) res.writeHeader(idHeader, requestId);
    res.end(body);
  });
}

function badGateway(res: HttpResponse): void {
  res.cork(() => res.writeStatus('502 Bad Gateway').end());
}

export async function startBareProxy(opts: BareProxyOptions): Promise<BareProxy> {
  const pool = new Pool(opts.upstream, {
    connections: opts.connections ?? 256,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    headersTimeout: 60_000,
    bodyTimeout: 300_000,
  });
  const app = uWS.App();
  const openai = opts.upstreamFormat === 'openai';
  const idHeader = openai ? 'x-request-id' : 'request-id';
  const bearer = opts.apiKey === undefined ? undefined : `Bearer ${opts.apiKey}`;
  // The upstream's headers, read off the request synchronously (uWS' req lives for the handler's call only).
  const upstreamHeaders: (req: HttpRequest) => Record<string, string> = openai
    ? (req) => ({ 'content-type': 'application/json', authorization: bearer ?? req.getHeader('authorization') })
    : (req) => ({ 'content-type': 'application/json', 'x-api-key': opts.apiKey ?? req.getHeader('x-api-key'), 'anthropic-version': req.getHeader('anthropic-version') || '2023-06-01' });

  const forward = (path: string) => (res: HttpResponse, req: HttpRequest): void => {
    const headers = upstreamHeaders(req);
    let aborted = false;
    let upstreamBody: Dispatcher.ResponseData['body'] | null = null;
    let wholeCall: BufferedCall | null = null;
    res.onAborted(() => {
      aborted = true;
      upstreamBody?.destroy();
      wholeCall?.abort();
    });
    const chunks: Buffer[] = [];
    res.onData((ab, isLast) => {
      chunks.push(Buffer.from(new Uint8Array(ab)));
      if (!isLast) return;
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      if (opts.upstreamApi !== 'request' && body.indexOf('"stream":true') < 0) {
        const call = new BufferedCall(MAX_UPSTREAM_JSON);
        wholeCall = call;
        pool.dispatch({ path, method: 'POST', headers, body }, call);
        call.answer.then((a) => {
          if (aborted) return;
          if (a.bodyError || a.truncated) return badGateway(res);
          sendWhole(res, a.statusCode, rawHeader(a.rawHeaders, 'content-type'), idHeader, rawHeader(a.rawHeaders, idHeader), a.body);
        }, () => { if (!aborted) badGateway(res); });
        return;
      }
      pool.request({ path, method: 'POST', headers, body }).then((up) => {
        upstreamBody = up.body;
        up.body.on('error', () => {}); // a client abort destroys the body; the handlers below check `aborted`
        if (aborted) return void up.body.destroy();
        const ct = first(up.headers['content-type']);
        const requestId = first(up.headers[idHeader]);
        if (up.statusCode === 200 && ct.startsWith('text/event-stream')) {
          // What arrives in one tick goes out in one cork (one send), as the relay does
          // (relay/messages/stream-relay.ts, ClientStream): a baseline that sent each chunk on its own
          // would flatter the relay's stream ratio.
          let head = true;
          let queue: Buffer[] = [];
          let scheduled = false;
          let ended = false;
          const writeQueued = (): boolean => {
            if (head) {
              head = false;
              res.writeStatus('200 OK').writeHeader('content-type', ct).writeHeader('cache-control', 'no-cache');
              if (requestId) res.writeHeader(idHeader, requestId);
            }
            let ok = true;
            for (const c of queue) ok = res.write(c) && ok;
            queue = [];
            return ok;
          };
          const onWritable = (): boolean => {
            up.body.resume();
            return true;
          };
          const flush = (): void => {
            scheduled = false;
            if (aborted || ended || (!head && queue.length === 0)) return;
            let ok = true;
            res.cork(() => { ok = writeQueued(); });
            if (!ok) {
              up.body.pause();
              res.onWritable(onWritable);
            }
          };
          // After the tick's other callbacks (the body's 'end' is emitted on a nextTick): see ClientStream.
          const schedule = (): void => {
            if (scheduled) return;
            scheduled = true;
            process.nextTick(() => queueMicrotask(flush));
          };
          schedule();
          up.body.on('data', (chunk: Buffer) => {
            if (aborted) return;
            queue.push(chunk);
            schedule();
          });
          up.body.on('end', () => {
            if (aborted) return;
            ended = true;
            res.cork(() => { writeQueued(); res.end(); });
          });
          up.body.on('error', () => { if (!aborted) { ended = true; res.cork(() => res.close()); } });
          return;
        }
        up.body.arrayBuffer().then((buf) => {
          if (aborted) return;
          sendWhole(res, up.statusCode, ct, idHeader, requestId, buf);
        }, () => { if (!aborted) badGateway(res); });
      }, () => {
        if (!aborted) badGateway(res);
      });
    });
  };
  app.post('/v1/messages', forward('/v1/messages'));
  app.post('/v1/chat/completions', forward('/v1/chat/completions'));
  app.get('/health', (res) => { res.cork(() => res.end('ok')); });
  app.any('/*', (res) => { res.cork(() => res.writeStatus('404 Not Found').end()); });

  const host = opts.host ?? '127.0.0.1';
  const socket = await new Promise<uWS.us_listen_socket>((resolve, reject) => {
    app.listen(host, opts.port ?? 0, (s) => (s ? resolve(s) : reject(new Error(`bare proxy cannot listen on ${host}:${opts.port ?? 0}`))));
  });
  return {
    port: uWS.us_socket_local_port(socket),
    async close() {
      uWS.us_listen_socket_close(socket);
      await pool.close();
    },
  };
}

// Run as a process when executed directly.
if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: { upstream: { type: 'string' }, port: { type: 'string' }, host: { type: 'string' }, 'api-key': { type: 'string' }, 'upstream-api': { type: 'string' }, 'upstream-format': { type: 'string' } },
  });
  if (!values.upstream) {
    process.stderr.write('usage: bare-proxy --upstream <url> [--port N] [--host H] [--api-key K] [--upstream-api request|dispatch] [--upstream-format anthropic|openai]\n');
    process.exit(2);
  }
  const format = values['upstream-format'] ?? 'anthropic';
  if (format !== 'anthropic' && format !== 'openai') {
    process.stderr.write('--upstream-format: anthropic or openai\n');
    process.exit(2);
  }
  const api = values['upstream-api'] ?? 'dispatch';
  if (api !== 'request' && api !== 'dispatch') {
    process.stderr.write('--upstream-api: request or dispatch\n');
    process.exit(2);
  }
  const proxy = await startBareProxy({ upstream: values.upstream, port: Number(values.port ?? 0), host: values.host, apiKey: values['api-key'], upstreamApi: api, upstreamFormat: format });
  process.stdout.write(`bare-proxy listening ${proxy.port}\n`);
  const stop = (): void => { proxy.close().then(() => process.exit(0), () => process.exit(1)); };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
