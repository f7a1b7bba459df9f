// A minimal HTTP/1.1 client on a raw socket. fetch refuses exactly the bytes this test needs to send
// (control characters and non-Latin-1 text in header values, raw bytes and malformed escapes in the
// request target, a Content-Length that lies), so every fuzz request goes out byte for byte as built.
import net from 'node:net';

export interface RawRequest {
  method: string;
  /** The request target exactly as sent (a latin1 string: each char one byte). */
  target: string;
  /** Header lines in order; a Buffer value is sent verbatim (e.g. UTF-8 bytes). */
  headers: [string, string | Buffer][];
  body?: Buffer;
}

export interface RawAnswer {
  /** 0 when no status line arrived. */
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** The connection closed (or was reset) before a status line. */
  closedWithoutAnswer: boolean;
  timedOut: boolean;
  /** A socket error such as ECONNREFUSED: nothing is listening. */
  error?: string;
}

function encodeHead(r: RawRequest, host: string): Buffer {
  const parts: Buffer[] = [Buffer.from(`${r.method} ${r.target} HTTP/1.1\r\nhost: ${host}\r\n`, 'latin1')];
  for (const [name, value] of r.headers) {
    parts.push(Buffer.from(`${name}: `, 'latin1'), typeof value === 'string' ? Buffer.from(value, 'latin1') : value, Buffer.from('\r\n'));
  }
  const explicitLength = r.headers.some(([n]) => n.toLowerCase() === 'content-length');
  if (r.body && !explicitLength) parts.push(Buffer.from(`content-length: ${r.body.length}\r\n`));
  parts.push(Buffer.from('connection: close\r\n\r\n'));
  return Buffer.concat(parts);
}

/** Decodes a chunked body; null while incomplete. */
function dechunk(buf: Buffer): Buffer | null {
  const out: Buffer[] = [];
  let i = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', i);
    if (eol < 0) return null;
    const size = parseInt(buf.subarray(i, eol).toString('latin1').split(';')[0]!, 16);
    if (Number.isNaN(size)) return Buffer.concat(out);
    if (size === 0) return Buffer.concat(out);
    if (buf.length < eol + 2 + size + 2) return null;
    out.push(buf.subarray(eol + 2, eol + 2 + size));
    i = eol + 2 + size + 2;
  }
}

export function sendRaw(port: number, req: RawRequest, timeoutMs = 20_000): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    let settled = false;
    let head: { status: number; headers: Record<string, string>; bodyStart: number } | null = null;
    const finish = (a: Partial<RawAnswer>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ status: head?.status ?? 0, headers: head?.headers ?? {}, body: Buffer.alloc(0), closedWithoutAnswer: false, timedOut: false, ...a });
    };
    const bodyIfComplete = (ended: boolean): Buffer | null => {
      if (!head) return null;
      const rest = data.subarray(head.bodyStart);
      if (req.method === 'HEAD' || head.status === 204 || head.status === 304) return Buffer.alloc(0);
      if ((head.headers['transfer-encoding'] ?? '').includes('chunked')) return dechunk(rest) ?? (ended ? rest : null);
      const cl = head.headers['content-length'];
      if (cl !== undefined) return rest.length >= Number(cl) ? rest.subarray(0, Number(cl)) : ended ? rest : null;
      return ended ? rest : null;
    };
    const timer = setTimeout(() => finish({ timedOut: true, body: data.subarray(head?.bodyStart ?? 0) }), timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      if (!head) {
        const end = data.indexOf('\r\n\r\n');
        if (end < 0) return;
        const lines = data.subarray(0, end).toString('latin1').split('\r\n');
        const status = Number(lines[0]!.split(' ')[1]);
        const headers: Record<string, string> = {};
        for (const line of lines.slice(1)) {
          const colon = line.indexOf(':');
          if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
        }
        head = { status, headers, bodyStart: end + 4 };
      }
      const body = bodyIfComplete(false);
      if (body) finish({ body });
    });
    const ended = (error?: string) => {
      if (settled) return;
      if (!head) return finish({ closedWithoutAnswer: true, ...(error ? { error } : {}) });
      finish({ body: bodyIfComplete(true) ?? Buffer.alloc(0) });
    };
    socket.on('end', () => ended());
    socket.on('close', () => ended());
    // EPIPE/ECONNRESET while a large body is still going out is normal after an early answer.
    socket.on('error', (err: NodeJS.ErrnoException) => ended(err.code ?? err.message));
    socket.write(encodeHead(req, `127.0.0.1:${port}`));
    // The body in slices, stopping once an answer has begun: a server may answer 413 and close early.
    const body = req.body ?? Buffer.alloc(0);
    let offset = 0;
    const pump = () => {
      while (offset < body.length && !settled && !head && !socket.destroyed) {
        const slice = body.subarray(offset, offset + 64 * 1024);
        offset += slice.length;
        if (!socket.write(slice)) return void socket.once('drain', pump);
      }
    };
    pump();
  });
}
