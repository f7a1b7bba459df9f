import { createServer } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { answerConnectNotFound, Counter2, Histogram, Registry, parsePromText } from './prom.js';

describe('prometheus text exposition', () => {
  it('renders counters with labels and cumulative histogram buckets', () => {
    const r = new Registry();
    const c = r.register(new Counter2('x_total', 'help', ['status', 'type']));
    const h = r.register(new Histogram('lat_seconds', 'help', [0.001, 0.01]));
    c.inc(200, '');
    c.inc(200, '');
    c.inc(529, 'overloaded_error');
    h.observe(0.0005);
    h.observe(0.005);
    h.observe(5);
    const m = parsePromText(r.render());
    expect(m.get('x_total{status="200",type=""}')).toBe(2);
    expect(m.get('x_total{status="529",type="overloaded_error"}')).toBe(1);
    expect(m.get('lat_seconds_bucket{le="0.001"}')).toBe(1);
    expect(m.get('lat_seconds_bucket{le="0.01"}')).toBe(2);
    expect(m.get('lat_seconds_bucket{le="+Inf"}')).toBe(3);
    expect(m.get('lat_seconds_count')).toBe(3);
  });
});

describe('answerConnectNotFound', () => {
  it('answers CONNECT 404 where Node closed the connection unanswered', async () => {
    const server = createServer((_req, res) => res.end('ok'));
    answerConnectNotFound(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const sock = connect((server.address() as AddressInfo).port, '127.0.0.1');
      let text = '';
      sock.setEncoding('latin1').on('data', (d: string) => { text += d; });
      sock.write('CONNECT /metrics HTTP/1.1\r\nHost: x\r\n\r\n');
      await new Promise((resolve) => sock.on('close', resolve));
      expect(text).toMatch(/^HTTP\/1\.1 404 Not Found\r\n[\s\S]*\r\n\r\nnot found\n$/);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
