// GET /metrics of the relay on a port of its own (RELAY_METRICS_HOST:RELAY_METRICS_PORT), on a small
// node:http server: the metrics say how busy the relay is and which errors it answers, which is for
// operators, not for anyone who can reach the public relay port.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { answerConnectNotFound, PROM_CONTENT_TYPE } from '../../core/metrics/prom.js';
import type { RelayMetrics } from './relay-metrics.js';

export interface RelayMetricsServer {
  port: number;
  close(): Promise<void>;
}

export async function startRelayMetricsServer(host: string, port: number, metrics: RelayMetrics): Promise<RelayMetricsServer> {
  const server: Server = createServer((req, res) => {
    if (req.method === 'GET' && (req.url === '/metrics' || req.url?.startsWith('/metrics?'))) {
      let text: string;
      try {
        text = metrics.render();
      } catch {
        res.writeHead(500).end();
        return;
      }
      res.writeHead(200, { 'content-type': PROM_CONTENT_TYPE }).end(text);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  });
  answerConnectNotFound(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new Error(`relay metrics could not listen on ${host}:${port}: ${err.message}`)));
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}
