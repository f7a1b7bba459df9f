// autocannon, programmatically: closed-loop runs (a fixed number of connections sending as fast as
// they are answered) for the saturation figures and the console queries. Every response time is
// recorded at full resolution from autocannon's 'response' event (its own histogram keeps whole ms).
import autocannon from 'autocannon';
import { Recorder, type Summary } from './stats.js';

export interface CannonSpec {
  url: string;
  connections: number;
  durationSec: number;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  /** One request per entry; each connection cycles through them. */
  requests: Array<{ path: string; body?: string }>;
  timeoutSec?: number;
}

export interface CannonResult {
  durationSec: number;
  completed: number;
  rps: number;
  errors: number;
  timeouts: number;
  status: Record<string, number>;
  /** Milliseconds, 2xx only. */
  latency: Summary;
}

export async function cannon(spec: CannonSpec): Promise<CannonResult> {
  const rec = new Recorder();
  const t0 = performance.now();
  const instance = autocannon({
    url: spec.url,
    connections: spec.connections,
    duration: spec.durationSec,
    timeout: spec.timeoutSec ?? 30,
    requests: spec.requests.map((r) => ({
      method: spec.method ?? 'POST',
      path: r.path,
      headers: spec.headers,
      ...(r.body !== undefined ? { body: r.body } : {}),
    })),
  });
  instance.on('response', (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
    if (statusCode >= 200 && statusCode < 300) rec.record(responseTime);
  });
  const result = await instance;
  const durationSec = (performance.now() - t0) / 1000;
  const status: Record<string, number> = {};
  for (const [k, v] of Object.entries(result.statusCodeStats ?? {})) status[k] = v.count;
  const completed = Object.values(status).reduce((a, b) => a + b, 0);
  return {
    durationSec,
    completed,
    rps: completed / spec.durationSec,
    errors: result.errors,
    timeouts: result.timeouts,
    status,
    latency: rec.summary(),
  };
}
