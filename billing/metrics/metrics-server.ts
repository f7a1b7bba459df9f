// GET /metrics and GET /health of the billing worker on a small node:http server (the worker has no
// HTTP server of its own). Stream length and pending count are read from Redis at scrape time; a Redis error leaves
// the previous values in place rather than failing the scrape.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import { answerConnectNotFound, PROM_CONTENT_TYPE } from '../../core/metrics/prom.js';
import { billingMetrics, type BillingMetrics } from './billing-metrics.js';

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

export interface MetricsServerOptions {
  host: string;
  port: number;
  redis?: Redis;
  /** The usage stream, or every shard's stream (the gauges then sum them). */
  stream?: string | string[];
  group?: string;
  metrics?: BillingMetrics;
}

export async function startBillingMetricsServer(opts: MetricsServerOptions): Promise<MetricsServer> {
  const metrics = opts.metrics ?? billingMetrics;
  const refresh = async (): Promise<void> => {
    if (!opts.redis || !opts.stream) return;
    const redis = opts.redis;
    const group = opts.group;
    try {
      const counts = await Promise.all((Array.isArray(opts.stream) ? opts.stream : [opts.stream]).map((stream) => Promise.all([
        redis.xlen(stream),
        group ? (redis.xpending(stream, group) as Promise<[number, ...unknown[]]>).catch(() => [0] as [number]) : Promise.resolve([0] as [number]),
      ])));
      metrics.streamLength.set(counts.reduce((n, [len]) => n + len, 0));
      metrics.streamPending.set(counts.reduce((n, [, pending]) => n + (Number(pending[0]) || 0), 0));
    } catch {
      // keep the last values
    }
  };
  const server: Server = createServer((req, res) => {
    if (req.method === 'GET' && (req.url === '/metrics' || req.url?.startsWith('/metrics?'))) {
      refresh().then(() => {
        res.writeHead(200, { 'content-type': PROM_CONTENT_TYPE });
        res.end(metrics.render());
      }, () => {
        res.writeHead(500).end();
      });
      return;
    }
    if (req.method === 'GET' && req.url === '/health') {
      // 503 while the worker's rounds fail, so an orchestrator's probe sees a worker that is stuck
      // (Redis, Postgres or ClickHouse unreachable) rather than a process that merely runs.
      const health = metrics.health();
      res.writeHead(health.status === 'ok' ? 200 : 503, { 'content-type': 'application/json' });
      res.end(JSON.stringify(health));
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  });
  answerConnectNotFound(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}
