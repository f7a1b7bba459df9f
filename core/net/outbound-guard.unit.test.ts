import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkTarget, guardedAgent, guardedConnector, isPublicAddress, PRIVATE_TARGET, PrivateTargetError } from './outbound-guard.js';

describe('isPublicAddress', () => {
  it.each([
    '127.0.0.1', '127.255.0.9', '0.0.0.0', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1',
    '224.0.0.1', '255.255.255.255', '::1', '::', 'fe80::1', 'fd00::1', 'fc00::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1',
    '::ffff:169.254.169.254', '::127.0.0.1', '::7f00:1', '64:ff9b::7f00:1', '2002:7f00:1::', 'ff02::1', 'not-an-ip', '',
  ])('refuses %s', (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each(['8.8.8.8', '1.1.1.1', '93.184.216.34', '2606:4700:4700::1111', '::ffff:8.8.8.8'])('accepts %s', (address) => {
    expect(isPublicAddress(address)).toBe(true);
  });
});

describe('checkTarget', () => {
  it.each([
    'http://127.0.0.1:8123', 'http://2130706433:8123', 'http://0x7f.1', 'http://[::1]:8123', 'http://[::ffff:127.0.0.1]/',
    'http://0.0.0.0:8123', 'http://169.254.169.254/latest', 'http://[fe80::1]', 'http://localhost:8123',
  ])('refuses %s', async (url) => {
    await expect(checkTarget(url)).rejects.toBeInstanceOf(PrivateTargetError);
  });

  it('accepts a public literal, and reports a name that does not resolve', async () => {
    expect(await checkTarget('https://8.8.8.8/v1')).toBe('public');
    expect(await checkTarget('https://no-such-host.invalid')).toBe('unresolved');
  });
});

describe('guardedAgent', () => {
  let server: Server;
  let port = 0;
  beforeAll(async () => {
    server = createServer((_req, res) => res.end('reached'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
  });

  it("refuses a name whose connection-time lookup answers a loopback address (what DNS rebinding would serve)", async () => {
    const agent = guardedAgent();
    try {
      const err = await request(`http://localhost:${port}/`, { dispatcher: agent }).then(() => undefined, (e: unknown) => e);
      const codes: unknown[] = [];
      for (let e = err as { code?: unknown; cause?: unknown } | undefined; e; e = e.cause as typeof e) codes.push(e.code);
      expect(codes).toContain(PRIVATE_TARGET);
      // The same server is reachable without the guard: the refusal is the lookup's.
      const plain = await request(`http://localhost:${port}/`);
      expect(await plain.body.text()).toBe('reached');
    } finally {
      await agent.close();
    }
  });
});

describe('guardedConnector', () => {
  let server: Server;
  let port = 0;
  let connections = 0;
  beforeAll(async () => {
    server = createServer((_req, res) => res.end('reached')).on('connection', () => connections++);
    await new Promise<void>((r) => server.listen(0, '::', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
  });

  // net.connect never looks a literal up, so the lookup's check alone would let these through.
  it.each(['localhost', '127.0.0.1', '[::1]', '[::ffff:127.0.0.1]'])('refuses http://%s before a byte is sent', async (host) => {
    const before = connections;
    const agent = new Agent({ connect: guardedConnector() });
    try {
      const err = await request(`http://${host}:${port}/`, { dispatcher: agent }).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(PrivateTargetError);
      expect((err as PrivateTargetError).code).toBe(PRIVATE_TARGET);
      expect(connections).toBe(before);
    } finally {
      await agent.close();
    }
  });
});
