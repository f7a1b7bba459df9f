// A bare HTTP/1.1 client for relay tests: sends bytes as given (control characters in headers, a
// body promised by content-length and never sent) where fetch and the SDK refuse to.
import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Writes `head` (request line and headers, without the blank line) and `body`, and resolves with the
 * first complete response, or rejects after `timeoutMs`. The socket is closed either way.
 */
export function rawRequest(port: number, head: string, body = '', timeoutMs = 5000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no response within ${timeoutMs} ms`));
    }, timeoutMs);
    const done = (r: RawResponse | Error) => {
      clearTimeout(timer);
      sock.destroy();
      if (r instanceof Error) reject(r);
      else resolve(r);
    };
    sock.on('error', (err) => done(err));
    sock.on('close', () => done(new Error(`connection closed before a full response: ${JSON.stringify(buf.toString('latin1').slice(0, 200))}`)));
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
      const status = Number(lines[0]!.split(' ')[1]);
      const headers: Record<string, string> = {};
      for (const l of lines.slice(1)) {
        const i = l.indexOf(':');
        headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
      }
      const length = Number(headers['content-length'] ?? 0);
      if (buf.length - end - 4 < length) return;
      done({ status, headers, body: buf.subarray(end + 4, end + 4 + length).toString('utf8') });
    });
    sock.write(`${head}\r\n\r\n`, 'latin1');
    if (body) sock.write(body);
  });
}
