// A paced HTTP/1.1 load driver on raw sockets, for what autocannon cannot do:
//   - a smooth fixed offered rate (autocannon's overallRate lets every connection fire its quota for
//     the second back-to-back at each second boundary, which measures bursts, not a steady load);
//   - time to first body byte of every response (streams);
//   - client aborts mid-body (read N body bytes, then destroy the socket);
//   - response header capture (x-gateway-request-id) with the response's end time;
//   - a clean end: no new request after the duration, in-flight requests are awaited, so every
//     request the server saw got its full answer (the money audit can count them exactly).
// Each connection keeps one request in flight and its own schedule (phase-shifted); when a response
// is late the next request goes at once and is counted as `late`.
import net from 'node:net';
import { Recorder, type Summary } from './stats.js';

export interface DriveSpec {
  url: string;
  /** Complete HTTP/1.1 requests (headers + body); connection i cycles through them from i. */
  requests: Buffer[];
  connections: number;
  /** Offered requests per second over all connections; 0 = closed loop (as fast as answered). */
  rate: number;
  durationMs: number;
  /** Destroy the socket after this many body bytes of a 200 response (client abort storm). */
  abortAfterBodyBytes?: number;
  /** Lower-case header name to capture from 2xx responses, with the wall-clock end time. */
  captureHeader?: string;
  /** Called at once with each captured header value and the response's wall-clock end and start times. */
  onCapture?: (value: string, endMs: number, startMs: number) => void;
  /** Capture one response in this many (default 1). */
  captureEvery?: number;
  /** Longest wait for in-flight responses after the duration (default 30 s). */
  graceMs?: number;
}

export interface DriveResult {
  durationSec: number;
  sent: number;
  completed: number;
  aborted: number;
  socketErrors: number;
  late: number;
  status: Record<string, number>;
  /** Milliseconds, request written -> last byte, 2xx only. */
  latency: Summary;
  /** Milliseconds, request written -> first body byte, 2xx only. */
  ttfb: Summary;
  /** Completed (and, in an abort storm, aborted) requests per second. */
  rps: number;
  captured: Array<{ value: string; endMs: number }>;
}

export function buildRequest(url: string, path: string, headers: Record<string, string>, body: string): Buffer {
  const u = new URL(url);
  const b = Buffer.from(body);
  let head = `POST ${path} HTTP/1.1\r\nhost: ${u.host}\r\nconnection: keep-alive\r\ncontent-length: ${b.length}\r\n`;
  for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
  return Buffer.concat([Buffer.from(head + '\r\n', 'latin1'), b]);
}

export function buildGet(url: string, path: string, headers: Record<string, string>): Buffer {
  const u = new URL(url);
  let head = `GET ${path} HTTP/1.1\r\nhost: ${u.host}\r\nconnection: keep-alive\r\n`;
  for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
  return Buffer.from(head + '\r\n', 'latin1');
}

const HEADER_END = Buffer.from('\r\n\r\n');
const CHUNKED_END = '\r\n0\r\n\r\n';

export async function drive(spec: DriveSpec): Promise<DriveResult> {
  const u = new URL(spec.url);
  const port = Number(u.port || 80);
  const host = u.hostname;
  const latency = new Recorder();
  const ttfb = new Recorder();
  const status: Record<string, number> = {};
  const captured: Array<{ value: string; endMs: number }> = [];
  const captureRe = spec.captureHeader ? new RegExp(`\\r\\n${spec.captureHeader}:\\s*([^\\r]*)`, 'i') : null;
  const captureEvery = spec.captureEvery ?? 1;
  let sent = 0, completed = 0, aborted = 0, socketErrors = 0, late = 0, ok2xx = 0;
  const interval = spec.rate > 0 ? (spec.connections * 1000) / spec.rate : 0;
  const t0 = performance.now();
  const tEnd = t0 + spec.durationMs;
  let active = spec.connections;
  let finishAll: () => void = () => {};
  const allDone = new Promise<void>((r) => { finishAll = r; });

  const stoppers: Array<() => void> = [];
  const runConnection = (index: number): void => {
    let sock: net.Socket;
    let nextAt = t0 + (interval * index) / spec.connections;
    let reqIndex = index % spec.requests.length;
    // per-response state
    let inFlight = false;
    let sentAt = 0;
    let head: Buffer | null = null;
    let headerDone = false;
    let code = 0;
    let contentLength = -1;
    let chunked = false;
    let bodyBytes = 0;
    let tail = '';
    let firstByteAt = 0;
    let stopped = false;
    let timer: NodeJS.Timeout | undefined;

    const stop = (): void => {
      if (stopped) return;
      stopped = true;
      clearTimeout(timer);
      sock?.destroy();
      if (--active === 0) finishAll();
    };

    const connect = (): void => {
      sock = net.connect({ host, port, noDelay: true });
      sock.on('data', onData);
      sock.on('error', () => {});
      sock.on('close', () => {
        if (stopped) return;
        if (inFlight) {
          socketErrors++;
          inFlight = false;
        }
        connect();
        schedule();
      });
    };

    const schedule = (): void => {
      if (stopped || inFlight) return;
      const now = performance.now();
      if (now >= tEnd) return stop();
      if (interval === 0) return send();
      if (nextAt <= now + 0.5) {
        if (now - nextAt > 1) late++;
        send();
      } else {
        clearTimeout(timer);
        timer = setTimeout(send, nextAt - now);
      }
    };

    const send = (): void => {
      if (stopped || inFlight) return;
      if (performance.now() >= tEnd) return stop();
      inFlight = true;
      head = null;
      headerDone = false;
      code = 0;
      contentLength = -1;
      chunked = false;
      bodyBytes = 0;
      tail = '';
      firstByteAt = 0;
      const req = spec.requests[reqIndex]!;
      reqIndex = (reqIndex + 1) % spec.requests.length;
      sent++;
      sentAt = performance.now();
      if (interval > 0) nextAt += interval;
      sock.write(req);
    };

    const complete = (): void => {
      inFlight = false;
      completed++;
      const end = performance.now();
      status[code] = (status[code] ?? 0) + 1;
      if (code >= 200 && code < 300) {
        latency.record(end - sentAt);
        if (firstByteAt) ttfb.record(firstByteAt - sentAt);
        if (captureRe && head && ok2xx++ % captureEvery === 0) {
          const m = captureRe.exec(head.toString('latin1'));
          if (m) {
            const c = { value: m[1]!.trim(), endMs: Date.now() };
            captured.push(c);
            spec.onCapture?.(c.value, c.endMs, c.endMs - (end - sentAt));
          }
        }
      }
      schedule();
    };

    const onBody = (chunk: Buffer): void => {
      if (chunk.length === 0) return;
      if (!firstByteAt) firstByteAt = performance.now();
      bodyBytes += chunk.length;
      if (spec.abortAfterBodyBytes !== undefined && code === 200 && chunked && bodyBytes >= spec.abortAfterBodyBytes) {
        aborted++;
        status['aborted'] = (status['aborted'] ?? 0) + 1;
        ttfb.record(firstByteAt - sentAt);
        inFlight = false;
        sock.removeAllListeners('close');
        sock.destroy();
        connect();
        schedule();
        return;
      }
      if (chunked) {
        tail = (tail + chunk.toString('latin1', Math.max(0, chunk.length - 7))).slice(-7);
        if (tail.endsWith(CHUNKED_END) || (bodyBytes === 5 && tail === '0\r\n\r\n')) complete();
      } else if (bodyBytes >= contentLength) {
        complete();
      }
    };

    function onData(chunk: Buffer): void {
      if (!inFlight) return;
      if (headerDone) return onBody(chunk);
      head = head ? Buffer.concat([head, chunk]) : chunk;
      const at = head.indexOf(HEADER_END);
      if (at < 0) return;
      headerDone = true;
      const text = head.toString('latin1', 0, at + 2);
      code = parseInt(text.slice(9, 12), 10);
      const cl = /\r\ncontent-length:\s*(\d+)/i.exec(text);
      chunked = /\r\ntransfer-encoding:\s*chunked/i.test(text);
      contentLength = cl ? Number(cl[1]) : chunked ? -1 : 0;
      const rest = head.subarray(at + 4);
      head = head.subarray(0, at + 2);
      if (!chunked && contentLength === 0) return complete();
      onBody(rest);
    }

    stoppers.push(stop);
    connect();
    schedule();
  };

  for (let i = 0; i < spec.connections; i++) runConnection(i);
  // The duration ends; connections stop after their in-flight response, or at the grace deadline.
  const grace = setTimeout(() => {
    for (const s of stoppers) s();
    finishAll();
  }, spec.durationMs + (spec.graceMs ?? 30_000));
  await allDone;
  clearTimeout(grace);
  const durationSec = (performance.now() - t0) / 1000;
  const measured = Math.min(durationSec, spec.durationMs / 1000 + 0.001);
  return {
    durationSec,
    sent, completed, aborted, socketErrors, late, status,
    latency: latency.summary(),
    ttfb: ttfb.summary(),
    rps: (completed + aborted) / measured,
    captured,
  };
}
