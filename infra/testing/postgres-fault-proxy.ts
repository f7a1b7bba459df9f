// A TCP proxy in front of Postgres for tests of what a client does when Postgres ends its connections
// at the wrong moment. It reads both sides of the protocol and can:
//
//   - answer a query whose text contains one of `failQueriesContaining` itself, the way a backend that
//     pg_terminate_backend reached does (ErrorResponse FATAL 57P01, then the connection closes),
//     without passing it on. postgres.js (fetch_types) runs `select b.oid, b.typarray …` on each new
//     connection with a promise nothing awaits, so failing that query is a deterministic way to get the
//     unhandled rejection that a terminated connection or a statement timeout gave at random
//     (infra/postgres/client.ts);
//   - terminate the connections that are idle outside a transaction (terminateIdle), as
//     pg_terminate_backend does, so that the client opens new ones. (Busy ones are terminated with
//     pg_terminate_backend itself: tests/processes/postgres-connection-faults.integration.test.ts.)
//
// Everything else goes through unchanged.
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface PostgresFaultProxy {
  readonly port: number;
  /** Queries answered with the fatal error instead of being passed on. */
  readonly failedQueries: number;
  /** Client connections accepted so far. */
  readonly connections: number;
  /**
   * Ends every connection idle outside a transaction (its last server message ReadyForQuery 'I' and
   * nothing sent by the client since) with ErrorResponse FATAL 57P01; returns how many.
   */
  terminateIdle(): number;
  close(): Promise<void>;
}

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;

/** An ErrorResponse message: what a backend sends before it exits when terminated. */
export function fatalErrorResponse(code = '57P01', message = 'terminating connection due to administrator command'): Buffer {
  const fields = Buffer.concat([
    Buffer.from(`SFATAL\0VFATAL\0C${code}\0M${message}\0`, 'utf8'),
    Buffer.from([0]),
  ]);
  const head = Buffer.alloc(5);
  head.write('E', 0);
  head.writeInt32BE(fields.length + 4, 1);
  return Buffer.concat([head, fields]);
}

export async function startPostgresFaultProxy(
  target: { host: string; port: number },
  opts: {
    failQueriesContaining: readonly string[];
    /** Fail only this many of those queries, then pass them on (default: every one). */
    failAtMost?: number;
  },
): Promise<PostgresFaultProxy> {
  let failedQueries = 0;
  let connections = 0;
  const sockets = new Set<Socket>();
  const idle = new Map<Socket, () => void>();
  const server: Server = createServer((client) => {
    connections++;
    const upstream = connect(target);
    sockets.add(client);
    sockets.add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
      idle.delete(client);
    };
    const terminate = () => {
      failed = true;
      idle.delete(client);
      client.end(fatalErrorResponse(), () => end());
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);

    // The client's messages, passed on whole: untyped (length first) until the startup message,
    // then a type byte and a length.
    let pending: Buffer = Buffer.alloc(0);
    let startup = true;
    let failed = false;
    let sslAnswerDue = false;
    client.on('data', (chunk: Buffer) => {
      if (failed) return;
      idle.delete(client);
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      const out: Buffer[] = [];
      for (;;) {
        const head = startup ? 0 : 1;
        if (pending.length < head + 4) break;
        const length = pending.readInt32BE(head);
        if (pending.length < head + length) break;
        const message = pending.subarray(0, head + length);
        pending = pending.subarray(head + length);
        if (startup) {
          const code = message.readInt32BE(4);
          // An SSL or GSS request is answered with one byte, then the startup message follows.
          if (code === SSL_REQUEST || code === GSSENC_REQUEST) sslAnswerDue = true;
          else startup = false;
        } else {
          const type = String.fromCharCode(message[0]!);
          if ((type === 'Q' || type === 'P') && failedQueries < (opts.failAtMost ?? Infinity) && opts.failQueriesContaining.some((s) => message.includes(s))) {
            failedQueries++;
            if (out.length) upstream.write(Buffer.concat(out));
            terminate();
            return;
          }
        }
        out.push(message);
      }
      if (out.length) upstream.write(out.length === 1 ? out[0]! : Buffer.concat(out));
    });

    // The server's messages, passed on as they come; read only to know when the connection is idle.
    let fromServer: Buffer = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      if (failed) return;
      client.write(chunk);
      fromServer = fromServer.length ? Buffer.concat([fromServer, chunk]) : chunk;
      if (sslAnswerDue && fromServer.length > 0) {
        sslAnswerDue = false;
        fromServer = fromServer.subarray(1);
      }
      let lastIdle = false;
      let any = false;
      while (fromServer.length >= 5) {
        const length = fromServer.readInt32BE(1);
        if (fromServer.length < 1 + length) break;
        any = true;
        lastIdle = fromServer[0] === 0x5a && fromServer[5] === 0x49; // ReadyForQuery, status 'I'
        fromServer = fromServer.subarray(1 + length);
      }
      if (!any) return;
      if (lastIdle && fromServer.length === 0 && pending.length === 0) idle.set(client, terminate);
      else idle.delete(client);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    get failedQueries() {
      return failedQueries;
    },
    get connections() {
      return connections;
    },
    terminateIdle() {
      const now = [...idle.values()];
      for (const terminate of now) terminate();
      return now.length;
    },
    async close() {
      for (const s of sockets) s.destroy();
      sockets.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
