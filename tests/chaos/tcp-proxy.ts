// A TCP proxy tests put between the services and a server (Postgres, Redis): cut() makes the server
// unreachable for them as a network partition would (open connections reset, new ones refused)
// while the test itself still reads the server directly; restore() lets them connect again;
// retarget() points new connections at another server and resets the open ones (an address now
// naming another server). `onClientChunk` sees what each connection sends, as text, and may cut that
// connection before the chunk goes on, or after it (the server runs the command, its answer never
// comes back: a reply lost on the wire).
import { createServer, connect, type Server, type Socket } from 'node:net';

/** What the proxy does with a chunk a client sent: pass it on, reset the connection before it, or pass it on and lose the answer. */
export type ChunkVerdict = 'forward' | 'cut' | 'forwardThenCut';

export interface ProxiedConnection {
  /** What the hook noted about the connection (its client's name, say), kept across its chunks. */
  readonly notes: Record<string, unknown>;
}

export interface TcpProxyOptions {
  onClientChunk?: (text: string, connection: ProxiedConnection) => ChunkVerdict | undefined;
}

export interface TcpProxy {
  readonly port: number;
  cut(): void;
  restore(): void;
  retarget(target: { host: string; port: number }): void;
  /** Resets the open connections whose notes match (one client's connections, by the name it gave). */
  cutWhere(match: (notes: Record<string, unknown>) => boolean): void;
  close(): Promise<void>;
}

/** How long a connection whose chunk went on with 'forwardThenCut' stays open, its answers dropped. */
const CUT_AFTER_MS = 100;

export async function startTcpProxy(initial: { host: string; port: number }, opts: TcpProxyOptions = {}): Promise<TcpProxy> {
  let target = initial;
  let open = true;
  const connections = new Map<Socket, { notes: Record<string, unknown>; end(): void }>();
  const server: Server = createServer((client) => {
    if (!open) {
      client.destroy();
      return;
    }
    const upstream = connect(target);
    const connection: ProxiedConnection & { end(): void } = {
      notes: {},
      end() {
        client.destroy();
        upstream.destroy();
        connections.delete(client);
      },
    };
    connections.set(client, connection);
    const end = connection.end;
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    const hook = opts.onClientChunk;
    if (hook === undefined) {
      client.pipe(upstream);
      upstream.pipe(client);
      return;
    }
    let answering = true;
    client.on('data', (chunk: Buffer) => {
      if (!answering) return;
      const verdict = hook(chunk.toString('latin1'), connection) ?? 'forward';
      if (verdict === 'cut') return end();
      upstream.write(chunk);
      if (verdict === 'forwardThenCut') {
        answering = false;
        setTimeout(end, CUT_AFTER_MS);
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      if (answering) client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const cutWhere = (match: (notes: Record<string, unknown>) => boolean) => {
    for (const c of [...connections.values()]) if (match(c.notes)) c.end();
  };
  const cut = () => {
    open = false;
    cutWhere(() => true);
  };
  return {
    port: (server.address() as { port: number }).port,
    cut,
    restore() {
      open = true;
    },
    retarget(to) {
      target = to;
      cutWhere(() => true);
    },
    cutWhere,
    async close() {
      cut();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
