// A channel whose TLS handshake fails (its certificate self-signed, expired or for another name; plain
// HTTP behind an https URL) was sent nothing: the request goes to the next channel, as a refused
// connection does. Before (review routing): 500 "the connection was lost after the request was sent",
// the next channel never tried, until the cooldown set the failing one aside.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttps } from 'node:https';
import { createServer as createNet, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, fundedAccount, ledgerRow, mockChannel, startGatewayStack, type GatewayStack } from '../../tests/harness/gateway-stack.js';

let stack: GatewayStack;
let key: string;
let certDir: string;
let reachedOverTls = 0;
const closers: Array<() => void> = [];

beforeAll(async () => {
  stack = await startGatewayStack({ env: { RELAY_MAX_TRIES: '3' } });
  key = (await createApiKey(stack, await fundedAccount(stack, 10_000_000))).key;
  certDir = mkdtempSync(join(tmpdir(), 'tls-retry-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(certDir, 'key.pem'), '-out', join(certDir, 'cert.pem'), '-days', '1', '-subj', '/CN=127.0.0.1'], { stdio: 'ignore' });
});
afterAll(async () => {
  for (const close of closers) close();
  await stack?.close();
  if (certDir) rmSync(certDir, { recursive: true, force: true });
});

async function listening(server: { listen(port: number, host: string, cb: () => void): unknown; address(): unknown; close(): unknown }): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => server.close());
  return (server.address() as AddressInfo).port;
}

describe('a channel whose TLS handshake fails', () => {
  it.each([
    ['a self-signed certificate', 'tls-self-signed', async () => {
      const server = createHttps({ key: readFileSync(join(certDir, 'key.pem')), cert: readFileSync(join(certDir, 'cert.pem')) }, (_req, res) => {
        reachedOverTls++;
        res.end('{}');
      });
      return `https://127.0.0.1:${await listening(server)}`;
    }],
    ['plain HTTP behind an https URL', 'tls-plain-http', async () => `https://127.0.0.1:${await listening(createNet((socket) => {
      socket.on('error', () => {});
      socket.on('data', () => socket.end('HTTP/1.1 400 Bad Request\r\n\r\n'));
    }))}`],
  ])('%s: the request goes to the next channel, which alone answers and bills it', async (_name, model, serve) => {
    await mockChannel(stack, [model], 'default', { base_url: await serve(), priority: 10 });
    const healthy = await mockChannel(stack, [model], 'default', { priority: 0 });
    const res = await fetch(`${stack.relayUrl}/v1/messages`, {
      method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    const row = await ledgerRow(stack, res.headers.get('x-gateway-request-id')!);
    expect(row.channel_id).toBe(healthy);
    expect(row.quota).toBeGreaterThan(0);
    expect(reachedOverTls).toBe(0);
  });
});
