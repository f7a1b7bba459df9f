// The billing worker's periodic jobs (reservation reaper, console follow-up, key-edit pruning) run
// only while its Redis is known to be its database's. Review diffreview: a check in flight when the
// connection dropped left the answer unknown for good on a quiet gateway (nothing else asked), and an
// expired reservation was still held 15 s later. Now each connection gets its own check, and a job's
// turn asks when the answer is not known.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/testing/free-port.js';
import { createApiKey, fundedAccount, startGatewayStack, type GatewayStack } from '../harness/gateway-stack.js';
import { startRedisServer, type OwnRedisServer } from './redis-server.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';
import { until } from '../harness/until.js';

/** The reaper's connection names itself so (CLIENT SETNAME, billing/service.ts). */
const REAPER_CONNECTION = 'billing-reaper';

let redisServer: OwnRedisServer;
let proxy: TcpProxy;
/** Armed: the reaper connection's next check of whose Redis it is loses its connection. */
let cutCheck = false;
let stack: GatewayStack;

beforeAll(async () => {
  redisServer = await startRedisServer({ port: await freePort(), aof: true });
  proxy = await startTcpProxy({ host: '127.0.0.1', port: redisServer.port }, {
    onClientChunk: (text, connection) => {
      if (text.includes(`$${REAPER_CONNECTION.length}\r\n${REAPER_CONNECTION}\r\n`)) connection.notes.reaper = true;
      if (connection.notes.reaper !== true || !cutCheck || !text.includes('database-instance')) return 'forward';
      cutCheck = false;
      return 'cut';
    },
  });
  stack = await startGatewayStack({ env: { REDIS_URL: `redis://127.0.0.1:${proxy.port}`, RESERVATION_REAP_INTERVAL_MS: '500' } });
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await proxy?.close();
  await redisServer?.close();
});

describe('the billing worker\'s periodic jobs after a reconnect whose check was cut', () => {
  it('run again: the reaper releases an expired reservation, on a quiet gateway', async () => {
    const acct = await fundedAccount(stack, 10_000_000);
    const key = await createApiKey(stack, acct, { unlimited_quota: false, remain_quota: 1_000_000 });
    const expired = async (): Promise<string> => {
      const id = randomUUID();
      expect(await stack.quota.reserve({ userId: acct.id, tokenId: key.id, tokenLimited: true, requestId: id, amount: 1000, deadlineMs: Date.now() - 1000 })).toBe('reserved');
      return id;
    };
    // Control: released.
    const control = await expired();
    await until('the control reservation released', async () => await stack.redis.exists(stack.keys.reservation(acct.id, control)) === 0);

    cutCheck = true;
    proxy.cutWhere((notes) => notes.reaper === true);
    await until('the check cut', () => !cutCheck);
    const id = await expired();
    await until('the reservation released after the reconnect', async () => await stack.redis.exists(stack.keys.reservation(acct.id, id)) === 0);
    expect(Number(await stack.redis.get(stack.keys.accountBalance(acct.id)))).toBe(10_000_000);
  }, 60_000);
});
