// The relay's check of whose Redis it is, in flight when its connection drops. ioredis sends the
// check's GET again after the reconnect, but 'ready' comes first. Review diffreview: the new
// connection was handed the old connection's check, which answers nothing, and no check was asked of
// it: the relay answered 529 (GET /ready 503) for 8.2 s, until its 10 s reload timer asked. Now each
// connection gets its own check.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/testing/free-port.js';
import { createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../harness/gateway-stack.js';
import { normalMessage, startScriptedProvider, type ScriptedProvider } from '../harness/scripted-provider.js';
import { startRedisServer, type OwnRedisServer } from './redis-server.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

const MODEL = 'check-cut-model';
/** The relay's periodic reload (relay/server.ts RELOAD_INTERVAL_MS) also asks again: the relay must be ready long before it. */
const RELOAD_INTERVAL_MS = 10_000;

let redisServer: OwnRedisServer;
let proxy: TcpProxy;
/** Armed: the relay's next check of whose Redis it is loses its connection. */
let cutCheck = false;
let provider: ScriptedProvider;
let stack: GatewayStack;

beforeAll(async () => {
  redisServer = await startRedisServer({ port: await freePort(), aof: true });
  proxy = await startTcpProxy({ host: '127.0.0.1', port: redisServer.port }, {
    onClientChunk: (text, connection) => {
      // The relay's quota connection names itself "relay" (CLIENT SETNAME), its subscriber "relay-sub".
      if (text.includes('$5\r\nrelay\r\n')) connection.notes.relay = true;
      if (connection.notes.relay !== true || !cutCheck || !text.includes('database-instance')) return 'forward';
      cutCheck = false;
      return 'cut';
    },
  });
  provider = await startScriptedProvider((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(normalMessage(MODEL));
  });
  stack = await startGatewayStack({ env: { REDIS_URL: `redis://127.0.0.1:${proxy.port}` } });
  await mockChannel(stack, [MODEL], 'default', { base_url: provider.url });
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await provider?.close();
  await proxy?.close();
  await redisServer?.close();
});

describe('a check of whose Redis it is, cut with its connection', () => {
  it('is asked again on the next connection: the relay serves again without waiting for its periodic reload', async () => {
    const acct = await fundedAccount(stack, 10_000_000);
    const key = await createApiKey(stack, acct, {});
    const client = new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 });
    await client.messages.create({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    expect((await fetch(`${stack.relayUrl}/ready`)).status).toBe(200);
    // The relay's connection drops (a blip): it reconnects and asks, and that ask's connection drops too.
    cutCheck = true;
    const t0 = Date.now();
    proxy.cutWhere((notes) => notes.relay === true);
    let readyAfterMs = -1;
    while (Date.now() - t0 < RELOAD_INTERVAL_MS + 5_000) {
      if (!cutCheck && (await fetch(`${stack.relayUrl}/ready`)).status === 200) {
        readyAfterMs = Date.now() - t0;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(cutCheck).toBe(false);
    expect(readyAfterMs).toBeGreaterThan(0);
    expect(readyAfterMs).toBeLessThan(RELOAD_INTERVAL_MS / 2);
    const served = await client.messages.create({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    expect(served.type).toBe('message');
  }, 60_000);
});
