// A Redis that refuses the relay's settlements for longer than their retries, on a connection that
// never drops, then takes them again: no 'ready' announces it. Here an operator's ACL change refuses
// scripts to the relay's user for a while (NOPERM); a Redis paused with SIGSTOP is the milder case
// (the commands wait in the socket and run when it resumes), and a full one does not refuse the
// settlement script, whose first write (DEL) frees memory. The settlement whose retries gave up is in
// the spool, and the relay replays it every RELAY_SPOOL_REPLAY_INTERVAL_MS while any is stalled
// (issue 15); before, it waited for the relay's next restart, the request served free until then.
import Anthropic from '@anthropic-ai/sdk';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  billingSettled, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack,
} from '../harness/gateway-stack.js';
import { startRedisServer, type OwnRedisServer } from './redis-server.js';

const REDIS_PORT = 6402;
// Settlement retries (relay/messages/settlement.ts): 50, 250, 1,000 and 5,000 ms apart, each refused at once.
const REFUSING_MS = 9_000;

let server: OwnRedisServer;
let stack: GatewayStack;
/** A user of this Redis's own that changes what the default user (everyone else's) may run. */
let admin: Redis;

beforeAll(async () => {
  server = await startRedisServer({ port: REDIS_PORT, aof: true });
  admin = new Redis(server.url);
  await admin.call('ACL', 'SETUSER', 'chaos-admin', 'on', '>chaos-admin-password', '~*', '&*', '+@all');
  await admin.quit();
  admin = new Redis(server.url, { username: 'chaos-admin', password: 'chaos-admin-password' });
  stack = await startGatewayStack({
    env: { REDIS_URL: server.url, RELAY_SPOOL_REPLAY_INTERVAL_MS: '500' },
    mock: { tokenDelayMs: 50 },
  });
});

afterAll(async () => {
  await admin?.call('ACL', 'SETUSER', 'default', '+@all').catch(() => undefined);
  admin?.disconnect();
  await stack?.close();
  await server?.close();
});

describe('a settlement given up while Redis refused it', () => {
  it('is replayed from the spool once Redis takes it again, on the same connection', async () => {
    const account = await fundedAccount(stack, 1_000_000);
    await mockChannel(stack, ['claude-haiku-4-5']);
    const { key } = await createApiKey(stack, account);
    const client = new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 });

    // A 40-token stream (2 s): reserved before, ended and settled while scripts are refused.
    const stream = client.messages.stream({ model: 'claude-haiku-4-5', max_tokens: 40, messages: [{ role: 'user', content: 'hello' }] });
    const { response } = await stream.withResponse();
    const requestId = response.headers.get('x-gateway-request-id')!;
    await admin.call('ACL', 'SETUSER', 'default', '-evalsha', '-eval');
    const message = await stream.finalMessage();
    expect(message.usage.output_tokens).toBe(40);
    await new Promise((r) => setTimeout(r, REFUSING_MS));
    expect(await admin.call('ACL', 'SETUSER', 'default', '+@all')).toBe('OK');

    await billingSettled(stack, 20_000);
    const deadline = Date.now() + 10_000;
    let rows: { quota: number; completion_tokens: number }[] = [];
    while (Date.now() < deadline) {
      rows = await stack.sql<{ quota: number; completion_tokens: number }[]>`SELECT quota, completion_tokens FROM ledger WHERE request_id = ${requestId}`;
      if (rows.length) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(rows.map((r) => r.completion_tokens)).toEqual([40]);
    await billingSettled(stack);
    const [u] = await stack.sql`SELECT quota FROM users WHERE id = ${account.id}`;
    expect(Number(u!.quota)).toBe(1_000_000 - Number(rows[0]!.quota));
    expect(await stack.quota.accountBalance(account.id)).toBe(Number(u!.quota));
  }, 60_000);
});
