// The per-client limit on e-mail codes (EMAIL_CODES_PER_CLIENT, 20 an hour) counted an IPv6 client by
// its full address, where every other per-client limit counts its /64 (auth/login-limiter.ts
// clientBucket), which one subscriber holds whole: rotating addresses, one /64 had 30 of 30 codes
// mailed (review auth).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayStack, uniqueName, type GatewayStack } from '../../tests/harness/gateway-stack.js';
import { mailThroughSink, startSmtpSink, type SmtpSink } from '../../tests/harness/smtp-sink.js';

let stack: GatewayStack;
let sink: SmtpSink;

beforeAll(async () => {
  sink = await startSmtpSink();
  stack = await startGatewayStack({ env: { TRUSTED_PROXIES: '127.0.0.1, ::1, ::ffff:127.0.0.1' } });
  await mailThroughSink(stack.sql, sink);
}, 120_000);
afterAll(async () => {
  await stack?.close();
  await sink?.close();
});

describe('e-mail codes per client', () => {
  it('count an IPv6 client by its /64: rotating addresses within it gets no more than 20 an hour', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 24; i++) {
      const res = await fetch(`${stack.consoleUrl}/api/verification?purpose=register&email=${uniqueName('b')}@example.test`, {
        headers: { 'x-forwarded-for': `2001:db8:2:2::${(i + 1).toString(16)}` },
      });
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(20);
    expect(statuses.slice(20)).toEqual([429, 429, 429, 429]);
    // Another /64 is another client.
    const other = await fetch(`${stack.consoleUrl}/api/verification?purpose=register&email=${uniqueName('c')}@example.test`, { headers: { 'x-forwarded-for': '2001:db8:9:9::1' } });
    expect(other.status).toBe(200);
  }, 120_000);
});
